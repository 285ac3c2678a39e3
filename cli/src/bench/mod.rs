//! `macko bench`: on every available backend, MACKO-16-4 against the baselines a user would
//! otherwise pick (our dense GEMV and CSR; cuBLAS and cuSPARSE on CUDA), over LLM weight shapes
//! and densities, each result checked against the f64 reference before it is timed, with the
//! device's streaming-read ceiling over the same bytes measured in the same run. With
//! `--batch 1,4,16` every case is measured as a few-token product Y = A·X of each batch size
//! B (`Device::spmm`; the same B for every kernel, the vendor baselines included). With
//! `--values f16,int8,int4` every case also measures, per quantized value type V, `macko-V`
//! (the case's MACKO matrix quantized) and `dense-V` (its dense matrix quantized), against the
//! same f16 dense baseline, so that "MACKO-int8 over cuBLAS f16" is read off one run. With
//! `--merge DIR…` it measures nothing and combines earlier runs' results instead (merge.rs).

mod check;
mod devices;
mod limits;
mod merge;
mod plots;
mod record;
mod report;
mod shapes;
mod sparse_inputs;
mod values;

use std::path::PathBuf;

use check::{first_wrong, reference_batch, sample_rows, RowRef};
use clap::Args;
use devices::{
    ceiling_gbps, open_devices, percentile, progress_bar, rotated_copies, say, Bench,
    ROTATION_BYTES,
};
use half::f16;
use macko::{
    synthetic, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceMatrix, Error, MackoMatrix,
    MatrixRef, Precision, QuantBits, QuantDenseMatrix, QuantMackoMatrix, Quantization,
    Sparse24Matrix, VendorBaseline,
};
pub use record::Record;
use record::{Host, Results, Settings, TOOL};
pub use shapes::{parse_shape, PAPER_SHAPES};
use values::{parse_group, quantization};
use values::{quant_kernels, ValueType};

use crate::error::CliError;

/// `--quick`: a few small shapes, seconds on a laptop or on lavapipe.
const QUICK_SHAPES: [(usize, usize); 3] = [(1024, 1024), (2048, 1024), (1024, 3072)];
const QUICK_DENSITIES: [f64; 5] = [1.0, 0.7, 0.5, 0.3, 0.1];
const DEFAULT_DENSITIES: [f64; 11] = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05];

/// The largest `--batch`: vectors of one few-token product (the library works through a
/// batch in chunks of 16; beyond 64 a bench measures a prefill, not a few-token product).
pub const MAX_BATCH: usize = 64;

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
    /// Vectors per product, B of Y = A·X (repeatable or comma-separated, each 1 to 64); every
    /// case is measured once per B. Default 1 (y = A·x).
    #[arg(long, value_delimiter = ',', value_parser = parse_batch)]
    batch: Vec<usize>,
    /// Value types to measure (repeatable or comma-separated). f16: MACKO, dense and CSR with
    /// binary16 values (always measured: the dense f16 product is the baseline of every
    /// speedup). int8, int4: the case's MACKO and dense matrices quantized (symmetric absmax,
    /// round to nearest), measured as the kernels macko-int8/dense-int8 and
    /// macko-int4/dense-int4, each checked against the f64 reference of its dequantized matrix.
    /// A backend without quantized kernels is skipped for them, with a note. Default f16.
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    values: Vec<ValueType>,
    /// Also measure 2:4 structured sparsity (kernel `sparse24`): each case's matrix pruned to
    /// 2:4 (the two largest |w| of every four columns), same shape. Its storage, 0.5625 of
    /// dense, does not depend on the case's density: compare it with MACKO at d = 0.5.
    #[arg(long)]
    sparse24: bool,
    /// Measure the products with a sparse input instead (y = A·x with x sparse, y = Aᵀ·x with
    /// x dense or sparse; CSR, homogeneous CSR and MACKO), x this fraction non-zero
    /// (comma-separated for several). Default case: 10000x10000 at densities 0.01, 0.05, 0.1.
    /// Writes sparse_inputs.csv to --out.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "X_DENSITIES",
        conflicts_with_all = ["batch", "values", "sparse24", "group"]
    )]
    sparse_inputs: Vec<f64>,
    /// Scale group of the int8 and int4 values: one binary16 scale per G consecutive stored
    /// values (a multiple of 8 from 8 to 16777216). Default: int8 one scale per row, int4 one
    /// per 64 values.
    #[arg(long, value_name = "G", value_parser = parse_group)]
    group: Option<u32>,
    /// Write results.csv, results.json and SVG plots here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Measure nothing: merge the results.json of earlier runs (repeatable, in order; a later
    /// DIR's record replaces an earlier one's of the same backend, shape, density, batch and kernel)
    /// and write the merged results, plots and summary to --out. The runs must have measured
    /// the same device per backend with the same settings.
    #[arg(
        long,
        value_name = "DIR",
        requires = "out",
        conflicts_with_all = ["backend", "quick", "shapes", "densities", "iters", "warmup", "check_rows", "seed", "batch", "values", "group", "sparse_inputs"]
    )]
    merge: Vec<PathBuf>,
}

