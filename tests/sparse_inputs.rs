//! Products with a sparse input (docs/FORMAT.md, "Sparse vectors") on every device: y = A·x
//! with x a `SparseVector` (`Device::spmv_sparse_x`), and the transposed product y = Aᵀ·x with x
//! dense (`Device::spmv_transposed`) or sparse (`Device::spmv_transposed_sparse_x`), for CSR,
//! homogeneous CSR, MACKO and dense (the baseline), plus 2:4 and quantized MACKO; every output
//! checked against the f64 reference in both precisions. Cases: empty and all-zero x, NaN/∞ in
//! x where A's rows (or columns) are empty or hold only padding, the 10 000 × 10 000 CSR regime
//! of the issue, an LLM down-projection after a ReLU, MACKO rows whose padding (row-aligned
//! uploads) runs over x's NaN/∞ or up to 7 columns past the last, and wgpu's transposed MACKO
//! products over every upload layout (x in column tiles, rows aligned or not). A product a
//! device has a kernel for must agree (the CPU: all; wgpu and CUDA: both for CSR, homogeneous
//! CSR and MACKO with binary16 values; `transposed_built` and `sparse_x_built`); the rest must
//! be refused with `Error::Unsupported`. Every device uploads sparse vectors and every format,
//! homogeneous CSR included.
//!
//! Also: the ordinary products of homogeneous CSR matrices, and their container round trip.
//! `tests/sparse_vectors.rs` has the typed errors of `SparseVector::new` and the devices' shape
//! checks.

mod common;

use common::*;
use half::f16;
use macko::format::container;
use macko::{
    reference, AnyMatrix, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceMatrix, Error,
    FormatError, HomogeneousCsrMatrix, MackoMatrix, MatrixKind, MatrixRef, Precision, QuantBits,
    QuantMackoMatrix, Quantization, ScaleLayout, Sparse24Matrix, SparseVector,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Whether `e` is the refusal a GPU backend owes a product it has no kernel for: the
/// product's (a sparse x, a transposed product). Every format uploads everywhere (homogeneous
/// CSR and 2:4 included), so a refusal at upload fails the test.
fn refused(dev: &Device, e: &Error) -> bool {
    refused_sparse_input(dev, e)
}

/// Unwraps a device result, or returns `None` where a GPU refuses as it must; anything else
/// (any error on the CPU) fails the test.
fn or_refused<T>(label: &str, what: &str, dev: &Device, r: macko::Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if refused(dev, &e) => None,
        Err(e) => panic!("{label}, {what}: {e}"),
    }
}

/// A seeded vector of `len` elements of which about `density` are non-zero.
fn sparse_dense_x(len: usize, density: f64, seed: u64) -> Vec<f16> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xa11ce);
    (0..len)
        .map(|_| {
            if rng.random::<f64>() < density {
                let v: f32 = rng.random_range(-1.0..1.0);
                f16::from_f32(if v == 0.0 { 0.25 } else { v })
            } else {
                f16::ZERO
            }
        })
        .collect()
}

