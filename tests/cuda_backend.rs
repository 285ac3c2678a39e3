//! The CUDA backend against the f64 reference (`macko::reference`), on a GPU: random matrices in
//! every format and both output precisions, edge shapes, NaN/∞ in x, non-canonical matrices,
//! the cuBLAS and cuSPARSE baselines, queued products and the CUDA-event timers.
//!
//! Without a GPU (or driver, or NVRTC) every test prints why and passes, unless
//! `MACKO_REQUIRE_BACKENDS` names `cuda`. The `edge_` tests are small and quick: run them under
//! `compute-sanitizer --tool memcheck` (the command is in kernels/README.md, "Correctness: every
//! read in bounds").
#![cfg(feature = "cuda")]

mod common;

use common::{open_or_skip, ragged_matrix, random_dense, random_x};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use half::f16;
use macko::{
    reference, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceMatrix, DeviceOptions,
    DeviceVector, Error, HostVector, MackoMatrix, MatrixRef, Precision, VendorBaseline,
};

/// The CUDA device, or `None` (with a printed line) where there is none and it is not required.
fn cuda(test: &str) -> Option<Device> {
    open_or_skip(test, &DeviceOptions::for_backend(BackendKind::Cuda))
}

/// A y of `rows` elements whose every element is NaN, so that a row the kernel never writes
/// shows up as a disagreement (a zeroed y would hide it where the reference is 0).
fn poisoned_y(dev: &Device, rows: usize, precision: Precision) -> DeviceVector {
    let ones = DenseMatrix::new(rows, 1, vec![f16::ONE; rows]).expect("column of ones");
    let a = dev.upload(&ones).expect("upload");
    let x = dev.upload_vector(&[f16::NAN]).expect("upload");
    let mut y = dev.zeros(rows, precision).expect("alloc");
    dev.spmv(&a, &x, &mut y).expect("poison product");
    let back = dev.download(&y).expect("download").to_f64();
    assert!(back.iter().all(|v| v.is_nan()), "poisoning y failed");
    y
}

/// y = A·x on the device into a poisoned y, checked row by row against `r`.
fn check(
    dev: &Device,
    what: &str,
    a: &DeviceMatrix,
    x: &DeviceVector,
    r: &reference::Reference,
    precision: Precision,
) {
    let mut y = poisoned_y(dev, a.rows(), precision);
    dev.spmv(a, x, &mut y)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = dev.download(&y).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got.len(), r.y.len(), "{what}: length of y");
    if let Some((row, got, want, tol)) = r.first_disagreement(&got.to_f64(), precision) {
        panic!(
            "{what} ({precision:?}): row {row} is {got}, reference {want} (tolerance {tol:e}, {} terms)",
            r.terms[row]
        );
    }
}

/// Multiplies `dense` as MACKO, CSR and dense with macko's kernels, both output precisions.
fn check_formats(dev: &Device, name: &str, dense: &DenseMatrix, x: &[f16]) {
    let macko = MackoMatrix::from_dense(dense).expect("encode");
    let csr = CsrMatrix::from_dense(dense).expect("encode");
    let x_dev = dev.upload_vector(x).expect("upload x");
    let cases: [(&str, MatrixRef, reference::Reference); 3] = [
        (
            "macko",
            (&macko).into(),
            reference::spmv_macko(&macko, x).expect("reference"),
        ),
        (
            "csr",
            (&csr).into(),
            reference::spmv_csr(&csr, x).expect("reference"),
        ),
        (
            "dense",
            dense.into(),
            reference::spmv_dense(dense, x).expect("reference"),
        ),
    ];
    for (format, m, r) in cases {
        let a = dev.upload(m).expect("upload");
        for precision in [Precision::F16, Precision::F32] {
            check(
                dev,
                &format!("{name} as {format}"),
                &a,
                &x_dev,
                &r,
                precision,
            );
        }
    }
}

#[test]
fn random_matrices_agree_with_the_reference() {
    let Some(dev) = cuda("random matrices") else {
        return;
    };
    let shapes = [
        (1, 1),
        (3, 7),
        (17, 33),
        (64, 4096),
        (100, 1000),
        (333, 777),
        (1000, 3),
        (5, 20000),
        (48, 12288),
    ];
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        for (j, &d) in [0.0, 0.05, 0.3, 0.5, 0.9, 1.0].iter().enumerate() {
            let seed = (100 * i + j) as u64;
            let dense = random_dense(rows, cols, d, seed);
            check_formats(
                &dev,
                &format!("{rows}×{cols} d={d}"),
                &dense,
                &random_x(cols, seed),
            );
        }
    }
}