/// A `--batch` value that is not a number of vectors from 1 to [`MAX_BATCH`].
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// Not a whole number.
    #[error("batch {text:?} is not a whole number of vectors ({reason})")]
    NotANumber {
        /// The value given.
        text: String,
        /// What the number parser said.
        reason: std::num::ParseIntError,
    },
    /// A number outside 1..=MAX_BATCH.
    #[error("batch {batch} is outside 1..={MAX_BATCH}: a product multiplies at least one vector and the bench at most {MAX_BATCH}")]
    OutOfRange {
        /// The batch given.
        batch: usize,
    },
}

fn parse_batch(s: &str) -> Result<usize, BatchError> {
    let batch = s
        .trim()
        .parse::<usize>()
        .map_err(|reason| BatchError::NotANumber {
            text: s.into(),
            reason,
        })?;
    if (1..=MAX_BATCH).contains(&batch) {
        Ok(batch)
    } else {
        Err(BatchError::OutOfRange { batch })
    }
}

/// The plan after defaults are applied.
struct Plan {
    shapes: Vec<(usize, usize)>,
    densities: Vec<f64>,
    /// Batch sizes, ascending, each once.
    batches: Vec<usize>,
    /// The quantized value types, in the order given, each once.
    quants: Vec<Quantization>,
    /// `--sparse24`.
    sparse24: bool,
}

/// A refused argument as the command's usage error.
fn usage(e: limits::BenchLimit) -> CliError {
    CliError::Usage(e.to_string())
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
    limits::check_iters(args.iters).map_err(usage)?;
    for &(rows, cols) in &shapes {
        limits::check_shape(rows, cols).map_err(usage)?;
    }
    if let Some(d) = densities.iter().find(|d| !(**d > 0.0 && **d <= 1.0)) {
        return Err(CliError::Usage(format!("density {d} is outside (0, 1]")));
    }
    let mut batches = if args.batch.is_empty() {
        vec![1]
    } else {
        args.batch.clone()
    };
    batches.sort_unstable();
    batches.dedup();
    let mut quants: Vec<Quantization> = Vec::new();
    for bits in args.values.iter().filter_map(|v| v.bits()) {
        if !quants.iter().any(|q| q.bits == bits) {
            quants.push(quantization(bits, args.group));
        }
    }
    if let (Some(g), true) = (args.group, quants.is_empty()) {
        return Err(CliError::Usage(format!(
            "--group {g} sets the scale group of int8 and int4 values, but --values names neither"
        )));
    }
    Ok(Plan {
        shapes,
        densities,
        batches,
        quants,
        sparse24: args.sparse24,
    })
}