/// The three products on `dev` for matrix `m` (already uploaded as `a`) and the x given dense
/// (`x_cols` for A·x, `x_rows` for Aᵀ·x), each checked against the reference in both output
/// precisions. A GPU's refusal ends the check.
fn check_products(
    label: &str,
    dev: &Device,
    what: &str,
    (m, a): (MatrixRef<'_>, &DeviceMatrix),
    x_cols: &[f16],
    x_rows: &[f16],
) {
    let (rows, cols) = m.shape();
    let sx_cols = SparseVector::from_dense(x_cols).unwrap();
    let sx_rows = SparseVector::from_dense(x_rows).unwrap();
    let r_sparse = reference::spmv_sparse_x(m, &sx_cols).unwrap();
    let r_t = reference::spmv_transposed(m, x_rows).unwrap();
    let r_ts = reference::spmv_transposed_sparse_x(m, &sx_rows).unwrap();
    // Compared as text: a NaN of y equals itself there.
    assert_eq!(
        format!("{r_t:?}"),
        format!("{r_ts:?}"),
        "{what}: Aᵀ·x is the same for x dense or sparse"
    );
    for precision in [Precision::F16, Precision::F32] {
        // y = A·x, x sparse: every device uploads the vector; one with the kernel for this
        // format must not refuse the product. y starts non-zero: the product writes all of it.
        let x = dev
            .upload_sparse_vector(&sx_cols)
            .unwrap_or_else(|e| panic!("{label}, {what}: uploading a sparse x: {e}"));
        assert_eq!((x.len(), x.nnz()), (cols, sx_cols.nnz()));
        let mut y = ones(dev, rows, precision);
        let done = twice(|| dev.spmv_sparse_x(a, &x, &mut y));
        let done = if sparse_x_built(dev, m.kind()) {
            if let Err(e) = done {
                panic!("{label}, {what}: A·x, x sparse: {e}");
            }
            true
        } else {
            or_refused(label, what, dev, done).is_some()
        };
        if done {
            let got = dev.download(&y).unwrap();
            assert_agrees(label, &format!("{what}: A·x, x sparse"), &r_sparse, &got);
        }

        // y = Aᵀ·x, x dense.
        let x = dev.upload_vector(x_rows).unwrap();
        let mut y = ones(dev, cols, precision);
        let done = twice(|| dev.spmv_transposed(a, &x, &mut y));
        if transposed_built(dev, m.kind()) {
            if let Err(e) = &done {
                panic!("{label}, {what}: Aᵀ·x, x dense: {e}");
            }
        }
        if or_refused(label, what, dev, done).is_some() {
            let got = dev.download(&y).unwrap();
            assert_agrees(label, &format!("{what}: Aᵀ·x, x dense"), &r_t, &got);
        }

        // y = Aᵀ·x, x sparse: a device with the kernel for this format must not refuse.
        let x = dev
            .upload_sparse_vector(&sx_rows)
            .unwrap_or_else(|e| panic!("{label}, {what}: uploading a sparse x: {e}"));
        let mut y = ones(dev, cols, precision);
        let done = twice(|| dev.spmv_transposed_sparse_x(a, &x, &mut y));
        let done = if transposed_built(dev, m.kind()) {
            if let Err(e) = done {
                panic!("{label}, {what}: Aᵀ·x, x sparse: {e}");
            }
            true
        } else {
            or_refused(label, what, dev, done).is_some()
        };
        if done {
            let got = dev.download(&y).unwrap();
            assert_agrees(label, &format!("{what}: Aᵀ·x, x sparse"), &r_ts, &got);
        }
    }
}

/// The y of a checked product: ones for f16 (uploaded), so that an element the product leaves
/// unwritten is seen; zeros for f32 (there is no f32 upload). Every product is also queued
/// twice into the same y (`twice`), so one that adds to y instead of overwriting it (the
/// transposed scatter without its clearing) doubles and fails in both precisions.
fn ones(dev: &Device, len: usize, precision: Precision) -> macko::DeviceVector {
    match precision {
        Precision::F16 => dev.upload_vector(&vec![f16::ONE; len]).unwrap(),
        Precision::F32 => dev.zeros(len, precision).unwrap(),
    }
}

/// Queues `product` twice, the second time only where the first was accepted: its error, or
/// the second's result. A product must give the same y however often it is repeated.
fn twice(mut product: impl FnMut() -> macko::Result<()>) -> macko::Result<()> {
    product()?;
    product()
}

/// Whether `dev` has a kernel for y = Aᵀ·x, x dense or sparse, with A in `format` (so must not
/// refuse it): the CPU for every format, wgpu and CUDA for CSR, homogeneous CSR and MACKO with
/// binary16 values (quantized MACKO is `MackoQuant`, refused).
fn transposed_built(dev: &Device, format: MatrixKind) -> bool {
    match dev.kind() {
        BackendKind::Cpu => true,
        BackendKind::Wgpu | BackendKind::Cuda => matches!(
            format,
            MatrixKind::Csr | MatrixKind::HomogeneousCsr | MatrixKind::Macko
        ),
    }
}

/// Whether `dev` has a kernel for y = A·x with x sparse, with A in `format`: the same formats
/// as the transposed products (`transposed_built`; on wgpu MACKO's ordinary kernels with
/// `SPARSE_X`).
fn sparse_x_built(dev: &Device, format: MatrixKind) -> bool {
    transposed_built(dev, format)
}

/// `dense` in every format these products take, with names.
fn formats(dense: &DenseMatrix) -> Vec<(&'static str, AnyMatrix)> {
    let csr = CsrMatrix::from_dense(dense).unwrap();
    let macko = MackoMatrix::from_dense(dense).unwrap();
    let mut out: Vec<(&'static str, AnyMatrix)> = vec![
        ("csr", csr.clone().into()),
        (
            "csr-homogeneous",
            HomogeneousCsrMatrix::from_pattern(&csr, f16::from_f32(0.75)).into(),
        ),
        ("macko", macko.clone().into()),
        ("dense", dense.clone().into()),
        (
            "sparse24",
            Sparse24Matrix::prune_from_dense(dense).unwrap().into(),
        ),
    ];
    // Quantizing refuses NaN and ±∞ weights: int8 joins only where every weight is finite.
    let int8 = Quantization {
        bits: QuantBits::Int8,
        scales: ScaleLayout::PerRow,
    };
    if let Ok(q) = QuantMackoMatrix::quantize(&macko, int8) {
        out.push(("macko-int8", q.into()));
    }
    out
}

/// Uploads `m`: every device takes every format (a refusal fails the test).
fn upload(label: &str, dev: &Device, what: &str, m: &AnyMatrix) -> Option<DeviceMatrix> {
    or_refused(label, what, dev, dev.upload(m))
}

#[test]
fn products_with_sparse_inputs_agree_in_every_format_or_are_refused() {
    // Empty rows and columns, one column, widths around MACKO's gap limit, a dense matrix.
    let shapes = [
        (1, 1, 1.0),
        (7, 5, 0.5),
        (33, 70, 0.1),
        (64, 40, 0.0),
        (100, 300, 0.3),
        (20, 33, 1.0),
    ];
    for (label, dev) in devices_under_test() {
        let cpu = dev.kind() == BackendKind::Cpu;
        for (i, &(rows, cols, d)) in shapes.iter().enumerate() {
            let dense = random_dense(rows, cols, d, 2500 + i as u64);
            for (x_density, seed) in [(0.1, 1u64), (0.5, 2), (1.0, 3)] {
                let x_cols = sparse_dense_x(cols, x_density, seed + 10 * i as u64);
                let x_rows = sparse_dense_x(rows, x_density, seed + 100 + 10 * i as u64);
                for (name, m) in formats(&dense) {
                    let what = format!("{rows}×{cols} d={d} {name}, x density {x_density}");
                    let Some(a) = upload(&label, &dev, &what, &m) else {
                        assert!(!cpu);
                        continue;
                    };
                    check_products(&label, &dev, &what, (m.as_ref(), &a), &x_cols, &x_rows);
                }
            }
        }
    }
}

#[test]
fn empty_and_all_zero_x_give_zeros() {
    let dense = random_dense(40, 50, 0.3, 2600);
    for (label, dev) in devices_under_test() {
        for (name, m) in formats(&dense) {
            let Some(a) = upload(&label, &dev, name, &m) else {
                continue;
            };
            // No stored entry; every element a stored zero (+0 and −0): nothing contributes,
            // not even dense's IEEE zeros (x's zeros are skipped).
            let zeros_rows = SparseVector::new(
                40,
                (0..40).collect(),
                (0..40)
                    .map(|i| if i % 2 == 0 { f16::ZERO } else { f16::NEG_ZERO })
                    .collect(),
            )
            .unwrap();
            for x in [SparseVector::zeros(40), zeros_rows] {
                let r = reference::spmv_transposed_sparse_x(m.as_ref(), &x).unwrap();
                assert!(r.y.iter().all(|&v| v == 0.0) && r.terms.iter().all(|&t| t == 0));
                let xd = dev.upload_sparse_vector(&x).unwrap();
                // f16 y starts at ones: the product must overwrite all of y.
                for mut y in [
                    dev.upload_vector(&[f16::ONE; 50]).unwrap(),
                    dev.zeros(50, Precision::F32).unwrap(),
                ] {
                    let done = dev.spmv_transposed_sparse_x(&a, &xd, &mut y);
                    if !transposed_built(&dev, m.kind()) {
                        assert!(or_refused(&label, name, &dev, done).is_none(), "{name}");
                        continue;
                    }
                    done.unwrap();
                    assert_eq!(dev.download(&y).unwrap().to_f32(), vec![0.0; 50], "{name}");
                }
            }
            check_products(
                &label,
                &dev,
                &format!("{name}, x all zero"),
                (m.as_ref(), &a),
                &[f16::ZERO; 50],
                &[f16::NEG_ZERO; 40],
            );
        }
    }
}

#[test]
fn nan_and_infinity_in_x_never_meet_empty_rows_zeros_or_padding() {
    // Row 0: [1, 0 × 20, 2, 0…] (a MACKO padding entry in the gap); row 1 empty; row 2 only
    // column 3. Column 1..=20 and 23.. are empty except for row 0's padding.
    let (rows, cols) = (3, 30);
    let mut w = vec![f16::ZERO; rows * cols];
    w[0] = f16::from_f32(1.0);
    w[21] = f16::from_f32(2.0);
    w[2 * cols + 3] = f16::from_f32(-0.5);
    let dense = DenseMatrix::new(rows, cols, w).unwrap();
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    assert_eq!(
        macko.row_ptr(),
        &[0, 3, 3, 4],
        "the padding entry the test aims at"
    );
    for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
        // Aᵀ·x: NaN/∞ at the empty row 1.
        let mut x_rows = vec![f16::from_f32(1.0); rows];
        x_rows[1] = bad;
        // A·x: NaN/∞ in columns that are empty (or hold only row 0's padding, column 16).
        let mut x_cols = vec![f16::ZERO; cols];
        x_cols[0] = f16::from_f32(1.0);
        x_cols[3] = f16::from_f32(2.0);
        for c in [1, 16, 20, 25, 29] {
            x_cols[c] = bad;
        }
        let sparse_formats: Vec<(&str, AnyMatrix)> = formats(&dense)
            .into_iter()
            .filter(|(name, _)| *name != "dense")
            .collect();
        for (name, m) in &sparse_formats {
            let r = reference::spmv_transposed(m.as_ref(), &x_rows).unwrap();
            assert!(r.y.iter().all(|v| v.is_finite()), "{name}: {:?}", r.y);
            let r =
                reference::spmv_sparse_x(m.as_ref(), &SparseVector::from_dense(&x_cols).unwrap())
                    .unwrap();
            assert!(r.y.iter().all(|v| v.is_finite()), "{name}: {:?}", r.y);
        }
        // Aᵀ·x with NaN/∞ at row 0, which holds a padding entry at column 16: y[16] stays 0
        // in MACKO (the padding is masked), the columns of row 0's values get NaN/∞.
        let x_rows_padding = [bad, f16::ZERO, f16::from_f32(1.0)];
        let r = reference::spmv_transposed(MatrixRef::from(&macko), &x_rows_padding).unwrap();
        assert_eq!(r.y[16], 0.0);
        assert!(!r.y[0].is_finite() && !r.y[21].is_finite());
        for (label, dev) in devices_under_test() {
            for (name, m) in formats(&dense) {
                for xr in [&x_rows[..], &x_rows_padding] {
                    let what = format!("{name}, x holds {bad}");
                    let Some(a) = upload(&label, &dev, &what, &m) else {
                        continue;
                    };
                    check_products(&label, &dev, &what, (m.as_ref(), &a), &x_cols, xr);
                }
            }
        }
    }
    // A NaN of x under a stored non-zero does reach y, as in every product.
    let mut x_rows = vec![f16::ZERO; rows];
    x_rows[2] = f16::NAN;
    let r = reference::spmv_transposed(MatrixRef::from(&macko), &x_rows).unwrap();
    assert!(r.y[3].is_nan() && r.y[0] == 0.0, "{:?}", r.y);
}

