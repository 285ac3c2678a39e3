//! `macko tune`: times the candidate plans of each matrix class on every GPU backend here and
//! files the fastest in the plan cache, which later devices of the same kind, driver and
//! library version apply at upload (`macko::tune`). Classes come from the 31 paper shapes at a
//! few densities, or from the MACKO matrices of a converted checkpoint. The cache is written
//! after every class, so an interrupted run keeps what it measured.

use std::collections::HashSet;
use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use macko::tune::{self, DeviceKey, MatrixClass, PlanCacheFile, TuneProgress, TuneSettings};
use macko::{
    synthetic, AnyMatrix, BackendKind, Device, DeviceOptions, MackoMatrix, MatrixRef, PlanCache,
};

use crate::bench::{parse_shape, PAPER_SHAPES};
use crate::error::CliError;
use crate::text::printable;

/// Densities tuned by default: the three (the plan rules change most across them).
const DEFAULT_DENSITIES: [f64; 3] = [0.5, 0.3, 0.1];
/// `--quick`: two small shapes at one density, seconds on lavapipe.
const QUICK_SHAPES: [(usize, usize); 2] = [(1024, 1024), (512, 2048)];

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Backends to tune (comma-separated); default: every GPU backend available (the CPU has
    /// no plans to tune).
    #[arg(long, value_delimiter = ',')]
    backend: Vec<BackendKind>,
    /// Shapes as ROWSxCOLS, comma-separated; default: the 31 shapes of the MACKO paper.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape, conflicts_with = "checkpoint")]
    shapes: Vec<(usize, usize)>,
    /// Densities in (0, 1], comma-separated; default 0.5, 0.3, 0.1.
    #[arg(long, value_delimiter = ',', conflicts_with = "checkpoint")]
    densities: Vec<f64>,
    /// Tune the classes of the MACKO matrices of this converted file (`macko convert`'s
    /// output) instead of synthetic ones.
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// Two small shapes at d = 0.5: seconds, for a first look or a software adapter.
    #[arg(long, conflicts_with_all = ["shapes", "densities", "checkpoint"])]
    quick: bool,
    /// The cache file to update; default: MACKO_PLAN_CACHE where it names a file, else the
    /// user's cache directory (macko/plans.json there).
    #[arg(long, value_name = "FILE")]
    cache: Option<PathBuf>,
    /// Measure classes the cache already has for this device again.
    #[arg(long)]
    retune: bool,
    /// Timed products per measurement (median kept).
    #[arg(long, default_value_t = 40)]
    iters: usize,
    /// Untimed products first.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Print every candidate's time, not only each class's winner.
    #[arg(long)]
    verbose: bool,
    /// Measure nothing: list the plans the cache holds, per device, and exit.
    #[arg(long, conflicts_with_all = ["shapes", "densities", "checkpoint", "quick", "retune"])]
    show: bool,
}

/// Where the matrices to tune come from.
enum Source {
    Synthetic(Vec<((usize, usize), f64)>),
    Checkpoint(PathBuf),
}

pub fn run(args: &TuneArgs) -> Result<(), CliError> {
    if std::env::var_os(macko::ENV_TUNING).is_some() {
        return Err(CliError::Usage(format!(
            "{} is set: tuning compares the plan rules' own choices with candidates, so it \
             must not run with forced choices; unset it",
            macko::ENV_TUNING
        )));
    }
    let path = cache_path(args)?;
    if args.show {
        return show(&path);
    }
    let source = source(args)?;
    let devices = open_devices(args)?;
    if devices.is_empty() {
        println!(
            "nothing to tune: no GPU backend is available here (the CPU has no plans to tune)"
        );
        return Ok(());
    }
    let mut file = match PlanCacheFile::load(&path) {
        Ok(f) => f,
        Err(problem) => {
            eprintln!("warning: {problem}; starting a new cache there");
            PlanCacheFile::default()
        }
    };
    println!("plan cache: {}", path.display());
    let settings = TuneSettings {
        warmup: args.warmup,
        iters: args.iters.max(1),
        ..TuneSettings::default()
    };
    for dev in &devices {
        tune_device(dev, &source, &settings, args, &mut file, &path)?;
    }
    Ok(())
}