struct Kernel<'a> {
    name: &'static str,
    /// The quantized width of its values (`None`: f16), so that a backend refusing one width
    /// is skipped for that width's kernels only.
    quant: Option<QuantBits>,
    matrix: MatrixRef<'a>,
    vendor: Option<VendorBaseline>,
    /// The f64 reference of `matrix` at the sampled rows, per vector of the largest batch.
    reference: &'a [Vec<RowRef>],
}

/// One case's MACKO and dense matrices quantized to one width, with their references.
struct QuantMatrices {
    bits: QuantBits,
    macko: QuantMackoMatrix,
    dense: QuantDenseMatrix,
    /// References of the quantized MACKO and dense matrices (their dequantized values), in
    /// that order.
    reference: [Vec<Vec<RowRef>>; 2],
}

/// One case's matrices in every format, with the f64 reference of each at the sampled rows.
struct Matrices<'a> {
    macko: &'a MackoMatrix,
    dense: &'a DenseMatrix,
    csr: &'a CsrMatrix,
    /// References of MACKO, dense and CSR, in that order.
    reference: [Vec<Vec<RowRef>>; 3],
    /// The quantized matrices of each `--values` width that some backend still measures.
    quant: Vec<QuantMatrices>,
    /// With `--sparse24`: the case's matrix pruned to 2:4, and its reference.
    sparse24: Option<(Sparse24Matrix, Vec<Vec<RowRef>>)>,
}

impl Matrices<'_> {
    /// The kernels measured on a backend: ours in every format and, on CUDA, cuBLAS (dense)
    /// and cuSPARSE (CSR) with the same matrices.
    fn kernels(&self, kind: BackendKind) -> Vec<Kernel<'_>> {
        let [macko_ref, dense_ref, csr_ref] = &self.reference;
        let mut kernels = vec![
            Kernel {
                name: "macko",
                quant: None,
                matrix: self.macko.into(),
                vendor: None,
                reference: macko_ref,
            },
            Kernel {
                name: "dense",
                quant: None,
                matrix: self.dense.into(),
                vendor: None,
                reference: dense_ref,
            },
            Kernel {
                name: "csr",
                quant: None,
                matrix: self.csr.into(),
                vendor: None,
                reference: csr_ref,
            },
        ];
        if kind == BackendKind::Cuda {
            kernels.push(Kernel {
                name: "cublas",
                quant: None,
                matrix: self.dense.into(),
                vendor: Some(VendorBaseline::CublasDense),
                reference: dense_ref,
            });
            kernels.push(Kernel {
                name: "cusparse",
                quant: None,
                matrix: self.csr.into(),
                vendor: Some(VendorBaseline::CusparseCsr),
                reference: csr_ref,
            });
        }
        if let Some((m, reference)) = &self.sparse24 {
            kernels.push(Kernel {
                name: "sparse24",
                quant: None,
                matrix: m.into(),
                vendor: None,
                reference,
            });
        }
        // The quantized kernels come after every f16 one, so a case line reads as before with
        // the quantized figures appended.
        for q in &self.quant {
            let [macko_name, dense_name] = quant_kernels(q.bits);
            let [macko_ref, dense_ref] = &q.reference;
            kernels.push(Kernel {
                name: macko_name,
                quant: Some(q.bits),
                matrix: (&q.macko).into(),
                vendor: None,
                reference: macko_ref,
            });
            kernels.push(Kernel {
                name: dense_name,
                quant: Some(q.bits),
                matrix: (&q.dense).into(),
                vendor: None,
                reference: dense_ref,
            });
        }
        kernels
    }
}

fn upload(dev: &Device, k: &Kernel<'_>) -> Result<DeviceMatrix, Error> {
    match k.vendor {
        Some(v) => dev.upload_vendor(k.matrix, v),
        None => dev.upload(k.matrix),
    }
}

