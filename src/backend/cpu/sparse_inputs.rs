//! Products with a sparse input on the CPU (docs/FORMAT.md, "Sparse vectors"), for every
//! format, and the ordinary products of homogeneous CSR matrices. f32 accumulation, as in the
//! other loops; the f64 reference is `reference::spmv_sparse_x` / `spmv_transposed`.
//!
//! What each reads:
//!
//! - y = Aᵀ·x (`transposed`): x's non-zeros select rows of A, and only those rows are read
//!   (their two row pointers and their entries; for a dense matrix the row). Each selected row
//!   is scattered into y: y\[c\] += A\[i, c\]·x\[i\]. Bytes of A read scale with nnz(x) times the
//!   row length, not with the size of A; y (one f32 per column) is written in full. With a dense
//!   x, x itself is scanned once for its non-zeros.
//! - y = A·x with x sparse (`sparse_x`): the formats are row-major, so nothing tells which rows
//!   hold a given column without reading them: every row of A is read, as in y = A·x, and each
//!   entry whose column holds a zero of x is skipped (neither multiplied nor added). x is
//!   scattered once into a dense f32 copy (`cols` floats) for the lookups. What this saves
//!   over a dense x is the multiply-adds and the semantics (a NaN or ±∞ of A under a zero of x
//!   adds nothing), not bytes; the transposed product is the one whose bytes follow nnz(x).
//!
//! Zeros: an element of x that is ±0 never contributes. In the sparse formats (MACKO, CSR,
//! homogeneous CSR, 2:4, MACKO with quantized values) a zero value of A contributes nothing
//! even where x is NaN or ±∞; dense matrices, quantized or not, are IEEE.

use half::f16;
use macko_format::{code_at, HomogeneousCsrMatrix};
use rayon::prelude::*;

use super::decode::widen1;
use super::storage::{CpuData, CpuQuant, CpuSparseVector, CpuStored, ROWS_PER_TASK};

/// Rows of A one task of the transposed product scatters at least: below this a second
/// buffer of `cols` floats costs more than the rows it would take over.
const TRANSPOSED_ROWS_PER_TASK: usize = 64;

/// Whether zero values of the stored matrix are masked (the sparse formats) rather than
/// multiplied (dense, IEEE).
fn masks_zeros(a: &CpuStored) -> bool {
    !matches!(
        a,
        CpuStored::Plain(CpuData::Dense(_)) | CpuStored::Quant(CpuQuant::Dense(_))
    )
}

/// Calls `f(column, value)` for every stored entry of row `r` (every column of a dense row),
/// reading only that row. Padding positions of a 2:4 row's last group (columns at or past
/// `cols`, zeros by validation) are left out: they have no column.
#[inline]
fn visit_row(a: &CpuStored, r: usize, mut f: impl FnMut(usize, f32)) {
    match a {
        CpuStored::Plain(CpuData::Macko(m)) => {
            let (values, codes) = (m.values(), m.codes());
            let mut next = 0usize;
            for i in m.row_range(r) {
                let c = next + code_at(codes, i) as usize;
                f(c, widen1(values[i]));
                next = c + 1;
            }
        }
        CpuStored::Plain(CpuData::Bitmap(m)) => m.visit_row(r, f),
        CpuStored::Plain(CpuData::Csr(m)) => {
            let range = m.row_range(r);
            for (&c, &v) in m.col_idx()[range.clone()].iter().zip(&m.values()[range]) {
                f(c as usize, widen1(v));
            }
        }
        CpuStored::Plain(CpuData::Dense(m)) => {
            for (c, &v) in m.row(r).iter().enumerate() {
                f(c, widen1(v));
            }
        }
        CpuStored::HomogeneousCsr(m) => {
            let w = widen1(m.weight());
            for c in m.row_columns(r) {
                f(c, w);
            }
        }
        CpuStored::Sparse24(m) => {
            let cols = m.cols();
            for (c, v) in m.row_entries(r).filter(|(c, _)| *c < cols) {
                f(c, widen1(v));
            }
        }
        // Quantized values: `scale · q` is exact in f64 and rounded once to f32 here; the
        // reference counts each such term twice for that rounding.
        CpuStored::Quant(CpuQuant::Macko(m)) => {
            for (c, v) in m.row_entries(r) {
                f(c, v as f32);
            }
        }
        CpuStored::Quant(CpuQuant::Dense(m)) => {
            for c in 0..m.cols() {
                f(c, m.value(r, c) as f32);
            }
        }
    }
}

