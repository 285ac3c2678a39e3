//! 2:4 structured sparsity (docs/FORMAT.md, "2:4 structured sparsity") on every device: every
//! backend multiplies it (the CPU, wgpu on both kernel paths, CUDA), every batch size and output
//! precision checked row by row against the f64 reference, zeros (a group's fill, padding past
//! the last column) never meeting NaN/∞ in X. No backend may refuse it.

mod common;

use common::*;
use half::f16;
use macko::{reference, DenseMatrix, Device, DeviceMatrix, MatrixRef, Precision, Sparse24Matrix};

/// The matrix on the device: every backend multiplies 2:4 (a refusal fails the test).
fn upload(label: &str, dev: &Device, m: &Sparse24Matrix) -> DeviceMatrix {
    dev.upload(m)
        .unwrap_or_else(|e| panic!("{label}: uploading a 2:4 matrix: {e}"))
}

/// Y = A·X on `dev` in both output precisions, checked against the reference.
fn check_batch(label: &str, dev: &Device, a: &DeviceMatrix, m: &Sparse24Matrix, x: &[f16]) {
    let batch = x.len() / m.cols().max(1);
    let r = reference::spmm(MatrixRef::from(m), x, batch).unwrap();
    let x_dev = dev.upload_batch(x, batch).unwrap();
    for precision in [Precision::F16, Precision::F32] {
        let mut y = dev.zeros_batch(m.rows(), batch, precision).unwrap();
        dev.spmm(a, &x_dev, &mut y).unwrap();
        let what = format!("{}×{} 2:4 B={batch}", m.rows(), m.cols());
        assert_agrees(label, &what, &r, &dev.download(&y).unwrap());
    }
}

/// (rows, columns, density): columns not a multiple of 4 (padding in every row's last group),
/// empty rows, one column, and rows of 282 and 65 words of 8 groups (lanes holding 8–9 and 2–3
/// words, so that the CUDA kernels' batches of words end part-way).
const SHAPES: [(usize, usize, f64); 9] = [
    (1, 1, 1.0),
    (5, 6, 0.8),
    (31, 33, 0.3),
    (65, 1000, 0.5),
    (70, 300, 0.0),
    (9, 130, 1.0),
    (40, 8, 0.6),
    (3, 9000, 0.5),
    (2, 2056, 0.7),
];

#[test]
fn sparse24_products_agree_on_every_device() {
    for (label, dev) in devices_under_test() {
        for (i, &(rows, cols, d)) in SHAPES.iter().enumerate() {
            let dense = random_dense(rows, cols, d, 2400 + i as u64);
            let m = Sparse24Matrix::prune_from_dense(&dense).unwrap();
            let a = upload(&label, &dev, &m);
            assert_eq!(a.bytes(), m.storage_bytes() as u64, "{label}");
            for batch in [1, 2, 3, 8, 17] {
                let x = random_batch(cols, batch, (i * 31 + batch) as u64);
                check_batch(&label, &dev, &a, &m, &x);
            }
        }
    }
}

#[test]
fn zeros_never_meet_nan_or_infinity_in_x() {
    // Row 0 [1, 0, 0, 0 | 0, 2]: group 0 stores 1 and a zero fill at column 1, group 1 a zero
    // at column 4, 2 at column 5, and padding (columns 6, 7, past x). Row 1 is all zero.
    let mut values = vec![f16::ZERO; 2 * 6];
    values[0] = f16::from_f32(1.0);
    values[5] = f16::from_f32(2.0);
    let m = Sparse24Matrix::from_dense(&DenseMatrix::new(2, 6, values).unwrap()).unwrap();
    let stored: Vec<usize> = m.row_entries(0).map(|(c, _)| c).collect();
    assert_eq!(stored, [0, 1, 4, 5], "the fill the test aims at");
    for (label, dev) in devices_under_test() {
        let a = upload(&label, &dev, &m);
        for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
            let mut x = vec![f16::from_f32(1.0); 6];
            x[1] = bad;
            x[2] = bad;
            x[4] = bad;
            let r = reference::spmv(MatrixRef::from(&m), &x).unwrap();
            assert_eq!(r.y, [3.0, 0.0], "the reference masks zeros");
            for batch in [1, 3] {
                let xs: Vec<f16> = x.iter().copied().cycle().take(6 * batch).collect();
                check_batch(&format!("{label}, x = {bad}"), &dev, &a, &m, &xs);
            }
        }
        // A NaN under a stored non-zero does reach y, as in every format.
        let mut x = vec![f16::from_f32(1.0); 6];
        x[5] = f16::NAN;
        check_batch(&format!("{label}, NaN under a value"), &dev, &a, &m, &x);
    }
}