/// `--show`: every section of the cache file and its entries.
fn show(path: &std::path::Path) -> Result<(), CliError> {
    let file = PlanCacheFile::load(path).map_err(|p| CliError::Check(p.to_string()))?;
    println!("plan cache: {}", path.display());
    let mut any = false;
    for (key, entries) in file.sections() {
        any = true;
        println!(
            "{}: {}, driver {:?}, library {} ({} classes)",
            key.backend,
            printable(&key.device),
            printable(&key.driver),
            printable(&key.library),
            entries.len()
        );
        for e in entries {
            println!(
                "  {:<34} rules {:9.2} µs  tuned {:9.2} µs  {}",
                e.class.describe(),
                e.rules_us,
                e.tuned_us,
                printable(label(&e.tuning))
            );
        }
    }
    if !any {
        println!("(empty: `macko tune` fills it)");
    }
    Ok(())
}

fn cache_path(args: &TuneArgs) -> Result<PathBuf, CliError> {
    if let Some(p) = &args.cache {
        return Ok(p.clone());
    }
    match std::env::var(macko::ENV_PLAN_CACHE).map(|v| PlanCache::from_value(&v)) {
        Ok(PlanCache::File(p)) => return Ok(p),
        Ok(PlanCache::Off) => {
            return Err(CliError::Usage(format!(
                "{} turns the plan cache off: name a file with --cache to tune anyway",
                macko::ENV_PLAN_CACHE
            )))
        }
        _ => {}
    }
    tune::default_cache_path().ok_or_else(|| {
        CliError::Usage("this platform has no cache directory: name a file with --cache".into())
    })
}

fn source(args: &TuneArgs) -> Result<Source, CliError> {
    if let Some(p) = &args.checkpoint {
        return Ok(Source::Checkpoint(p.clone()));
    }
    let (shapes, densities) = if args.quick {
        (QUICK_SHAPES.to_vec(), vec![0.5])
    } else {
        (
            if args.shapes.is_empty() {
                PAPER_SHAPES.to_vec()
            } else {
                args.shapes.clone()
            },
            if args.densities.is_empty() {
                DEFAULT_DENSITIES.to_vec()
            } else {
                args.densities.clone()
            },
        )
    };
    if let Some(&(r, c)) = shapes.iter().find(|&&(r, c)| r == 0 || c == 0) {
        return Err(CliError::Usage(format!(
            "--shapes {r}x{c}: a matrix needs at least one row and one column"
        )));
    }
    if let Some(d) = densities.iter().find(|d| !(**d > 0.0 && **d <= 1.0)) {
        return Err(CliError::Usage(format!(
            "--densities {d}: a density is in (0, 1]"
        )));
    }
    // Density by density, so that an interrupted run has whole densities filed.
    Ok(Source::Synthetic(
        densities
            .iter()
            .flat_map(|&d| shapes.iter().map(move |&s| (s, d)))
            .collect(),
    ))
}

