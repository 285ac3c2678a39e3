//! Few-token products on the CPU: Y = A·X for a chunk of up to [`MAX_CHUNK`] vectors at once,
//! so that each entry of the matrix is decoded once and feeds every vector's sum.
//!
//! X is transposed once per chunk into `xt`, W lanes per column (W the chunk's vector count
//! rounded up to a power of two, the extra lanes zero): the W values one entry multiplies are
//! then adjacent, one vector load, and the W sums of a row are one register-wide accumulator.
//! The row loops are generic over W and instantiated inside an AVX2 + FMA function where the
//! CPU has them, so the compiler turns each entry's W multiply-adds into one or two vector FMAs.

use half::f16;
use macko_format::{code_at, CsrMatrix, MackoMatrix, GROUP};
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::batch_avx2;
use super::bitmap::{BitmapMatrix, BLOCK};
#[cfg(target_arch = "x86_64")]
use super::bitmap_avx2;
use super::decode::{column_steps, widen1, widen8};
use super::storage::{CpuData, CpuVector, ROWS_PER_TASK};
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
    let mut width = chunk.count.next_power_of_two().clamp(2, MAX_CHUNK);
    if simd && matches!(data, CpuData::Macko(_) | CpuData::Bitmap(_)) {
        // Two vectors take the 4-lane AVX2 row, lanes 2 and 3 zero: a 2-lane row would need
        // as many instructions per entry (see `batch_avx2::macko_row4`).
        width = width.max(4);
    }
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
                // SAFETY: `simd` is the backend's `avx2::supported()` (AVX2, FMA, F16C and POPCNT).
                unsafe { rows_fma::<W>(data, finite, xt, first_row, out) };
                return;
            }
            let _ = simd;
            rows_plain::<W>(data, finite, xt, first_row, out);
        });
}

/// [`rows_generic`] compiled for AVX2 + FMA + F16C: the W-lane multiply-adds become vector FMAs
/// and 8 values are widened with one instruction. MACKO rows at W = 8 and 16 take the
/// hand-vectorised [`batch_avx2::macko_row`] instead (8 FMA chains and about 6 instructions per
/// entry, against 4 chains and about 10 here; 8192², d = 0.5 on the 2-core VM, same runs:
/// B = 8 11.5–12.0 ms against 15.6–16.0 ms, B = 16 19.6–19.8 ms against 23.6–23.8 ms), and at
/// W = 4 (B = 2 to 4) [`batch_avx2::macko_row4`] (later runs, minimum of three: B = 2 10.1 ms
/// and B = 4 9.2 ms against 16.3 and 17.1 ms here; dense 16.5 and 13.7 ms).
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,popcnt")]
unsafe fn rows_fma<const W: usize>(
    data: &CpuData,
    finite: bool,
    xt: &[f32],
    first_row: usize,
    out: &mut [f32],
) {
    if let CpuData::Bitmap(m) = data {
        let cols = m.shape().1;
        if (W == 4 || W % 8 == 0) && xt.len() >= cols * W && xt.len() <= (u32::MAX / 4) as usize {
            let mut offsets = Vec::new();
            for (k, o) in out.chunks_exact_mut(W).enumerate() {
                // SAFETY: AVX2, FMA, F16C and POPCNT are enabled here; W and `xt` are checked
                // just above (and again inside).
                unsafe { bitmap_avx2::row_few::<W>(m, first_row + k, xt, &mut offsets, o) };
            }
            return;
        }
    }
    if let CpuData::Macko(m) = data {
        let cols = m.cols();
        if W == 4 && xt.len() >= cols * 4 {
            for (k, o) in out.chunks_exact_mut(4).enumerate() {
                // SAFETY: AVX2, FMA and F16C are enabled here; `xt` holds 4 lanes for each
                // column (checked just above).
                unsafe {
                    if finite {
                        batch_avx2::macko_row4::<false>(m, first_row + k, (xt, cols), o);
                    } else {
                        batch_avx2::macko_row4::<true>(m, first_row + k, (xt, cols), o);
                    }
                }
            }
            return;
        }
        if W % 8 == 0 && xt.len() >= cols * W {
            for (k, o) in out.chunks_exact_mut(W).enumerate() {
                // SAFETY: AVX2, FMA and F16C are enabled here; `xt` holds W lanes for each
                // column (checked just above).
                unsafe {
                    if finite {
                        batch_avx2::macko_row::<W, false>(m, first_row + k, (xt, cols), o);
                    } else {
                        batch_avx2::macko_row::<W, true>(m, first_row + k, (xt, cols), o);
                    }
                }
            }
            return;
        }
    }
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
///
/// Measured and rejected (2-core AVX2 VM, 4096², d = 0.5, W = 8): walking a block of rows one
/// tile of columns at a time so the transposed X stays in L1 was slower (16 KiB tiles: MACKO
/// 10.4 ms, dense 8.3–9.1 ms; untiled 8.4 and 6.7–7.2 ms): the whole transposed X (128 KiB)
/// streams from L2 fast enough, and a block of rows read in tiles breaks the matrix's stream.
/// Dense rows taken in pairs, each X load feeding both rows, gained at most 5 % (7.3–7.5 ms
/// against 7.4–7.9, one thread): X's traffic is not what bounds these loops.
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
            (CpuData::Dense(m), _) => dense_row::<W, FMA>(m.row(r), xt),
            // Kept entries only, all non-zero: nothing to mask.
            (CpuData::Bitmap(m), _) => bitmap_row::<W, FMA>(m, r, xt),
        };
        o.copy_from_slice(&acc);
    }
}

