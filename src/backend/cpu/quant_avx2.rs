//! The one-vector group loops of the quantized products with AVX2 + FMA, chosen at run time
//! where the plan's `avx2` is true (quant.rs calls them for the whole groups of a row; heads,
//! tails and every other width stay in the portable loops there).
//!
//! Per aligned group of 8 stored values: the 8 codes widened to 8 i32 lanes in a register
//! (`vpmovsxbd` for int8; for int4, the 4-byte word broadcast and shifted so nibble j sits at
//! the top of lane j, then shifted back arithmetically), converted to f32 and multiplied by the
//! group's one scale (scale groups are multiples of 8 in storage order, per-row scales one per
//! row), so each value `scale · q` is exact in f32 as in the portable loops; then one FMA with x:
//! for MACKO, x gathered at the 8 columns decoded from the gap codes (one `vpgatherdd`), for
//! dense, 8 consecutive elements of x. Sums rotate through independent accumulators (2 for
//! MACKO, whose gathers bound it; 4 for dense), so consecutive FMAs do not wait on each other.
//!
//! Measured (this 2-core AVX2 VM, 2026-11-26; `macko bench --backend cpu --shapes 4096x4096
//! --densities 0.5 --values int8,int4 --iters 30`, release, one vector; median of 30 products,
//! best of 5 runs before (main, c6a0015) and of 4 after, the binaries mostly alternating;
//! scales per row for int8, per 64 values for int4; the VM was slower than for quant.rs's
//! figures, portable MACKO-int8 13.4 ms here against 6.9 there): portable → AVX2, MACKO-int8
//! 13.4 → 6.0 ms, MACKO-int4 16.4 → 6.0 ms (one run 3.1), dense-int8 22.8 → 2.7 ms, dense-int4
//! 28.2 → 3.3 ms (one run 2.7). Binary16 in the same runs: AVX2 MACKO 5.3 ms, AVX2 dense
//! 1.7–2.6 ms.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use macko_format::{QuantBits, GROUP};

#[cfg(target_arch = "x86_64")]
use super::decode::column_steps;

/// Sums the whole groups of a MACKO row's entries from `*i` (a multiple of 8) to `end`,
/// advancing `*i` and `*next` (the column after the previous entry) past them. `scale(i)` is
/// the scale of stored value `i` (`i` never decreasing). With `MASK`, an entry whose value is
/// zero adds nothing even where x is NaN or ±∞ (MACKO's padding); without, 0 · x = ±0 adds
/// nothing to a sum that starts at +0 (every x finite). A group whose columns would pass the
/// end of `x` (not in a validated matrix) is left to the caller's bounds-checked loop.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `x.len() < i32::MAX` (gather offsets are i32).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn macko_groups<const MASK: bool>(
    codes: &[u8],
    (bits, packed): (QuantBits, &[u8]),
    (i, end): (&mut usize, usize),
    next: &mut usize,
    x: &[f32],
    scale: impl FnMut(usize) -> f32,
) -> f32 {
    // The position is kept in locals and stored once at the end: stored through `i` and
    // `next`, it would be written back every group (a bounds check may panic in between).
    let (mut at, mut col) = (*i, *next);
    let sum = match bits {
        // SAFETY: the caller's guarantees are this function's.
        QuantBits::Int8 => unsafe {
            macko_loop::<MASK, false>(codes, packed, (&mut at, end), &mut col, x, scale)
        },
        // SAFETY: as above.
        QuantBits::Int4 => unsafe {
            macko_loop::<MASK, true>(codes, packed, (&mut at, end), &mut col, x, scale)
        },
    };
    (*i, *next) = (at, col);
    sum
}

