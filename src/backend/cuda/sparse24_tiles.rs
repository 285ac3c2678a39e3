//! The layout of 2:4 matrices for the sparse tensor cores (kernels/sparse24_mma.cu): every
//! operand of `mma.sp.m16n8k32` a coalesced load, nothing decoded on the GPU.
//!
//! Rows go in tiles of 16 (their count rounded up to even, so that a band of two tiles never
//! runs past the matrix), columns in k-steps of 32 (eight groups), k-steps in quads of four (128
//! columns). Per (tile, quad), `values` holds 4 k-steps × 32 lanes × four u32 and `meta` 16 meta
//! lanes × four u32 (one per k-step): lane 4g + t's A fragment of a k-step is the value pairs of
//! groups (row g, chunk t), (row g + 8, chunk t), (row g, chunk t + 4), (row g + 8, chunk t + 4)
//! of the step's eight groups; meta lane 2g + s holds, for each k-step, the nibbles of chunks 4s
//! .. 4s + 3 of row g (bits 0–15) and of row g + 8 (bits 16–31). Rows, groups and columns past
//! the matrix are zero values with positions 0 and 1 (the hardware refuses equal positions).
//! `DeviceMatrix::bytes` still counts the format's bytes.

use macko_format::sparse24::{groups_per_row, KEPT24};
use macko_format::Sparse24Matrix;

/// Rows of a tile (the `m` of `mma.m16n8k32`).
pub(crate) const TILE_ROWS: usize = 16;
/// Columns of a quad of k-steps.
pub(crate) const QUAD_COLS: usize = 128;
/// u32 of values per (tile, quad): 4 k-steps × 32 lanes × 4.
const QUAD_VALUES: usize = 4 * 32 * 4;
/// u32 of metadata per (tile, quad): 16 meta lanes × 4 k-steps.
const QUAD_META: usize = 16 * 4;
/// Positions 0 and 1: the nibble of a group past the matrix.
const PAD_NIBBLE: u32 = 0b0100;

/// Tiles of 16 rows for `rows` rows: an even count.
pub(crate) fn tiles(rows: usize) -> usize {
    rows.div_ceil(2 * TILE_ROWS) * 2
}

/// Quads of 128 columns per tile for `cols` columns.
pub(crate) fn quads(cols: usize) -> usize {
    cols.div_ceil(QUAD_COLS)
}

