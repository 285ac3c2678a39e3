//! Every linear weight of a real checkpoint, pruned, encoded and multiplied on every available
//! backend with activation-like inputs, each product checked against the f64 reference
//! ([`check_layer`], or [`check_product`] for the same matrix with quantized values), and how far
//! the stored layer's output is from the original and the pruned f16 layer's
//! ([`output_error`]): the code behind the `pruned_checkpoint` example and the real-model test.
//!
//! ```no_run
//! use macko::checkpoint::{products, Checkpoint};
//!
//! let ckpt = Checkpoint::open("model.safetensors")?;
//! let layers = products::prune_linear_weights(&ckpt, 0.5)?;
//! let devices = products::available_devices();
//! for layer in &layers {
//!     let x = products::activation_like(layer.macko.cols(), 7);
//!     for check in products::check_layer(layer, &x, &devices, 9)? {
//!         assert_eq!(check.disagreeing_rows, 0, "{}", check.device);
//!     }
//! }
//! # Ok::<(), macko::checkpoint::CheckpointError>(())
//! ```

use half::f16;
use macko_format::{reference, DenseMatrix, MackoMatrix, MatrixRef};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::file::{Checkpoint, Result};
use crate::{prune, Device, Precision};

/// One linear weight of a checkpoint, before and after pruning.
#[derive(Debug, Clone)]
pub struct LinearLayer {
    /// The tensor's name.
    pub name: String,
    /// The source dtype (`F32`, `BF16`, `F16`).
    pub source_dtype: String,
    /// Bytes of the tensor in the checkpoint.
    pub source_bytes: u64,
    /// The weight rounded to binary16, not pruned.
    pub dense: DenseMatrix,
    /// The weight pruned per row and encoded.
    pub macko: MackoMatrix,
    /// Non-zeros kept.
    pub nonzeros: usize,
}

impl LinearLayer {
    /// Bytes as dense binary16.
    pub fn dense_f16_bytes(&self) -> u64 {
        self.dense.bytes()
    }

    /// Bytes as MACKO-16-4.
    pub fn macko_bytes(&self) -> u64 {
        self.macko.bytes()
    }
}

/// Every linear weight ([`super::file::TensorEntry::is_linear_weight`]) of the checkpoint, rounded to
/// binary16, pruned per row to `density` ([`prune::magnitude_per_row`]) and encoded.
pub fn prune_linear_weights(ckpt: &Checkpoint, density: f64) -> Result<Vec<LinearLayer>> {
    prune::check_density(density)?;
    ckpt.linear_weights()
        .into_iter()
        .map(|entry| {
            let dense = ckpt.dense(&entry.name)?;
            let pruned = prune::magnitude_per_row(&dense, density)?;
            let nonzeros = pruned.count_nonzero();
            let macko = MackoMatrix::from_dense(&pruned)?;
            Ok(LinearLayer {
                name: entry.name.clone(),
                source_dtype: entry.dtype.clone(),
                source_bytes: entry.bytes,
                dense,
                macko,
                nonzeros,
            })
        })
        .collect()
}

/// An input vector that looks like the activations a linear layer sees after a layer norm:
/// standard normal values, with one feature in 64 an outlier eight times larger (transformer
/// activations have a few such channels), seeded.
pub fn activation_like(len: usize, seed: u64) -> Vec<f16> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_ac71);
    (0..len)
        .map(|i| {
            // Box–Muller: two uniforms in (0, 1] → one standard normal.
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random::<f64>();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let scale = if i % 64 == 17 { 8.0 } else { 1.0 };
            f16::from_f64(z * scale)
        })
        .collect()
}

/// Every backend that can be opened here (software wgpu adapters included), in the order
/// CUDA, wgpu, CPU.
pub fn available_devices() -> Vec<Device> {
    Device::available()
        .into_iter()
        .filter(|s| s.device.is_ok())
        .filter_map(|s| Device::new(s.backend).ok())
        .collect()
}

