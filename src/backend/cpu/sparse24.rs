//! Products of 2:4 matrices on the CPU (docs/FORMAT.md, "2:4 structured sparsity"): Y = A·X for
//! `batch` vectors at once, so that each group's nibble and two values are read once and feed
//! every vector's sum.
//!
//! Where the CPU has AVX2, FMA and F16C, whole steps of 4 groups go through
//! `sparse24_avx2::row_steps` (a row's last `per_row % 4` groups through the loop below);
//! otherwise a portable loop: per group, two multiply-adds per vector, f32 accumulation as in
//! the other formats. Semantics are MACKO's: a stored zero (the fill of a group with fewer than two
//! non-zeros, or padding past the last column) contributes nothing even where x holds NaN or
//! ±∞, so when x is not all finite every term goes through the same mask as the MACKO loop
//! (`term`). Padding positions name columns at or past `cols`, where x has no element: they are
//! never read (their value is zero by validation, so the skipped term is the masked one).

use half::f16;
use macko_format::sparse24::{groups_per_row, GROUP24, KEPT24};
use macko_format::Sparse24Matrix;
use rayon::prelude::*;

use super::decode::{term, widen1};
#[cfg(target_arch = "x86_64")]
use super::sparse24_avx2::{widened_x, STEP_GROUPS};
use super::storage::ROWS_PER_TASK;