#[test]
fn edge_degenerate_shapes() {
    let Some(dev) = cuda("degenerate shapes") else {
        return;
    };
    for (rows, cols) in [(0, 0), (0, 9), (9, 0), (1, 1), (1, 8), (8, 1), (2, 9)] {
        for d in [0.0, 1.0] {
            let dense = random_dense(rows, cols, d, 7);
            check_formats(
                &dev,
                &format!("{rows}×{cols} d={d}"),
                &dense,
                &random_x(cols, 7),
            );
        }
    }
}

#[test]
fn edge_ragged_rows_start_and_end_inside_groups() {
    let Some(dev) = cuda("ragged rows") else {
        return;
    };
    // 123 rows: not a multiple of the 16 warps of a block; 300 and 301 columns: dense rows at
    // every 16-byte misalignment.
    for (rows, cols) in [(123, 300), (123, 301), (17, 45), (31, 1000)] {
        let dense = ragged_matrix(rows, cols);
        check_formats(
            &dev,
            &format!("ragged {rows}×{cols}"),
            &dense,
            &random_x(cols, 3),
        );
    }
}

#[test]
fn edge_rows_beyond_one_pass_of_the_grid() {
    let Some(dev) = cuda("many rows") else {
        return;
    };
    // More rows than warps resident on any current GPU (a warp walks several rows), and empty
    // rows among them.
    let dense = random_dense(40_001, 9, 0.3, 11);
    check_formats(&dev, "40001×9", &dense, &random_x(9, 11));
}

#[test]
fn edge_x_too_large_for_shared_memory() {
    let Some(dev) = cuda("x in global memory") else {
        return;
    };
    // 70000 columns: x staged as f32 would take about 280 KB, more than a block may have, so
    // the sparse kernels read x from global memory.
    for d in [0.01, 0.5, 1.0] {
        let dense = random_dense(3, 70_000, d, 5);
        check_formats(
            &dev,
            &format!("3×70000 d={d}"),
            &dense,
            &random_x(70_000, 5),
        );
    }
}

#[test]
fn edge_long_rows_span_many_batches() {
    let Some(dev) = cuda("long rows") else {
        return;
    };
    // One row of 40000 dense columns: 5000 groups, 40 batches of a warp.
    let dense = random_dense(2, 40_000, 1.0, 8);
    check_formats(&dev, "2×40000", &dense, &random_x(40_000, 8));
}

#[test]
fn edge_rows_of_many_lengths_in_one_range_of_entries() {
    // Matrices the flat kernel takes (every row of at least 9 entries; run with
    // MACKO_TUNING="cuda.flat=on cuda.flat_snap=0" to cut rows inside): many short rows per
    // range, rows longer than a range, and rows of mixed lengths, both output precisions.
    let Some(dev) = cuda("rows of many lengths") else {
        return;
    };
    for (rows, cols, d, seed) in [
        (3000, 300, 0.12, 21),
        (700, 4096, 0.05, 22),
        (40, 20_000, 0.5, 23),
        (1500, 2500, 0.9, 24),
    ] {
        let dense = random_dense(rows, cols, d, seed);
        check_formats(
            &dev,
            &format!("{rows}×{cols} d={d}"),
            &dense,
            &random_x(cols, seed),
        );
    }
    // Row lengths from 9 entries to several thousand, interleaved.
    let (rows, cols) = (600, 3000);
    let mut values = vec![f16::ZERO; rows * cols];
    for r in 0..rows {
        let kept = [9, 10, 17, 250, 2999, 40][r % 6];
        for k in 0..kept {
            let c = (k * cols / kept + r) % cols;
            values[r * cols + c] = f16::from_f32(((r * 7 + k) % 13) as f32 / 8.0 - 0.75);
        }
    }
    let dense = DenseMatrix::new(rows, cols, values).expect("dense");
    check_formats(&dev, "mixed row lengths", &dense, &random_x(cols, 25));
    // NaN and ±∞ in x under columns every row leaves zero: the padding of long gaps.
    let dense = random_dense(400, 5000, 0.2, 26);
    let macko = MackoMatrix::from_dense(&dense).expect("encode");
    let mut x = random_x(5000, 27);
    for (c, xc) in x.iter_mut().enumerate() {
        if (0..dense.rows()).all(|r| dense.row(r)[c].to_bits() & 0x7fff == 0) {
            *xc = [f16::NAN, f16::INFINITY][c % 2];
        }
    }
    let r = reference::spmv_macko(&macko, &x).expect("reference");
    let a = dev.upload(&macko).expect("upload");
    let x_dev = dev.upload_vector(&x).expect("upload");
    for precision in [Precision::F16, Precision::F32] {
        check(&dev, "400×5000, NaN/∞ x", &a, &x_dev, &r, precision);
    }
}

