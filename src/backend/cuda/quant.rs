//! int8 / int4 values on the CUDA backend (docs/FORMAT.md, "Quantized values"): uploads of
//! quantized MACKO and dense matrices, the scale-group divisor the kernels use, the per-width
//! kernels compiled on first use, and few-token products of quantized matrices.
//!
//! A quantized MACKO matrix runs the row kernel of kernels/macko.cuh with its int8 / int4 entries
//! (kernels/macko_quant.cu) under the plan a binary16 matrix of the same rows would get, except
//! that the flat kernel is never chosen and the rows stay in the format's layout (per-group
//! scales index values in storage order, which a row-aligned copy would shift). Dense int8 /
//! int4 runs kernels/dense_quant.cu with the dense GEMV's launch shape, x staged in shared
//! memory as f32 where rows are aligned and x fits (a grid of the blocks that fit with it);
//! dense int4 with aligned rows and fitting scale groups runs on tensor cores instead, one block
//! per band of 16 rows (`dense_q_tc_*`, [`tensor_core_warps`] warps each).
//!
//! Few-token products of quantized matrices are, for now, one single-vector product per vector
//! (each vector copied to and from a scratch vector on the stream): correct for every B, but
//! reading the matrix B times.

use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;
use macko_format::{QuantBits, QuantDenseMatrix, QuantMackoMatrix, ScaleLayout};

use super::caps::{x_smem_bytes, Kernel, BLOCK};
use super::errors::{cuda_error, internal};
use super::kernels::{tensor_core_groups, DenseQuantLayout, QuantKernels};
use super::memory::{dim, DenseQuantDev, DeviceArray, MackoDev, QuantScales};
use super::plan;
use super::upload::{MackoLayout, Uploader};
use crate::error::Result;

/// The quantized kernels of each width, compiled and loaded on first use.
#[derive(Default)]
pub(crate) struct QuantCache {
    int8: Mutex<Option<Arc<QuantKernels>>>,
    int4: Mutex<Option<Arc<QuantKernels>>>,
}

impl QuantCache {
    /// The kernels of `bits`, loading them (`load`) the first time.
    pub fn get(
        &self,
        bits: QuantBits,
        load: impl FnOnce() -> Result<QuantKernels>,
    ) -> Result<Arc<QuantKernels>> {
        let slot = match bits {
            QuantBits::Int8 => &self.int8,
            QuantBits::Int4 => &self.int4,
        };
        let mut slot = slot
            .lock()
            .map_err(|_| internal("the quantized-kernel lock is poisoned"))?;
        if let Some(k) = slot.as_ref() {
            return Ok(k.clone());
        }
        let k = Arc::new(load()?);
        *slot = Some(k.clone());
        Ok(k)
    }
}

/// `(mul, shift)` with `(w · mul) >> shift == w / d` for every `w < 2^29` (`d ≥ 1`): shift =
/// 29 + ⌈log2 d⌉ and mul = ⌈2^shift / d⌉ < 2^30, whose excess over 2^shift / d is below 1, so
/// the error w · excess / 2^shift stays below 2^29 / 2^⌈log2 d⌉ ≤ 1 / d and never reaches the
/// next integer.
pub(crate) fn group_divisor(d: u32) -> (u32, u32) {
    let d = u64::from(d.max(1));
    let log = 64 - (d - 1).leading_zeros(); // ⌈log2 d⌉
    let shift = 29 + log;
    let mul = (1u64 << shift).div_ceil(d);
    (mul as u32, shift)
}

/// Rows of a band of the tensor-core dense entries (`dense_q_tc_*`, one block each).
const TC_BAND_ROWS: u32 = 16;

/// Warps of the tensor-core dense entries per SM the grid should hold at least: each keeps
/// three to four windows of 1 KiB of codes in flight (`DQT_DEPTH`), and an SM needs about
/// 16–25 KiB in flight to cover DRAM's latency at full bandwidth (H100: 3.35 TB/s × ~1 µs over
/// 132 SMs). More, with wider blocks, measured slower on an H100 (kernels/README.md).
const TC_WARPS_PER_SM: u32 = 8;

