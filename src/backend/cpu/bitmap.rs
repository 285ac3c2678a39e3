//! The CPU's bitmap layout of a binary16 MACKO matrix, derived at upload where the plan picks
//! it (`CpuLayout::Bitmap`): per row, one mask byte per block of 8 columns (bit j set when
//! column 8·b + j holds a kept entry) and the kept values packed in column order.
//!
//! Why: the MACKO loops are bound by the work per entry (a gather of x per group of 8), not by
//! memory. Here x is read densely, 8 columns per block with one load, and a block's packed
//! values are moved to their lanes by one permutation (`bitmap_avx2.rs`): the work is per
//! block of columns, the same at any density, and no x is gathered. It also stores less from
//! d ≈ 0.2: 1/8 byte per column for the masks plus 2 bytes per kept value, against MACKO's
//! 2.5 bytes per stored entry (padding included): 1.125 against ≈ 1.27 bytes per column at
//! d = 0.5.
//!
//! Kept entries are MACKO's entries with a non-zero value: padding and stored zeros are left
//! out, so they contribute nothing even where x holds NaN or ±∞, as in the f64 reference. A
//! leaf module: the layout and its portable loops; shared by mod.rs, batch.rs and
//! sparse_inputs.rs.

use half::f16;
use macko_format::{is_zero, MackoMatrix};
use rayon::prelude::*;

use super::decode::widen1;

/// Columns per mask byte.
pub(super) const BLOCK: usize = 8;

/// A binary16 MACKO matrix as masks and packed kept values (see the module comment).
///
/// Invariants (established by [`BitmapMatrix::from_macko`], the only constructor): row r's
/// masks are `masks[r·blocks..][..blocks]`, no bit at a column ≥ `cols`; its kept values are
/// `values[row_ptr[r]..row_ptr[r + 1]]`, as many as its masks have bits set, all non-zero; and
/// `values` ends with [`BLOCK`] zeros past the last row, so that 8 values can be loaded at any
/// kept position.
#[derive(Debug, Clone)]
pub(crate) struct BitmapMatrix {
    rows: usize,
    cols: usize,
    blocks: usize,
    masks: Vec<u8>,
    row_ptr: Vec<u32>,
    values: Vec<f16>,
}

impl BitmapMatrix {
    /// The bitmap layout of `m`: its non-zero entries, rows decoded in parallel.
    pub(super) fn from_macko(m: &MackoMatrix) -> Self {
        let (rows, cols) = (m.rows(), m.cols());
        let blocks = cols.div_ceil(BLOCK);
        let mut masks = vec![0u8; rows * blocks];
        // No columns, no entries: every row is empty (and `masks` has no chunks to walk).
        let per_row: Vec<Vec<f16>> = if blocks == 0 {
            vec![Vec::new(); rows]
        } else {
            masks
                .par_chunks_mut(blocks)
                .enumerate()
                .map(|(r, row_masks)| {
                    let mut kept = Vec::new();
                    for (c, v) in m.row_entries(r) {
                        if !is_zero(v) {
                            row_masks[c / BLOCK] |= 1 << (c % BLOCK);
                            kept.push(v);
                        }
                    }
                    kept
                })
                .collect()
        };
        let kept: usize = per_row.iter().map(Vec::len).sum();
        let mut values = Vec::with_capacity(kept + BLOCK);
        let mut row_ptr = Vec::with_capacity(rows + 1);
        row_ptr.push(0u32);
        for row in per_row {
            values.extend_from_slice(&row);
            // Kept entries are at most MACKO's entries, whose count fits u32 (validated).
            row_ptr.push(values.len() as u32);
        }
        values.resize(kept + BLOCK, f16::ZERO);
        Self {
            rows,
            cols,
            blocks,
            masks,
            row_ptr,
            values,
        }
    }

    /// Rows and columns.
    pub(super) fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Mask bytes per row: ⌈cols / 8⌉.
    pub(super) fn blocks(&self) -> usize {
        self.blocks
    }

    /// Bytes held: masks, 2 per kept value (and the 8 of padding), 4 per row pointer.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> u64 {
        self.masks.len() as u64 + 2 * self.values.len() as u64 + 4 * self.row_ptr.len() as u64
    }

    /// Row `r`'s masks, and the values from its first kept one to the end of `values` (so at
    /// least [`BLOCK`] past its last kept value).
    #[inline(always)]
    pub(super) fn row(&self, r: usize) -> (&[u8], &[f16]) {
        let masks = &self.masks[r * self.blocks..][..self.blocks];
        (masks, &self.values[self.row_ptr[r] as usize..])
    }

    /// Calls `f(column, value)` for each kept entry of row `r`, columns increasing.
    #[inline]
    pub(super) fn visit_row(&self, r: usize, mut f: impl FnMut(usize, f32)) {
        let (masks, values) = self.row(r);
        let mut p = 0;
        for (b, &mask) in masks.iter().enumerate() {
            let mut bits = mask;
            while bits != 0 {
                f(
                    b * BLOCK + bits.trailing_zeros() as usize,
                    widen1(values[p]),
                );
                p += 1;
                bits &= bits - 1;
            }
        }
    }
}

/// Row `r` of y = A·x, portable: each block's set bits in turn, one lane per bit position.
/// Only kept (non-zero) entries are multiplied, so NaN/∞ of x elsewhere never reach the sum.
pub(super) fn row_portable(m: &BitmapMatrix, r: usize, x: &[f32]) -> f32 {
    let (masks, values) = m.row(r);
    let mut lanes = [0.0f32; BLOCK];
    let mut p = 0;
    for (&mask, xs) in masks.iter().zip(x.chunks(BLOCK)) {
        let mut bits = mask;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            lanes[j] += widen1(values[p]) * xs[j];
            p += 1;
            bits &= bits - 1;
        }
    }
    lanes.iter().sum()
}
