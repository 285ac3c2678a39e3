//! `macko bench --sparse-inputs X_DENSITIES`: the products with a sparse input (issue 25, part
//! B; docs/FORMAT.md "Sparse vectors") on every backend, for CSR, homogeneous CSR and MACKO:
//! y = A·x with x sparse, and y = Aᵀ·x with x dense or sparse. Each is checked against the f64
//! reference, timed like the main bench (rotated copies, warm-up, the device's own timer where
//! it has one, median), and reported against the bytes it must move, which follow nnz(x)
//! (`needed_bytes`), as GB/s and as a fraction of the streaming-read ceiling over the same
//! bytes, against the ordinary product y = A·x with x dense of the same matrix (which reads all
//! of it), and on CUDA against cuSPARSE (`cusparseSpMV` of the CSR matrix with x given dense,
//! zeros included: y = A·x, and y = Aᵀ·x through `CUSPARSE_OPERATION_TRANSPOSE`), the library
//! a user would otherwise call. Results go to sparse_inputs.csv under `--out`.
//!
//! The default case is the CSR SpMV report's: 10 000 × 10 000 at 1, 5 and 10 % of the cells,
//! x 10 % non-zero (`--sparse-inputs 0.1`).

use std::fmt::Write as _;
use std::path::Path;

use half::f16;
use macko::{
    reference, synthetic, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceMatrix, Error,
    HomogeneousCsrMatrix, MackoMatrix, MatrixRef, Precision, SparseInputProduct, SparseVector,
    VendorBaseline,
};

use super::devices::{
    ceiling_gbps, open_devices, percentile, progress_bar, rotated_copies, say, Bench,
};
use super::limits;
use crate::error::CliError;

/// What `macko bench --sparse-inputs` was asked (the bench's arguments that apply).
pub struct Options<'a> {
    pub backends: &'a [BackendKind],
    pub quick: bool,
    pub shapes: &'a [(usize, usize)],
    pub densities: &'a [f64],
    pub x_densities: &'a [f64],
    pub iters: usize,
    pub warmup: usize,
    pub seed: u64,
    pub out: Option<&'a Path>,
}

/// The CSR SpMV report's case: 10 000 × 10 000 at 1–10 % of the cells.
const DEFAULT_SHAPES: [(usize, usize); 1] = [(10_000, 10_000)];
const DEFAULT_DENSITIES: [f64; 3] = [0.01, 0.05, 0.1];
/// `--quick`.
const QUICK_SHAPES: [(usize, usize); 1] = [(2_000, 2_000)];
const QUICK_DENSITIES: [f64; 1] = [0.05];

/// The weight of every entry of the homogeneous CSR matrix (one scalar for the whole matrix).
const HOMOGENEOUS_WEIGHT: f32 = 0.01;

/// The products measured, in order: (name in the results, description).
const PRODUCTS: [(&str, &str); 3] = [
    ("sparse-x", "A·x, x sparse"),
    ("transposed", "Aᵀ·x, x dense"),
    ("transposed-sparse-x", "Aᵀ·x, x sparse"),
];

/// One case's matrix in one format.
#[derive(Clone, Copy)]
enum Format<'a> {
    Csr(&'a CsrMatrix),
    Homogeneous(&'a HomogeneousCsrMatrix),
    Macko(&'a MackoMatrix),
}

impl<'a> Format<'a> {
    fn name(&self) -> &'static str {
        match self {
            Format::Csr(_) => "csr",
            Format::Homogeneous(_) => "csr-homogeneous",
            Format::Macko(_) => "macko",
        }
    }
    fn matrix(&self) -> MatrixRef<'a> {
        match *self {
            Format::Csr(m) => MatrixRef::Csr(m),
            Format::Homogeneous(m) => MatrixRef::HomogeneousCsr(m),
            Format::Macko(m) => MatrixRef::Macko(m),
        }
    }
}

/// One timed product.
#[derive(Clone)]
struct Row {
    backend: &'static str,
    device: String,
    rows: usize,
    cols: usize,
    density: f64,
    x_density: f64,
    format: &'static str,
    product: &'static str,
    bytes: u64,
    median_us: f64,
    min_us: f64,
    gbps: f64,
    fraction_of_ceiling: Option<f64>,
    full_us: Option<f64>,
    /// cuSPARSE's median for the same product (A·x, or Aᵀ·x for both transposed products)
    /// over this one's: CUDA only.
    over_cusparse: Option<f64>,
    timer: &'static str,
    iters: usize,
}

