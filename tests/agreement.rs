//! The cross-backend agreement suite: every available device (CPU, wgpu with and without
//! subgroups and with row-block splitting, CUDA) multiplies the same matrices in every format,
//! and every row must agree with the f64 reference within the tolerance derived from the
//! arithmetic (`macko::reference::tolerance`). A backend that is missing is skipped with a
//! printed line, unless `MACKO_REQUIRE_BACKENDS` names it.

mod common;

use common::*;
use half::f16;
use macko::{reference, CsrMatrix, DenseMatrix, Device, Error, MackoMatrix, MatrixRef, Precision};

#[test]
fn golden_vectors_agree_on_every_backend() {
    let cases = golden_cases();
    assert_eq!(cases.len(), 15, "the manifest lists 15 cases");
    for (label, dev) in devices_under_test() {
        for (name, dense) in &cases {
            let x = random_x(dense.cols(), 7);
            check_all_formats(&label, &dev, name, dense, &x);
        }
    }
}

/// Shapes that are multiples of nothing, degenerate ones, and LLM-like widths.
const SHAPES: &[(usize, usize)] = &[
    (0, 0),
    (0, 9),
    (9, 0),
    (1, 1),
    (3, 1),
    (1, 4099),
    (31, 33),
    (33, 777),
    (64, 4096),
    (65, 1000),
    (257, 129),
    (1000, 3),
    (130, 2049),
];

const DENSITIES: &[f64] = &[0.0, 0.03, 0.1, 0.3, 0.5, 0.7, 0.95, 1.0];

#[test]
fn random_matrices_agree_on_every_backend() {
    for (label, dev) in devices_under_test() {
        for (i, &(rows, cols)) in SHAPES.iter().enumerate() {
            for (j, &d) in DENSITIES.iter().enumerate() {
                let seed = (i * 100 + j) as u64;
                let dense = random_dense(rows, cols, d, seed);
                let x = random_x(cols, seed);
                check_all_formats(&label, &dev, &format!("{rows}×{cols} d={d}"), &dense, &x);
            }
        }
    }
}

/// Many long rows: the last rows of a dispatch are where work-distribution bugs lose rows (a
/// row counter that lost rows near the end of a 2048×1024 CSR product on lavapipe was found by
/// `macko bench`, not by the smaller shapes above).
#[test]
fn many_long_rows_agree_on_every_backend() {
    for (label, dev) in devices_under_test() {
        for (rows, cols, d) in [(2048, 1024, 1.0), (4096, 1024, 0.7)] {
            let dense = random_dense(rows, cols, d, 77);
            let x = random_x(cols, 77);
            check_all_formats(&label, &dev, &format!("{rows}×{cols} d={d}"), &dense, &x);
        }
    }
}

#[test]
fn ragged_rows_and_padding_agree_on_every_backend() {
    let dense = ragged_matrix(123, 300);
    let x = random_x(dense.cols(), 3);
    for (label, dev) in devices_under_test() {
        check_all_formats(&label, &dev, "ragged", &dense, &x);
    }
}