/// Independent accumulator sets a row's entries rotate through: one set's W sums form a chain of
/// dependent multiply-adds (4 cycles each on current x86 cores), so four sets keep enough FMAs
/// in flight to use the FMA units rather than wait on the previous sum.
const SETS: usize = 4;

/// The W sums of a row, kept in [`SETS`] independent sets.
type Sums<const W: usize> = [[f32; W]; SETS];

/// `sums[set] += a · xs`, lane by lane; with `MASK`, a zero-valued entry (padding) adds nothing
/// even where X holds NaN or ±∞ (with every X finite, 0 · x = ±0 adds nothing anyway).
#[inline(always)]
fn entry<const W: usize, const FMA: bool, const MASK: bool>(
    sums: &mut Sums<W>,
    set: usize,
    a: f32,
    xs: &[f32],
) {
    if MASK && a == 0.0 {
        return;
    }
    for (s, &x) in sums[set % SETS].iter_mut().zip(&xs[..W]) {
        *s = if FMA { a.mul_add(x, *s) } else { *s + a * x };
    }
}

/// The row's result: the sets added lane by lane.
#[inline(always)]
fn total<const W: usize>(sums: &Sums<W>) -> [f32; W] {
    let mut out = [0.0f32; W];
    for set in sums {
        for (o, s) in out.iter_mut().zip(set) {
            *o += s;
        }
    }
    out
}

/// Eight binary16 values to f32: with `F16C` (only inside [`rows_fma`], whose CPU has it) one
/// `vcvtph2ps`, else the portable [`widen8`].
#[inline(always)]
fn widen_group<const F16C: bool>(h: &[f16]) -> [f32; GROUP] {
    #[cfg(target_arch = "x86_64")]
    if F16C {
        use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm_loadu_si128};
        let mut out = [0.0f32; GROUP];
        // SAFETY: `h` has at least 8 elements (callers pass whole groups); F16C is true only
        // on the AVX2 + FMA + F16C path (`rows_fma`, called where `avx2::supported()`).
        unsafe {
            let v = _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr() as *const __m128i));
            std::ptr::copy_nonoverlapping(&v as *const _ as *const f32, out.as_mut_ptr(), GROUP);
        }
        return out;
    }
    widen8(h)
}

