//! `macko bench`: on every available backend, MACKO-16-4 against the baselines a user would
//! otherwise pick (our dense GEMV and CSR; cuBLAS and cuSPARSE on CUDA), over LLM weight shapes
//! and densities, each result checked against the f64 reference before it is timed, with the
//! device's streaming-read ceiling over the same bytes measured in the same run. With
//! `--merge DIR…` it measures nothing and combines earlier runs' results instead (merge.rs).

mod merge;
mod plots;
mod record;
mod report;

use std::path::PathBuf;

use clap::Args;
use half::f16;
use indicatif::{ProgressBar, ProgressStyle};
use macko::{
    synthetic, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceMatrix, DeviceOptions, Error,
    MackoMatrix, MatrixRef, Precision, VendorBaseline,
};
pub use record::Record;
use record::{Host, Results, Settings, TOOL};

use crate::error::CliError;

/// The 31 LLM weight shapes (rows × cols) of the MACKO paper.
pub const PAPER_SHAPES: [(usize, usize); 31] = [
    (4096, 4096),
    (8192, 8192),
    (8192, 29568),
    (32000, 5120),
    (32000, 8192),
    (28672, 8192),
    (5120, 5120),
    (5120, 13824),
    (3584, 20480),
    (4096, 11008),
    (13824, 5120),
    (18944, 3584),
    (14336, 4096),
    (4096, 14336),
    (8192, 28672),
    (11008, 4096),
    (32000, 4096),
    (20480, 3584),
    (3584, 18944),
    (21504, 7168),
    (7168, 7168),
    (28672, 7168),
    (7168, 28672),
    (27648, 9216),
    (9216, 9216),
    (36864, 9216),
    (9216, 36864),
    (36864, 12288),
    (12288, 12288),
    (49152, 12288),
    (12288, 49152),
];

/// `--quick`: a few small shapes, seconds on a laptop or on lavapipe.
const QUICK_SHAPES: [(usize, usize); 3] = [(1024, 1024), (2048, 1024), (1024, 3072)];
const QUICK_DENSITIES: [f64; 5] = [1.0, 0.7, 0.5, 0.3, 0.1];
const DEFAULT_DENSITIES: [f64; 11] = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05];

/// Rotated copies of a matrix are made until they total this many bytes, so that repeated
/// products read from memory, not from the L2 cache (50–60 MB on an H100/H200).
const ROTATION_BYTES: u64 = 256 << 20;
const MAX_COPIES: usize = 8;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Backends to measure (repeatable or comma-separated); default: every available one.
    #[arg(long, value_delimiter = ',')]
    backend: Vec<BackendKind>,
    /// A few small shapes and densities: seconds on a laptop or on a software adapter.
    #[arg(long)]
    quick: bool,
    /// Shapes as ROWSxCOLS, comma-separated; default: the 31 shapes of the MACKO paper.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    shapes: Vec<(usize, usize)>,
    /// Densities in (0, 1], comma-separated; default 1.0, 0.9 … 0.1, 0.05.
    #[arg(long, value_delimiter = ',')]
    densities: Vec<f64>,
    /// Timed products per measurement (median reported).
    #[arg(long, default_value_t = 100)]
    iters: usize,
    /// Untimed products first.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Rows checked against the f64 reference before timing (evenly spaced; 0 = all).
    #[arg(long, default_value_t = 512)]
    check_rows: usize,
    /// Seed of the synthetic matrices and vectors.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write results.csv, results.json and SVG plots here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Measure nothing: merge the results.json of earlier runs (repeatable, in order; a later
    /// DIR's record replaces an earlier one's of the same backend, shape, density and kernel)
    /// and write the merged results, plots and summary to --out. The runs must have measured
    /// the same device per backend with the same settings.
    #[arg(
        long,
        value_name = "DIR",
        requires = "out",
        conflicts_with_all = ["backend", "quick", "shapes", "densities", "iters", "warmup", "check_rows", "seed"]
    )]
    merge: Vec<PathBuf>,
}