/// The GPU devices to tune, each opened with no forced plan and no cache (the candidates are
/// measured against the rules' own plans).
fn open_devices(args: &TuneArgs) -> Result<Vec<Device>, CliError> {
    let wanted: Vec<BackendKind> = if args.backend.is_empty() {
        vec![BackendKind::Cuda, BackendKind::Wgpu]
    } else {
        args.backend.clone()
    };
    let mut out = Vec::new();
    for kind in wanted {
        let opts = DeviceOptions {
            plan_cache: PlanCache::Off,
            ..DeviceOptions::for_backend(kind)
        };
        match Device::with_options(&opts) {
            Ok(d) if tune::candidates::candidates(kind, macko::MatrixKind::Macko).is_empty() => {
                println!("{kind}: {} has no plans to tune", d.describe());
            }
            Ok(d) => out.push(d),
            Err(e) if args.backend.is_empty() => println!("{kind}: skipped ({e})"),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

fn tune_device(
    dev: &Device,
    source: &Source,
    settings: &TuneSettings,
    args: &TuneArgs,
    file: &mut PlanCacheFile,
    path: &std::path::Path,
) -> Result<(), CliError> {
    let key = DeviceKey::of(dev.info());
    println!(
        "{}, driver {:?}, library {}",
        dev.describe(),
        key.driver,
        key.library
    );
    let known: HashSet<MatrixClass> = file.entries_for(&key).iter().map(|e| e.class).collect();
    let mut done: HashSet<MatrixClass> = HashSet::new();
    let total = match source {
        Source::Synthetic(cases) => cases.len() as u64,
        Source::Checkpoint(p) => macko::format::container::MatrixFile::open(p)?
            .matrix_infos()?
            .len() as u64,
    };
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} (eta {eta}) {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut gains = Vec::new();
    let mut fractions: Vec<(f64, f64)> = Vec::new();
    let mut each = |name: String, m: MatrixRef<'_>| -> Result<(), CliError> {
        let class = MatrixClass::of(m);
        bar.set_message(format!("{name}: {}", class.describe()));
        if done.contains(&class) || (known.contains(&class) && !args.retune) {
            bar.inc(1);
            return Ok(());
        }
        let verbose = args.verbose;
        let outcome = tune::tune_matrix(dev, m, settings, &mut |p| {
            if verbose {
                match p {
                    TuneProgress::Timed { tuning, micros } => {
                        say(&bar, format!("    {micros:9.2} µs  {}", label(&tuning)))
                    }
                    TuneProgress::Skipped { tuning, reason } => say(
                        &bar,
                        format!("    skipped     {}: {reason}", label(&tuning)),
                    ),
                    TuneProgress::Confirming { .. } => {}
                }
            }
        })?;
        bar.inc(1);
        let Some(o) = outcome else {
            return Ok(());
        };
        let e = &o.entry;
        let gain = e.rules_us / e.tuned_us;
        gains.push(gain);
        // The device's streaming read of the same bytes, for "% of the ceiling".
        let ceiling = ceiling_us(dev, m.bytes(), settings)?;
        let pct = |us: f64| ceiling.map_or(String::new(), |c| format!(" ({:.1}%)", 100.0 * c / us));
        if let Some(c) = ceiling {
            fractions.push((c / e.rules_us, c / e.tuned_us));
        }
        say(
            &bar,
            format!(
                "  {:<34} rules {:9.2} µs{}  tuned {:9.2} µs{}  ×{gain:.3}  {}  ({} plans, {:.1} s)",
                e.class.describe(),
                e.rules_us,
                pct(e.rules_us),
                e.tuned_us,
                pct(e.tuned_us),
                label(&e.tuning),
                e.candidates,
                o.seconds
            ),
        );
        done.insert(class);
        file.insert(&key, o.entry);
        file.save(path)?;
        Ok(())
    };
    match source {
        Source::Synthetic(cases) => {
            for &((rows, cols), d) in cases {
                let dense = synthetic::pruned_matrix(rows, cols, d, 1)?;
                let m = MackoMatrix::from_dense(&dense)?;
                each(format!("{rows}x{cols} d={d}"), (&m).into())?;
            }
        }
        Source::Checkpoint(p) => {
            let f = macko::format::container::MatrixFile::open(p)?;
            for info in f.matrix_infos()? {
                if info.kind != macko::MatrixKind::Macko {
                    bar.inc(1);
                    continue;
                }
                let m = f.matrix(&info.name)?;
                if let AnyMatrix::Macko(m) = &m {
                    each(printable(&info.name).into_owned(), m.into())?;
                }
            }
        }
    }
    bar.finish_and_clear();
    if !fractions.is_empty() {
        let mut rules: Vec<f64> = fractions.iter().map(|f| f.0).collect();
        let mut tuned: Vec<f64> = fractions.iter().map(|f| f.1).collect();
        rules.sort_by(f64::total_cmp);
        tuned.sort_by(f64::total_cmp);
        println!(
            "{}: median fraction of the streaming-read ceiling: rules {:.1}%, tuned {:.1}%",
            dev.describe(),
            100.0 * rules[rules.len() / 2],
            100.0 * tuned[tuned.len() / 2]
        );
    }
    if !gains.is_empty() {
        gains.sort_by(f64::total_cmp);
        println!(
            "{}: {} classes tuned, median gain over the rules ×{:.3} (best ×{:.3})",
            dev.describe(),
            gains.len(),
            gains[gains.len() / 2],
            gains[gains.len() - 1]
        );
    }
    Ok(())
}

/// Median microseconds of the device's streaming read over `bytes` (its ceiling for a product
/// that reads them), `None` where the device has no such kernel.
fn ceiling_us(dev: &Device, bytes: u64, settings: &TuneSettings) -> Result<Option<f64>, CliError> {
    Ok(dev
        .stream_read(bytes, settings.warmup, settings.iters)?
        .filter(|t| !t.is_empty())
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2] * 1e6
        }))
}

/// Prints a line above the progress bar (or alone, where the bar is hidden because the output
/// is not a terminal).
fn say(bar: &ProgressBar, line: String) {
    bar.suspend(|| println!("{line}"));
}

/// A tuning's items, or "the rules' plan" where there are none.
fn label(tuning: &str) -> &str {
    if tuning.is_empty() {
        "the rules' plan"
    } else {
        tuning
    }
}