/// Columns a multiple of 8: the GPU kernels read x in 16-byte words and select each entry's
/// half out of them. Row 0 repeats [1, 0, 0, 0 | 0, 0, 0, 0 | 0, 2, 0, 0 | 3, -4, 0, 0] (group
/// fill, an all-zero group, fill after a value, two values), row 1 is all zero; x is NaN under
/// every zero of row 0, so any zero that meets its x poisons y.
fn check_zeros_under_nan_in_words(devices: &[(String, Device)]) {
    let pattern = [
        1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0, -4.0, 0.0, 0.0,
    ];
    for cols in [16, 40, 264] {
        let mut values = vec![f16::ZERO; 2 * cols];
        for c in 0..cols {
            values[c] = f16::from_f32(pattern[c % 16]);
        }
        let m = Sparse24Matrix::from_dense(&DenseMatrix::new(2, cols, values.clone()).unwrap())
            .unwrap();
        let x: Vec<f16> = (0..cols)
            .map(|c| {
                if values[c] == f16::ZERO {
                    f16::NAN
                } else {
                    f16::from_f32(1.0)
                }
            })
            .collect();
        let r = reference::spmv(MatrixRef::from(&m), &x).unwrap();
        assert!(
            r.y[0].is_finite() && r.y[1] == 0.0,
            "the reference masks zeros"
        );
        for (label, dev) in devices {
            let a = upload(label, dev, &m);
            for batch in [1, 3, 8] {
                let xs: Vec<f16> = x.iter().copied().cycle().take(cols * batch).collect();
                check_batch(&format!("{label}, {cols} columns"), dev, &a, &m, &xs);
            }
        }
    }
}

#[test]
fn zeros_never_meet_nan_in_x_read_in_words() {
    check_zeros_under_nan_in_words(&devices_under_test());
}

/// CUDA's single-vector kernel on the CUDA cores reads x from a copy in shared memory where it
/// fits; forced to read it from global memory (`cuda.s24_x=global`) the products agree as
/// well.
#[cfg(feature = "cuda")]
#[test]
fn cuda_products_agree_with_x_read_from_global_memory() {
    use macko::backend::cuda::tuning::{CudaTuning, XPlace};
    use macko::{BackendKind, DeviceOptions};
    let mut opts = DeviceOptions::for_backend(BackendKind::Cuda);
    opts.tuning.get_or_insert_with(Default::default).cuda = CudaTuning {
        s24_x: Some(XPlace::Global),
        s24_mma: Some(false),
        ..CudaTuning::default()
    };
    let label = "cuda, x in global memory".to_string();
    let Some(dev) = open_or_skip(&label, &opts) else {
        return;
    };
    for (i, &(rows, cols, d)) in SHAPES.iter().enumerate() {
        let dense = random_dense(rows, cols, d, 2400 + i as u64);
        let m = Sparse24Matrix::prune_from_dense(&dense).unwrap();
        let a = upload(&label, &dev, &m);
        check_batch(&label, &dev, &a, &m, &random_batch(cols, 1, i as u64));
    }
    check_zeros_under_nan_in_words(&[(label, dev)]);
}

/// CUDA on both of its 2:4 paths: the sparse tensor cores (the default where the GPU has them,
/// `mma.sp` on tiles of 16 rows) and the CUDA cores (`cuda.s24_mma=off`, the path of GPUs older
/// than compute capability 8.0): every shape and batch (odd counts, one and two n-tiles of the
/// tensor cores, a chunk past 16) against the reference, wide rows whose quads a block's warps
/// split, and zeros (group fill, padding) never meeting NaN or ±∞ of x, which on the tensor
/// cores sends the quads holding such x to the exact path.
#[cfg(feature = "cuda")]
#[test]
fn cuda_products_agree_on_tensor_and_cuda_cores() {
    use macko::backend::cuda::tuning::CudaTuning;
    use macko::{BackendKind, DeviceOptions};
    for (what, s24_mma) in [("sparse tensor cores", None), ("CUDA cores", Some(false))] {
        let mut opts = DeviceOptions::for_backend(BackendKind::Cuda);
        opts.tuning.get_or_insert_with(Default::default).cuda = CudaTuning {
            s24_mma,
            ..CudaTuning::default()
        };
        let label = format!("cuda, {what}");
        let Some(dev) = open_or_skip(&label, &opts) else {
            return;
        };
        let wide = [(300, 1024, 0.5), (64, 4096, 0.4), (48, 136, 0.9)];
        for (i, &(rows, cols, d)) in SHAPES.iter().chain(&wide).enumerate() {
            let dense = random_dense(rows, cols, d, 2500 + i as u64);
            let m = Sparse24Matrix::prune_from_dense(&dense).unwrap();
            let a = upload(&label, &dev, &m);
            for batch in [1, 2, 5, 8, 9, 16, 17] {
                let x = random_batch(cols, batch, (i * 37 + batch) as u64);
                check_batch(&label, &dev, &a, &m, &x);
            }
        }
        // A NaN and an ∞ under stored values of one quad each in a wide matrix: those quads
        // take the exact path, the others the tensor cores; y is NaN or ∞ where the reference
        // says so, nowhere else.
        let dense = random_dense(40, 1024, 0.6, 2600);
        let m = Sparse24Matrix::prune_from_dense(&dense).unwrap();
        let a = upload(&label, &dev, &m);
        let mut x = random_batch(1024, 3, 2601);
        x[1024 + 300] = f16::NAN;
        x[2 * 1024 + 7] = f16::INFINITY;
        check_batch(&format!("{label}, NaN and ∞ in x"), &dev, &a, &m, &x);
        check_zeros_under_nan_in_words(&[(label, dev)]);
    }
}