/// Y = A·X: `x` is `[batch][cols]`, `out` `[batch][rows]`, both as the reference lays them out.
/// `avx2`: the CPU has AVX2, FMA and F16C (`avx2::supported`).
pub(super) fn spmm_sparse24(
    a: &Sparse24Matrix,
    x: &[f16],
    batch: usize,
    avx2: bool,
    out: &mut [f32],
) {
    let (rows, cols) = (a.rows(), a.cols());
    debug_assert_eq!(x.len(), batch * cols, "x must be [batch][cols]");
    debug_assert_eq!(out.len(), batch * rows, "out must be [batch][rows]");
    if batch == 0 || rows == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    let sums = if avx2 {
        sums_avx2(a, x, batch)
    } else {
        sums_portable(a, x, batch)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let sums = {
        let _ = avx2;
        sums_portable(a, x, batch)
    };
    out.par_chunks_mut(rows).enumerate().for_each(|(b, y)| {
        for (r, o) in y.iter_mut().enumerate() {
            *o = sums[r * batch + b];
        }
    });
}

/// The portable product's sums, `[rows][batch]` (each row's `batch` sums adjacent).
fn sums_portable(a: &Sparse24Matrix, x: &[f16], batch: usize) -> Vec<f32> {
    let (rows, cols) = (a.rows(), a.cols());
    let xt = transpose(x, cols, batch);
    // Whether x is finite is known only now: with NaN/∞ in x, zero values are masked.
    let finite = xt.iter().all(|v| v.is_finite());
    row_sums(rows, batch, |r, y| {
        if finite {
            row::<false>(a, r, &xt, y);
        } else {
            row::<true>(a, r, &xt, y);
        }
    })
}

/// Row-major sums (`[rows][batch]`, each row's `batch` sums adjacent, transposed after), each
/// row's filled by `row(r, sums)` on rayon's pool, [`ROWS_PER_TASK`] rows a task.
fn row_sums(rows: usize, batch: usize, row: impl Fn(usize, &mut [f32]) + Sync) -> Vec<f32> {
    let mut sums = vec![0.0f32; rows * batch];
    sums.par_chunks_mut(ROWS_PER_TASK * batch)
        .enumerate()
        .for_each(|(t, block)| {
            for (k, y) in block.chunks_exact_mut(batch).enumerate() {
                row(t * ROWS_PER_TASK + k, y);
            }
        });
    sums
}

/// The AVX2 product's sums, `[rows][batch]`: each row's whole steps of 4 groups through
/// `row_steps`, its last groups through [`tail`].
#[cfg(target_arch = "x86_64")]
fn sums_avx2(a: &Sparse24Matrix, x: &[f16], batch: usize) -> Vec<f32> {
    let (rows, cols) = (a.rows(), a.cols());
    let per_row = groups_per_row(cols);
    let steps = per_row / STEP_GROUPS;
    let (xw, stride) = widened_x(x, cols, batch);
    row_sums(rows, batch, |r, y| {
        // SAFETY: `spmm_sparse24` is called with `avx2` only where the CPU has AVX2, FMA and
        // F16C; the validated matrix holds every group of row r (r · per_row .. (r + 1) ·
        // per_row, two values and a nibble each), and each of the batch's vectors in `xw` has
        // `stride` ≥ 16 · steps elements (`widened_x`).
        unsafe {
            super::sparse24_avx2::row_steps(
                a.values(),
                a.meta(),
                r * per_row,
                steps,
                &xw,
                stride,
                y,
            )
        };
        tail(a, r, steps * STEP_GROUPS, (&xw, stride), y);
    })
}

/// Adds row `r`'s groups from `first` on to `y` (vector b's x at `xw[b · stride + c]`), zero
/// values masked; padding positions (at or past `cols`) are skipped.
#[cfg(target_arch = "x86_64")]
fn tail(a: &Sparse24Matrix, r: usize, first: usize, (xw, stride): (&[f32], usize), y: &mut [f32]) {
    let cols = a.cols();
    let per_row = groups_per_row(cols);
    for j in first..per_row {
        let g = r * per_row + j;
        let (p0, p1) = positions(a.meta(), g);
        for (k, p) in [p0, p1].into_iter().enumerate() {
            let c = j * GROUP24 + p;
            if c >= cols {
                continue;
            }
            let v = widen1(a.values()[g * KEPT24 + k]);
            for (b, acc) in y.iter_mut().enumerate() {
                *acc += term::<true>(v, xw[b * stride + c]);
            }
        }
    }
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

/// The AVX2 loop (where this CPU has it) and the portable one against the f64 reference, every
/// batch from 1 to 17, f16 and f32 output: rows starting inside a metadata byte (an odd number
/// of groups per row), rows of 1–3 groups past the last whole step, rows with no whole step,
/// padding positions past the last column, and NaN/±∞ in x under stored zeros and under values
/// (`bitmap_tests::vectors`).
#[cfg(test)]
mod tests {
    use macko_format::{reference, MatrixRef};

    use super::super::bitmap_tests::{assert_agrees, random_dense, vectors, MAX_BATCH};
    use super::super::{avx2, CpuBackend};
    use super::Sparse24Matrix;
    use crate::backend::{Backend, Precision};

    #[test]
    fn both_loops_agree_with_the_reference() {
        // (rows, cols): groups per row 9, 18, 33, 50, 1 and 2 (the last with padding), and 4
        // and 8 with a padded last group inside the last whole step (x's ±∞ column too).
        let shapes = [
            (7, 33),
            (9, 70),
            (6, 130),
            (11, 200),
            (5, 4),
            (4, 6),
            (3, 15),
            (5, 31),
        ];
        for (i, &(rows, cols)) in shapes.iter().enumerate() {
            let dense = random_dense(rows, cols, 0.6, 90 + i as u64);
            let m = Sparse24Matrix::prune_from_dense(&dense).unwrap();
            let x = vectors(cols, 17 + i as u64);
            for simd in [false, true] {
                if simd && !avx2::supported() {
                    continue;
                }
                let backend = CpuBackend {
                    avx2: simd,
                    forced_layout: None,
                };
                let a = backend.upload_matrix(MatrixRef::Sparse24(&m)).unwrap();
                for batch in 1..=MAX_BATCH {
                    let xb = &x[..cols * batch];
                    let want = reference::spmm(MatrixRef::Sparse24(&m), xb, batch).unwrap();
                    let xv = backend.upload_vector(xb).unwrap();
                    for precision in [Precision::F16, Precision::F32] {
                        let mut y = backend.alloc_vector(rows * batch, precision).unwrap();
                        backend.multiply(&a, &xv, &mut y, batch).unwrap();
                        let got = backend.download(&y).unwrap();
                        let what = format!("{rows}×{cols}, avx2 {simd}, B = {batch}");
                        assert_agrees(&what, &want, &got);
                    }
                }
            }
        }
    }
}
