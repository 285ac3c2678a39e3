//! The 2:4 row loop (sparse24.rs) with AVX2 + FMA + F16C, chosen at run time where the CPU has
//! them. Per step of 4 groups (16 columns, 8 stored values): one 16-byte load and `vcvtph2ps`
//! for the values, the step's 16 bits of positions as two bytes that each index a table of 4
//! lane indices, and per vector two plain loads of x's 16 columns, two `vpermps` and a blend
//! that move each value's x under it, a mask that zeroes the x of zero values (NaN and ±∞ in x
//! never meet a stored zero), one FMA. About 9 micro-ops per 8 entries and vector, no gather;
//! the positions and values are decoded once for all the vectors of a few-token product.
//!
//! x is read widened to f32 and padded with zeros to whole steps (`widened_x`), so the last
//! step of a row may look past `cols` (where only padding positions, with zero values, point).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use half::f16;
use macko_format::sparse24::GROUP24;

use super::decode::widen1;

/// Groups per step of the vector loop: 16 columns, two meta bytes, 8 values.
pub(super) const STEP_GROUPS: usize = 4;

/// How far ahead of the step (in binary16 values, 1 KiB) the one-vector loop asks for the
/// matrix's values: measured on the 2-core VM (2026-11-29, three alternated runs), 11008×4096
/// 2.77–2.81 against 3.18–4.42 ms and 8192² 3.82–4.88 against 5.61–6.66 ms without it.
#[cfg(target_arch = "x86_64")]
const PREFETCH_VALUES: usize = 512;

/// Columns per step.
const STEP_COLS: usize = STEP_GROUPS * GROUP24;

/// x of each vector widened to f32, `[batch][stride]`, zero past `cols`: `stride` is a multiple
/// of 16 at or past `cols` (a step's two 8-column loads never leave the vector) plus 16, so that
/// vectors of a power-of-two width do not start 4 KiB apart (measured: with 16 vectors the
/// loads of one step then fell into one L1 set, 5.6× the time of 8 vectors).
pub(super) fn widened_x(x: &[f16], cols: usize, batch: usize) -> (Vec<f32>, usize) {
    let stride = cols.div_ceil(STEP_COLS) * STEP_COLS + STEP_COLS;
    let mut xw = vec![0.0f32; stride * batch];
    for (v, out) in x
        .chunks_exact(cols.max(1))
        .take(batch)
        .zip(xw.chunks_exact_mut(stride))
    {
        for (o, &e) in out.iter_mut().zip(v) {
            *o = widen1(e);
        }
    }
    (xw, stride)
}

/// For each meta byte (the nibbles of two groups, the first group's low), the lane indices of
/// its 4 values into the two groups' 8 columns: the first group's two positions, then the
/// second group's plus 4.
#[cfg(target_arch = "x86_64")]
#[repr(align(16))]
struct IndexTable([[i32; 4]; 256]);

#[cfg(target_arch = "x86_64")]
static INDICES: IndexTable = IndexTable(index_table());

#[cfg(target_arch = "x86_64")]
const fn index_table() -> [[i32; 4]; 256] {
    let mut table = [[0i32; 4]; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = [
            (b & 3) as i32,
            ((b >> 2) & 3) as i32,
            4 + ((b >> 4) & 3) as i32,
            4 + ((b >> 6) & 3) as i32,
        ];
        b += 1;
    }
    table
}

/// The 16 bits of positions of groups `g .. g + 4` (nibble k the positions of group g + k).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn step_nibbles(meta: &[u8], g: usize) -> u32 {
    let byte = g / 2;
    if g % 2 == 0 {
        u32::from(meta[byte]) | u32::from(meta[byte + 1]) << 8
    } else {
        let bits = u32::from(meta[byte]) >> 4
            | u32::from(meta[byte + 1]) << 4
            | u32::from(meta[byte + 2]) << 12;
        bits & 0xffff
    }
}

/// The values of groups `$g .. $g + 4` as f32, their lane indices into the step's two halves of
/// 8 columns, and their live mask (all ones where the value is not ±0; NaN is live). A macro,
/// not a function: a `#[target_feature]` function is not inlined into its caller, and the
/// three registers then went through the stack on every step (measured: 5× slower).
#[cfg(target_arch = "x86_64")]
macro_rules! step {
    ($values:expr, $meta:expr, $g:expr, $table:expr, $zero:expr) => {{
        let g = $g;
        let v = _mm256_cvtph_ps(_mm_loadu_si128($values.as_ptr().add(2 * g).cast()));
        let n = step_nibbles($meta, g);
        let lo = _mm_load_si128($table.add((n & 0xff) as usize).cast());
        let hi = _mm_load_si128($table.add((n >> 8) as usize).cast());
        (
            v,
            _mm256_set_m128i(hi, lo),
            _mm256_cmp_ps::<_CMP_NEQ_UQ>(v, $zero),
        )
    }};
}

