//! wgpu's transposed products y = Aᵀ·x (shaders/README.md, "Transposed products with a sparse
//! x") under every way of cutting x into chunks: the default rule, one chunk for all of x,
//! chunks of a single entry over a grid of 65 536 workgroups, each with row blocks (64 KiB
//! bindings) and without. Every output of CSR,
//! homogeneous CSR and MACKO, x dense and sparse, f16 and f32 y, against the f64 reference.
//! The matrix has rows longer than a workgroup's probes can cover in one round (4 096 entries),
//! empty rows under NaN and ∞ of x, and 20 column tiles.
#![cfg(feature = "wgpu")]

mod common;

use common::*;
use half::f16;
use macko::{
    reference, AnyMatrix, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceOptions,
    HomogeneousCsrMatrix, MackoMatrix, MatrixRef, Precision, SparseVector, Tuning,
};

/// A 300 × 5 000 matrix: every 50th row full (5 000 entries), every 7th empty, the rest about
/// 5 % dense.
fn matrix() -> DenseMatrix {
    let (rows, cols) = (300usize, 5000usize);
    let base = random_dense(rows, cols, 0.05, 4100);
    let mut w = base.values().to_vec();
    for r in 0..rows {
        let row = &mut w[r * cols..(r + 1) * cols];
        if r % 50 == 0 {
            for (c, v) in row.iter_mut().enumerate() {
                *v = f16::from_f32(0.25 + (c % 13) as f32 / 16.0);
            }
        } else if r % 7 == 0 {
            row.fill(f16::ZERO);
        }
    }
    DenseMatrix::new(rows, cols, w).unwrap()
}

/// x over the rows: NaN and ∞ on the empty rows (every 7th, not every 50th), zeros on every
/// third row, values elsewhere.
fn x_rows(rows: usize) -> Vec<f16> {
    (0..rows)
        .map(|r| match r {
            _ if r % 7 == 0 && r % 50 != 0 => {
                if r % 2 == 0 {
                    f16::NAN
                } else {
                    f16::INFINITY
                }
            }
            _ if r % 3 == 0 => f16::ZERO,
            _ => f16::from_f32(0.75 - (r % 11) as f32 / 8.0),
        })
        .collect()
}

/// The wgpu devices under test: each chunk rule, with and without row blocks.
fn devices() -> Vec<(String, Device)> {
    let rules: [(&str, Option<u32>, Option<u32>); 3] = [
        ("default chunks", None, None),
        ("one chunk", None, Some(u32::MAX)),
        ("chunks of one entry", Some(1 << 16), Some(1)),
    ];
    let mut out = Vec::new();
    for (rule, workgroups, min_chunk) in rules {
        for cap in [None, Some(64u64 << 10)] {
            let mut tuning = Tuning::default();
            tuning.wgpu.transposed_workgroups = workgroups;
            tuning.wgpu.transposed_min_chunk = min_chunk;
            let opts = DeviceOptions {
                tuning: Some(tuning),
                max_binding_bytes: cap,
                ..DeviceOptions::for_backend(BackendKind::Wgpu)
            };
            let label = format!(
                "wgpu, {rule}{}",
                if cap.is_some() {
                    ", 64 KiB bindings"
                } else {
                    ""
                }
            );
            if let Some(dev) = open_or_skip(&label, &opts) {
                out.push((label, dev));
            }
        }
    }
    out
}

#[test]
fn transposed_products_agree_under_every_chunk_rule() {
    let dense = matrix();
    let csr = CsrMatrix::from_dense(&dense).unwrap();
    let formats: [(&str, AnyMatrix); 3] = [
        ("csr", csr.clone().into()),
        (
            "csr-homogeneous",
            HomogeneousCsrMatrix::from_pattern(&csr, f16::from_f32(-1.25)).into(),
        ),
        ("macko", MackoMatrix::from_dense(&dense).unwrap().into()),
    ];
    let x = x_rows(dense.rows());
    let sx = SparseVector::from_dense(&x).unwrap();
    for (label, dev) in devices() {
        let xd = dev.upload_vector(&x).unwrap();
        let sxd = dev.upload_sparse_vector(&sx).unwrap();
        for (name, m) in &formats {
            let m = MatrixRef::from(m);
            let a = dev.upload(m).unwrap();
            let r = reference::spmv_transposed(m, &x).unwrap();
            let rs = reference::spmv_transposed_sparse_x(m, &sx).unwrap();
            for precision in [Precision::F16, Precision::F32] {
                let mut y = dev.zeros(dense.cols(), precision).unwrap();
                dev.spmv_transposed(&a, &xd, &mut y).unwrap();
                let what = format!("{name}, Aᵀ·x, x dense");
                assert_agrees(&label, &what, &r, &dev.download(&y).unwrap());
                let mut y = dev.zeros(dense.cols(), precision).unwrap();
                dev.spmv_transposed_sparse_x(&a, &sxd, &mut y).unwrap();
                let what = format!("{name}, Aᵀ·x, x sparse");
                assert_agrees(&label, &what, &rs, &dev.download(&y).unwrap());
            }
        }
    }
}
