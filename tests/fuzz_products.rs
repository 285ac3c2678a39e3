//! Products' agreement on devices, randomized (issue 27): seeded random cases — shapes from 1×1
//! to thousands of columns with empty and ragged rows (each row its own density, 0 and 1 among
//! them), weights that include ±65504 (binary16's largest), subnormals and −0.0, batch sizes
//! 1 to 17 — multiplied by `Device::spmm` on every device present, in every format (MACKO, CSR,
//! dense, MACKO and dense with int8/int4 values, and the case pruned to 2:4), and every
//! vector's every row checked against the f64 reference (`common::assert_agrees`). Every
//! backend multiplies every format: a refusal fails the test.
//!
//! x holds NaN or ±∞ in some columns where the matrix is zero in every row. The sparse formats'
//! padding entries and unstored zeros must never meet them (the contract: padding never
//! contributes), so their reference stays finite and a device that multiplies a padding entry
//! by x is caught; the dense formats multiply every zero, so there NaN must come out where the
//! reference has it. A failure names the seed and the case, and `FUZZ_PRODUCTS_CASE=<n>` runs
//! that case alone.

mod common;

use common::*;
use half::f16;
use macko::{
    reference, CsrMatrix, DenseMatrix, Device, MackoMatrix, MatrixRef, Precision, QuantBits,
    QuantDenseMatrix, QuantMackoMatrix, Quantization, ScaleLayout, Sparse24Matrix,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Cases per run; each is multiplied on every device in every format. Bounded for CI's debug
/// run on lavapipe (see README "Hardening" for the time measured).
const CASES: u64 = 48;
/// The seed of case `n` is `SEED + n`.
const SEED: u64 = 0x2700;
/// Runs one case alone (its number), to reproduce a failure.
const ENV_CASE: &str = "FUZZ_PRODUCTS_CASE";

/// One drawn case: the matrix, the batch of x (`[batch][cols]`), a quantization and the output
/// precision.
struct Case {
    dense: DenseMatrix,
    x: Vec<f16>,
    batch: usize,
    quant: Quantization,
    precision: Precision,
    poisoned: usize,
}

/// A weight: mostly ordinary, sometimes binary16's extremes, a subnormal, or −0.0 (which the
/// formats store as a zero that must not count).
fn weight(rng: &mut StdRng) -> f16 {
    match rng.random_range(0..40) {
        0 => f16::MAX,
        1 => f16::MIN,
        2 => f16::from_bits(rng.random_range(1..0x400)), // subnormal
        3 => f16::NEG_ZERO,
        _ => f16::from_f32(rng.random_range(-2.0f32..2.0)),
    }
}

/// An x element: ordinary, subnormal, ±0, or (rarely) large.
fn x_value(rng: &mut StdRng) -> f16 {
    match rng.random_range(0..30) {
        0 => f16::from_bits(rng.random_range(1..0x400) | (rng.random_range(0..2) << 15)),
        1 => f16::NEG_ZERO,
        2 => f16::from_f32(rng.random_range(-1000.0f32..1000.0)),
        _ => f16::from_f32(rng.random_range(-1.0f32..1.0)),
    }
}

/// A matrix whose rows each draw their own density (0, 1 or the case's), so empty rows, full
/// rows and ragged ones sit side by side.
fn matrix(rng: &mut StdRng) -> DenseMatrix {
    let cols = [1, 2, 7, 16, 17, 64, 100, 513, 1000, 2049, 3001][rng.random_range(0..11)];
    let max_rows = (60_000 / cols).clamp(1, 300);
    let rows = [0, 1, 2, 5, 31, 64, max_rows][rng.random_range(0..7)].min(max_rows);
    let density = [0.0, 0.02, 0.1, 0.5, 0.9, 1.0][rng.random_range(0..6)];
    let mut values = vec![f16::ZERO; rows * cols];
    for row in values.chunks_mut(cols) {
        let d = [0.0, 1.0, density, density][rng.random_range(0..4)];
        for v in row.iter_mut() {
            if rng.random_bool(d) {
                *v = weight(rng);
            }
        }
    }
    DenseMatrix::new(rows, cols, values).expect("shape matches")
}

/// Columns where every row's weight is ±0: x may hold anything there.
fn zero_columns(dense: &DenseMatrix) -> Vec<usize> {
    (0..dense.cols())
        .filter(|&c| (0..dense.rows()).all(|r| dense.row(r)[c].to_bits() & 0x7fff == 0))
        .collect()
}

/// Case `n`, drawn from its own seed.
fn case(n: u64) -> Case {
    let mut rng = StdRng::seed_from_u64(SEED + n);
    let dense = matrix(&mut rng);
    let batch = rng.random_range(1..=17);
    let cols = dense.cols();
    let mut x: Vec<f16> = (0..cols * batch).map(|_| x_value(&mut rng)).collect();
    let mut poisoned = 0;
    for c in zero_columns(&dense) {
        if rng.random_bool(0.5) {
            let bad = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][rng.random_range(0..3)];
            for b in 0..batch {
                x[b * cols + c] = bad;
            }
            poisoned += 1;
        }
    }
    let bits = [QuantBits::Int8, QuantBits::Int4][rng.random_range(0..2)];
    let scales = [
        ScaleLayout::PerRow,
        ScaleLayout::PerGroup(8),
        ScaleLayout::PerGroup(64),
    ][rng.random_range(0..3)];
    let precision = [Precision::F16, Precision::F32][rng.random_range(0..2)];
    Case {
        dense,
        x,
        batch,
        quant: Quantization { bits, scales },
        precision,
        poisoned,
    }
}