/// A seeded x of `len` elements of which about `fraction` are non-zero, at least one: which
/// ones from one activation vector (uniform in [-1, 1], kept where (a + 1)/2 < fraction), their
/// values from another.
fn sparse_x(len: usize, fraction: f64, seed: u64) -> Vec<f16> {
    let keep = synthetic::activations(len, seed ^ 0x5ba2_5e00);
    let values = synthetic::activations(len, seed);
    let mut x: Vec<f16> = keep
        .iter()
        .zip(&values)
        .map(|(k, v)| {
            if (f64::from(k.to_f32()) + 1.0) / 2.0 < fraction {
                *v
            } else {
                f16::ZERO
            }
        })
        .collect();
    if !x.iter().any(|v| v.to_f32() != 0.0) {
        if let Some(first) = x.first_mut() {
            *first = f16::ONE;
        }
    }
    x
}

/// The bytes a product must move: what of the matrix it needs, x as given (a dense x: 2 bytes
/// an element; a sparse one: a 4-byte index and a 2-byte value per non-zero) and y (f16,
/// written once).
///
/// - y = A·x, x sparse: every row's column indices (CSR, 4 bytes an entry) or gap codes
///   (MACKO, half a byte a stored entry), since which entries meet x's non-zeros is only known
///   from them, plus the values of the entries that do (2 bytes each, none for homogeneous
///   CSR), and the row pointers.
/// - y = Aᵀ·x: the rows x selects, whole (two row pointers each, and 6 bytes an entry for CSR,
///   4 for homogeneous CSR, 2.5 a stored entry for MACKO), nothing of the others.
fn needed_bytes(format: Format<'_>, product: &str, x_cols: &[f16], x_rows: &[f16]) -> u64 {
    let nonzero = |v: &f16| v.to_f32() != 0.0;
    let (rows, cols) = format.matrix().shape();
    let y_bytes = 2 * if product == "sparse-x" { rows } else { cols } as u64;
    let x_bytes = match product {
        "sparse-x" => 6 * x_cols.iter().filter(|v| nonzero(v)).count() as u64,
        "transposed" => 2 * x_rows.len() as u64,
        _ => 6 * x_rows.iter().filter(|v| nonzero(v)).count() as u64,
    };
    let matrix = match (format, product) {
        (Format::Csr(m), "sparse-x") => {
            let hits = m
                .col_idx()
                .iter()
                .filter(|&&c| nonzero(&x_cols[c as usize]))
                .count();
            4 * (rows as u64 + 1) + 4 * m.nnz() as u64 + 2 * hits as u64
        }
        (Format::Homogeneous(m), "sparse-x") => 4 * (rows as u64 + 1) + 4 * m.nnz() as u64,
        (Format::Macko(m), "sparse-x") => {
            let hits: usize = (0..rows)
                .map(|r| {
                    m.row_entries(r)
                        .filter(|(c, _)| nonzero(&x_cols[*c]))
                        .count()
                })
                .sum();
            4 * (rows as u64 + 1) + (m.padded_entries() as u64).div_ceil(2) + 2 * hits as u64
        }
        (format, _) => {
            let per_entry_x2: u64 = match format {
                Format::Csr(_) => 12,
                Format::Homogeneous(_) => 8,
                Format::Macko(_) => 5,
            };
            let row_len = |r: usize| -> u64 {
                let p = match format {
                    Format::Csr(m) => m.row_ptr(),
                    Format::Homogeneous(m) => m.row_ptr(),
                    Format::Macko(m) => m.row_ptr(),
                };
                u64::from(p[r + 1] - p[r])
            };
            (0..rows)
                .filter(|&r| nonzero(&x_rows[r]))
                .map(|r| 8 + (per_entry_x2 * row_len(r)).div_ceil(2))
                .sum()
        }
    };
    matrix + x_bytes + y_bytes
}

