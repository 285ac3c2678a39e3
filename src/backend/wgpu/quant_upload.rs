//! Uploads of quantized matrices (int8 or int4 values with binary16 scales; shaders/README.md,
//! "Quantized matrices"). MACKO keeps the format's own layout, so a group's index on the device
//! is its index in the format and the storage-order scale index `i / G` holds; dense rows are
//! padded with zero codes to whole 16-byte words (16 int8 or 32 int4 codes: one load each),
//! the scales kept in the format's storage order. Both are cut into row blocks that each fit a binding; each block
//! binds only the scales its rows use, from an even scale on (scales travel as binary16 pairs
//! in u32 words), and tells its kernel where its first value lies in its scale group (the
//! phase), so a block may start anywhere in a group.

use std::borrow::Cow;
use std::ops::Range;

use half::f16;
use macko_format::quant::{q_at, QuantValues, ScaleLayout};
use macko_format::{QuantBits, QuantDenseMatrix, QuantMackoMatrix, Quantization, GROUP};

use crate::backend::MatrixKind;
use crate::error::Result;

use super::backend::WgpuBackend;
use super::kernel::QuantKey;
use super::memory::{
    batch_dispatch, plan_dense_blocks, plan_sparse_blocks, to_u32, Block, GpuMatrix, MatrixParams,
};
use super::plan::WgpuPlan;

/// Values of a dense block's rows at most (value indices `r · cols + c` within the block, plus
/// the phase below 2²⁵, then stay below 2³² in the kernel's u32 arithmetic).
const DENSE_BLOCK_VALUES: usize = 1 << 31;

/// Units per scale: with scales per group of G values, G / 8 MACKO groups (every aligned group
/// shares one scale) or G dense values; 1 per row (unused there).
fn scale_unit(layout: ScaleLayout, macko: bool) -> u32 {
    match layout {
        ScaleLayout::PerRow => 1,
        ScaleLayout::PerGroup(g) if macko => g / GROUP as u32,
        ScaleLayout::PerGroup(g) => g,
    }
}

/// The pipeline key of a quantized matrix's kernels.
fn quant_key(q: Quantization, macko: bool) -> QuantKey {
    QuantKey {
        int4: q.bits == QuantBits::Int4,
        per_group: matches!(q.scales, ScaleLayout::PerGroup(_)),
        pow2: scale_unit(q.scales, macko).is_power_of_two(),
    }
}

/// The scales a block binds and how its kernel indexes them (quant.wgsl, `scale_index`).
struct ScaleSlice {
    /// Scales from an even index on, two per word (the even one in the low half).
    words: Vec<u32>,
    /// `MatrixParams::scale_unit`, `scale_shift`, `scale_phase`.
    unit: u32,
    shift: u32,
    phase: u32,
}

impl ScaleSlice {
    /// Scales `first..end` of `scales` (clipped to its length) from the even scale at or below
    /// `first`; the phase and unit are the caller's.
    fn new(scales: &[f16], first: usize, end: usize, unit: u32, phase: u32) -> Self {
        let start = (first & !1).min(scales.len());
        let end = end.clamp(start, scales.len());
        let words = scales[start..end]
            .chunks(2)
            .map(|p| {
                u32::from(p[0].to_bits()) | u32::from(p.get(1).map_or(0, |h| h.to_bits())) << 16
            })
            .collect();
        Self {
            words,
            unit,
            shift: unit.trailing_zeros(),
            phase,
        }
    }

    /// The scales of a block whose values lie in rows `rows` and, in storage order, in units
    /// `units` (MACKO groups or dense values) of `unit` units per scale group. Per row, the
    /// block's row r takes slice scale `phase + r`; per group, unit u of the block takes slice
    /// scale `(phase + u) / unit`, the phase being the first unit's place in its group plus one
    /// group where that group's scale is odd (the slice starting at the even one before it).
    fn for_block(v: &QuantValues, unit: u32, rows: &Range<usize>, units: Range<u64>) -> Self {
        match v.layout() {
            ScaleLayout::PerRow => {
                let phase = (rows.start & 1) as u32;
                Self::new(v.scales(), rows.start, rows.end, unit, phase)
            }
            ScaleLayout::PerGroup(_) => {
                let d = u64::from(unit);
                let first = units.start / d;
                let end = if units.end > units.start {
                    (units.end - 1) / d + 1
                } else {
                    first
                };
                // < 2 · unit <= 2²⁵.
                let phase = (units.start % d + (first & 1) * d) as u32;
                Self::new(v.scales(), first as usize, end as usize, unit, phase)
            }
        }
    }