/// Formats each case is multiplied in.
const FORMATS: usize = 6;

/// Multiplies `m` by the case's batch on `dev` and checks it against the reference. A sparse
/// format's reference never meets the NaN of x (only stored non-zeros count); a dense one
/// multiplies every zero, so its reference is NaN there and the device must be NaN too.
fn check_format(label: &str, dev: &Device, what: &str, case: &Case, m: MatrixRef<'_>) {
    let r = reference::spmm(m, &case.x, case.batch).expect("the reference multiplies");
    let sparse = !matches!(m, MatrixRef::Dense(_) | MatrixRef::DenseQuant(_));
    assert!(
        !sparse || r.y.iter().all(|v| !v.is_nan()),
        "{what}: NaN in x reached the reference through a zero weight"
    );
    let a = dev
        .upload(m)
        .unwrap_or_else(|e| panic!("{label}, {what}: upload: {e}"));
    let x = dev
        .upload_batch(&case.x, case.batch)
        .unwrap_or_else(|e| panic!("{label}, {what}: x: {e}"));
    let rows = case.dense.rows();
    let mut y = dev
        .zeros_batch(rows, case.batch, case.precision)
        .unwrap_or_else(|e| panic!("{label}, {what}: y: {e}"));
    dev.spmm(&a, &x, &mut y)
        .unwrap_or_else(|e| panic!("{label}, {what}: spmm: {e}"));
    let y = dev
        .download(&y)
        .unwrap_or_else(|e| panic!("{label}, {what}: download: {e}"));
    assert_agrees(label, what, &r, &y);
}

/// Case `n` in every format on `dev`.
fn check_case(label: &str, dev: &Device, n: u64) {
    let c = case(n);
    let what = |format: &str| {
        format!(
            "case {n} (seed {:#x}, {ENV_CASE}={n}): {}×{} as {format}, B = {}, {:?} y, {} \
             poisoned columns",
            SEED + n,
            c.dense.rows(),
            c.dense.cols(),
            c.batch,
            c.precision,
            c.poisoned
        )
    };
    let macko = MackoMatrix::from_dense(&c.dense).expect("encodes");
    let csr = CsrMatrix::from_dense(&c.dense).expect("encodes");
    let qm = QuantMackoMatrix::quantize(&macko, c.quant).expect("quantizes");
    let qd = QuantDenseMatrix::quantize(&c.dense, c.quant).expect("quantizes");
    // The case pruned to 2:4 (its poisoned columns stay zero, so stay unread).
    let s24 = Sparse24Matrix::prune_from_dense(&c.dense).expect("prunes");
    let formats: [(String, MatrixRef<'_>); FORMATS] = [
        ("macko".into(), (&macko).into()),
        ("csr".into(), (&csr).into()),
        ("dense".into(), (&c.dense).into()),
        (format!("macko {:?}", c.quant), (&qm).into()),
        (format!("dense {:?}", c.quant), (&qd).into()),
        ("2:4".into(), (&s24).into()),
    ];
    for (format, m) in formats {
        check_format(label, dev, &what(&format), &c, m);
    }
}

/// The cases to run: all, or the one `FUZZ_PRODUCTS_CASE` names.
fn cases() -> std::ops::Range<u64> {
    match std::env::var(ENV_CASE).ok().and_then(|v| v.parse().ok()) {
        Some(n) => n..n + 1,
        None => 0..CASES,
    }
}

#[test]
fn random_products_agree_with_the_reference_on_every_device() {
    let devices = devices_under_test();
    let (mut poisoned, mut elements) = (0usize, 0usize);
    for n in cases() {
        let c = case(n);
        poisoned += usize::from(c.poisoned > 0);
        elements += c.dense.rows() * c.dense.cols();
        for (label, dev) in &devices {
            check_case(label, dev, n);
        }
    }
    println!(
        "products: {} cases (seeds {SEED:#x}..), {elements} matrix elements, {poisoned} with \
         NaN/∞ in x, each in {FORMATS} formats on {} devices: all agree",
        cases().count(),
        devices.len()
    );
}