#[test]
fn padding_never_contributes_even_with_nan_and_infinity_in_x() {
    let dense = ragged_matrix(123, 300);
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    let csr = CsrMatrix::from_dense(&dense).unwrap();
    assert!(
        macko.values().iter().any(|v| v.to_bits() == 0),
        "the matrix must contain padding entries for this test to mean anything"
    );
    // x is NaN or ±∞ exactly where the matrix is zero in every row, finite elsewhere: any
    // product that multiplies a padding entry (or a dense zero) by x is poisoned.
    let mut x = random_x(dense.cols(), 11);
    for (c, xc) in x.iter_mut().enumerate() {
        if (0..dense.rows()).all(|r| dense.row(r)[c].to_bits() & 0x7fff == 0) {
            *xc = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][c % 3];
        }
    }
    let poisoned = x.iter().filter(|v| !v.is_finite()).count();
    assert!(poisoned > 0, "some columns must be poisoned");
    for (label, dev) in devices_under_test() {
        let x_dev = dev.upload_vector(&x).unwrap();
        for (format, m, r) in [
            (
                "macko",
                MatrixRef::from(&macko),
                reference::spmv_macko(&macko, &x).unwrap(),
            ),
            (
                "csr",
                MatrixRef::from(&csr),
                reference::spmv_csr(&csr, &x).unwrap(),
            ),
        ] {
            assert!(
                r.y.iter().all(|v| v.is_finite()),
                "reference must stay finite"
            );
            let a = dev.upload(m).unwrap();
            let mut y = dev.zeros(dense.rows(), Precision::F32).unwrap();
            dev.spmv(&a, &x_dev, &mut y).unwrap();
            assert_agrees(
                &label,
                &format!("{format} with NaN/∞ in x"),
                &r,
                &dev.download(&y).unwrap(),
            );
        }
    }
}

#[test]
fn nan_and_infinity_where_the_matrix_is_nonzero_propagate() {
    let dense = random_dense(40, 70, 0.5, 5);
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    let mut x = random_x(70, 5);
    x[3] = f16::NAN;
    x[10] = f16::INFINITY;
    let r = reference::spmv_macko(&macko, &x).unwrap();
    assert!(r.y.iter().any(|v| v.is_nan()));
    for (label, dev) in devices_under_test() {
        let a = dev.upload(&macko).unwrap();
        let x_dev = dev.upload_vector(&x).unwrap();
        let mut y = dev.zeros(40, Precision::F16).unwrap();
        dev.spmv(&a, &x_dev, &mut y).unwrap();
        assert_agrees(
            &label,
            "macko with NaN/∞ under non-zeros",
            &r,
            &dev.download(&y).unwrap(),
        );
    }
}

/// NaN and ±∞ stored as values of A reach y (IEEE: the row's sum is NaN or ±∞), on every
/// backend and path: a zero test that drops an entry must not drop these (an ordered `!=` on a
/// NaN is false).
#[test]
fn nan_and_infinity_stored_in_the_matrix_propagate() {
    let (rows, cols) = (40, 70);
    let mut values = random_dense(rows, cols, 0.5, 9).values().to_vec();
    // Rows 2, 5 and 11 get a NaN, a +∞ and a −∞ value at a column of their own.
    for (row, col, v) in [
        (2, 3, f16::NAN),
        (5, 40, f16::INFINITY),
        (11, 69, f16::NEG_INFINITY),
    ] {
        values[row * cols + col] = v;
    }
    let macko = MackoMatrix::from_dense(&DenseMatrix::new(rows, cols, values).unwrap()).unwrap();
    // x without zeros, so every stored value meets a non-zero.
    let x: Vec<f16> = random_x(cols, 9)
        .into_iter()
        .map(|v| if v.to_f32() == 0.0 { f16::ONE } else { v })
        .collect();
    let r = reference::spmv_macko(&macko, &x).unwrap();
    assert!(r.y[2].is_nan() && r.y[5].is_infinite() && r.y[11].is_infinite());
    for (label, dev) in devices_under_test() {
        let a = dev.upload(&macko).unwrap();
        let x_dev = dev.upload_vector(&x).unwrap();
        let mut y = dev.zeros(rows, Precision::F32).unwrap();
        dev.spmv(&a, &x_dev, &mut y).unwrap();
        assert_agrees(
            &label,
            "macko with NaN/∞ values",
            &r,
            &dev.download(&y).unwrap(),
        );
    }
}