/// What one product of one format on one device gave.
#[derive(Clone)]
enum Outcome {
    Timed(Row),
    /// The backend has no kernel for it (`Error::Unsupported`): noted once, not retried.
    Unsupported(String),
    Skipped(String),
    Wrong(String),
}

/// The inputs of one case.
struct Case<'a> {
    rows: usize,
    cols: usize,
    density: f64,
    x_density: f64,
    x_cols: &'a [f16],
    x_rows: &'a [f16],
}

/// One format's matrix on one device: its rotated copies, and the median µs of the ordinary
/// product y = A·x over them (x a dense activation vector: nothing skipped), the "full"
/// product each product with a sparse input is compared with.
struct Uploaded {
    mats: Vec<DeviceMatrix>,
    full_us: Option<f64>,
}

/// Uploads `format`'s rotated copies to `dev` and times the ordinary product over them, once
/// for every product measured with them.
fn upload(
    dev: &Device,
    format: Format<'_>,
    case: &Case<'_>,
    args: &Options<'_>,
) -> Result<Uploaded, Error> {
    let m = format.matrix();
    let first = dev.upload(m)?;
    let copies = rotated_copies(first.bytes());
    let mut mats = vec![first];
    for _ in 1..copies {
        mats.push(dev.upload(m)?);
    }
    let refs: Vec<&DeviceMatrix> = mats.iter().collect();
    let x = dev.upload_vector(&synthetic::activations(case.cols, 7))?;
    let mut y = dev.zeros(case.rows, Precision::F16)?;
    let mut t = dev.time_spmv(&refs, &x, &mut y, args.warmup, args.iters)?;
    t.sort_by(f64::total_cmp);
    let full_us = (!t.is_empty()).then(|| percentile(&t, 0.5) * 1e6);
    Ok(Uploaded { mats, full_us })
}

/// What an error of the library means for the run: a product the backend lacks, one too
/// large for it, or a failure.
fn outcome_of(e: Error) -> Outcome {
    match e {
        Error::Unsupported { .. } => Outcome::Unsupported(e.to_string()),
        Error::OutOfMemory { .. } | Error::TooLarge { .. } => Outcome::Skipped(e.to_string()),
        e => Outcome::Wrong(format!("error: {e}")),
    }
}