/// A valid but non-canonical MACKO matrix: zero-valued entries with any code (not only 15),
/// −0.0 values, rows that end with zeros, empty rows, and N a multiple of 8 or not.
fn non_canonical(seed: u64, rows: usize) -> MackoMatrix {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut row_ptr = vec![0u32];
    let (mut values, mut gaps) = (Vec::new(), Vec::new());
    let mut cols = 1;
    for _ in 0..rows {
        let n = [0, 1, 7, 8, 9, 15, 16, 17, 40, 300][rng.random_range(0..10)];
        let mut column = 0usize;
        for i in 0..n {
            let g: u8 = rng.random_range(0..16);
            column += g as usize + usize::from(i > 0);
            gaps.push(g);
            values.push(match rng.random_range(0..6) {
                0 => f16::ZERO,
                1 => f16::NEG_ZERO,
                _ => f16::from_f32(rng.random_range(-2.0..2.0)),
            });
        }
        cols = cols.max(column + 1 + rng.random_range(0..3));
        row_ptr.push(values.len() as u32);
    }
    let padded = values.len().div_ceil(8) * 8;
    values.resize(padded, f16::ZERO);
    gaps.resize(padded, 0);
    let codes = gaps.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
    MackoMatrix::from_parts(rows, cols, row_ptr, values, codes).expect("valid by construction")
}

#[test]
fn edge_non_canonical_matrices() {
    let Some(dev) = cuda("non-canonical") else {
        return;
    };
    for seed in 0..8 {
        let m = non_canonical(seed, 1 + 37 * seed as usize);
        let x = random_x(m.cols(), seed);
        let r = reference::spmv_macko(&m, &x).expect("reference");
        let a = dev.upload(&m).expect("upload");
        let x_dev = dev.upload_vector(&x).expect("upload");
        for precision in [Precision::F16, Precision::F32] {
            check(
                &dev,
                &format!("non-canonical #{seed}"),
                &a,
                &x_dev,
                &r,
                precision,
            );
        }
    }
}

#[test]
fn edge_padding_never_contributes_even_with_nan_and_infinity_in_x() {
    let Some(dev) = cuda("NaN/∞ under padding") else {
        return;
    };
    let dense = ragged_matrix(123, 300);
    let macko = MackoMatrix::from_dense(&dense).expect("encode");
    assert!(macko.values().iter().any(|v| v.to_bits() == 0));
    let csr = CsrMatrix::from_dense(&dense).expect("encode");
    // NaN or ±∞ exactly in the columns that are zero in every row.
    let mut x = random_x(300, 4);
    for (c, xc) in x.iter_mut().enumerate() {
        if (0..dense.rows()).all(|r| dense.row(r)[c].to_bits() & 0x7fff == 0) {
            *xc = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][c % 3];
        }
    }
    assert!(x.iter().any(|v| !v.is_finite()));
    let x_dev = dev.upload_vector(&x).expect("upload");
    for (format, m, r) in [
        (
            "macko",
            MatrixRef::from(&macko),
            reference::spmv_macko(&macko, &x).expect("reference"),
        ),
        (
            "csr",
            MatrixRef::from(&csr),
            reference::spmv_csr(&csr, &x).expect("reference"),
        ),
    ] {
        assert!(r.y.iter().all(|v| v.is_finite()));
        let a = dev.upload(m).expect("upload");
        for precision in [Precision::F16, Precision::F32] {
            check(
                &dev,
                &format!("{format}, NaN/∞ x"),
                &a,
                &x_dev,
                &r,
                precision,
            );
        }
    }
    // Non-canonical zeros (any code, −0.0) too: every column poisoned.
    let m = non_canonical(99, 50);
    let poison = vec![f16::NAN; m.cols()];
    let r = reference::spmv_macko(&m, &poison).expect("reference");
    let a = dev.upload(&m).expect("upload");
    let x_dev = dev.upload_vector(&poison).expect("upload");
    check(&dev, "non-canonical, NaN x", &a, &x_dev, &r, Precision::F32);
}