fn parse_shape(s: &str) -> Result<(usize, usize), String> {
    let (r, c) = s
        .split_once(['x', 'X', '×'])
        .ok_or_else(|| format!("shape {s:?} is not ROWSxCOLS"))?;
    let parse = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|e| format!("shape {s:?}: {v:?} is not a size ({e})"))
    };
    Ok((parse(r)?, parse(c)?))
}

/// A device under measurement and its baseline kernel name.
struct Bench {
    dev: Device,
    baseline: &'static str,
}

/// The plan after defaults are applied.
struct Plan {
    shapes: Vec<(usize, usize)>,
    densities: Vec<f64>,
}

fn plan(args: &BenchArgs) -> Result<Plan, CliError> {
    let shapes = if !args.shapes.is_empty() {
        args.shapes.clone()
    } else if args.quick {
        QUICK_SHAPES.to_vec()
    } else {
        PAPER_SHAPES.to_vec()
    };
    let densities = if !args.densities.is_empty() {
        args.densities.clone()
    } else if args.quick {
        QUICK_DENSITIES.to_vec()
    } else {
        DEFAULT_DENSITIES.to_vec()
    };
    if let Some(d) = densities.iter().find(|d| !(**d > 0.0 && **d <= 1.0)) {
        return Err(CliError::Usage(format!("density {d} is outside (0, 1]")));
    }
    Ok(Plan { shapes, densities })
}