#[test]
fn many_queued_products_before_one_wait() {
    let mats: Vec<(MackoMatrix, Vec<f16>)> = (0..12)
        .map(|s| {
            let (rows, cols) = (50 + 13 * s, 90 + 31 * s);
            (
                MackoMatrix::from_dense(&random_dense(rows, cols, 0.4, s as u64)).unwrap(),
                random_x(cols, s as u64),
            )
        })
        .collect();
    for (label, dev) in devices_under_test() {
        let mut outputs = Vec::new();
        for (m, x) in &mats {
            let a = dev.upload(m).unwrap();
            let x_dev = dev.upload_vector(x).unwrap();
            let mut y = dev.zeros(m.rows(), Precision::F32).unwrap();
            dev.spmv(&a, &x_dev, &mut y).unwrap();
            outputs.push((a, x_dev, y));
        }
        dev.synchronize().unwrap();
        for ((m, x), (_, _, y)) in mats.iter().zip(&outputs) {
            let r = reference::spmv_macko(m, x).unwrap();
            assert_agrees(&label, "queued product", &r, &dev.download(y).unwrap());
        }
    }
}

#[test]
fn chained_products_reuse_outputs_as_inputs() {
    // y1 = A·x, then y2 = B·y1 with y1 kept on the device: an f16 output is a valid input.
    let a = MackoMatrix::from_dense(&random_dense(64, 96, 0.5, 1)).unwrap();
    let b = MackoMatrix::from_dense(&random_dense(48, 64, 0.5, 2)).unwrap();
    let x = random_x(96, 1);
    for (label, dev) in devices_under_test() {
        let (a_dev, b_dev) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
        let x_dev = dev.upload_vector(&x).unwrap();
        let mut y1 = dev.zeros(64, Precision::F16).unwrap();
        let mut y2 = dev.zeros(48, Precision::F32).unwrap();
        dev.spmv(&a_dev, &x_dev, &mut y1).unwrap();
        dev.spmv(&b_dev, &y1, &mut y2).unwrap();
        let y1_host: Vec<f16> = match dev.download(&y1).unwrap() {
            macko::HostVector::F16(v) => v,
            other => panic!("{label}: y1 came back as {other:?}"),
        };
        let r = reference::spmv_macko(&b, &y1_host).unwrap();
        assert_agrees(&label, "chained product", &r, &dev.download(&y2).unwrap());
    }
}

#[test]
fn misuse_is_a_typed_error_not_a_panic() {
    let m = MackoMatrix::from_dense(&random_dense(8, 16, 0.5, 9)).unwrap();
    for (label, dev) in devices_under_test() {
        let other = Device::new(macko::BackendKind::Cpu).unwrap();
        let a = dev.upload(&m).unwrap();
        let x = dev.upload_vector(&random_x(16, 1)).unwrap();
        let short_x = dev.upload_vector(&random_x(15, 1)).unwrap();
        let mut y = dev.zeros(8, Precision::F32).unwrap();
        let mut short_y = dev.zeros(7, Precision::F32).unwrap();
        let mut foreign_y = other.zeros(8, Precision::F32).unwrap();
        let f32_x = dev.zeros(16, Precision::F32).unwrap();
        assert!(
            matches!(
                dev.spmv(&a, &short_x, &mut y),
                Err(Error::ShapeMismatch {
                    expected: 16,
                    found: 15,
                    ..
                })
            ),
            "{label}: short x"
        );
        assert!(
            matches!(
                dev.spmv(&a, &x, &mut short_y),
                Err(Error::ShapeMismatch {
                    expected: 8,
                    found: 7,
                    ..
                })
            ),
            "{label}: short y"
        );
        assert!(
            matches!(
                dev.spmv(&a, &x, &mut foreign_y),
                Err(Error::WrongDevice { .. })
            ),
            "{label}: y of another device"
        );
        assert!(
            matches!(
                dev.spmv(&a, &f32_x, &mut y),
                Err(Error::WrongElementType { .. })
            ),
            "{label}: f32 x"
        );
        assert!(
            matches!(other.download(&y), Err(Error::WrongDevice { .. })),
            "{label}: download elsewhere"
        );
    }
}