/// y = A·x with x sparse: the f32 sums, one per row (see the module's notes on what is read).
pub(super) fn sparse_x(a: &CpuStored, x: &CpuSparseVector) -> Vec<f32> {
    let (rows, cols) = a.shape();
    let mut dense = vec![0.0f32; cols];
    for &(i, v) in &x.entries {
        dense[i] = v;
    }
    let mask = masks_zeros(a);
    let mut sums = vec![0.0f32; rows];
    if x.entries.is_empty() {
        return sums;
    }
    sums.par_iter_mut()
        .enumerate()
        .with_min_len(ROWS_PER_TASK)
        .for_each(|(r, out)| {
            let mut acc = 0.0f32;
            visit_row(a, r, |c, v| {
                let xc = dense[c];
                // x's zeros are skipped; so are A's in the sparse formats. A select, not a
                // branch: which entries meet x's zeros is as random as x.
                let keep = (xc != 0.0) & !(mask & (v == 0.0));
                acc += if keep { v * xc } else { 0.0 };
            });
            *out = acc;
        });
    sums
}

/// The non-zero elements of a dense x, widened: the rows of A a transposed product reads.
pub(super) fn selected_rows(x: &[f16]) -> Vec<(usize, f32)> {
    x.iter()
        .enumerate()
        .filter(|(_, v)| !macko_format::is_zero(**v))
        .map(|(i, &v)| (i, widen1(v)))
        .collect()
}

/// y = Aᵀ·x over the selected rows `(i, x_i)` of A (x_i non-zero): the f32 sums, one per
/// column. The rows are cut into at most one contiguous run per thread, each scattered into a
/// buffer of its own, and the buffers are added in run order, so the result does not depend on
/// which thread ran what (only on the thread count).
pub(super) fn transposed(a: &CpuStored, selected: &[(usize, f32)]) -> Vec<f32> {
    let cols = a.shape().1;
    let mask = masks_zeros(a);
    let scatter = |run: &[(usize, f32)], y: &mut [f32]| {
        for &(i, xi) in run {
            visit_row(a, i, |c, v| {
                if !(mask && v == 0.0) {
                    y[c] += v * xi;
                }
            });
        }
    };
    let runs = selected
        .len()
        .div_ceil(TRANSPOSED_ROWS_PER_TASK)
        .clamp(1, rayon::current_num_threads().max(1));
    let mut y = vec![0.0f32; cols];
    if runs == 1 {
        scatter(selected, &mut y);
        return y;
    }
    let per_run = selected.len().div_ceil(runs);
    let partial: Vec<Vec<f32>> = selected
        .par_chunks(per_run)
        .map(|run| {
            let mut buf = vec![0.0f32; cols];
            scatter(run, &mut buf);
            buf
        })
        .collect();
    y.par_iter_mut()
        .enumerate()
        .with_min_len(1024)
        .for_each(|(c, out)| *out = partial.iter().map(|p| p[c]).sum());
    y
}

/// Y = A·X for a homogeneous CSR matrix and `batch` vectors (`x` row-major `[batch][cols]`):
/// the f32 sums `[batch][rows]`. Every term is weight · x\[c\], as CSR's with that value; a zero
/// weight gives zeros without reading an index (its entries are all stored zeros).
pub(super) fn spmm_homogeneous(m: &HomogeneousCsrMatrix, x: &[f16], batch: usize) -> Vec<f32> {
    let (rows, cols) = (m.rows(), m.cols());
    let mut sums = vec![0.0f32; rows * batch];
    if m.is_zero_weight() || rows == 0 {
        return sums;
    }
    let w = widen1(m.weight());
    sums.par_chunks_mut(rows)
        .zip(x.par_chunks(cols.max(1)))
        .for_each(|(y, x)| {
            let x: Vec<f32> = x.iter().map(|&v| widen1(v)).collect();
            y.par_iter_mut()
                .enumerate()
                .with_min_len(ROWS_PER_TASK)
                .for_each(|(r, out)| *out = m.row_columns(r).map(|c| w * x[c]).sum());
        });
    sums
}
