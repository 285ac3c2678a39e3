//! Few-token products on the CPU: Y = A·X for a chunk of up to [`MAX_CHUNK`] vectors at once,
//! so that each entry of the matrix is decoded once and feeds every vector's sum.
//!
//! X is transposed once per chunk into `xt`, W lanes per column (W the chunk's vector count
//! rounded up to a power of two, the extra lanes zero): the W values one entry multiplies are
//! then adjacent, one vector load, and the W sums of a row are one register-wide accumulator.
//! The row loops are generic over W and instantiated inside an AVX2 + FMA function where the
//! CPU has them, so the compiler turns each entry's W multiply-adds into one or two vector FMAs.

use half::f16;
use macko_format::{code_at, CsrMatrix, DenseMatrix, MackoMatrix, GROUP};
use rayon::prelude::*;

use super::decode::column_steps;
use super::{widen1, CpuData, CpuVector, ROWS_PER_TASK};
use crate::backend::{Chunk, MAX_CHUNK};

/// Multiplies the vectors `chunk` of `x` (row-major `[batch][cols]`) into the same vectors of
/// `y` (`[batch][rows]`). `chunk.count` is 1 to [`MAX_CHUNK`].
pub(super) fn multiply_chunk(
    data: &CpuData,
    simd: bool,
    (rows, cols): (usize, usize),
    x: &[f16],
    chunk: Chunk,
    y: &mut CpuVector,
) {
    let width = chunk.count.next_power_of_two().clamp(2, MAX_CHUNK);
    let xt = transpose(x, cols, chunk, width);
    // Whether X is finite is known only now: a product with NaN/∞ masks padding entries.
    let finite = xt.iter().all(|v| v.is_finite());
    let mut sums = vec![0.0f32; rows * width];
    macro_rules! run {
        ($($w:literal)+) => {
            match width {
                $($w => rows_of::<$w>(data, simd, finite, &xt, &mut sums),)+
                _ => unreachable!("chunk widths are powers of two from 2 to MAX_CHUNK"),
            }
        };
    }
    run!(2 4 8 16);
    scatter(&sums, width, rows, chunk, y);
}

/// `xt[c · width + b]` = x of vector `chunk.first + b` at column `c`, widened; lanes past the
/// chunk's vectors are zero.
fn transpose(x: &[f16], cols: usize, chunk: Chunk, width: usize) -> Vec<f32> {
    let mut xt = vec![0.0f32; cols * width];
    for b in 0..chunk.count {
        let v = &x[(chunk.first + b) * cols..][..cols];
        for (c, &e) in v.iter().enumerate() {
            xt[c * width + b] = widen1(e);
        }
    }
    xt
}

/// Writes the chunk's sums (`sums[r · width + b]`) into its vectors of `y`.
fn scatter(sums: &[f32], width: usize, rows: usize, chunk: Chunk, y: &mut CpuVector) {
    let lanes = chunk.first * rows..(chunk.first + chunk.count) * rows;
    macro_rules! fill {
        ($y:expr, $convert:expr) => {
            $y[lanes]
                .par_chunks_mut(rows.max(1))
                .enumerate()
                .for_each(|(b, out)| {
                    for (r, o) in out.iter_mut().enumerate() {
                        *o = $convert(sums[r * width + b]);
                    }
                })
        };
    }
    match y {
        CpuVector::F16(y) => fill!(y, f16::from_f32),
        CpuVector::F32(y) => fill!(y, |v: f32| v),
    }
}

/// Every row's W sums, rows in parallel tasks.
fn rows_of<const W: usize>(data: &CpuData, simd: bool, finite: bool, xt: &[f32], sums: &mut [f32]) {
    sums.par_chunks_mut(W * ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, out)| {
            let first_row = task * ROWS_PER_TASK;
            #[cfg(target_arch = "x86_64")]
            if simd {
                // SAFETY: `simd` is the backend's `avx2::supported()` (AVX2, FMA and F16C).
                unsafe { rows_fma::<W>(data, finite, xt, first_row, out) };
                return;
            }
            let _ = simd;
            rows_plain::<W>(data, finite, xt, first_row, out);
        });
}

/// [`rows_generic`] compiled for AVX2 + FMA: the W-lane multiply-adds become vector FMAs.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_fma<const W: usize>(
    data: &CpuData,
    finite: bool,
    xt: &[f32],
    first_row: usize,
    out: &mut [f32],
) {
    rows_generic::<W, true>(data, finite, xt, first_row, out)
}