/// Outcome of one kernel on one device.
enum Outcome {
    Timed(Record),
    Skipped(String),
    /// The backend has no kernel for these quantized values (`Error::Unsupported`): not a
    /// failure, and the width is skipped on this backend for the rest of the run.
    Unsupported(QuantBits, String),
    Wrong(String),
}

struct Case<'a> {
    rows: usize,
    cols: usize,
    density: f64,
    dense_bytes: u64,
    /// The vectors of the largest batch, row-major `[batch][cols]`; a batch of B takes the
    /// first B.
    x: &'a [f16],
    sample: &'a [usize],
}

/// `batch` seeded activation vectors of `cols` elements, row-major: the first is the single
/// vector the bench has always used with this seed, so that B = 1 measures what it did.
fn batch_activations(cols: usize, batch: usize, seed: u64) -> Vec<f16> {
    (0..batch)
        .flat_map(|b| synthetic::activations(cols, seed.wrapping_add((b as u64) << 32)))
        .collect()
}

/// The bytes a product must move: the stored matrix once, and the B vectors of X (f16) read
/// and of Y (f16) written once each. The ceiling and GB/s of every kernel are over these bytes.
fn product_bytes(matrix: u64, rows: usize, cols: usize, batch: usize) -> u64 {
    matrix + 2 * (cols as u64 + rows as u64) * batch as u64
}