#[test]
fn nan_and_infinity_under_nonzeros_propagate() {
    let Some(dev) = cuda("NaN/∞ under non-zeros") else {
        return;
    };
    let dense = random_dense(40, 70, 0.5, 5);
    let mut x = random_x(70, 5);
    x[3] = f16::NAN;
    x[10] = f16::INFINITY;
    x[11] = f16::NEG_INFINITY;
    check_formats(&dev, "NaN/∞ under non-zeros", &dense, &x);
}

/// Whether cuSPARSE multiplies this f16 matrix into an f32 y: the one vendor limitation the
/// backend reports as an error instead of a product (it says CUSPARSE_STATUS_NOT_SUPPORTED).
fn cusparse_takes_f32_y(dev: &Device, a: &DeviceMatrix, x: &DeviceVector) -> bool {
    let mut y = dev.zeros(a.rows(), Precision::F32).expect("alloc");
    match dev.spmv(a, x, &mut y) {
        Ok(()) => true,
        Err(Error::Backend { message, .. }) if message.contains("NOT_SUPPORTED") => false,
        Err(e) => panic!("cuSPARSE with an f32 y: {e}"),
    }
}

#[test]
fn vendor_baselines_agree_with_the_reference() {
    let Some(dev) = cuda("vendor baselines") else {
        return;
    };
    let shapes = [
        (0, 0),
        (0, 5),
        (5, 0),
        (1, 1),
        (33, 77),
        (256, 4096),
        (1000, 1001),
    ];
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        for d in [0.0, 0.1, 0.5, 1.0] {
            let dense = random_dense(rows, cols, d, i as u64);
            let csr = CsrMatrix::from_dense(&dense).expect("encode");
            let x = random_x(cols, i as u64);
            let x_dev = dev.upload_vector(&x).expect("upload");
            let name = format!("{rows}×{cols} d={d}");
            let cublas = dev
                .upload_vendor(&dense, VendorBaseline::CublasDense)
                .unwrap_or_else(|e| panic!("cuBLAS upload {name}: {e}"));
            let cusparse = dev
                .upload_vendor(&csr, VendorBaseline::CusparseCsr)
                .unwrap_or_else(|e| panic!("cuSPARSE upload {name}: {e}"));
            let r_dense = reference::spmv_dense(&dense, &x).expect("reference");
            let r_csr = reference::spmv_csr(&csr, &x).expect("reference");
            for precision in [Precision::F16, Precision::F32] {
                check(
                    &dev,
                    &format!("cuBLAS {name}"),
                    &cublas,
                    &x_dev,
                    &r_dense,
                    precision,
                );
                if precision == Precision::F32 && !cusparse_takes_f32_y(&dev, &cusparse, &x_dev) {
                    println!("cuSPARSE {name}: no f16 × f32 SpMV in this cuSPARSE, skipped");
                    continue;
                }
                check(
                    &dev,
                    &format!("cuSPARSE {name}"),
                    &cusparse,
                    &x_dev,
                    &r_csr,
                    precision,
                );
            }
        }
    }
    // A baseline refuses the wrong format with an error, not a panic.
    let m = MackoMatrix::from_dense(&random_dense(4, 4, 0.5, 1)).expect("encode");
    assert!(dev.upload_vendor(&m, VendorBaseline::CublasDense).is_err());
}