/// One product of one layer on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductCheck {
    /// The device, as [`Device::describe`] puts it.
    pub device: String,
    /// Largest |y − reference| over the rows (f32 output).
    pub max_abs_error: f64,
    /// Largest |y − reference| / tolerance over the rows: at most 1 where every row agrees.
    pub worst_error_over_tolerance: f64,
    /// Rows outside the tolerance of [`reference::tolerance`].
    pub disagreeing_rows: usize,
    /// Median seconds per product (the device's own timer).
    pub seconds: f64,
}

/// Multiplies the layer's MACKO matrix by `x` on each device (f32 output), compares every row
/// with the f64 reference product of the stored weights, and times `timed_runs` products (after
/// two untimed ones) for the median. [`check_product`] with `layer.macko`.
pub fn check_layer(
    layer: &LinearLayer,
    x: &[f16],
    devices: &[Device],
    timed_runs: usize,
) -> Result<Vec<ProductCheck>> {
    check_product((&layer.macko).into(), x, devices, timed_runs)
}

/// Multiplies `stored` (any format: a layer's MACKO matrix, or its values quantized) by `x` on
/// each device (f32 output), compares every row with the f64 reference product of the stored
/// matrix (for quantized values, the exact `scale · q`: the dequantized matrix), and times
/// `timed_runs` products (after two untimed ones) for the median.
pub fn check_product(
    stored: MatrixRef<'_>,
    x: &[f16],
    devices: &[Device],
    timed_runs: usize,
) -> Result<Vec<ProductCheck>> {
    let reference = reference::spmv(stored, x)?;
    let rows = stored.rows();
    let mut out = Vec::with_capacity(devices.len());
    for dev in devices {
        let a = dev.upload(stored)?;
        let x_dev = dev.upload_vector(x)?;
        let mut y_dev = dev.zeros(rows, Precision::F32)?;
        dev.spmv(&a, &x_dev, &mut y_dev)?;
        let y = dev.download(&y_dev)?.to_f64();
        if y.len() != rows {
            return Err(crate::Error::ShapeMismatch {
                what: "downloaded y (matrix rows)",
                expected: rows,
                found: y.len(),
            }
            .into());
        }
        let mut max_abs_error = 0.0f64;
        let mut worst = 0.0f64;
        let mut disagreeing_rows = 0;
        for (r, (&got, &want)) in y.iter().zip(&reference.y).enumerate() {
            let err = (got - want).abs();
            let tol = reference.tolerance(r, Precision::F32);
            max_abs_error = max_abs_error.max(err);
            let ratio = if tol > 0.0 {
                err / tol
            } else if err > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            worst = worst.max(ratio);
            if !reference.agrees(r, got, Precision::F32) {
                disagreeing_rows += 1;
            }
        }
        let mut times = dev.time_spmv(&[&a], &x_dev, &mut y_dev, 2, timed_runs.max(1))?;
        times.sort_by(f64::total_cmp);
        out.push(ProductCheck {
            device: dev.describe(),
            max_abs_error,
            worst_error_over_tolerance: worst,
            disagreeing_rows,
            seconds: times.get(times.len() / 2).copied().unwrap_or(f64::NAN),
        });
    }
    Ok(out)
}

/// How much pruning changes the layer's output for `x`: ‖W_pruned·x − W·x‖ / ‖W·x‖ in f64 (0
/// when nothing was pruned). This is the cost of pruning, not an error of any backend.
pub fn pruning_change(layer: &LinearLayer, x: &[f16]) -> Result<f64> {
    Ok(output_error(layer, (&layer.macko).into(), x)?.vs_dense)
}

/// How far a stored layer's output is from the layer's f16 outputs, for one input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutputError {
    /// ‖y − y_dense‖ / ‖y_dense‖, y_dense = W·x with the original (unpruned) f16 weights:
    /// everything the stored matrix loses, pruning and quantization together.
    pub vs_dense: f64,
    /// ‖y − y_pruned‖ / ‖y_pruned‖, y_pruned = W_pruned·x with the pruned f16 weights
    /// (`layer.macko`): what storing the values differently (quantizing) adds; 0 for
    /// `layer.macko` itself.
    pub vs_pruned: f64,
}