fn measure(b: &Bench, k: &Kernel<'_>, case: &Case<'_>, batch: usize, args: &BenchArgs) -> Outcome {
    let dev = &b.dev;
    let run = || -> Result<Outcome, Error> {
        let first = upload(dev, k)?;
        let copies = rotated_copies(first.bytes());
        let mut mats = vec![first];
        for _ in 1..copies {
            mats.push(upload(dev, k)?);
        }
        let x = dev.upload_batch(&case.x[..batch * case.cols], batch)?;
        let mut y = dev.zeros_batch(case.rows, batch, Precision::F16)?;
        dev.spmm(&mats[0], &x, &mut y)?;
        let got = dev.download(&y)?.to_f64();
        let reference = k.reference.get(..batch).unwrap_or(k.reference);
        if let Some(why) = first_wrong(&got, case.rows, case.sample, reference) {
            return Ok(Outcome::Wrong(why));
        }
        let refs: Vec<&DeviceMatrix> = mats.iter().collect();
        let mut t = dev.time_spmv(&refs, &x, &mut y, args.warmup, args.iters)?;
        t.sort_by(f64::total_cmp);
        let bytes = product_bytes(first_bytes(&mats), case.rows, case.cols, batch);
        let median = percentile(&t, 0.5);
        Ok(Outcome::Timed(Record {
            backend: dev.kind().name().into(),
            device: dev.info().name.clone(),
            rows: case.rows,
            cols: case.cols,
            density: case.density,
            batch,
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
        Err(e @ Error::Unsupported { .. }) => match k.quant {
            Some(bits) => Outcome::Unsupported(bits, e.to_string()),
            None => Outcome::Wrong(format!("error: {e}")),
        },
        Err(e) => Outcome::Wrong(format!("error: {e}")),
    }
}

fn first_bytes(mats: &[DeviceMatrix]) -> u64 {
    mats.first().map_or(0, |m| m.bytes())
}

pub fn run(args: &BenchArgs) -> Result<(), CliError> {
    if !args.merge.is_empty() {
        let out = args.out.as_deref().ok_or_else(|| {
            CliError::Usage("--merge needs --out DIR for the merged results".into())
        })?;
        return merge::run(&args.merge, out);
    }
    if !args.sparse_inputs.is_empty() {
        return sparse_inputs::run(&sparse_inputs::Options {
            backends: &args.backend,
            quick: args.quick,
            shapes: &args.shapes,
            densities: &args.densities,
            x_densities: &args.sparse_inputs,
            iters: args.iters,
            warmup: args.warmup,
            seed: args.seed,
            out: args.out.as_deref(),
        });
    }
    let plan = plan(args)?;
    let benches = open_devices(&args.backend)?;
    if benches.is_empty() {
        return Err(CliError::Usage("no backend could be opened".into()));
    }
    let total = (plan.shapes.len() * plan.densities.len() * plan.batches.len()) as u64;
    let bar = progress_bar(total);
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
            scales: plan
                .quants
                .iter()
                .map(|q| (q.bits.as_str().to_string(), q.scales.describe()))
                .collect(),
        },
        devices: benches.iter().map(|b| b.dev.info().into()).collect(),
        merged_from: Vec::new(),
        results: Vec::new(),
    };
    let mut failures: Vec<String> = Vec::new();
    // Quantized kernels each backend refused (`Error::Unsupported`): not tried again on that
    // backend, and noted once per width (both kernels of a width are tried in the first case),
    // not once per case.
    let mut refused: Vec<(BackendKind, &str)> = Vec::new();
    for (si, &(rows, cols)) in plan.shapes.iter().enumerate() {
        for (di, &density) in plan.densities.iter().enumerate() {
            let seed = args.seed.wrapping_add((si * 1000 + di) as u64);
            let dense: DenseMatrix = synthetic::pruned_matrix(rows, cols, density, seed)?;
            let macko = MackoMatrix::from_dense(&dense)?;
            let csr = CsrMatrix::from_dense(&dense)?;
            let most = plan.batches.last().copied().unwrap_or(1);
            let x = batch_activations(cols, most, seed);
            let sample = sample_rows(rows, args.check_rows);
            // Quantizing (and its reference) is skipped for a width every backend refused.
            let mut quant = Vec::new();
            for q in &plan.quants {
                if benches.iter().all(|b| {
                    quant_kernels(q.bits)
                        .iter()
                        .all(|k| refused.contains(&(b.dev.kind(), *k)))
                }) {
                    continue;
                }
                let qm = QuantMackoMatrix::quantize(&macko, *q)?;
                let qd = QuantDenseMatrix::quantize(&dense, *q)?;
                let reference = [
                    reference_batch((&qm).into(), &x, most, &sample),
                    reference_batch((&qd).into(), &x, most, &sample),
                ];
                quant.push(QuantMatrices {
                    bits: q.bits,
                    macko: qm,
                    dense: qd,
                    reference,
                });
            }
            let sparse24 = if plan.sparse24 {
                let m = Sparse24Matrix::prune_from_dense(&dense)?;
                let reference = reference_batch((&m).into(), &x, most, &sample);
                Some((m, reference))
            } else {
                None
            };
            let matrices = Matrices {
                sparse24,
                reference: [
                    reference_batch((&macko).into(), &x, most, &sample),
                    reference_batch((&dense).into(), &x, most, &sample),
                    reference_batch((&csr).into(), &x, most, &sample),
                ],
                macko: &macko,
                dense: &dense,
                csr: &csr,
                quant,
            };
            let case = Case {
                rows,
                cols,
                density,
                dense_bytes: dense.bytes(),
                x: &x,
                sample: &sample,
            };
            for &batch in &plan.batches {
                bar.set_message(format!("{rows}×{cols} d={density} B={batch}"));
                for b in &benches {
                    let kernels = matrices.kernels(b.dev.kind());
                    let mut these: Vec<Record> = Vec::new();
                    // Kernels this backend refused in this case, by width, with the first
                    // reason: (width, kernels, reason).
                    let mut refusals: Vec<(QuantBits, Vec<&str>, String)> = Vec::new();
                    let kind = b.dev.kind();
                    for k in &kernels {
                        if refused.contains(&(kind, k.name)) {
                            continue;
                        }
                        let what = || {
                            format!(
                                "{} {rows}×{cols} d={density} B={batch} {}",
                                b.dev.kind(),
                                k.name
                            )
                        };
                        match measure(b, k, &case, batch, args) {
                            Outcome::Timed(r) => these.push(r),
                            Outcome::Skipped(why) => {
                                say(&bar, format!("{}: skipped: {why}", what()))
                            }
                            Outcome::Unsupported(bits, why) => {
                                refused.push((kind, k.name));
                                match refusals.iter_mut().find(|r| r.0 == bits) {
                                    Some(r) => r.1.push(k.name),
                                    None => refusals.push((bits, vec![k.name], why)),
                                }
                            }
                            Outcome::Wrong(why) => {
                                let line = format!("{}: WRONG RESULT, not timed: {why}", what());
                                say(&bar, &line);
                                failures.push(line);
                            }
                        }
                    }
                    for (bits, names, why) in &refusals {
                        say(
                            &bar,
                            format!(
                                "note: {kind}: {} values: {} not measured in this run ({why})",
                                bits.as_str(),
                                names.join(", "),
                            ),
                        );
                    }
                    report::finish_case(&mut these, b.baseline, |bytes| {
                        ceiling_gbps(b, bytes, args.warmup, args.iters)
                    });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_outside_one_to_64_are_refused_by_value() {
        assert_eq!(parse_batch("1").ok(), Some(1));
        assert_eq!(parse_batch(" 64").ok(), Some(64));
        let zero = parse_batch("0").err().map(|e| e.to_string());
        assert!(zero.is_some_and(|e| e.contains("batch 0 is outside 1..=64")));
        assert!(matches!(
            parse_batch("65"),
            Err(BatchError::OutOfRange { batch: 65 })
        ));
        assert!(matches!(
            parse_batch("four"),
            Err(BatchError::NotANumber { .. })
        ));
    }

    #[test]
    fn sampled_batch_reference_is_the_library_reference_at_those_rows() {
        let (rows, cols, batch) = (37, 53, 5);
        let dense = synthetic::pruned_matrix(rows, cols, 0.4, 3).expect("matrix");
        let macko = MackoMatrix::from_dense(&dense).expect("macko");
        let csr = CsrMatrix::from_dense(&dense).expect("csr");
        let x = batch_activations(cols, batch, 9);
        assert_eq!(&x[..cols], &synthetic::activations(cols, 9)[..]);
        let sample = sample_rows(rows, 7);
        for m in [
            MatrixRef::from(&macko),
            MatrixRef::from(&dense),
            MatrixRef::from(&csr),
        ] {
            let ours = reference_batch(m, &x, batch, &sample);
            let lib = macko::reference::spmm(m, &x, batch).expect("reference");
            assert_eq!(ours.len(), batch);
            for (b, refs) in ours.iter().enumerate() {
                for (&r, &(y, abs, n)) in sample.iter().zip(refs) {
                    let i = b * rows + r;
                    assert!((y - lib.y[i]).abs() <= 1e-12 * abs.max(1.0), "{b} {r}");
                    assert!((abs - lib.abs_sum[i]).abs() <= 1e-12 * abs.max(1.0));
                    assert_eq!(n, lib.terms[i], "{b} {r}");
                }
            }
            // A wrong value in the last vector is found and named.
            let mut got: Vec<f64> = lib.y.clone();
            got[(batch - 1) * rows + sample[3]] += 1.0;
            let why = first_wrong(&got, rows, &sample, &ours).expect("found");
            assert!(
                why.starts_with(&format!("vector {}, row {}", batch - 1, sample[3])),
                "{why}"
            );
            assert!(first_wrong(&lib.y, rows, &sample, &ours).is_none());
        }
    }

    #[test]
    fn product_bytes_count_x_and_y_of_every_vector() {
        assert_eq!(product_bytes(1000, 10, 20, 1), 1000 + 60);
        assert_eq!(product_bytes(1000, 10, 20, 4), 1000 + 240);
    }
}