    /// Sets the block's scale fields of `params`.
    fn apply(&self, params: &mut MatrixParams) {
        params.scale_unit = self.unit;
        params.scale_shift = self.shift;
        params.scale_phase = self.phase;
    }
}

/// Codes per 16-byte word of a quantized dense row (quant_dense_sg.wgsl's loads).
fn word_codes(bits: QuantBits) -> usize {
    match bits {
        QuantBits::Int8 => 16,
        QuantBits::Int4 => 32,
    }
}

/// Dense rows `rows` of `v` (`cols` values each) padded with zero codes to `stride` chunks of
/// 8 values (whole 16-byte words): borrowed where the rows already are whole words, else
/// repacked (an int4 row of odd length may start in the high nibble of a byte).
fn padded_rows<'a>(
    v: &'a QuantValues,
    cols: usize,
    stride: usize,
    rows: &Range<usize>,
) -> Cow<'a, [u8]> {
    let bits = v.bits();
    if cols == stride * GROUP {
        let range = bits.bytes_for(rows.start * cols)..bits.bytes_for(rows.end * cols);
        return Cow::Borrowed(&v.packed()[range]);
    }
    let row_bytes = bits.bytes_for(stride * GROUP);
    let mut out = vec![0u8; rows.len() * row_bytes];
    for (r, row) in rows.clone().zip(out.chunks_exact_mut(row_bytes)) {
        match bits {
            QuantBits::Int8 => row[..cols].copy_from_slice(&v.packed()[r * cols..(r + 1) * cols]),
            QuantBits::Int4 if cols % 2 == 0 => {
                let bytes = &v.packed()[r * cols / 2..(r + 1) * cols / 2];
                row[..cols / 2].copy_from_slice(bytes);
            }
            QuantBits::Int4 => {
                for c in 0..cols {
                    let code = (q_at(bits, v.packed(), r * cols + c) as u8) & 0x0f;
                    row[c / 2] |= code << ((c & 1) * 4);
                }
            }
        }
    }
    Cow::Owned(out)
}