/// The relative output errors of `stored`, a matrix made from the layer (its MACKO matrix, or
/// that matrix's values quantized), for input `x`: y = stored·x against the dense and the
/// pruned f16 products, all three exact f64 references ([`reference::spmv`]), so the figures
/// are the format's, not any backend's. A relative error falls back to the absolute one when
/// the f16 product is all zeros. A shape other than the layer's is an error naming both.
pub fn output_error(layer: &LinearLayer, stored: MatrixRef<'_>, x: &[f16]) -> Result<OutputError> {
    let (rows, cols) = (layer.dense.rows(), layer.dense.cols());
    if stored.shape() != (rows, cols) {
        return Err(macko_format::FormatError::Container {
            context: format!("output error of {}", layer.name),
            message: format!(
                "the stored matrix is {}×{} but the layer is {rows}×{cols}",
                stored.rows(),
                stored.cols()
            ),
        }
        .into());
    }
    let y = reference::spmv(stored, x)?.y;
    let dense = reference::spmv_dense(&layer.dense, x)?.y;
    let pruned = reference::spmv_macko(&layer.macko, x)?.y;
    Ok(OutputError {
        vs_dense: relative_distance(&y, &dense),
        vs_pruned: relative_distance(&y, &pruned),
    })
}

/// ‖y − want‖ / ‖want‖ (Euclidean norms, f64), or ‖y − want‖ where `want` is all zeros.
fn relative_distance(y: &[f64], want: &[f64]) -> f64 {
    let (diff, norm) = y
        .iter()
        .zip(want)
        .fold((0.0f64, 0.0f64), |(diff, norm), (a, b)| {
            (diff + (a - b) * (a - b), norm + b * b)
        });
    if norm > 0.0 {
        (diff / norm).sqrt()
    } else {
        diff.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macko_format::{QuantMackoMatrix, Quantization};

    /// A 4×32 layer with no zero weight, pruned to half its weights.
    fn layer() -> LinearLayer {
        let values = (0..4 * 32)
            .map(|i| f16::from_f32(((i * 7919 % 613) as f32 - 306.5) / 200.0))
            .collect();
        let dense = DenseMatrix::new(4, 32, values).expect("weights");
        let pruned = prune::magnitude_per_row(&dense, 0.5).expect("prune");
        LinearLayer {
            name: "layer.weight".into(),
            source_dtype: "F16".into(),
            source_bytes: dense.bytes(),
            nonzeros: pruned.count_nonzero(),
            macko: MackoMatrix::from_dense(&pruned).expect("encode"),
            dense,
        }
    }

    #[test]
    fn the_pruned_matrix_differs_from_the_dense_layer_only() {
        let layer = layer();
        let x = activation_like(32, 3);
        let e = output_error(&layer, (&layer.macko).into(), &x).expect("errors");
        assert_eq!(e.vs_pruned, 0.0);
        assert!(e.vs_dense > 0.0 && e.vs_dense < 1.0, "{e:?}");
        assert_eq!(pruning_change(&layer, &x).expect("change"), e.vs_dense);
    }

    #[test]
    fn quantizing_adds_to_pruning_within_the_triangle_inequality() {
        let layer = layer();
        let x = activation_like(32, 4);
        let pruning = output_error(&layer, (&layer.macko).into(), &x).expect("errors");
        let q = QuantMackoMatrix::quantize(&layer.macko, Quantization::int4_per_group(8))
            .expect("quantize");
        let e = output_error(&layer, (&q).into(), &x).expect("errors");
        assert!(e.vs_pruned > 0.0 && e.vs_pruned < 0.5, "{e:?}");
        let c = pruning.vs_dense;
        assert!(e.vs_dense <= c + e.vs_pruned * (1.0 + c) + 1e-12, "{e:?}");
    }

    #[test]
    fn a_matrix_of_another_shape_is_an_error_naming_both() {
        let layer = layer();
        let other =
            MackoMatrix::from_dense(&DenseMatrix::new(2, 32, vec![f16::ONE; 64]).expect("other"))
                .expect("encode");
        let e = output_error(&layer, (&other).into(), &activation_like(32, 5));
        assert!(
            e.is_err_and(|e| e.to_string().contains("2×32") && e.to_string().contains("4×32")),
            "shape mismatch must be named"
        );
    }
}