#[test]
fn many_products_queued_before_one_wait() {
    let Some(dev) = cuda("queued products") else {
        return;
    };
    let cases: Vec<(MackoMatrix, Vec<f16>)> = (0..24)
        .map(|s| {
            let (rows, cols) = (50 + 37 * s, 90 + 101 * s);
            let dense = random_dense(rows, cols, 0.4, s as u64);
            (
                MackoMatrix::from_dense(&dense).expect("encode"),
                random_x(cols, s as u64),
            )
        })
        .collect();
    let mut queued = Vec::new();
    for (m, x) in &cases {
        let a = dev.upload(m).expect("upload");
        let x_dev = dev.upload_vector(x).expect("upload");
        let mut y = dev.zeros(m.rows(), Precision::F32).expect("alloc");
        dev.spmv(&a, &x_dev, &mut y).expect("queue");
        queued.push((a, x_dev, y));
    }
    dev.synchronize().expect("synchronize");
    for ((m, x), (_, _, y)) in cases.iter().zip(&queued) {
        let r = reference::spmv_macko(m, x).expect("reference");
        let got = dev.download(y).expect("download");
        assert!(
            r.first_disagreement(&got.to_f64(), Precision::F32)
                .is_none(),
            "queued product of {}×{}",
            m.rows(),
            m.cols()
        );
    }
}

#[test]
fn chained_f16_output_is_a_valid_input() {
    let Some(dev) = cuda("chained products") else {
        return;
    };
    let a = MackoMatrix::from_dense(&random_dense(64, 96, 0.5, 1)).expect("encode");
    let b = MackoMatrix::from_dense(&random_dense(48, 64, 0.5, 2)).expect("encode");
    let x = random_x(96, 1);
    let (a_dev, b_dev) = (
        dev.upload(&a).expect("upload"),
        dev.upload(&b).expect("upload"),
    );
    let x_dev = dev.upload_vector(&x).expect("upload");
    let mut y1 = dev.zeros(64, Precision::F16).expect("alloc");
    dev.spmv(&a_dev, &x_dev, &mut y1).expect("first product");
    let y1_host = match dev.download(&y1).expect("download") {
        HostVector::F16(v) => v,
        other => panic!("y1 came back as {other:?}"),
    };
    let r = reference::spmv_macko(&b, &y1_host).expect("reference");
    check(&dev, "chained", &b_dev, &y1, &r, Precision::F32);
}

#[test]
fn timers_are_cuda_events() {
    let Some(dev) = cuda("timers") else {
        return;
    };
    assert_eq!(dev.timer(), "cuda events");
    let dense = random_dense(512, 1024, 0.3, 3);
    let m = MackoMatrix::from_dense(&dense).expect("encode");
    let copies: Vec<DeviceMatrix> = (0..3).map(|_| dev.upload(&m).expect("upload")).collect();
    let refs: Vec<&DeviceMatrix> = copies.iter().collect();
    let x = dev.upload_vector(&random_x(1024, 3)).expect("upload");
    let mut y = dev.zeros(512, Precision::F16).expect("alloc");
    let times = dev.time_spmv(&refs, &x, &mut y, 3, 20).expect("time");
    assert_eq!(times.len(), 20);
    assert!(
        times.iter().all(|t| t.is_finite() && *t > 0.0 && *t < 1.0),
        "{times:?}"
    );
    // The timed products computed the right thing too.
    let r = reference::spmv_macko(&m, &random_x(1024, 3)).expect("reference");
    let got = dev.download(&y).expect("download").to_f64();
    assert!(r.first_disagreement(&got, Precision::F16).is_none());
    // Vendor baselines go through the same timer.
    let cublas = dev
        .upload_vendor(&dense, VendorBaseline::CublasDense)
        .expect("cuBLAS");
    assert_eq!(
        dev.time_spmv(&[&cublas], &x, &mut y, 2, 5)
            .expect("time")
            .len(),
        5
    );
    let ceiling = dev
        .stream_read(m.bytes(), 2, 10)
        .expect("stream read")
        .expect("the CUDA backend has a streaming-read kernel");
    assert_eq!(ceiling.len(), 10);
    assert!(ceiling.iter().all(|t| t.is_finite() && *t > 0.0));
}

#[test]
fn unavailable_cuda_says_why() {
    match Device::new(BackendKind::Cuda) {
        Ok(dev) => assert!(dev.describe().contains("sm_"), "{}", dev.describe()),
        Err(Error::Unavailable { reason, .. }) => {
            println!("cuda unavailable: {reason}");
            assert!(!reason.is_empty());
        }
        Err(other) => panic!("opening CUDA must fail only as Unavailable, got: {other}"),
    }
}