/// Row `r` of a MACKO matrix: entries one at a time up to the first aligned group, then whole
/// groups of 8 (one code word decoded to 8 columns with one multiplication, 8 values widened at
/// once), then one at a time to the row's end. The sums are locals, so they stay in registers.
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
    let mut sums = [[0.0f32; W]; SETS];
    let single = |i: usize, next: &mut usize, sums: &mut Sums<W>| {
        let c = *next + code_at(codes, i) as usize;
        entry::<W, FMA, MASK>(sums, i, widen1(values[i]), &xt[c * W..]);
        *next = c + 1;
    };
    while i < end && i % GROUP != 0 {
        single(i, &mut next, &mut sums);
        i += 1;
    }
    while i + GROUP <= end {
        let k = i / 2;
        let w = u32::from_le_bytes([codes[k], codes[k + 1], codes[k + 2], codes[k + 3]]);
        let steps = column_steps(w);
        let v = widen_group::<FMA>(&values[i..i + GROUP]);
        // The group's last column bounds all 8: one check instead of one per entry.
        let last = next + (steps >> 56) as usize - 1;
        let Some(window) = xt.get(next * W..(last + 1) * W) else {
            break; // unreachable for a validated matrix; `single` then checks each entry
        };
        for (j, &a) in v.iter().enumerate() {
            let c = ((steps >> (8 * j)) & 0xff) as usize - 1;
            entry::<W, FMA, MASK>(&mut sums, j, a, &window[c * W..]);
        }
        next += (steps >> 56) as usize;
        i += GROUP;
    }
    while i < end {
        single(i, &mut next, &mut sums);
        i += 1;
    }
    total(&sums)
}

/// Row `r` of a bitmap matrix: each mask byte decoded once, its set bits in turn, each kept
/// value feeding the W lanes of its column. Only kept (non-zero) entries are read, so NaN or
/// ±∞ of X at other columns never reach the sums.
#[inline(always)]
fn bitmap_row<const W: usize, const FMA: bool>(m: &BitmapMatrix, r: usize, xt: &[f32]) -> [f32; W] {
    let (masks, values) = m.row(r);
    let mut sums = [[0.0f32; W]; SETS];
    let mut p = 0;
    for (b, &mask) in masks.iter().enumerate() {
        let mut bits = mask;
        while bits != 0 {
            let c = b * BLOCK + bits.trailing_zeros() as usize;
            entry::<W, FMA, false>(&mut sums, p, widen1(values[p]), &xt[c * W..]);
            p += 1;
            bits &= bits - 1;
        }
    }
    total(&sums)
}

#[inline(always)]
fn csr_row<const W: usize, const FMA: bool, const MASK: bool>(
    m: &CsrMatrix,
    r: usize,
    xt: &[f32],
) -> [f32; W] {
    let mut sums = [[0.0f32; W]; SETS];
    for i in m.row_range(r) {
        let c = m.col_idx()[i] as usize;
        entry::<W, FMA, MASK>(&mut sums, i, widen1(m.values()[i]), &xt[c * W..]);
    }
    total(&sums)
}

/// A dense row with IEEE semantics (a stored zero times ∞ is NaN, as in any dense product):
/// 8 values widened at once, each feeding W lanes.
#[inline(always)]
fn dense_row<const W: usize, const FMA: bool>(a: &[f16], xt: &[f32]) -> [f32; W] {
    let mut local = [[0.0f32; W]; SETS];
    let sums = &mut local;
    let mut groups = a.chunks_exact(GROUP);
    let mut c = 0;
    for g in &mut groups {
        let v = widen_group::<FMA>(g);
        for (j, &a) in v.iter().enumerate() {
            entry::<W, FMA, false>(sums, j, a, &xt[(c + j) * W..]);
        }
        c += GROUP;
    }
    for (j, &a) in groups.remainder().iter().enumerate() {
        entry::<W, FMA, false>(sums, j, widen1(a), &xt[(c + j) * W..]);
    }
    total(&local)
}