#[test]
fn nan_and_infinity_in_a_under_zeros_of_x_add_nothing() {
    // Row 1 and column 2 hold ∞ and NaN; x is zero there (row 1 for Aᵀ·x, column 2 for
    // A·x), so they are skipped in every format, dense included: x's zeros are not multiplied.
    let (rows, cols) = (4, 5);
    let mut w: Vec<f16> = (0..rows * cols)
        .map(|i| {
            f16::from_f32(if i % 3 == 0 {
                0.0
            } else {
                (i % 7) as f32 - 3.0
            })
        })
        .collect();
    for c in 0..cols {
        w[cols + c] = if c % 2 == 0 { f16::INFINITY } else { f16::NAN };
    }
    for r in 0..rows {
        w[r * cols + 2] = f16::NEG_INFINITY;
    }
    let dense = DenseMatrix::new(rows, cols, w).unwrap();
    let x_rows = [1.0, 0.0, 2.0, 0.5].map(f16::from_f32);
    let x_cols = [1.0, -1.0, 0.0, 2.0, 0.5].map(f16::from_f32);
    for (label, dev) in devices_under_test() {
        for (name, m) in formats(&dense) {
            let what = format!("{name}, NaN/∞ in A under x's zeros");
            let r = reference::spmv_transposed(m.as_ref(), &x_rows).unwrap();
            let r_s =
                reference::spmv_sparse_x(m.as_ref(), &SparseVector::from_dense(&x_cols).unwrap())
                    .unwrap();
            if name != "csr-homogeneous" {
                // Column 2 holds −∞ in every row: Aᵀ·x reaches it from rows 0, 2, 3.
                assert!(r.y[2].is_infinite(), "{name}: {:?}", r.y);
                assert!(
                    r.y.iter().enumerate().all(|(c, v)| c == 2 || v.is_finite()),
                    "{name}"
                );
                assert!(
                    r_s.y
                        .iter()
                        .enumerate()
                        .all(|(r, v)| r == 1 || v.is_finite()),
                    "{name}"
                );
            }
            let Some(a) = upload(&label, &dev, &what, &m) else {
                continue;
            };
            check_products(&label, &dev, &what, (m.as_ref(), &a), &x_cols, &x_rows);
        }
    }
}