/// [`macko_groups`] for one code width (`INT4`), so the loop does not test it per group.
///
/// # Safety
/// As [`macko_groups`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn macko_loop<const MASK: bool, const INT4: bool>(
    codes: &[u8],
    packed: &[u8],
    (i, end): (&mut usize, usize),
    next: &mut usize,
    x: &[f32],
    mut scale: impl FnMut(usize) -> f32,
) -> f32 {
    let (mut acc, mut other) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    while *i + GROUP <= end {
        let Some(&c) = codes
            .get(*i / 2..*i / 2 + 4)
            .and_then(|c| <&[u8; 4]>::try_from(c).ok())
        else {
            break;
        };
        let steps = column_steps(u32::from_le_bytes(c));
        // The group's last column bounds all 8.
        if *next + (steps >> 56) as usize > x.len() {
            break;
        }
        // Column of lane j: next − 1 + steps[j].
        let lanes = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(steps as i64));
        let cols = _mm256_add_epi32(lanes, _mm256_set1_epi32(*next as i32 - 1));
        // SAFETY: every lane's column is at most the group's last column, < x.len() (checked
        // above), and at least `next` ≥ 0; both fit i32 because x.len() < i32::MAX.
        let xv = unsafe { _mm256_i32gather_ps::<4>(x.as_ptr(), cols) };
        let v = values8::<INT4>(packed, *i, scale(*i));
        acc = if MASK {
            let nonzero = _mm256_cmp_ps::<_CMP_NEQ_OQ>(v, _mm256_setzero_ps());
            _mm256_add_ps(acc, _mm256_and_ps(_mm256_mul_ps(v, xv), nonzero))
        } else {
            _mm256_fmadd_ps(v, xv, acc)
        };
        // The next group adds into the other accumulator (a swap of registers, no move).
        std::mem::swap(&mut acc, &mut other);
        *next += (steps >> 56) as usize;
        *i += GROUP;
    }
    hsum(_mm256_add_ps(acc, other))
}

/// Sums the whole groups of a dense row from column `*c` to `cols`, the row's first stored
/// value being `start` (so value `start + c` is at column `c`, and `start + *c` must be a
/// multiple of 8), advancing `*c` past them. IEEE: 0 · ∞ = NaN, like the portable loop. Groups
/// past the end of `x` are left to the caller's bounds-checked loop.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dense_groups(
    (bits, packed): (QuantBits, &[u8]),
    start: usize,
    (c, cols): (&mut usize, usize),
    x: &[f32],
    mut scale: impl FnMut(usize) -> f32,
) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 4];
    let end = cols.min(x.len());
    while *c + GROUP <= end {
        let i = start + *c;
        let xs = &x[*c..*c + GROUP];
        // SAFETY: `xs` holds exactly 8 f32; loadu has no alignment requirement.
        let xv = unsafe { _mm256_loadu_ps(xs.as_ptr()) };
        let v = match bits {
            QuantBits::Int8 => values8::<false>(packed, i, scale(i)),
            QuantBits::Int4 => values8::<true>(packed, i, scale(i)),
        };
        // Rotate the four sums: each FMA's result is next used four groups later.
        acc = [acc[1], acc[2], acc[3], _mm256_fmadd_ps(v, xv, acc[0])];
        *c += GROUP;
    }
    hsum(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ))
}

/// The 8 values `scale · q` of stored values `i..i + 8` (`i` a multiple of 8, so an int4 group
/// is one aligned 4-byte word), int4 codes if `INT4` else int8, exact in f32 (11 + 8
/// significant bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn values8<const INT4: bool>(packed: &[u8], i: usize, scale: f32) -> __m256 {
    let q = match INT4 {
        false => {
            let b = &packed[i..i + GROUP];
            // SAFETY: `b` holds exactly 8 bytes, what `movq` reads; no alignment requirement.
            let b = unsafe { _mm_loadl_epi64(b.as_ptr() as *const __m128i) };
            _mm256_cvtepi8_epi32(b)
        }
        true => {
            let b = &packed[i / 2..i / 2 + 4];
            let w = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            // Nibble j (bits 4j..4j + 4) moved to the top of lane j, then back arithmetically:
            // sign-extended, −8..7.
            let up = _mm256_sllv_epi32(
                _mm256_set1_epi32(w),
                _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0),
            );
            _mm256_srai_epi32::<28>(up)
        }
    };
    _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(scale))
}

/// The sum of a register's 8 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn hsum(v: __m256) -> f32 {
    let half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let quad = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(quad, _mm_shuffle_ps::<1>(quad, quad)))
}
