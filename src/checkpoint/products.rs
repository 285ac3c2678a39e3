//! Every linear weight of a real checkpoint, pruned, encoded and multiplied on every available
//! backend with activation-like inputs, each product checked against the f64 reference: the
//! code behind the `pruned_checkpoint` example and the real-model test.
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
use macko_format::{reference, DenseMatrix, MackoMatrix};
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
/// two untimed ones) for the median.
pub fn check_layer(
    layer: &LinearLayer,
    x: &[f16],
    devices: &[Device],
    timed_runs: usize,
) -> Result<Vec<ProductCheck>> {
    let reference = reference::spmv_macko(&layer.macko, x)?;
    let rows = layer.macko.rows();
    let mut out = Vec::with_capacity(devices.len());
    for dev in devices {
        let a = dev.upload(&layer.macko)?;
        let x_dev = dev.upload_vector(x)?;
        let mut y_dev = dev.zeros(rows, Precision::F32)?;
        dev.spmv(&a, &x_dev, &mut y_dev)?;
        let y = dev.download(&y_dev)?.to_f64();
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
        if y.len() != rows {
            return Err(crate::Error::ShapeMismatch {
                what: "downloaded y (matrix rows)",
                expected: rows,
                found: y.len(),
            }
            .into());
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
    let full = reference::spmv_dense(&layer.dense, x)?;
    let pruned = reference::spmv_macko(&layer.macko, x)?;
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (a, b) in pruned.y.iter().zip(&full.y) {
        diff += (a - b) * (a - b);
        norm += b * b;
    }
    Ok(if norm > 0.0 {
        (diff / norm).sqrt()
    } else {
        diff.sqrt()
    })
}