/// MACKO's device layout pads each row's last group with zero entries one column apart
/// (macko_format::aligned), so a row's padding names the up to 7 columns after its last entry,
/// past the last column where the row ends there. With x sparse they must add nothing whatever
/// x holds there (NaN, ±∞, or a read past x), and x's zeros nothing under A's NaN/∞, on every
/// configuration: rows aligned (wgpu's subgroup path, by default) or in the format's own
/// layout, whose rows share groups (its workgroup path).
#[test]
fn macko_padding_past_a_row_or_the_last_column_adds_nothing_with_x_sparse() {
    let (rows, cols) = (48usize, 45usize);
    let mut rng = StdRng::seed_from_u64(3200);
    // Row r holds up to 1 + r % 9 entries (so its last group's padding, aligned: 0..=7 entries)
    // ending at `last`: before the last 8 columns (the padding runs over them) or at the last.
    let build = |ends_at_the_edge: bool, rng: &mut StdRng| {
        let mut w = vec![f16::ZERO; rows * cols];
        for r in 0..rows {
            let last = if ends_at_the_edge {
                cols - 1
            } else {
                cols - 9 - r % 8
            };
            w[r * cols + last] = f16::from_f32(1.0 + (r % 5) as f32);
            for _ in 0..r % 9 {
                let c = rng.random_range(0..last);
                // NaN/∞ of A in the columns where x is zero (multiples of 3 below).
                w[r * cols + c] = match (c % 3, r % 3) {
                    (0, 0) => f16::NAN,
                    (0, 1) => f16::INFINITY,
                    (0, _) => f16::NEG_INFINITY,
                    _ => f16::from_f32(rng.random_range(-2.0..2.0)),
                };
            }
        }
        DenseMatrix::new(rows, cols, w).unwrap()
    };
    let x_rows = sparse_dense_x(rows, 0.5, 32);
    for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
        for ends_at_the_edge in [false, true] {
            let dense = build(ends_at_the_edge, &mut rng);
            let macko = MackoMatrix::from_dense(&dense).unwrap();
            // x: zero at multiples of 3; where the rows end before them, `bad` over the last 8
            // columns (only padding meets them); else finite up to the last column.
            let x_cols: Vec<f16> = (0..cols)
                .map(|c| match c {
                    _ if c % 3 == 0 => f16::ZERO,
                    _ if !ends_at_the_edge && c >= cols - 8 => bad,
                    _ => f16::from_f32(0.25 + (c % 7) as f32 / 8.0),
                })
                .collect();
            let r = reference::spmv_sparse_x(
                MatrixRef::from(&macko),
                &SparseVector::from_dense(&x_cols).unwrap(),
            )
            .unwrap();
            assert!(r.y.iter().all(|v| v.is_finite()), "{:?}", r.y);
            for (label, dev) in devices_under_test() {
                let what = format!("MACKO padding, ends at the edge: {ends_at_the_edge}, x {bad}");
                let a = dev.upload(&macko).unwrap();
                let m = MatrixRef::from(&macko);
                check_products(&label, &dev, &what, (m, &a), &x_cols, &x_rows);
            }
        }
    }
}

