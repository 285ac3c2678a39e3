//! Few-token products Y = A·X ([`Device::spmm`]) on every available device: every batch size
//! from 1 to 17 and a few past one chunk (odd sizes, sizes that are not a power of two, more
//! vectors than a warp's share), every format, both output precisions, checked row by row
//! against the f64 reference; padding never contributes, even with NaN/∞ in X; a batch of one
//! is bit for bit the single-vector product; misuse is a typed error.

mod common;

use common::*;
use half::f16;
use macko::{reference, CsrMatrix, Error, MackoMatrix, MatrixRef, Precision};

/// 1–17 (each chunk width and the first size that takes two chunks), and 33, 40 (three chunks
/// of 11, 11, 11 and of 14, 13, 13).
const BATCHES: &[usize] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 16, 17, 33, 40];

/// Degenerate shapes, shapes that are multiples of nothing, a wide one and a tall one.
const SHAPES: &[(usize, usize, f64)] = &[
    (0, 9, 0.5),
    (9, 0, 0.5),
    (1, 1, 1.0),
    (31, 33, 0.3),
    (33, 777, 0.1),
    (65, 1000, 0.5),
    (130, 2049, 0.7),
    (257, 129, 1.0),
    (70, 300, 0.0),
];

#[test]
fn every_batch_size_agrees_on_every_backend() {
    for (label, dev) in devices_under_test() {
        for (i, &(rows, cols, d)) in SHAPES.iter().enumerate() {
            let dense = random_dense(rows, cols, d, 500 + i as u64);
            for &batch in BATCHES {
                let x = random_batch(cols, batch, (i * 100 + batch) as u64);
                check_all_formats_batch(
                    &label,
                    &dev,
                    &format!("{rows}×{cols} d={d}"),
                    &dense,
                    &x,
                    batch,
                );
            }
        }
    }
}

#[test]
fn long_rows_and_ragged_rows_agree_for_few_tokens() {
    let cases = [
        ("2048×1024 d=0.5", random_dense(2048, 1024, 0.5, 41)),
        ("ragged", ragged_matrix(123, 300)),
    ];
    for (label, dev) in devices_under_test() {
        for (name, dense) in &cases {
            for batch in [3, 8, 16] {
                let x = random_batch(dense.cols(), batch, 9 + batch as u64);
                check_all_formats_batch(&label, &dev, name, dense, &x, batch);
            }
        }
    }
}

#[test]
fn a_batch_of_one_is_exactly_the_single_vector_product() {
    let dense = random_dense(300, 700, 0.4, 3);
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    let x = random_x(700, 3);
    for (label, dev) in devices_under_test() {
        let a = dev.upload(&macko).unwrap();
        let (single, batch) = (
            dev.upload_vector(&x).unwrap(),
            dev.upload_batch(&x, 1).unwrap(),
        );
        let mut y1 = dev.zeros(300, Precision::F32).unwrap();
        let mut y2 = dev.zeros_batch(300, 1, Precision::F32).unwrap();
        dev.spmv(&a, &single, &mut y1).unwrap();
        dev.spmm(&a, &batch, &mut y2).unwrap();
        assert_eq!(
            dev.download(&y1).unwrap(),
            dev.download(&y2).unwrap(),
            "{label}: spmm with B = 1 differs from spmv"
        );
    }
}

#[test]
fn each_vector_of_a_batch_is_its_own_single_product() {
    // Every vector of the batch but one is finite; the poisoned one must not leak into the
    // others' sums (a lane mix-up would), and each vector's result is its own spmv's within
    // the tolerance.
    let dense = random_dense(90, 400, 0.5, 8);
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    let batch = 7;
    let mut x = random_batch(400, batch, 8);
    x[2 * 400 + 17] = f16::NAN;
    x[2 * 400 + 18] = f16::INFINITY;
    let r = reference::spmm((&macko).into(), &x, batch).unwrap();
    for (label, dev) in devices_under_test() {
        let a = dev.upload(&macko).unwrap();
        let x_dev = dev.upload_batch(&x, batch).unwrap();
        let mut y = dev.zeros_batch(90, batch, Precision::F32).unwrap();
        dev.spmm(&a, &x_dev, &mut y).unwrap();
        let y = dev.download(&y).unwrap();
        assert_agrees(&label, "batch with one poisoned vector", &r, &y);
        let y = y.to_f64();
        for (b, ys) in y.chunks(90).enumerate() {
            assert_eq!(
                ys.iter().all(|v| v.is_finite()),
                b != 2,
                "{label}: vector {b} finite-ness"
            );
        }
    }
}

#[test]
fn padding_never_contributes_for_any_vector_of_a_batch() {
    // 300 columns, and 304 (rows 16-byte aligned: the CUDA tensor-core kernels, whose zero tiles
    // times a non-finite x make NaN that the exact recomputation must undo).
    for cols in [300, 304] {
        padding_never_contributes_with(&ragged_matrix(123, cols));
    }
}