/// Warps per block of the tensor-core dense entries for `rows` × `words` 16-byte words per row:
/// 4, doubled (up to 16) while the bands times the warps stay under [`TC_WARPS_PER_SM`] per SM,
/// halved (down to 1) while warps would outnumber the row's 64-byte windows.
fn tensor_core_warps(sm_count: u32, rows: u32, words: u32) -> u32 {
    let bands = u64::from(rows.div_ceil(TC_BAND_ROWS));
    let target = u64::from(sm_count) * u64::from(TC_WARPS_PER_SM);
    let windows = words.div_ceil(4);
    let mut warps = 4u32;
    while warps < 16 && bands * u64::from(warps) < target {
        warps *= 2;
    }
    while warps > 1 && warps > windows {
        warps /= 2;
    }
    warps
}

/// The packed codes as 16-bit units, padded with zeros to a whole 16-byte word (the kernels read
/// 16-byte words of dense rows and 8- or 4-byte words of MACKO groups).
fn padded_units(q: &[u8]) -> Vec<u16> {
    let mut bytes = q.to_vec();
    bytes.resize(q.len().div_ceil(16).max(1) * 16, 0);
    bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// The scales on the device with their group divisor.
fn upload_scales(
    stream: &Arc<CudaStream>,
    kernels: Arc<QuantKernels>,
    layout: ScaleLayout,
    scales: &[half::f16],
) -> Result<QuantScales> {
    let bits: Vec<u16> = scales.iter().map(|s| s.to_bits()).collect();
    // A matrix without scales (no rows, or no values) still binds a buffer.
    let bits = if bits.is_empty() { vec![0u16] } else { bits };
    let group = match layout {
        ScaleLayout::PerRow => None,
        ScaleLayout::PerGroup(g) => Some(g),
    };
    let (mul, shift) = group_divisor(group.map_or(1, |g| g / 8));
    Ok(QuantScales {
        kernels,
        scales: DeviceArray::upload(stream, &bits, "quantized scales")?,
        group,
        mul,
        shift,
    })
}

impl Uploader<'_> {
    /// A quantized MACKO matrix: [`Uploader::macko_layout`] over its codes, with its scales.
    pub fn macko_quant(
        &self,
        m: &QuantMackoMatrix,
        kernels: Arc<QuantKernels>,
    ) -> Result<MackoDev> {
        let v = m.values();
        let units = padded_units(v.packed());
        let layout = MackoLayout {
            rows: m.rows(),
            cols: m.cols(),
            row_ptr: m.row_ptr(),
            codes: m.codes(),
            values: &units,
            binary16: None,
        };
        let mut dev = self.macko_layout(&layout)?;
        dev.quant = Some(upload_scales(self.stream, kernels, v.layout(), v.scales())?);
        Ok(dev)
    }

    /// A dense int8 / int4 matrix, with the dense GEMV's launch shape.
    pub fn dense_quant(
        &self,
        m: &QuantDenseMatrix,
        kernels: Arc<QuantKernels>,
    ) -> Result<(DenseQuantDev, plan::CudaPlan)> {
        let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
        let v = m.values();
        let per_word = match v.bits() {
            QuantBits::Int8 => 16,
            QuantBits::Int4 => 32,
        };
        let aligned = cols % per_word == 0
            && match v.layout() {
                ScaleLayout::PerRow => true,
                ScaleLayout::PerGroup(g) => cols % g == 0,
            };
        let mut plan = plan::dense_plan(self.caps, self.tuning, rows, cols)?;
        let smem = u32::try_from(x_smem_bytes(cols)).unwrap_or(u32::MAX);
        let staged = match aligned.then(|| self.caps.grid(Kernel::DenseAligned, BLOCK, smem, rows))
        {
            Some(Some(grid)) if smem <= self.caps.smem_limit => Some(grid),
            _ => None,
        };
        let group = match v.layout() {
            ScaleLayout::PerRow => None,
            ScaleLayout::PerGroup(g) => Some(g),
        };
        // int4 only: int8 has issue to spare, and on tensor cores it measured slower (71-85 %
        // of the ceiling against 80-93 %, H100; kernels/README.md).
        let tensor_cores = aligned
            && v.bits() == QuantBits::Int4
            && self.caps.tensor_cores
            && tensor_core_groups(group, per_word)
            && self.tuning.dense_quant_mma.unwrap_or(true);
        let layout = match (aligned, staged) {
            _ if tensor_cores => {
                let warps = self.tuning.dense_quant_warps.unwrap_or_else(|| {
                    tensor_core_warps(self.caps.sm_count, rows, cols / per_word)
                });
                plan.grid = rows.div_ceil(TC_BAND_ROWS);
                plan.block = 32 * warps;
                plan.smem_bytes = 0;
                DenseQuantLayout::TensorCore { warps }
            }
            (true, Some(grid)) => {
                plan.grid = grid;
                plan.block = BLOCK;
                plan.smem_bytes = smem;
                DenseQuantLayout::Staged
            }
            (true, None) => DenseQuantLayout::Aligned,
            (false, _) => DenseQuantLayout::Any,
        };
        let q = padded_units(v.packed());
        let bytes: &[u8] = bytemuck::cast_slice(&q);
        let dev = DenseQuantDev {
            rows,
            cols,
            q: DeviceArray::upload(self.stream, bytes, "dense int8/int4 codes")?,
            scales: upload_scales(self.stream, kernels, v.layout(), v.scales())?,
            layout,
        };
        Ok((dev, plan))
    }
}

