//! `Device::time_sparse_input`: the products with a sparse input timed as `macko bench
//! --sparse-inputs` times them (rotated copies, warm-up, the device's own timer where it has
//! one). On every device: each product a device multiplies returns one finite, positive time
//! per timed product and leaves y equal to the f64 reference (the timed products are real
//! products, not a stand-in); a product a GPU has no kernel for is refused as the product
//! itself is; the CPU refuses nothing. The argument checks are the products' own.

mod common;

use common::*;
use macko::{
    reference, BackendKind, CsrMatrix, Device, DeviceMatrix, Error, HomogeneousCsrMatrix,
    MackoMatrix, MatrixRef, Precision, SparseInputProduct, SparseVector,
};

/// Times the three products of `m` on `dev` (two rotated copies, 2 warm-up and 5 timed
/// products) and checks the times and the y each leaves.
fn check_timed(
    label: &str,
    dev: &Device,
    m: MatrixRef<'_>,
    x_cols: &[half::f16],
    x_rows: &[half::f16],
) {
    let (rows, cols) = m.shape();
    let copies: Vec<DeviceMatrix> = (0..2).map(|_| dev.upload(m).unwrap()).collect();
    let a: Vec<&DeviceMatrix> = copies.iter().collect();
    let sx_cols = SparseVector::from_dense(x_cols).unwrap();
    let sx_rows = SparseVector::from_dense(x_rows).unwrap();
    let sx_cols_dev = dev.upload_sparse_vector(&sx_cols).unwrap();
    let sx_rows_dev = dev.upload_sparse_vector(&sx_rows).unwrap();
    let x_rows_dev = dev.upload_vector(x_rows).unwrap();
    let cases = [
        (
            "A·x, x sparse",
            SparseInputProduct::SparseX(&sx_cols_dev),
            reference::spmv_sparse_x(m, &sx_cols).unwrap(),
            rows,
        ),
        (
            "Aᵀ·x, x dense",
            SparseInputProduct::Transposed(&x_rows_dev),
            reference::spmv_transposed(m, x_rows).unwrap(),
            cols,
        ),
        (
            "Aᵀ·x, x sparse",
            SparseInputProduct::TransposedSparseX(&sx_rows_dev),
            reference::spmv_transposed_sparse_x(m, &sx_rows).unwrap(),
            cols,
        ),
    ];
    for (what, product, r, len) in cases {
        let mut y = dev.zeros(len, Precision::F32).unwrap();
        match dev.time_sparse_input(&a, product, &mut y, 2, 5) {
            Ok(times) => {
                assert_eq!(
                    times.len(),
                    5,
                    "{label}, {what}: one time per timed product"
                );
                assert!(
                    times.iter().all(|t| t.is_finite() && *t > 0.0),
                    "{label}, {what}: times {times:?}"
                );
                assert_agrees(label, what, &r, &dev.download(&y).unwrap());
            }
            Err(e) if refused_sparse_input(dev, &e) => {
                // The product itself must refuse in the same way.
                let mut y = dev.zeros(len, Precision::F32).unwrap();
                let direct = match product {
                    SparseInputProduct::SparseX(x) => dev.spmv_sparse_x(a[0], x, &mut y),
                    SparseInputProduct::Transposed(x) => dev.spmv_transposed(a[0], x, &mut y),
                    SparseInputProduct::TransposedSparseX(x) => {
                        dev.spmv_transposed_sparse_x(a[0], x, &mut y)
                    }
                };
                assert!(
                    matches!(&direct, Err(d) if d.to_string() == e.to_string()),
                    "{label}, {what}: timing refused with {e}, the product gave {direct:?}"
                );
            }
            Err(e) => panic!("{label}, {what}: {e}"),
        }
    }
}

#[test]
fn timed_products_are_real_products_on_every_device() {
    let (rows, cols) = (333, 517);
    let dense = random_dense(rows, cols, 0.1, 5);
    let csr = CsrMatrix::from_dense(&dense).unwrap();
    let homogeneous = HomogeneousCsrMatrix::from_pattern(&csr, half::f16::from_f32(0.5));
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    let mut x_cols = random_x(cols, 6);
    let mut x_rows = random_x(rows, 7);
    // About one element in ten non-zero, as the bench's default.
    for (i, v) in x_cols.iter_mut().enumerate() {
        if i % 10 != 3 {
            *v = half::f16::ZERO;
        }
    }
    for (i, v) in x_rows.iter_mut().enumerate() {
        if i % 10 != 7 {
            *v = half::f16::ZERO;
        }
    }
    for (label, dev) in devices_under_test() {
        progress("sparse_input_timing", format_args!("{label}"));
        for (name, m) in [
            ("CSR", MatrixRef::Csr(&csr)),
            ("homogeneous CSR", MatrixRef::HomogeneousCsr(&homogeneous)),
            ("MACKO", MatrixRef::Macko(&macko)),
        ] {
            check_timed(&format!("{label}, {name}"), &dev, m, &x_cols, &x_rows);
        }
        assert!(!dev.sparse_input_timer().is_empty());
    }
}

/// The timing refuses what the products refuse: a y of the wrong length, copies of different
/// shapes; and times nothing for no matrix.
#[test]
fn timing_checks_its_arguments() {
    let dev = Device::new(BackendKind::Cpu).unwrap();
    let csr = CsrMatrix::from_dense(&random_dense(20, 30, 0.3, 1)).unwrap();
    let other = CsrMatrix::from_dense(&random_dense(20, 31, 0.3, 2)).unwrap();
    let a = dev.upload(&csr).unwrap();
    let b = dev.upload(&other).unwrap();
    let x = dev
        .upload_sparse_vector(&SparseVector::from_dense(&random_x(30, 3)).unwrap())
        .unwrap();
    let mut short_y = dev.zeros(19, Precision::F32).unwrap();
    let e = dev
        .time_sparse_input(&[&a], SparseInputProduct::SparseX(&x), &mut short_y, 0, 1)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 20,
                found: 19,
                ..
            }
        ),
        "{e}"
    );
    let mut y = dev.zeros(20, Precision::F32).unwrap();
    let e = dev
        .time_sparse_input(&[&a, &b], SparseInputProduct::SparseX(&x), &mut y, 0, 1)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 30,
                found: 31,
                ..
            }
        ),
        "{e}"
    );
    let times = dev
        .time_sparse_input(&[], SparseInputProduct::SparseX(&x), &mut y, 0, 3)
        .unwrap();
    assert!(times.is_empty());
}