fn padding_never_contributes_with(dense: &macko::DenseMatrix) {
    let macko = MackoMatrix::from_dense(dense).unwrap();
    let csr = CsrMatrix::from_dense(dense).unwrap();
    assert!(macko.values().iter().any(|v| v.to_bits() == 0));
    // Each vector is NaN or ±∞ where the matrix is zero in every column, in its own pattern.
    let zero_col: Vec<bool> = (0..dense.cols())
        .map(|c| (0..dense.rows()).all(|r| dense.row(r)[c].to_bits() & 0x7fff == 0))
        .collect();
    for batch in [2, 5, 8, 13, 16] {
        let mut x = random_batch(dense.cols(), batch, 11);
        for (i, xc) in x.iter_mut().enumerate() {
            let (b, c) = (i / dense.cols(), i % dense.cols());
            if zero_col[c] {
                *xc = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][(c + b) % 3];
            }
        }
        assert!(x.iter().any(|v| !v.is_finite()));
        for (label, dev) in devices_under_test() {
            let x_dev = dev.upload_batch(&x, batch).unwrap();
            for (format, m) in [("macko", MatrixRef::from(&macko)), ("csr", (&csr).into())] {
                let r = reference::spmm(m, &x, batch).unwrap();
                assert!(
                    r.y.iter().all(|v| v.is_finite()),
                    "reference must stay finite"
                );
                let a = dev.upload(m).unwrap();
                let mut y = dev
                    .zeros_batch(dense.rows(), batch, Precision::F16)
                    .unwrap();
                dev.spmm(&a, &x_dev, &mut y).unwrap();
                assert_agrees(
                    &label,
                    &format!("{format} with NaN/∞ in X, B = {batch}"),
                    &r,
                    &dev.download(&y).unwrap(),
                );
            }
        }
    }
}

#[test]
fn queued_few_token_products_chain_on_the_device() {
    // Y1 = A·X, then Y2 = B·Y1 with Y1 kept on the device: a batch of f16 outputs is a valid
    // batch of inputs.
    let a = MackoMatrix::from_dense(&random_dense(64, 96, 0.5, 1)).unwrap();
    let b = MackoMatrix::from_dense(&random_dense(48, 64, 0.5, 2)).unwrap();
    let batch = 6;
    let x = random_batch(96, batch, 1);
    for (label, dev) in devices_under_test() {
        let (a_dev, b_dev) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
        let x_dev = dev.upload_batch(&x, batch).unwrap();
        let mut y1 = dev.zeros_batch(64, batch, Precision::F16).unwrap();
        let mut y2 = dev.zeros_batch(48, batch, Precision::F32).unwrap();
        dev.spmm(&a_dev, &x_dev, &mut y1).unwrap();
        dev.spmm(&b_dev, &y1, &mut y2).unwrap();
        let y1_host: Vec<f16> = match dev.download(&y1).unwrap() {
            macko::HostVector::F16(v) => v,
            other => panic!("{label}: Y1 came back as {other:?}"),
        };
        let r = reference::spmm((&b).into(), &y1_host, batch).unwrap();
        assert_agrees(
            &label,
            "chained few-token product",
            &r,
            &dev.download(&y2).unwrap(),
        );
    }
}

#[test]
fn batch_misuse_is_a_typed_error_not_a_panic() {
    let m = MackoMatrix::from_dense(&random_dense(8, 16, 0.5, 9)).unwrap();
    for (label, dev) in devices_under_test() {
        let a = dev.upload(&m).unwrap();
        assert!(
            matches!(
                dev.upload_batch(&random_x(16, 1), 0),
                Err(Error::BadBatch { batch: 0, .. })
            ),
            "{label}: batch of zero vectors"
        );
        assert!(
            matches!(
                dev.upload_batch(&random_x(16, 1), 3),
                Err(Error::BadBatch {
                    batch: 3,
                    elements: 16
                })
            ),
            "{label}: 16 elements are not 3 vectors"
        );
        assert!(
            matches!(
                dev.zeros_batch(usize::MAX, 2, Precision::F32),
                Err(Error::BadBatch { .. })
            ),
            "{label}: overflowing batch"
        );
        let x3 = dev.upload_batch(&random_batch(16, 3, 1), 3).unwrap();
        let mut y2 = dev.zeros_batch(8, 2, Precision::F32).unwrap();
        assert!(
            matches!(
                dev.spmm(&a, &x3, &mut y2),
                Err(Error::ShapeMismatch {
                    expected: 3,
                    found: 2,
                    ..
                })
            ),
            "{label}: Y with fewer vectors than X"
        );
        let mut y3 = dev.zeros_batch(8, 3, Precision::F32).unwrap();
        assert!(
            matches!(
                dev.spmv(&a, &x3, &mut y3),
                Err(Error::ShapeMismatch {
                    expected: 1,
                    found: 3,
                    ..
                })
            ),
            "{label}: spmv given a batch"
        );
        let short = dev.upload_batch(&random_batch(15, 3, 1), 3).unwrap();
        assert!(
            matches!(
                dev.spmm(&a, &short, &mut y3),
                Err(Error::ShapeMismatch {
                    expected: 16,
                    found: 15,
                    ..
                })
            ),
            "{label}: X's vectors too short"
        );
    }
}