/// wgpu's transposed MACKO kernel reads rows as the upload laid them out: row pointers into
/// row-aligned rows (padding naming up to 7 columns past a row's end) or into the format's
/// layout (rows sharing groups), or, with x in column tiles, a tile table whose parts it walks
/// one after another. Each layout on its own device, with rows longer than one chunk of the
/// workgroup (64 groups of 8), a row ending at the last column, columns over several tiles of
/// y and of x, NaN/±∞ of A under x's zeros, and one empty row where x is NaN. (Its tuning keys
/// exist only with the wgpu feature.)
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_macko_transposed_products_agree_in_every_upload_layout() {
    let (rows, cols) = (37usize, 1000usize);
    let mut rng = StdRng::seed_from_u64(3300);
    let mut w = random_dense(rows, cols, 0.3, 3301).values().to_vec();
    for r in 0..rows {
        let row = &mut w[r * cols..(r + 1) * cols];
        match r % 4 {
            // About 700 entries (88 groups): more than one chunk.
            0 => {
                for v in row.iter_mut() {
                    if rng.random::<f64>() < 0.6 {
                        *v = f16::from_f32(rng.random_range(0.25..2.0));
                    }
                }
            }
            // Ends at the last column (its aligned padding runs past it).
            1 => row[cols - 1] = f16::from_f32(-1.5),
            _ => {}
        }
    }
    // Row 5 empty (x is NaN there); NaN/±∞ of A in rows where x is zero (every third).
    w[5 * cols..6 * cols].fill(f16::ZERO);
    for (k, bad) in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY]
        .into_iter()
        .enumerate()
    {
        w[(3 * (k + 1)) * cols + 100 * k + 7] = bad;
    }
    let macko = MackoMatrix::from_dense(&DenseMatrix::new(rows, cols, w).unwrap()).unwrap();
    let x_rows: Vec<f16> = (0..rows)
        .map(|r| match r {
            5 => f16::NAN,
            _ if r % 3 == 0 => f16::ZERO,
            _ => f16::from_f32(0.5 - (r % 7) as f32 / 8.0),
        })
        .collect();
    let x_cols = sparse_dense_x(cols, 0.5, 33);
    let layouts = [
        ("x in column tiles of 128, rows aligned", Some(128), None),
        (
            "x in column tiles of 128, format layout",
            Some(128),
            Some(false),
        ),
        ("format layout", None, Some(false)),
        ("rows aligned", None, Some(true)),
    ];
    for (layout, tile_cols, aligned) in layouts {
        let mut tuning = macko::Tuning::default();
        tuning.wgpu.x_tile_cols = tile_cols;
        tuning.wgpu.aligned_rows = aligned;
        let opts = macko::DeviceOptions {
            tuning: Some(tuning),
            ..macko::DeviceOptions::for_backend(BackendKind::Wgpu)
        };
        let label = format!("wgpu, {layout}");
        let Some(dev) = open_or_skip(&label, &opts) else {
            continue;
        };
        let a = dev.upload(&macko).unwrap();
        let m = MatrixRef::from(&macko);
        check_products(&label, &dev, "MACKO layouts", (m, &a), &x_cols, &x_rows);
    }
}

