//! Quantized values (int8 / int4 with binary16 scales, docs/FORMAT.md "Quantized values") on
//! every device: the CPU multiplies them, every batch size and output precision checked row by
//! row against the f64 reference of the exact values, padding never meeting NaN/∞ in X; a GPU
//! without their kernels refuses them with a typed error instead of a wrong answer.

mod common;

use common::*;
use half::f16;
use macko::{
    reference, BackendKind, Error, MackoMatrix, MatrixRef, Precision, QuantBits, QuantDenseMatrix,
    QuantMackoMatrix, Quantization, ScaleLayout,
};

fn quantizations() -> Vec<Quantization> {
    let mut out = Vec::new();
    for bits in [QuantBits::Int8, QuantBits::Int4] {
        for scales in [
            ScaleLayout::PerRow,
            ScaleLayout::PerGroup(8),
            ScaleLayout::PerGroup(64),
        ] {
            out.push(Quantization { bits, scales });
        }
    }
    out
}

#[test]
fn quantized_products_agree_or_are_refused_on_every_device() {
    let shapes = [
        (1, 1, 1.0),
        (31, 33, 0.3),
        (65, 1000, 0.5),
        (70, 300, 0.0),
        (9, 130, 1.0),
    ];
    for (label, dev) in devices_under_test() {
        for (i, &(rows, cols, d)) in shapes.iter().enumerate() {
            let dense = random_dense(rows, cols, d, 900 + i as u64);
            let macko = MackoMatrix::from_dense(&dense).unwrap();
            for quant in quantizations() {
                let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
                let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
                for (format, m) in [
                    ("macko", MatrixRef::from(&qm)),
                    ("dense", MatrixRef::from(&qd)),
                ] {
                    let a = match dev.upload(m) {
                        Ok(a) => a,
                        Err(Error::Unsupported { backend, what }) => {
                            assert_ne!(
                                backend,
                                BackendKind::Cpu,
                                "{label}: the CPU multiplies {what}"
                            );
                            continue;
                        }
                        Err(e) => panic!("{label}: uploading {format} {quant:?}: {e}"),
                    };
                    for batch in [1, 2, 3, 8, 17] {
                        let x = random_batch(cols, batch, (i * 31 + batch) as u64);
                        let r = reference::spmm(m, &x, batch).unwrap();
                        let x_dev = dev.upload_batch(&x, batch).unwrap();
                        for precision in [Precision::F16, Precision::F32] {
                            let mut y = dev.zeros_batch(rows, batch, precision).unwrap();
                            dev.spmm(&a, &x_dev, &mut y).unwrap();
                            let y = dev.download(&y).unwrap();
                            let what = format!("{rows}×{cols} d={d} {format} {quant:?} B={batch}");
                            assert_agrees(&label, &what, &r, &y);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn padding_never_meets_nan_or_infinity_in_quantized_macko() {
    // Row 0: entries at columns 0 and 40 (two padding entries between them, at 16 and 32).
    let mut values = vec![f16::ZERO; 2 * 48];
    values[0] = f16::from_f32(1.0);
    values[40] = f16::from_f32(-3.0);
    values[48 + 47] = f16::from_f32(0.5);
    let dense = macko::DenseMatrix::new(2, 48, values).unwrap();
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    for (label, dev) in devices_under_test() {
        for quant in quantizations() {
            let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
            let Ok(a) = dev.upload(&qm) else { continue };
            for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
                let mut x = vec![f16::from_f32(1.0); 48];
                x[16] = bad;
                x[32] = bad;
                let r = reference::spmv(MatrixRef::from(&qm), &x).unwrap();
                assert!(r.y.iter().all(|v| v.is_finite()));
                let x_dev = dev.upload_batch(&x, 1).unwrap();
                let mut y = dev.zeros_batch(2, 1, Precision::F32).unwrap();
                dev.spmm(&a, &x_dev, &mut y).unwrap();
                assert_agrees(
                    &label,
                    &format!("{quant:?} x = {bad}"),
                    &r,
                    &dev.download(&y).unwrap(),
                );
            }
        }
    }
}