/// `m` as the tensor-core kernels read it: (values, meta), as in the module's header.
pub(crate) fn sparse24_tiles(m: &Sparse24Matrix) -> (Vec<u32>, Vec<u32>) {
    let (rows, per_row) = (m.rows(), groups_per_row(m.cols()));
    let (nt, nq) = (tiles(rows), quads(m.cols()));
    let bits: &[u16] = bytemuck::cast_slice(m.values());
    let meta_bytes = m.meta();
    // The value pair and nibble of group `j` of row `r`, zero pair and PAD_NIBBLE past the
    // matrix.
    let group = |r: usize, j: usize| -> (u32, u32) {
        if r >= rows || j >= per_row {
            return (0, PAD_NIBBLE);
        }
        let g = r * per_row + j;
        let pair = &bits[g * KEPT24..(g + 1) * KEPT24];
        let nibble = u32::from(meta_bytes[g / 2] >> (4 * (g % 2))) & 0xf;
        (u32::from(pair[0]) | (u32::from(pair[1]) << 16), nibble)
    };
    let mut values = vec![0u32; nt * nq * QUAD_VALUES];
    let mut meta = vec![0u32; nt * nq * QUAD_META];
    for tile in 0..nt {
        let r0 = tile * TILE_ROWS;
        for q in 0..nq {
            let tq = tile * nq + q;
            for kk in 0..4 {
                let j0 = (4 * q + kk) * 8;
                for lane in 0..32 {
                    let (g, t) = (lane / 4, lane % 4);
                    let at = ((tq * 4 + kk) * 32 + lane) * 4;
                    for (i, (dr, chunk)) in [(0, t), (8, t), (0, t + 4), (8, t + 4)]
                        .into_iter()
                        .enumerate()
                    {
                        values[at + i] = group(r0 + g + dr, j0 + chunk).0;
                    }
                }
                for g in 0..8 {
                    for s in 0..2 {
                        let mut word = 0u32;
                        for c in 0..4 {
                            let chunk = 4 * s + c;
                            word |= group(r0 + g, j0 + chunk).1 << (4 * c);
                            word |= group(r0 + g + 8, j0 + chunk).1 << (16 + 4 * c);
                        }
                        meta[(tq * 16 + 2 * g + s) * 4 + kk] = word;
                    }
                }
            }
        }
    }
    (values, meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use macko_format::DenseMatrix;

    /// Multiplies the tiles as `mma.sp.m16n8k32` does by the PTX ISA's fragment layouts (A
    /// fragments, metadata from lanes 4g and 4g + 1, B columns 2t .. of each k-step) and
    /// returns the dense matrix those operands stand for: every stored value at its column,
    /// zeros elsewhere, nothing past the matrix.
    fn dense_of_tiles(rows: usize, cols: usize, values: &[u32], meta: &[u32]) -> Vec<f32> {
        let (nt, nq) = (tiles(rows), quads(cols));
        let mut a = vec![0f32; nt * TILE_ROWS * nq * QUAD_COLS];
        let width = nq * QUAD_COLS;
        for tile in 0..nt {
            for q in 0..nq {
                let tq = tile * nq + q;
                for kk in 0..4 {
                    let k0 = (4 * q + kk) * 32;
                    for lane in 0..32 {
                        let (g, t) = (lane / 4, lane % 4);
                        let at = ((tq * 4 + kk) * 32 + lane) * 4;
                        for (i, (dr, chunk)) in [(0, t), (8, t), (0, t + 4), (8, t + 4)]
                            .into_iter()
                            .enumerate()
                        {
                            let r = tile * TILE_ROWS + g + dr;
                            let word = meta[(tq * 16 + 2 * g + chunk / 4) * 4 + kk];
                            let n = (word >> (16 * (dr / 8) + 4 * (chunk % 4))) & 0xf;
                            let (p0, p1) = (n & 3, n >> 2);
                            assert!(p0 < p1, "ordered metadata: tile {tile} row {r} nibble {n}");
                            let pair = values[at + i];
                            for (p, h) in [(p0, pair & 0xffff), (p1, pair >> 16)] {
                                let c = k0 + 4 * chunk + p as usize;
                                a[r * width + c] += f16::from_bits(h as u16).to_f32();
                            }
                        }
                    }
                }
            }
        }
        let mut out = vec![0f32; rows * cols];
        for r in 0..nt * TILE_ROWS {
            for c in 0..width {
                let v = a[r * width + c];
                if r < rows && c < cols {
                    out[r * cols + c] = v;
                } else {
                    assert_eq!(v, 0.0, "a value past the matrix at ({r}, {c})");
                }
            }
        }
        out
    }

    /// The tiles stand for exactly the matrix, for shapes with partial tiles, partial quads,
    /// columns not a multiple of 4 and one tile pair.
    #[test]
    fn tiles_hold_every_entry_at_its_fragment_place() {
        for (rows, cols) in [(1, 1), (16, 128), (17, 130), (40, 300), (33, 9), (5, 512)] {
            let w: Vec<f16> = (0..rows * cols)
                .map(|i| f16::from_f32(((i * 7919) % 23) as f32 - 11.0))
                .collect();
            let dense = DenseMatrix::new(rows, cols, w).unwrap();
            let m = Sparse24Matrix::prune_from_dense(&dense).unwrap();
            let (values, meta) = sparse24_tiles(&m);
            assert_eq!(values.len(), tiles(rows) * quads(cols) * QUAD_VALUES);
            assert_eq!(meta.len(), tiles(rows) * quads(cols) * QUAD_META);
            let expected: Vec<f32> = m
                .to_dense()
                .unwrap()
                .values()
                .iter()
                .map(|v| v.to_f32())
                .collect();
            assert_eq!(
                dense_of_tiles(rows, cols, &values, &meta),
                expected,
                "{rows}×{cols}"
            );
        }
    }
}