/// x under each of the step's 8 values: lanes 0–3 from the first 8 columns at `$x`, lanes 4–7
/// from the next 8, zero where the value is not live (a macro for the reason of [`step`]).
#[cfg(target_arch = "x86_64")]
macro_rules! gather16 {
    ($x:expr, $idx:expr, $live:expr) => {{
        let x = $x;
        let first = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x), $idx);
        let second = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x.add(8)), $idx);
        _mm256_and_ps(_mm256_blend_ps::<0xf0>(first, second), $live)
    }};
}

/// Adds the products of groups `g0 .. g0 + 4 · steps` (one row's whole steps, its first column
/// at column 0 of each vector's slice) to `sums[b]` for every vector b of `xw` (`[batch][stride]`,
/// `sums.len()` vectors).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`avx2::supported`); `values` and `meta` must hold
/// groups `g0 .. g0 + 4 · steps` (two values and a nibble each, as a validated
/// `Sparse24Matrix` stores them), and every vector's slice of `xw` at least `16 · steps`
/// elements (`widened_x`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn row_steps(
    values: &[f16],
    meta: &[u8],
    g0: usize,
    steps: usize,
    xw: &[f32],
    stride: usize,
    sums: &mut [f32],
) {
    debug_assert!(values.len() >= 2 * (g0 + STEP_GROUPS * steps));
    debug_assert!(stride >= STEP_COLS * steps && xw.len() >= stride * sums.len());
    let zero = _mm256_setzero_ps();
    let table = INDICES.0.as_ptr();
    // One vector: two accumulators over alternate steps (4-cycle FMA latency).
    if sums.len() == 1 {
        let (mut acc0, mut acc1) = (zero, zero);
        let x = xw.as_ptr();
        let mut s = 0;
        while s + 2 <= steps {
            let ahead = 2 * (g0 + STEP_GROUPS * s) + PREFETCH_VALUES;
            _mm_prefetch::<_MM_HINT_T0>(values.as_ptr().wrapping_add(ahead).cast());
            let (v, idx, live) = step!(values, meta, g0 + STEP_GROUPS * s, table, zero);
            acc0 = _mm256_fmadd_ps(v, gather16!(x.add(STEP_COLS * s), idx, live), acc0);
            let (v, idx, live) = step!(values, meta, g0 + STEP_GROUPS * (s + 1), table, zero);
            acc1 = _mm256_fmadd_ps(v, gather16!(x.add(STEP_COLS * (s + 1)), idx, live), acc1);
            s += 2;
        }
        if s < steps {
            let (v, idx, live) = step!(values, meta, g0 + STEP_GROUPS * s, table, zero);
            acc0 = _mm256_fmadd_ps(v, gather16!(x.add(STEP_COLS * s), idx, live), acc0);
        }
        sums[0] += hsum(_mm256_add_ps(acc0, acc1));
        return;
    }
    // A few vectors: pieces of 8, 4, 2 and 1 vectors, each decoding the row's steps once.
    let mut first = 0;
    for w in [8, 4, 2, 1] {
        while sums.len() - first >= w {
            let (x, y) = (&xw[first * stride..], &mut sums[first..first + w]);
            match w {
                8 => few::<8>(values, meta, g0, steps, (x, stride), y),
                4 => few::<4>(values, meta, g0, steps, (x, stride), y),
                2 => few::<2>(values, meta, g0, steps, (x, stride), y),
                _ => few::<1>(values, meta, g0, steps, (x, stride), y),
            }
            first += w;
        }
    }
}

/// [`row_steps`] for W vectors: each step decoded once, one accumulator per vector kept in a
/// register (W ≤ 8 of the 16; the loops over W unroll).
///
/// # Safety
/// As [`row_steps`], with `sums.len() == W`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn few<const W: usize>(
    values: &[f16],
    meta: &[u8],
    g0: usize,
    steps: usize,
    (xw, stride): (&[f32], usize),
    sums: &mut [f32],
) {
    let zero = _mm256_setzero_ps();
    let table = INDICES.0.as_ptr();
    let x = xw.as_ptr();
    let mut acc = [zero; W];
    for s in 0..steps {
        let (v, idx, live) = step!(values, meta, g0 + STEP_GROUPS * s, table, zero);
        for (b, a) in acc.iter_mut().enumerate() {
            let sel = gather16!(x.add(b * stride + STEP_COLS * s), idx, live);
            *a = _mm256_fmadd_ps(v, sel, *a);
        }
    }
    for (y, a) in sums.iter_mut().zip(acc.iter()) {
        *y += hsum(*a);
    }
}

/// The sum of a register's 8 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
}
