//! Products of 2:4 matrices on the CPU (docs/FORMAT.md, "2:4 structured sparsity"): Y = A·X for
//! `batch` vectors at once, so that each group's nibble and two values are read once and feed
//! every vector's sum.
//!
//! A portable loop: per group, two multiply-adds per vector, f32 accumulation as in the other
//! formats. Semantics are MACKO's: a stored zero (the fill of a group with fewer than two
//! non-zeros, or padding past the last column) contributes nothing even where x holds NaN or
//! ±∞, so when x is not all finite every term goes through the same mask as the MACKO loop
//! (`term`). Padding positions name columns at or past `cols`, where x has no element: they are
//! never read (their value is zero by validation, so the skipped term is the masked one).

use half::f16;
use macko_format::sparse24::{groups_per_row, GROUP24, KEPT24};
use macko_format::Sparse24Matrix;
use rayon::prelude::*;

use super::decode::{term, widen1};
use super::storage::ROWS_PER_TASK;

/// Y = A·X: `x` is `[batch][cols]`, `out` `[batch][rows]`, both as the reference lays them out.
pub(super) fn spmm_sparse24(a: &Sparse24Matrix, x: &[f16], batch: usize, out: &mut [f32]) {
    let (rows, cols) = (a.rows(), a.cols());
    debug_assert_eq!(x.len(), batch * cols, "x must be [batch][cols]");
    debug_assert_eq!(out.len(), batch * rows, "out must be [batch][rows]");
    if batch == 0 || rows == 0 {
        return;
    }
    let xt = transpose(x, cols, batch);
    // Whether x is finite is known only now: with NaN/∞ in x, zero values are masked.
    let finite = xt.iter().all(|v| v.is_finite());
    // Row-major sums ([rows][batch]), each row's `batch` sums adjacent, transposed after.
    let mut sums = vec![0.0f32; rows * batch];
    sums.par_chunks_mut(ROWS_PER_TASK * batch)
        .enumerate()
        .for_each(|(t, block)| {
            for (k, y) in block.chunks_exact_mut(batch).enumerate() {
                let r = t * ROWS_PER_TASK + k;
                if finite {
                    row::<false>(a, r, &xt, y);
                } else {
                    row::<true>(a, r, &xt, y);
                }
            }
        });
    out.par_chunks_mut(rows).enumerate().for_each(|(b, y)| {
        for (r, o) in y.iter_mut().enumerate() {
            *o = sums[r * batch + b];
        }
    });
}

/// `xt[c · batch + b]` = x of vector `b` at column `c`, widened: the `batch` values one stored
/// value multiplies are then one contiguous slice.
fn transpose(x: &[f16], cols: usize, batch: usize) -> Vec<f32> {
    let mut xt = vec![0.0f32; cols * batch];
    for (b, v) in x.chunks_exact(cols.max(1)).take(batch).enumerate() {
        for (c, &e) in v.iter().enumerate() {
            xt[c * batch + b] = widen1(e);
        }
    }
    xt
}

/// Row `r`'s `batch` sums into `y`, group by group; padding positions (only in the last
/// group, at or past `cols`) are skipped.
fn row<const MASK: bool>(a: &Sparse24Matrix, r: usize, xt: &[f32], y: &mut [f32]) {
    let cols = a.cols();
    let per_row = groups_per_row(cols);
    let batch = y.len();
    y.fill(0.0);
    for j in 0..per_row {
        let g = r * per_row + j;
        let (first, second) = positions(a.meta(), g);
        for (k, p) in [first, second].into_iter().enumerate() {
            let c = j * GROUP24 + p;
            if c >= cols {
                continue; // padding: a zero value with no x to multiply
            }
            let v = widen1(a.values()[g * KEPT24 + k]);
            let xs = &xt[c * batch..(c + 1) * batch];
            for (acc, &xb) in y.iter_mut().zip(xs) {
                *acc += term::<MASK>(v, xb);
            }
        }
    }
}

/// The two positions (in its group) of group `g`'s values: nibble g of `meta`, low nibble first.
#[inline(always)]
fn positions(meta: &[u8], g: usize) -> (usize, usize) {
    let n = (meta[g / 2] >> (4 * (g % 2))) & 0xf;
    ((n & 3) as usize, (n >> 2) as usize)
}