impl WgpuBackend {
    /// One block of a quantized matrix: its uniform, then `arrays` (binding, bytes, what) bound
    /// with it in `layout`, dispatched as `plan` says for its rows.
    fn quant_block(
        &self,
        plan: &WgpuPlan,
        params: MatrixParams,
        arrays: &[(u32, &[u8], &str)],
        layout: &wgpu::BindGroupLayout,
    ) -> Result<Block> {
        let rows = params.rows;
        let uniform = self.uniform(params)?;
        let buffers = arrays
            .iter()
            .map(|&(binding, data, what)| Ok((binding, self.storage(data, what)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut entries = vec![(0, &uniform)];
        entries.extend(buffers.iter().map(|(b, buffer)| (*b, buffer)));
        let bind_group = self.bind_group(layout, &entries, "quantized block")?;
        Ok(Block {
            bind_group,
            dispatch: plan.grid.dispatch(rows),
            batch_dispatch: batch_dispatch(plan, rows),
        })
    }

    /// A quantized MACKO matrix: row blocks of whole groups (as MACKO-16-4's in the format's
    /// layout), each with its row pointers rebased, its codes of values and gap codes, and its
    /// scales.
    pub(super) fn upload_macko_quant(&self, m: &QuantMackoMatrix) -> Result<GpuMatrix> {
        let v = m.values();
        let quant = v.quantization();
        let plan = self
            .plan_for(MatrixKind::MackoQuant, m.rows(), m.cols(), 0)
            .quantized(quant_key(quant, true));
        let unit = scale_unit(quant.scales, true);
        let row_ptr = m.row_ptr();
        // The largest array per entry: int8 codes (1 byte); int4 codes and gap codes take half.
        let blocks_rows = plan_sparse_blocks(
            row_ptr,
            GROUP as u64,
            1,
            4,
            self.matrix_limit,
            "quantized MACKO",
        )?;
        let mut blocks = Vec::with_capacity(blocks_rows.len());
        for (slot, rows) in blocks_rows.into_iter().enumerate() {
            let base = row_ptr[rows.start] as usize / GROUP * GROUP;
            let end = (row_ptr[rows.end] as usize).div_ceil(GROUP) * GROUP;
            let table: Vec<u32> = row_ptr[rows.start..=rows.end]
                .iter()
                .map(|&p| p - base as u32)
                .collect();
            let groups = (base / GROUP) as u64..(end / GROUP) as u64;
            let scales = ScaleSlice::for_block(v, unit, &rows, groups);
            let mut params = MatrixParams::block(
                to_u32(rows.len(), "rows of a block")?,
                m.cols() as u32,
                to_u32(rows.start, "first row of a block")?,
            );
            params.slot = to_u32(slot, "block index")?;
            scales.apply(&mut params);
            let q = &v.packed()[v.bits().bytes_for(base)..v.bits().bytes_for(end)];
            let arrays: [(u32, &[u8], &str); 4] = [
                (1, bytemuck::cast_slice(&table), "quantized MACKO row_ptr"),
                (2, q, "quantized MACKO values"),
                (3, &m.codes()[base / 2..end / 2], "quantized MACKO codes"),
                (
                    4,
                    bytemuck::cast_slice(&scales.words),
                    "quantized MACKO scales",
                ),
            ];
            blocks.push(self.quant_block(&plan, params, &arrays, &self.pipelines.quant_sparse)?);
        }
        Ok(GpuMatrix {
            plan,
            rows: m.rows(),
            blocks,
            _partials: None,
            batch: self.batch_state(m.rows(), m.cols()),
        })
    }

    /// A quantized dense matrix: blocks of whole rows, each row padded to whole 16-byte words
    /// of codes (quant_dense_sg.wgsl reads them so), with the block's scales.
    pub(super) fn upload_dense_quant(&self, m: &QuantDenseMatrix) -> Result<GpuMatrix> {
        let (rows, cols) = (m.rows(), m.cols());
        let v = m.values();
        let quant = v.quantization();
        let plan = self
            .plan_for(MatrixKind::DenseQuant, rows, cols, 0)
            .quantized(quant_key(quant, false));
        let unit = scale_unit(quant.scales, false);
        // Chunks of 8 per row, rounded up to whole 16-byte words of codes.
        let per_word = word_codes(v.bits());
        let stride = cols.div_ceil(per_word) * (per_word / GROUP);
        let row_bytes = v.bits().bytes_for(stride * GROUP) as u64;
        let per_block = plan_dense_blocks(rows, row_bytes, self.matrix_limit)?
            .min((DENSE_BLOCK_VALUES / cols.max(1)).max(1));
        let mut blocks = Vec::new();
        let mut r0 = 0;
        while r0 < rows {
            let block_rows = r0..(r0 + per_block).min(rows);
            let units = (r0 * cols) as u64..(block_rows.end * cols) as u64;
            let scales = ScaleSlice::for_block(v, unit, &block_rows, units);
            let mut params = MatrixParams::block(
                to_u32(block_rows.len(), "rows of a block")?,
                cols as u32,
                to_u32(r0, "first row of a block")?,
            );
            params.stride = to_u32(stride, "chunks per row")?;
            scales.apply(&mut params);
            let q = padded_rows(v, cols, stride, &block_rows);
            let arrays: [(u32, &[u8], &str); 2] = [
                (2, &q, "quantized dense values"),
                (
                    4,
                    bytemuck::cast_slice(&scales.words),
                    "quantized dense scales",
                ),
            ];
            blocks.push(self.quant_block(&plan, params, &arrays, &self.pipelines.quant_dense)?);
            r0 = block_rows.end;
        }
        Ok(GpuMatrix {
            plan,
            rows,
            blocks,
            _partials: None,
            batch: self.batch_state(rows, cols),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's scale index (quant.wgsl, `scale_index`) over a block's slice gives every
    /// unit the scale the format gives it, for blocks starting anywhere in a group.
    #[test]
    fn block_slices_index_the_format_scales() {
        for unit in [1u32, 2, 3, 8, 12] {
            let units = 100u64;
            let scales: Vec<f16> = (0..units.div_ceil(u64::from(unit)))
                .map(|i| f16::from_f32(i as f32 + 1.0))
                .collect();
            let quant = Quantization {
                bits: QuantBits::Int8,
                scales: ScaleLayout::PerGroup(8 * unit),
            };
            let q = vec![0u8; 8 * units as usize];
            let v = QuantValues::from_parts(quant, 1, q.len(), q.len(), q, scales.clone()).unwrap();
            for start in [0u64, 1, 5, 13, 37, 99] {
                let slice = ScaleSlice::for_block(&v, unit, &(0..1), start..units);
                for u in start..units {
                    let l = (slice.phase + (u - start) as u32) / unit;
                    let half = (slice.words[(l >> 1) as usize] >> ((l & 1) * 16)) & 0xffff;
                    let want = scales[(u / u64::from(unit)) as usize];
                    assert_eq!(
                        half as u16,
                        want.to_bits(),
                        "unit {unit}, start {start}, u {u}"
                    );
                }
            }
        }
    }
}
