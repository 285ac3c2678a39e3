//! The device layout of 2:4 matrices, shared by the GPU backends (shaders/sparse24.wgsl,
//! kernels/sparse24.cu): the format's groups regrouped into words of 8 per row.
//!
//! The format (docs/FORMAT.md, "2:4 structured sparsity") packs rows back to back, a nibble per
//! group, so a row may start inside a byte of nibbles and a lane's 32-bit word of positions
//! would mix two rows. Padding each row to whole words of 8 groups instead starts every word at
//! a column that is a multiple of 32: a lane's x is then four aligned 16-byte words of x and no
//! group needs a row mask. It costs nothing where `cols` is a multiple of 32 (the matrices of
//! real models) and at most 7 groups per row otherwise. `DeviceMatrix::bytes` still counts the
//! format's bytes (what the benchmarks divide by).

use std::ops::Range;

use macko_format::sparse24::{groups_per_row, KEPT24};
use macko_format::Sparse24Matrix;

/// Groups of a word: one u32 of positions (a nibble each), 32 columns.
pub(crate) const WORD_GROUPS: usize = 8;

/// Words of 8 groups per stored row of a 2:4 matrix of `cols` columns.
pub(crate) fn sparse24_words(cols: usize) -> usize {
    groups_per_row(cols).div_ceil(WORD_GROUPS)
}

/// Rows `rows` of `m` as the kernels read them: every row `sparse24_words(cols)` words, word k
/// holding groups 8k .. 8k + 7 of the row; values one u32 per group (its binary16 pair, the
/// first position's in the low half), positions one u32 per word (nibble i for group 8k + i,
/// the format's nibble). Groups past the row's end are zero (nibble 0, values +0).
pub(crate) fn sparse24_rows(m: &Sparse24Matrix, rows: Range<usize>) -> (Vec<u32>, Vec<u32>) {
    let per_row = groups_per_row(m.cols());
    let words = per_row.div_ceil(WORD_GROUPS);
    let row_groups = words * WORD_GROUPS;
    let bits: &[u16] = bytemuck::cast_slice(m.values());
    let meta = m.meta();
    let mut values = vec![0u32; rows.len() * row_groups];
    let mut positions = vec![0u32; rows.len() * words];
    for (k, r) in rows.enumerate() {
        for j in 0..per_row {
            let g = r * per_row + j;
            let pair = &bits[g * KEPT24..(g + 1) * KEPT24];
            values[k * row_groups + j] = u32::from(pair[0]) | (u32::from(pair[1]) << 16);
            let nibble = u32::from(meta[g / 2] >> (4 * (g % 2))) & 0xf;
            positions[k * words + j / WORD_GROUPS] |= nibble << (4 * (j % WORD_GROUPS));
        }
    }
    (values, positions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use macko_format::DenseMatrix;

    /// The layout holds exactly each row's entries (`Sparse24Matrix::row_entries`) and zeros
    /// past them, for blocks starting at every row, rows of odd group counts (starting inside
    /// a byte of nibbles) and of whole words.
    #[test]
    fn rows_hold_each_rows_entries_at_its_columns() {
        for cols in [1usize, 5, 13, 32, 33, 70] {
            let rows = 5;
            let w: Vec<f16> = (0..rows * cols)
                .map(|i| f16::from_f32(((i * 7919) % 13) as f32 - 6.0))
                .collect();
            let dense = DenseMatrix::new(rows, cols, w).unwrap();
            let m = Sparse24Matrix::prune_from_dense(&dense).unwrap();
            let words = sparse24_words(cols);
            for r0 in 0..rows {
                let (values, positions) = sparse24_rows(&m, r0..rows);
                assert_eq!(values.len(), (rows - r0) * words * 8);
                assert_eq!(positions.len(), (rows - r0) * words);
                for r in r0..rows {
                    let k = r - r0;
                    let mut found = Vec::new();
                    for g in 0..words * 8 {
                        let v = values[k * words * 8 + g];
                        let n = (positions[k * words + g / 8] >> (4 * (g % 8))) & 0xf;
                        if g >= cols.div_ceil(4) {
                            assert_eq!((v, n), (0, 0), "{cols} columns, row {r}, group {g}");
                            continue;
                        }
                        let (p0, p1) = ((n & 3) as usize, (n >> 2) as usize);
                        found.push((4 * g + p0, f16::from_bits(v as u16)));
                        found.push((4 * g + p1, f16::from_bits((v >> 16) as u16)));
                    }
                    let expected: Vec<(usize, f16)> = m.row_entries(r).collect();
                    assert_eq!(found, expected, "{cols} columns, row {r}, block from {r0}");
                }
            }
        }
    }
}