#[test]
fn transposed_reference_is_the_product_with_the_transpose() {
    // For finite values, Aᵀ·x of the reference equals the dense reference of the explicit
    // transpose, and A·x with x sparse equals A·x with x dense: the new references agree with
    // the old ones where their semantics meet.
    let dense = random_dense(45, 61, 0.4, 2700);
    let mut t = vec![f16::ZERO; 45 * 61];
    for r in 0..45 {
        for c in 0..61 {
            t[c * 45 + r] = dense.row(r)[c];
        }
    }
    let transpose = DenseMatrix::new(61, 45, t).unwrap();
    let x_rows = sparse_dense_x(45, 0.3, 7);
    let x_cols = sparse_dense_x(61, 0.3, 8);
    for (name, m) in formats(&dense) {
        let dense_of = |m: &AnyMatrix| match m {
            AnyMatrix::MackoQuant(q) => q.dequantize().unwrap(),
            AnyMatrix::Sparse24(s) => s.to_dense().unwrap(),
            _ => dense.clone(),
        };
        let base = dense_of(&m);
        let base_t = if matches!(m, AnyMatrix::MackoQuant(_) | AnyMatrix::Sparse24(_)) {
            let mut t = vec![f16::ZERO; 45 * 61];
            for r in 0..45 {
                for c in 0..61 {
                    t[c * 45 + r] = base.row(r)[c];
                }
            }
            DenseMatrix::new(61, 45, t).unwrap()
        } else {
            transpose.clone()
        };
        let got = reference::spmv_transposed(m.as_ref(), &x_rows).unwrap();
        let want = reference::spmv_dense(&base_t, &x_rows).unwrap();
        let got_s =
            reference::spmv_sparse_x(m.as_ref(), &SparseVector::from_dense(&x_cols).unwrap())
                .unwrap();
        let want_s = reference::spmv(MatrixRef::from(&base), &x_cols).unwrap();
        // Homogeneous CSR has 0.75 where dense has its values: compare it with its own dense.
        if let AnyMatrix::HomogeneousCsr(h) = &m {
            let hd = h.to_dense().unwrap();
            let hs = reference::spmv(MatrixRef::from(&hd), &x_cols).unwrap();
            for (g, w) in got_s.y.iter().zip(&hs.y) {
                assert!(
                    (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
                    "{name}: {g} vs {w}"
                );
            }
            continue;
        }
        // Quantized values are exact in the reference but rounded to f16 by dequantize.
        let tol = if name == "macko-int8" { 1e-2 } else { 1e-9 };
        for (g, w) in got
            .y
            .iter()
            .zip(&want.y)
            .chain(got_s.y.iter().zip(&want_s.y))
        {
            assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{name}: {g} vs {w}");
        }
    }
}

#[test]
fn the_regime_of_the_issue_agrees() {
    // 10 000 × 10 000 CSR with 1 % of its entries, x 10 % non-zero, built from its pattern
    // (a dense 10⁸ would be 200 MB); and an LLM down-projection (768 × 3072, MACKO at d = 0.5)
    // after a ReLU, x 90 % zero. The GPUs multiply the CSR ones (wgpu: Aᵀ·x only).
    let (n, per_row) = (10_000usize, 100usize);
    let mut rng = StdRng::seed_from_u64(2800);
    let mut row_ptr = vec![0u32];
    let mut col_idx = Vec::new();
    for _ in 0..n {
        let mut cols: Vec<u32> = (0..per_row)
            .map(|_| rng.random_range(0..n as u32))
            .collect();
        cols.sort_unstable();
        cols.dedup();
        col_idx.extend(&cols);
        row_ptr.push(col_idx.len() as u32);
    }
    let values: Vec<f16> = (0..col_idx.len())
        .map(|_| f16::from_f32(rng.random_range(0.0625..1.0)))
        .collect();
    let csr = CsrMatrix::from_parts(n, n, row_ptr, col_idx, values).unwrap();
    let homogeneous = HomogeneousCsrMatrix::from_pattern(&csr, f16::from_f32(-1.5));
    let x = sparse_dense_x(n, 0.1, 9);
    let x2 = sparse_dense_x(n, 0.1, 10);

    let down = random_dense(768, 3072, 0.5, 2801);
    let down_t = {
        let mut t = vec![f16::ZERO; 768 * 3072];
        for r in 0..768 {
            for c in 0..3072 {
                t[c * 768 + r] = down.row(r)[c];
            }
        }
        DenseMatrix::new(3072, 768, t).unwrap()
    };
    let relu = |v: Vec<f16>| -> Vec<f16> {
        v.into_iter()
            .map(|e| if e.to_f32() > 0.8 { e } else { f16::ZERO })
            .collect()
    };
    let h = relu(random_x(3072, 11));
    let macko = MackoMatrix::from_dense(&down).unwrap();
    let macko_t = MackoMatrix::from_dense(&down_t).unwrap();
    // Rows of ~1 536 entries: the GPUs' transposed teams span several warps (CUDA: 256 threads).
    let down_csr = CsrMatrix::from_dense(&down).unwrap();
    // Rows of ~4 100 MACKO entries: CUDA's teams of 8 warps walk each in several steps.
    let wide = MackoMatrix::from_dense(&random_dense(40, 8192, 0.5, 2802)).unwrap();
    let (wide_x, wide_rows) = (sparse_dense_x(8192, 0.1, 12), sparse_dense_x(40, 0.5, 13));
    for (label, dev) in devices_under_test() {
        for (what, m, xc, xr) in [
            ("10k² CSR 1 %", MatrixRef::from(&csr), &x, &x2),
            (
                "10k² homogeneous CSR 1 %",
                MatrixRef::from(&homogeneous),
                &x,
                &x2,
            ),
            (
                "down-projection 768×3072",
                MatrixRef::from(&macko),
                &h,
                &x[..768].to_vec(),
            ),
            (
                "wide rows 40×8192 MACKO",
                MatrixRef::from(&wide),
                &wide_x,
                &wide_rows,
            ),
            (
                "down-projection 768×3072 as CSR",
                MatrixRef::from(&down_csr),
                &h,
                &x[..768].to_vec(),
            ),
            (
                "its transpose 3072×768",
                MatrixRef::from(&macko_t),
                &x[..768].to_vec(),
                &h,
            ),
        ] {
            let Some(a) = or_refused(&label, what, &dev, dev.upload(m)) else {
                continue;
            };
            check_products(&label, &dev, what, (m, &a), xc, xr);
        }
    }
}

/// wgpu's transposed CSR product sums each y[c] in x's order (shaders/README.md, "Transposed
/// products with a sparse x"), so its f32 y is the same bit for bit on every run and on every
/// wgpu configuration, the split into row blocks of 64 KiB bindings included.
#[test]
fn wgpu_transposed_sparse_x_is_deterministic_across_runs_and_row_blocks() {
    let (rows, cols) = (3000usize, 700usize);
    let dense = random_dense(rows, cols, 0.05, 3100);
    let csr = CsrMatrix::from_dense(&dense).unwrap();
    let x = SparseVector::from_dense(&sparse_dense_x(rows, 0.3, 31)).unwrap();
    let r = reference::spmv_transposed_sparse_x(MatrixRef::from(&csr), &x).unwrap();
    let mut first: Option<(String, Vec<u32>)> = None;
    for (label, dev) in devices_under_test() {
        if dev.kind() != BackendKind::Wgpu {
            continue;
        }
        let a = dev.upload(&csr).unwrap();
        let xd = dev.upload_sparse_vector(&x).unwrap();
        for run in 0..2 {
            let mut y = dev.zeros(cols, Precision::F32).unwrap();
            dev.spmv_transposed_sparse_x(&a, &xd, &mut y).unwrap();
            let got = dev.download(&y).unwrap();
            assert_agrees(&label, "Aᵀ·x, x sparse", &r, &got);
            let bits: Vec<u32> = got.to_f32().iter().map(|v| v.to_bits()).collect();
            match &first {
                None => first = Some((label.clone(), bits)),
                Some((l0, b0)) => assert!(
                    *b0 == bits,
                    "{label} (run {run}) differs from {l0} in {} of {cols} columns",
                    b0.iter().zip(&bits).filter(|(a, b)| a != b).count()
                ),
            }
        }
    }
}

#[test]
fn homogeneous_csr_multiplies_like_its_csr_and_round_trips_through_a_file() {
    let dense = random_dense(50, 70, 0.2, 2900);
    let csr = CsrMatrix::from_dense(&dense).unwrap();
    for weight in [0.75f32, 0.0, -0.0, -3.0, f32::INFINITY] {
        let w = f16::from_f32(weight);
        let h = HomogeneousCsrMatrix::from_pattern(&csr, w);
        assert_eq!(h.bytes(), 4 * 51 + 4 * csr.nnz() as u64 + 2);
        let as_csr = h.to_csr();
        for batch in [1, 3, 17] {
            let mut x = random_batch(70, batch, 29);
            x[5] = f16::NAN; // reaches y where column 5 has an entry, unless the weight is zero
            let r = reference::spmm(MatrixRef::from(&h), &x, batch).unwrap();
            let rc = reference::spmm(MatrixRef::from(&as_csr), &x, batch).unwrap();
            assert_eq!(
                format!("{:?}", r.y),
                format!("{:?}", rc.y),
                "weight {weight}"
            );
            for (label, dev) in devices_under_test() {
                let Some(a) = or_refused(&label, "csr-homogeneous", &dev, dev.upload(&h)) else {
                    continue;
                };
                assert_eq!(a.bytes(), h.bytes());
                let xd = dev.upload_batch(&x, batch).unwrap();
                for precision in [Precision::F16, Precision::F32] {
                    let mut y = dev.zeros_batch(50, batch, precision).unwrap();
                    dev.spmm(&a, &xd, &mut y).unwrap();
                    let what = format!("homogeneous CSR, weight {weight}, B = {batch}");
                    assert_agrees(&label, &what, &r, &dev.download(&y).unwrap());
                }
                if batch == 1 {
                    // The products with a sparse input at every weight (a zero weight: nothing
                    // read, zeros even under x's NaN; ∞: ∞ or NaN wherever an entry is met).
                    let mut x_cols = sparse_dense_x(70, 0.3, 30);
                    x_cols[5] = f16::NAN;
                    let x_rows = sparse_dense_x(50, 0.3, 31);
                    let what = format!("homogeneous CSR, weight {weight}");
                    check_products(
                        &label,
                        &dev,
                        &what,
                        (MatrixRef::from(&h), &a),
                        &x_cols,
                        &x_rows,
                    );
                }
            }
        }
        // Saved beside a CSR, loaded back bit for bit (a NaN weight included).
        let path = std::env::temp_dir().join(format!(
            "macko-homogeneous-{}-{}.safetensors",
            std::process::id(),
            weight.to_bits()
        ));
        let nan = HomogeneousCsrMatrix::from_pattern(&csr, f16::NAN);
        container::save(
            &path,
            &[
                ("h", MatrixRef::from(&h)),
                ("nan", MatrixRef::from(&nan)),
                ("c", MatrixRef::from(&csr)),
            ],
        )
        .unwrap();
        assert_eq!(
            container::load_matrix(&path, "h").unwrap(),
            AnyMatrix::HomogeneousCsr(h)
        );
        assert_eq!(
            container::load_matrix(&path, "nan").unwrap(),
            AnyMatrix::HomogeneousCsr(nan)
        );
        assert_eq!(
            container::load_matrix(&path, "c").unwrap(),
            AnyMatrix::Csr(csr.clone())
        );
        std::fs::remove_file(&path).ok();
    }
    // Untrusted arrays get CSR's checks.
    let w = f16::ONE;
    assert_eq!(
        HomogeneousCsrMatrix::from_parts(2, 3, vec![0, 2, 3], vec![1, 1, 0], w),
        Err(FormatError::CsrColumnsNotIncreasing {
            row: 0,
            index: 1,
            previous: 1,
            column: 1
        })
    );
    assert_eq!(
        HomogeneousCsrMatrix::from_parts(2, 3, vec![0, 1, 2], vec![0, 3], w),
        Err(FormatError::CsrColumnOutOfRange {
            row: 1,
            index: 1,
            column: 3,
            cols: 3
        })
    );
    assert!(matches!(
        HomogeneousCsrMatrix::from_parts(2, 3, vec![0, 1, 2], vec![0], w),
        Err(FormatError::CsrLength {
            entries: 2,
            col_idx: 1,
            ..
        })
    ));
}