/// Checks `product` of the uploaded `format` against the f64 reference and times it.
fn measure(
    b: &Bench,
    (format, up): (Format<'_>, &Uploaded),
    product: &'static str,
    case: &Case<'_>,
    args: &Options<'_>,
) -> Outcome {
    let dev = &b.dev;
    let run = || -> Result<Outcome, Error> {
        let m = format.matrix();
        let refs: Vec<&DeviceMatrix> = up.mats.iter().collect();
        let sx_cols = SparseVector::from_dense(case.x_cols)?;
        let sx_rows = SparseVector::from_dense(case.x_rows)?;
        let (expected, y_len) = match product {
            "sparse-x" => (reference::spmv_sparse_x(m, &sx_cols)?, case.rows),
            "transposed" => (reference::spmv_transposed(m, case.x_rows)?, case.cols),
            _ => (reference::spmv_transposed_sparse_x(m, &sx_rows)?, case.cols),
        };
        let sparse = dev.upload_sparse_vector(if product == "sparse-x" {
            &sx_cols
        } else {
            &sx_rows
        })?;
        let dense = dev.upload_vector(case.x_rows)?;
        let input = match product {
            "sparse-x" => SparseInputProduct::SparseX(&sparse),
            "transposed" => SparseInputProduct::Transposed(&dense),
            _ => SparseInputProduct::TransposedSparseX(&sparse),
        };
        let mut y = dev.zeros(y_len, Precision::F16)?;
        let t = dev.time_sparse_input(&refs, input, &mut y, args.warmup, args.iters)?;
        // The timed products wrote y: it must be the reference's.
        let got = dev.download(&y)?;
        if let Some((r, g, e, tol)) = expected.first_disagreement(&got.to_f64(), got.precision()) {
            return Ok(Outcome::Wrong(format!(
                "y[{r}] = {g}, the reference {e} (tolerance {tol:e})"
            )));
        }
        let bytes = needed_bytes(format, product, case.x_cols, case.x_rows);
        let mut row = Row::timed(b, (case, args), (format.name(), product), bytes, t);
        row.full_us = up.full_us;
        Ok(Outcome::Timed(row))
    };
    run().unwrap_or_else(outcome_of)
}

impl Row {
    /// The row of one timed product: `t` its times (seconds, any order), `bytes` what it must
    /// move; no full-product time and no cuSPARSE ratio yet (the caller knows them).
    fn timed(
        b: &Bench,
        (case, args): (&Case<'_>, &Options<'_>),
        (format, product): (&'static str, &'static str),
        bytes: u64,
        mut t: Vec<f64>,
    ) -> Row {
        t.sort_by(f64::total_cmp);
        let median = percentile(&t, 0.5);
        Row {
            backend: b.dev.kind().name(),
            device: b.dev.info().name.clone(),
            rows: case.rows,
            cols: case.cols,
            density: case.density,
            x_density: case.x_density,
            format,
            product,
            bytes,
            median_us: median * 1e6,
            min_us: percentile(&t, 0.0) * 1e6,
            gbps: bytes as f64 / median / 1e9,
            fraction_of_ceiling: ceiling_gbps(b, bytes, args.warmup, args.iters)
                .map(|c| bytes as f64 / median / 1e9 / c),
            full_us: None,
            over_cusparse: None,
            timer: b.dev.sparse_input_timer(),
            iters: t.len(),
        }
    }
}

/// cuSPARSE's rows for one case (format "cusparse"): y = A·x and y = Aᵀ·x of the CSR matrix,
/// x given dense (cuSPARSE has no sparse x: it reads all of A whatever x holds), each checked
/// against the f64 reference and timed as ours are. Their bytes are the ones our CSR products
/// must move, so that "%ceil" compares useful work per time. `None` where the device has no
/// cuSPARSE (every backend but CUDA).
fn cusparse_rows(
    b: &Bench,
    csr: &CsrMatrix,
    case: &Case<'_>,
    args: &Options<'_>,
) -> Option<Vec<Outcome>> {
    let dev = &b.dev;
    if dev.kind() != BackendKind::Cuda {
        return None;
    }
    let run = || -> Result<Vec<Outcome>, Error> {
        let first = dev.upload_vendor(csr, VendorBaseline::CusparseCsr)?;
        let mut mats = vec![first];
        for _ in 1..rotated_copies(mats[0].bytes()) {
            mats.push(dev.upload_vendor(csr, VendorBaseline::CusparseCsr)?);
        }
        let refs: Vec<&DeviceMatrix> = mats.iter().collect();
        let m = MatrixRef::Csr(csr);
        let mut out = Vec::new();
        for product in ["sparse-x", "transposed"] {
            let (x, y_len) = match product {
                "sparse-x" => (case.x_cols, case.rows),
                _ => (case.x_rows, case.cols),
            };
            let expected = match product {
                "sparse-x" => reference::spmv(m, x)?,
                _ => reference::spmv_transposed(m, x)?,
            };
            let xd = dev.upload_vector(x)?;
            // An f16 y as ours have; an f32 one if cuSPARSE refuses that or sums it too coarsely
            // (its transposed product may add into y as it goes).
            let mut timed = Err(String::new());
            for precision in [Precision::F16, Precision::F32] {
                let mut y = dev.zeros(y_len, precision)?;
                let t = match product {
                    "sparse-x" => dev.time_spmv(&refs, &xd, &mut y, args.warmup, args.iters),
                    _ => {
                        let input = SparseInputProduct::Transposed(&xd);
                        dev.time_sparse_input(&refs, input, &mut y, args.warmup, args.iters)
                    }
                };
                let t = match t {
                    Ok(t) => t,
                    Err(e @ Error::Backend { .. }) => {
                        timed = Err(format!("{precision:?} y: {e}"));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let got = dev.download(&y)?;
                match expected.first_disagreement(&got.to_f64(), got.precision()) {
                    None => {
                        timed = Ok(t);
                        break;
                    }
                    Some((r, g, e, tol)) => {
                        timed = Err(format!(
                            "{precision:?} y[{r}] = {g}, the reference {e} (tolerance {tol:e})"
                        ))
                    }
                }
            }
            let t = match timed {
                Ok(t) => t,
                Err(why) => {
                    out.push(Outcome::Wrong(format!("cuSPARSE {product}: {why}")));
                    continue;
                }
            };
            let bytes = needed_bytes(Format::Csr(csr), product, case.x_cols, case.x_rows);
            let mut row = Row::timed(b, (case, args), ("cusparse", product), bytes, t);
            row.over_cusparse = Some(1.0);
            out.push(Outcome::Timed(row));
        }
        Ok(out)
    };
    Some(run().unwrap_or_else(|e| vec![outcome_of(e)]))
}

/// cuSPARSE's timed rows from its outcomes for one case, noting them on the case's `line`; a
/// disagreement with the reference is a failure of the run, as one of ours is.
fn take_baseline(
    outcomes: Vec<Outcome>,
    label: &str,
    line: &mut String,
    bar: &indicatif::ProgressBar,
    failures: &mut Vec<String>,
) -> Vec<Row> {
    let mut timed = Vec::new();
    for outcome in outcomes {
        match outcome {
            Outcome::Timed(r) => {
                let _ = write!(line, "  cusparse {}={:.1}µs", r.product, r.median_us);
                timed.push(r);
            }
            Outcome::Wrong(why) => {
                let f = format!("{label} {why}");
                say(bar, format!("WRONG: {f}"));
                failures.push(f);
            }
            Outcome::Unsupported(why) | Outcome::Skipped(why) => {
                let _ = write!(line, "  cusparse skipped ({why})");
            }
        }
    }
    timed
}

/// cuSPARSE's median µs for `product` among its timed rows (the transposed one serves both
/// transposed products).
fn cusparse_us(rows: &[Row], product: &str) -> Option<f64> {
    let wanted = if product == "sparse-x" {
        "sparse-x"
    } else {
        "transposed"
    };
    rows.iter()
        .find(|r| r.format == "cusparse" && r.product == wanted)
        .map(|r| r.median_us)
}

/// What a run measures: shapes, matrix densities and x densities.
struct Plan {
    shapes: Vec<(usize, usize)>,
    densities: Vec<f64>,
    x_densities: Vec<f64>,
}

/// The run's plan, defaults applied and every value checked.
fn plan(args: &Options<'_>) -> Result<Plan, CliError> {
    let shapes = match (args.shapes.is_empty(), args.quick) {
        (false, _) => args.shapes.to_vec(),
        (true, true) => QUICK_SHAPES.to_vec(),
        (true, false) => DEFAULT_SHAPES.to_vec(),
    };
    let densities = match (args.densities.is_empty(), args.quick) {
        (false, _) => args.densities.to_vec(),
        (true, true) => QUICK_DENSITIES.to_vec(),
        (true, false) => DEFAULT_DENSITIES.to_vec(),
    };
    limits::check_iters(args.iters).map_err(|e| CliError::Usage(e.to_string()))?;
    for &(rows, cols) in &shapes {
        limits::check_shape(rows, cols).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    for (what, list) in [
        ("density", &densities),
        ("x density", &args.x_densities.to_vec()),
    ] {
        if let Some(d) = list.iter().find(|d| !(**d > 0.0 && **d <= 1.0)) {
            return Err(CliError::Usage(format!("{what} {d} is outside (0, 1]")));
        }
    }
    Ok(Plan {
        shapes,
        densities,
        x_densities: args.x_densities.to_vec(),
    })
}

pub fn run(args: &Options<'_>) -> Result<(), CliError> {
    let Plan {
        shapes,
        densities,
        x_densities,
    } = plan(args)?;
    let benches = open_devices(args.backends)?;
    if benches.is_empty() {
        return Err(CliError::Usage("no backend could be opened".into()));
    }
    let total = (shapes.len() * densities.len() * x_densities.len()) as u64;
    let bar = progress_bar(total);
    let mut rows_out: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut refused: Vec<(BackendKind, &'static str, &'static str)> = Vec::new();
    for (si, &(rows, cols)) in shapes.iter().enumerate() {
        for (di, &density) in densities.iter().enumerate() {
            let seed = args.seed.wrapping_add((si * 1000 + di) as u64);
            let dense: DenseMatrix = synthetic::pruned_matrix(rows, cols, density, seed)?;
            let csr = CsrMatrix::from_dense(&dense)?;
            let homogeneous =
                HomogeneousCsrMatrix::from_pattern(&csr, f16::from_f32(HOMOGENEOUS_WEIGHT));
            let macko = MackoMatrix::from_dense(&dense)?;
            let formats = [
                Format::Csr(&csr),
                Format::Homogeneous(&homogeneous),
                Format::Macko(&macko),
            ];
            for (xi, &x_density) in x_densities.iter().enumerate() {
                bar.set_message(format!("{rows}×{cols} d={density} x={x_density}"));
                let xseed = seed.wrapping_add(((xi as u64) + 1) << 40);
                let x_cols = sparse_x(cols, x_density, xseed);
                let x_rows = sparse_x(rows, x_density, xseed ^ 1);
                let case = Case {
                    rows,
                    cols,
                    density,
                    x_density,
                    x_cols: &x_cols,
                    x_rows: &x_rows,
                };
                for b in &benches {
                    let kind = b.dev.kind();
                    let mut line = format!(
                        "{kind:<5} {:>6}×{:<6} d={density} x={x_density}",
                        rows, cols
                    );
                    let label = format!("{kind} {rows}×{cols} d={density} x={x_density}");
                    let outcomes = cusparse_rows(b, &csr, &case, args).unwrap_or_default();
                    let baseline = take_baseline(outcomes, &label, &mut line, &bar, &mut failures);
                    rows_out.extend(baseline.iter().cloned());
                    for format in formats {
                        let wanted: Vec<(&'static str, &'static str)> = PRODUCTS
                            .into_iter()
                            .filter(|(p, _)| !refused.contains(&(kind, format.name(), *p)))
                            .collect();
                        if wanted.is_empty() {
                            continue;
                        }
                        let outcomes: Vec<_> = match upload(&b.dev, format, &case, args) {
                            Ok(up) => wanted
                                .iter()
                                .map(|&(p, what)| {
                                    (p, what, measure(b, (format, &up), p, &case, args))
                                })
                                .collect(),
                            Err(e) => {
                                let why = outcome_of(e);
                                wanted
                                    .iter()
                                    .map(|&(p, what)| (p, what, why.clone()))
                                    .collect()
                            }
                        };
                        for (product, what, outcome) in outcomes {
                            match outcome {
                                Outcome::Timed(mut r) => {
                                    r.over_cusparse =
                                        cusparse_us(&baseline, r.product).map(|c| c / r.median_us);
                                    let _ = write!(
                                        line,
                                        "  {} {what}={:.1}µs{}",
                                        format.name(),
                                        r.median_us,
                                        r.fraction_of_ceiling.map_or(String::new(), |f| format!(
                                            "({:.0}%)",
                                            f * 100.0
                                        ))
                                    );
                                    rows_out.push(r);
                                }
                                Outcome::Unsupported(why) => {
                                    say(
                                        &bar,
                                        format!(
                                            "{kind}: no {} {what} ({why}): skipped for the run",
                                            format.name()
                                        ),
                                    );
                                    refused.push((kind, format.name(), product));
                                }
                                Outcome::Skipped(why) => {
                                    let _ =
                                        write!(line, "  {} {what} skipped ({why})", format.name());
                                }
                                Outcome::Wrong(why) => {
                                    let f = format!(
                                        "{kind} {rows}×{cols} d={density} x={x_density} {} {what}: {why}",
                                        format.name()
                                    );
                                    say(&bar, format!("WRONG: {f}"));
                                    failures.push(f);
                                }
                            }
                        }
                    }
                    say(&bar, line);
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    print_medians(&rows_out);
    if let Some(out) = args.out {
        write_csv(out, &rows_out)?;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::Check(format!(
            "{} product(s) disagreed with the f64 reference or failed (listed above)",
            failures.len()
        )))
    }
}

/// Medians over the cases of each (backend, format, product): % of the ceiling and the
/// ordinary product's time over this one's.
fn print_medians(rows: &[Row]) {
    println!();
    println!("backend format          product               cases  %ceil  ×full A·x  ×cuSPARSE");
    let mut keys: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.backend, r.format, r.product))
        .collect();
    keys.dedup();
    keys.sort_unstable();
    keys.dedup();
    for (backend, format, product) in keys {
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| (r.backend, r.format, r.product) == (backend, format, product))
            .collect();
        let mut ceil: Vec<f64> = mine
            .iter()
            .filter_map(|r| r.fraction_of_ceiling)
            .map(|f| f * 100.0)
            .collect();
        let mut full: Vec<f64> = mine
            .iter()
            .filter_map(|r| r.full_us.map(|f| f / r.median_us))
            .collect();
        let mut over_cusparse: Vec<f64> = mine.iter().filter_map(|r| r.over_cusparse).collect();
        ceil.sort_by(f64::total_cmp);
        full.sort_by(f64::total_cmp);
        over_cusparse.sort_by(f64::total_cmp);
        let median = |v: &[f64]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}", percentile(v, 0.5))
            }
        };
        println!(
            "{backend:<7} {format:<15} {product:<21} {:>5} {:>6.1} {:>10} {:>10}",
            mine.len(),
            percentile(&ceil, 0.5),
            median(&full),
            median(&over_cusparse)
        );
    }
    println!("(medians over cases; %ceil: the bytes the product must move over its time, as a percentage of the streaming-read ceiling over the same bytes; ×full A·x: the ordinary product y = A·x of the same matrix, x dense, over this product's time; ×cuSPARSE: cusparseSpMV of the CSR matrix, x given dense, for y = A·x or y = Aᵀ·x, over this product's time, CUDA only)");
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// sparse_inputs.csv: one line per timed product.
fn write_csv(dir: &Path, rows: &[Row]) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let path = dir.join("sparse_inputs.csv");
    let mut s = String::from(
        "backend,device,rows,cols,density,x_density,format,product,bytes,median_us,min_us,gbps,fraction_of_ceiling,full_product_us,over_cusparse,timer,iters\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    for r in rows {
        let _ = writeln!(
            s,
            "{},\"{}\",{},{},{},{},{},{},{},{:.2},{:.2},{:.1},{},{},{},{},{}",
            r.backend,
            r.device.replace('"', "'"),
            r.rows,
            r.cols,
            r.density,
            r.x_density,
            r.format,
            r.product,
            r.bytes,
            r.median_us,
            r.min_us,
            r.gbps,
            opt(r.fraction_of_ceiling),
            r.full_us.map_or(String::new(), |v| format!("{v:.2}")),
            opt(r.over_cusparse),
            r.timer,
            r.iters
        );
    }
    std::fs::write(&path, s).map_err(|e| io_error(&path, e))?;
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of each product of A = [[1, 0, 2], [0, 3, 0]], counted by hand.
    #[test]
    fn needed_bytes_count_what_each_product_reads() {
        let w = [1.0, 0.0, 2.0, 0.0, 3.0, 0.0].map(f16::from_f32).to_vec();
        let dense = DenseMatrix::new(2, 3, w).expect("dense");
        let csr = CsrMatrix::from_dense(&dense).expect("csr");
        let h = HomogeneousCsrMatrix::from_pattern(&csr, f16::ONE);
        let x_cols = [0.0, 0.0, 5.0].map(f16::from_f32);
        let x_rows = [0.0, 2.0].map(f16::from_f32);
        let bytes = |f, p| needed_bytes(f, p, &x_cols, &x_rows);
        // Row pointers 12, column indices 12, the one value under x's non-zero 2; x's entry 6
        // (index and value); y 4.
        assert_eq!(bytes(Format::Csr(&csr), "sparse-x"), 12 + 12 + 2 + 6 + 4);
        assert_eq!(bytes(Format::Homogeneous(&h), "sparse-x"), 12 + 12 + 6 + 4);
        // Row 1 only: its two row pointers 8 and its entry 6 (CSR) or 4 (homogeneous); x dense
        // 4 or sparse 6; y 6.
        assert_eq!(bytes(Format::Csr(&csr), "transposed"), 8 + 6 + 4 + 6);
        assert_eq!(
            bytes(Format::Csr(&csr), "transposed-sparse-x"),
            8 + 6 + 6 + 6
        );
        assert_eq!(
            bytes(Format::Homogeneous(&h), "transposed-sparse-x"),
            8 + 4 + 6 + 6
        );
    }
}