/// Copies `len` elements of `src` from `from` into `dst` at `to`, on the stream.
pub(crate) fn copy_within<T: cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    src: &DeviceArray<T>,
    from: usize,
    dst: &mut DeviceArray<T>,
    to: usize,
    len: usize,
) -> Result<()> {
    if from + len > src.len() || to + len > dst.len() {
        return Err(internal("a vector copy past its buffer"));
    }
    let view = src.buf().slice(from..from + len);
    let mut out = dst.buf_mut().slice_mut(to..to + len);
    stream
        .memcpy_dtod(&view, &mut out)
        .map_err(|e| cuda_error("copying a vector on the device", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_divisor_is_exact_below_two_to_the_29() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for d in (1..=64).chain([100, 125, 1000, 4095, 4096, 1 << 21]) {
            let (mul, shift) = group_divisor(d);
            let q = |w: u64| (w * u64::from(mul)) >> shift;
            for w in (0..4096u64).chain((1 << 29) - 4096..1 << 29) {
                assert_eq!(q(w), w / u64::from(d), "d = {d}, w = {w}");
            }
            for _ in 0..10_000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let w = seed % (1 << 29);
                assert_eq!(q(w), w / u64::from(d), "d = {d}, w = {w}");
            }
        }
    }

    #[test]
    fn tensor_core_warps_fill_the_sms_without_idle_warps() {
        // 4096 rows: 256 bands; 4 warps each (1024) are under 132 · 8, 8 are not.
        assert_eq!(tensor_core_warps(132, 8192, 256), 4);
        assert_eq!(tensor_core_warps(132, 28672, 256), 4);
        assert_eq!(tensor_core_warps(132, 4096, 448), 8);
        assert_eq!(tensor_core_warps(132, 1, 4096), 16);
        // No more warps than 64-byte windows per row: 5 windows, 4 warps; 1 window, 1 warp.
        assert_eq!(tensor_core_warps(132, 16, 20), 4);
        assert_eq!(tensor_core_warps(132, 16, 1), 1);
        assert_eq!(tensor_core_warps(132, 16, 0), 1);
    }

    #[test]
    fn tensor_core_groups_are_chunks_pairs_or_whole_windows() {
        for per_word in [16, 32] {
            assert!(tensor_core_groups(None, per_word));
            for g in [
                per_word,
                2 * per_word,
                4 * per_word,
                8 * per_word,
                12 * per_word,
            ] {
                assert!(tensor_core_groups(Some(g), per_word), "{g} of {per_word}");
            }
            for g in [
                8,
                per_word / 2,
                3 * per_word,
                6 * per_word,
                4 * per_word + 8,
            ] {
                assert!(!tensor_core_groups(Some(g), per_word), "{g} of {per_word}");
            }
        }
    }

    #[test]
    fn packed_codes_are_padded_to_whole_words() {
        assert_eq!(padded_units(&[]).len(), 8);
        let u = padded_units(&[1, 2, 3]);
        assert_eq!(u.len(), 8);
        assert_eq!(u[0], 0x0201);
        assert_eq!(u[1], 0x0003);
        assert_eq!(padded_units(&[7; 17]).len(), 16);
    }
}