/// Opens every backend asked for (or every one), skipping those unavailable here. A bad
/// `MACKO_BACKEND`/`MACKO_TUNING` is an error, not a skip: a sweep must not measure defaults
/// while believing it measured a tuning.
fn open_devices(args: &BenchArgs) -> Result<Vec<Bench>, CliError> {
    let env = DeviceOptions::from_env()?;
    let kinds: Vec<BackendKind> = if args.backend.is_empty() {
        BackendKind::ALL.to_vec()
    } else {
        args.backend.clone()
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
                println!("{:<5} {} (timer: {})", kind, dev.info().name, dev.timer());
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

/// Prints a line above the progress bar (or plainly, when output is not a terminal and the bar
/// is hidden).
fn say(bar: &ProgressBar, line: impl AsRef<str>) {
    bar.suspend(|| println!("{}", line.as_ref()));
}

/// Evenly spaced rows to check, first and last included.
fn sample_rows(rows: usize, n: usize) -> Vec<usize> {
    if n == 0 || rows <= n {
        return (0..rows).collect();
    }
    let mut v: Vec<usize> = (0..n).map(|i| i * (rows - 1) / (n - 1)).collect();
    v.dedup();
    v
}

/// The f64 reference of the sampled rows, as `(value, Σ|terms|, terms)` per sampled row.
fn reference_rows(m: MatrixRef<'_>, x: &[f16], rows: &[usize]) -> Vec<(f64, f64, usize)> {
    let one = |terms: &mut dyn Iterator<Item = f64>| {
        let (mut y, mut abs, mut n) = (0.0, 0.0, 0usize);
        for t in terms {
            y += t;
            abs += t.abs();
            n += 1;
        }
        (y, abs, n)
    };
    rows.iter()
        .map(|&r| match m {
            MatrixRef::Macko(a) => one(&mut a
                .row_entries(r)
                .filter(|(_, v)| !macko::format::is_zero(*v))
                .map(|(c, v)| v.to_f64() * x[c].to_f64())),
            MatrixRef::Csr(a) => one(&mut a
                .row_range(r)
                .filter(|&i| !macko::format::is_zero(a.values()[i]))
                .map(|i| a.values()[i].to_f64() * x[a.col_idx()[i] as usize].to_f64())),
            MatrixRef::Dense(a) => one(&mut a
                .row(r)
                .iter()
                .zip(x)
                .map(|(v, xv)| v.to_f64() * xv.to_f64())),
        })
        .collect()
}

/// One kernel to measure on one device.
struct Kernel<'a> {
    name: &'static str,
    matrix: MatrixRef<'a>,
    vendor: Option<VendorBaseline>,
}

fn upload(dev: &Device, k: &Kernel<'_>) -> Result<DeviceMatrix, Error> {
    match k.vendor {
        Some(v) => dev.upload_vendor(k.matrix, v),
        None => dev.upload(k.matrix),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Outcome of one kernel on one device.
enum Outcome {
    Timed(Record),
    Skipped(String),
    Wrong(String),
}

struct Case<'a> {
    rows: usize,
    cols: usize,
    density: f64,
    dense_bytes: u64,
    x: &'a [f16],
    sample: &'a [usize],
}

fn measure(b: &Bench, k: &Kernel<'_>, case: &Case<'_>, args: &BenchArgs) -> Outcome {
    let dev = &b.dev;
    let run = || -> Result<Outcome, Error> {
        let first = upload(dev, k)?;
        let copies = (ROTATION_BYTES.div_ceil(first.bytes().max(1)) as usize).clamp(1, MAX_COPIES);
        let mut mats = vec![first];
        for _ in 1..copies {
            mats.push(upload(dev, k)?);
        }
        let x = dev.upload_vector(case.x)?;
        let mut y = dev.zeros(case.rows, Precision::F16)?;
        dev.spmv(&mats[0], &x, &mut y)?;
        let got = dev.download(&y)?.to_f64();
        let reference = reference_rows(k.matrix, case.x, case.sample);
        for (&r, &(want, abs, n)) in case.sample.iter().zip(&reference) {
            if !macko::reference::agrees(got[r], want, abs, n, Precision::F16) {
                return Ok(Outcome::Wrong(format!(
                    "row {r}: got {}, reference {want} (tolerance {:e})",
                    got[r],
                    macko::reference::tolerance(want, abs, n, Precision::F16)
                )));
            }
        }
        let refs: Vec<&DeviceMatrix> = mats.iter().collect();
        let mut t = dev.time_spmv(&refs, &x, &mut y, args.warmup, args.iters)?;
        t.sort_by(f64::total_cmp);
        let bytes = first_bytes(&mats) + 2 * case.cols as u64 + 2 * case.rows as u64;
        let median = percentile(&t, 0.5);
        Ok(Outcome::Timed(Record {
            backend: dev.kind().name().into(),
            device: dev.info().name.clone(),
            rows: case.rows,
            cols: case.cols,
            density: case.density,
            kernel: k.name.into(),
            bytes,
            effective_density: first_bytes(&mats) as f64 / case.dense_bytes.max(1) as f64,
            median_us: median * 1e6,
            min_us: percentile(&t, 0.0) * 1e6,
            p10_us: percentile(&t, 0.1) * 1e6,
            p90_us: percentile(&t, 0.9) * 1e6,
            gbps: bytes as f64 / median / 1e9,
            fraction_of_ceiling: None,
            speedup_over_dense: None,
            timer: dev.timer().into(),
            iters: t.len(),
        }))
    };
    match run() {
        Ok(o) => o,
        Err(
            e @ (Error::OutOfMemory { .. } | Error::TooLarge { .. } | Error::Unavailable { .. }),
        ) => Outcome::Skipped(e.to_string()),
        Err(e) => Outcome::Wrong(format!("error: {e}")),
    }
}

fn first_bytes(mats: &[DeviceMatrix]) -> u64 {
    mats.first().map_or(0, |m| m.bytes())
}

/// The ceiling: a streaming read of the same bytes, in the same run.
fn ceiling_gbps(b: &Bench, bytes: u64, args: &BenchArgs) -> Option<f64> {
    let mut t = b.dev.stream_read(bytes, args.warmup, args.iters).ok()??;
    t.sort_by(f64::total_cmp);
    let median = percentile(&t, 0.5);
    (median > 0.0).then(|| bytes as f64 / median / 1e9)
}

pub fn run(args: &BenchArgs) -> Result<(), CliError> {
    if !args.merge.is_empty() {
        let out = args.out.as_deref().ok_or_else(|| {
            CliError::Usage("--merge needs --out DIR for the merged results".into())
        })?;
        return merge::run(&args.merge, out);
    }
    let plan = plan(args)?;
    let benches = open_devices(args)?;
    if benches.is_empty() {
        return Err(CliError::Usage("no backend could be opened".into()));
    }
    let total = (plan.shapes.len() * plan.densities.len()) as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} (eta {eta}) {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut doc = Results {
        tool: TOOL.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        date: report::today(),
        host: Host::here(),
        settings: Settings {
            iters: args.iters,
            warmup: args.warmup,
            check_rows: args.check_rows,
            seed: args.seed,
            output: "f16".into(),
            rotation_bytes: ROTATION_BYTES,
        },
        devices: benches.iter().map(|b| b.dev.info().into()).collect(),
        merged_from: Vec::new(),
        results: Vec::new(),
    };
    let mut failures: Vec<String> = Vec::new();
    for (si, &(rows, cols)) in plan.shapes.iter().enumerate() {
        for (di, &density) in plan.densities.iter().enumerate() {
            bar.set_message(format!("{rows}×{cols} d={density}"));
            let seed = args.seed.wrapping_add((si * 1000 + di) as u64);
            let dense: DenseMatrix = synthetic::pruned_matrix(rows, cols, density, seed)?;
            let macko = MackoMatrix::from_dense(&dense)?;
            let csr = CsrMatrix::from_dense(&dense)?;
            let x = synthetic::activations(cols, seed);
            let sample = sample_rows(rows, args.check_rows);
            let case = Case {
                rows,
                cols,
                density,
                dense_bytes: dense.bytes(),
                x: &x,
                sample: &sample,
            };
            for b in &benches {
                let mut kernels = vec![
                    Kernel {
                        name: "macko",
                        matrix: (&macko).into(),
                        vendor: None,
                    },
                    Kernel {
                        name: "dense",
                        matrix: (&dense).into(),
                        vendor: None,
                    },
                    Kernel {
                        name: "csr",
                        matrix: (&csr).into(),
                        vendor: None,
                    },
                ];
                if b.dev.kind() == BackendKind::Cuda {
                    kernels.push(Kernel {
                        name: "cublas",
                        matrix: (&dense).into(),
                        vendor: Some(VendorBaseline::CublasDense),
                    });
                    kernels.push(Kernel {
                        name: "cusparse",
                        matrix: (&csr).into(),
                        vendor: Some(VendorBaseline::CusparseCsr),
                    });
                }
                let mut these: Vec<Record> = Vec::new();
                for k in &kernels {
                    match measure(b, k, &case, args) {
                        Outcome::Timed(r) => these.push(r),
                        Outcome::Skipped(why) => say(
                            &bar,
                            format!(
                                "{} {rows}×{cols} d={density} {}: skipped: {why}",
                                b.dev.kind(),
                                k.name
                            ),
                        ),
                        Outcome::Wrong(why) => {
                            let line = format!(
                                "{} {rows}×{cols} d={density} {}: WRONG RESULT, not timed: {why}",
                                b.dev.kind(),
                                k.name
                            );
                            say(&bar, &line);
                            failures.push(line);
                        }
                    }
                }
                report::finish_case(&mut these, b.baseline, |bytes| ceiling_gbps(b, bytes, args));
                if let Some(line) = report::case_line(&these) {
                    say(&bar, line);
                }
                doc.results.extend(these);
            }
            // Results so far go to disk after every case, so a run cut short keeps them.
            if let Some(dir) = &args.out {
                report::write_files(&doc, dir)?;
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    report::finish(&doc, args.out.as_deref())?;
    if !failures.is_empty() {
        return Err(CliError::Check(format!(
            "{} kernel result(s) disagreed with the f64 reference (listed above)",
            failures.len()
        )));
    }
    Ok(())
}
