//! What every `macko bench` mode shares about the devices it measures: opening them, the
//! progress lines, rotated copies, medians, and the streaming-read ceiling. A leaf module.

use indicatif::{ProgressBar, ProgressStyle};
use macko::{BackendKind, Device, DeviceOptions};

use crate::error::CliError;

/// Rotated copies of a matrix are made until they total this many bytes, so that repeated
/// products read from memory, not from the L2 cache (50–60 MB on an H100/H200).
pub const ROTATION_BYTES: u64 = 256 << 20;
/// At most this many copies, however small the matrix.
pub const MAX_COPIES: usize = 8;

/// `Device::timer` of a device without a timer of its own (the CPU).
pub const WALL_CLOCK: &str = "wall clock";

/// A device under measurement and its baseline kernel name.
pub struct Bench {
    pub dev: Device,
    pub baseline: &'static str,
}

/// How many copies of a matrix of `bytes` bytes a measurement rotates through.
pub fn rotated_copies(bytes: u64) -> usize {
    (ROTATION_BYTES.div_ceil(bytes.max(1)) as usize).clamp(1, MAX_COPIES)
}

/// Opens every backend asked for (or every one, `backends` empty), skipping those unavailable
/// here. A bad `MACKO_BACKEND`/`MACKO_TUNING` is an error, not a skip: a sweep must not
/// measure defaults while believing it measured a tuning.
pub fn open_devices(backends: &[BackendKind]) -> Result<Vec<Bench>, CliError> {
    let env = DeviceOptions::from_env()?;
    let kinds: Vec<BackendKind> = if backends.is_empty() {
        BackendKind::ALL.to_vec()
    } else {
        backends.to_vec()
    };
    let mut out = Vec::new();
    for kind in kinds {
        let opts = DeviceOptions {
            backend: Some(kind),
            allow_software_adapter: true,
            ..env.clone()
        };
        match Device::with_options(&opts) {
            Ok(dev) => {
                println!(
                    "{:<5} {} (timer: {}; plan cache: {})",
                    kind,
                    dev.info().name,
                    dev.timer(),
                    dev.plan_cache()
                );
                let baseline = if kind == BackendKind::Cuda {
                    "cublas"
                } else {
                    "dense"
                };
                out.push(Bench { dev, baseline });
            }
            Err(e) => println!("{kind:<5} skipped: {e}"),
        }
    }
    Ok(out)
}

/// The progress bar of a run of `total` cases (hidden where output is not a terminal).
pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} (eta {eta}) {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Prints a line above the progress bar (or plainly, when output is not a terminal and the bar
/// is hidden).
pub fn say(bar: &ProgressBar, line: impl AsRef<str>) {
    bar.suspend(|| println!("{}", line.as_ref()));
}

/// The `p` quantile (0 to 1) of sorted times, NaN for none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The ceiling: a streaming read of the same bytes, in the same run, over its fastest pass
/// where the timer is the wall clock ([`ceiling_percentile`]).
pub fn ceiling_gbps(b: &Bench, bytes: u64, warmup: usize, iters: usize) -> Option<f64> {
    let mut t = b.dev.stream_read(bytes, warmup, iters).ok()??;
    t.sort_by(f64::total_cmp);
    let seconds = percentile(&t, ceiling_percentile(b.dev.timer()));
    (seconds > 0.0).then(|| bytes as f64 / seconds / 1e9)
}

/// Which pass of the streaming read is the ceiling. A wall clock (the CPU) also times whatever
/// else the machine's cores ran meanwhile, so its passes swing with other processes' load (12
/// to 43 GB/s within one run on a shared 2-core machine, the medians of single kernels below
/// it); a ceiling is what the memory can deliver, so the fastest pass is taken. A device's own
/// timer times the kernel alone: its median is kept, as it always was.
fn ceiling_percentile(timer: &str) -> f64 {
    if timer == WALL_CLOCK {
        0.0
    } else {
        0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_ceilings_are_the_fastest_pass_device_timers_the_median() {
        assert_eq!(ceiling_percentile(WALL_CLOCK), 0.0);
        assert_eq!(ceiling_percentile("cuda events"), 0.5);
        assert_eq!(ceiling_percentile("wgpu timestamp queries"), 0.5);
        let cpu = Device::new(BackendKind::Cpu).expect("the CPU backend is always there");
        assert_eq!(cpu.timer(), WALL_CLOCK);
    }

    #[test]
    fn rotated_copies_pass_the_rotation_bytes_up_to_the_cap() {
        assert_eq!(rotated_copies(1 << 30), 1);
        assert_eq!(rotated_copies(64 << 20), 4);
        assert_eq!(rotated_copies(1), MAX_COPIES);
        assert_eq!(rotated_copies(0), MAX_COPIES);
    }
}