/// [`rows_generic`] for any CPU (separate multiply and add: `mul_add` without FMA hardware is
/// a slow library call).
fn rows_plain<const W: usize>(
    data: &CpuData,
    finite: bool,
    xt: &[f32],
    first_row: usize,
    out: &mut [f32],
) {
    rows_generic::<W, false>(data, finite, xt, first_row, out)
}

/// The sums of rows `first_row..` into `out` (W per row).
#[inline(always)]
fn rows_generic<const W: usize, const FMA: bool>(
    data: &CpuData,
    finite: bool,
    xt: &[f32],
    first_row: usize,
    out: &mut [f32],
) {
    for (k, o) in out.chunks_exact_mut(W).enumerate() {
        let r = first_row + k;
        let acc: [f32; W] = match (data, finite) {
            (CpuData::Macko(m), true) => macko_row::<W, FMA, false>(m, r, xt),
            (CpuData::Macko(m), false) => macko_row::<W, FMA, true>(m, r, xt),
            (CpuData::Csr(m), true) => csr_row::<W, FMA, false>(m, r, xt),
            (CpuData::Csr(m), false) => csr_row::<W, FMA, true>(m, r, xt),
            (CpuData::Dense(m), _) => dense_row::<W, FMA>(m, r, xt),
        };
        o.copy_from_slice(&acc);
    }
}

/// `acc += a · xs`, lane by lane; with `MASK`, a zero-valued entry (padding) adds nothing even
/// where X holds NaN or ±∞ (with every X finite, 0 · x = ±0 adds nothing anyway).
#[inline(always)]
fn entry<const W: usize, const FMA: bool, const MASK: bool>(
    acc: &mut [f32; W],
    a: f32,
    xs: &[f32],
) {
    if MASK && a == 0.0 {
        return;
    }
    for (s, &x) in acc.iter_mut().zip(&xs[..W]) {
        *s = if FMA { a.mul_add(x, *s) } else { *s + a * x };
    }
}

/// Row `r` of a MACKO matrix: entries one at a time at the ends of the row, whole groups of 8
/// (one code word decoded to 8 columns with one multiplication) in between.
#[inline(always)]
fn macko_row<const W: usize, const FMA: bool, const MASK: bool>(
    m: &MackoMatrix,
    r: usize,
    xt: &[f32],
) -> [f32; W] {
    let (values, codes) = (m.values(), m.codes());
    let range = m.row_range(r);
    let (mut i, end) = (range.start, range.end);
    let mut next = 0usize; // the column after the previous entry
    let mut acc = [0.0f32; W];
    let single = |i: usize, next: &mut usize, acc: &mut [f32; W]| {
        let c = *next + code_at(codes, i) as usize;
        entry::<W, FMA, MASK>(acc, widen1(values[i]), &xt[c * W..]);
        *next = c + 1;
    };
    while i < end && i % GROUP != 0 {
        single(i, &mut next, &mut acc);
        i += 1;
    }
    while i + GROUP <= end {
        let w = u32::from_le_bytes([
            codes[i / 2],
            codes[i / 2 + 1],
            codes[i / 2 + 2],
            codes[i / 2 + 3],
        ]);
        let steps = column_steps(w);
        for j in 0..GROUP {
            let c = next + ((steps >> (8 * j)) & 0xff) as usize - 1;
            entry::<W, FMA, MASK>(&mut acc, widen1(values[i + j]), &xt[c * W..]);
        }
        next += (steps >> 56) as usize;
        i += GROUP;
    }
    while i < end {
        single(i, &mut next, &mut acc);
        i += 1;
    }
    acc
}

#[inline(always)]
fn csr_row<const W: usize, const FMA: bool, const MASK: bool>(
    m: &CsrMatrix,
    r: usize,
    xt: &[f32],
) -> [f32; W] {
    let mut acc = [0.0f32; W];
    for i in m.row_range(r) {
        let c = m.col_idx()[i] as usize;
        entry::<W, FMA, MASK>(&mut acc, widen1(m.values()[i]), &xt[c * W..]);
    }
    acc
}

/// A dense row with IEEE semantics (a stored zero times ∞ is NaN, as in any dense product).
#[inline(always)]
fn dense_row<const W: usize, const FMA: bool>(m: &DenseMatrix, r: usize, xt: &[f32]) -> [f32; W] {
    let mut acc = [0.0f32; W];
    for (a, xs) in m.row(r).iter().zip(xt.chunks_exact(W)) {
        entry::<W, FMA, false>(&mut acc, widen1(*a), xs);
    }
    acc
}
