//! The MACKO group loop with AVX2 + FMA + F16C, chosen at run time where the CPU has them:
//! per group of 8 entries, one 16-byte load and `vcvtph2ps` for the values, the column steps
//! widened from bytes to 8 lanes, one `vpgatherdd` of x, one FMA. About a third of the
//! instructions of the portable loop, which is bound by per-entry scalar work, not memory.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use half::f16;
use macko_format::GROUP;

use super::decode::column_steps;

/// Whether this CPU can run [`groups`] (and the bitmap row, which also needs POPCNT: every
/// AVX2 CPU has it).
pub(super) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
            && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Sums the whole groups of entries `i..end` (`i` a multiple of 8), advancing `next` (the
/// column after the previous entry) and `i`. With `MASK`, zero-valued entries are masked so
/// NaN/∞ in x cannot leak through padding.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C ([`supported`]); `values`/`codes` must come from a
/// validated `MackoMatrix` whose columns are all `< x.len()`, and `x.len() < i32::MAX`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn groups<const MASK: bool>(
    values: &[f16],
    codes: &[u8],
    i: &mut usize,
    end: usize,
    next: &mut usize,
    x: &[f32],
) -> f32 {
    let mut acc = _mm256_setzero_ps();
    while *i + GROUP <= end {
        let c = &codes[*i / 2..*i / 2 + 4];
        let steps = column_steps(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        // Column of lane j: next − 1 + steps[j].
        let lanes = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(steps as i64));
        let cols = _mm256_add_epi32(lanes, _mm256_set1_epi32(*next as i32 - 1));
        // SAFETY: every column is < x.len() (validated matrix, x.len() == cols), so the gather
        // stays inside x; indices fit i32 because x.len() < i32::MAX.
        let xv = _mm256_i32gather_ps::<4>(x.as_ptr(), cols);
        let v = &values[*i..*i + GROUP];
        // SAFETY: `v` holds exactly 8 f16 = 16 bytes; loadu has no alignment requirement.
        let a = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr() as *const __m128i));
        acc = if MASK {
            let nonzero = _mm256_cmp_ps::<_CMP_NEQ_OQ>(a, _mm256_setzero_ps());
            _mm256_add_ps(acc, _mm256_and_ps(_mm256_mul_ps(a, xv), nonzero))
        } else {
            _mm256_fmadd_ps(a, xv, acc)
        };
        *next += (steps >> 56) as usize;
        *i += GROUP;
    }
    let half = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps::<1>(acc));
    let quad = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(quad, _mm_shuffle_ps::<1>(quad, quad)))
}

/// Dense dot product of one f16 row with an f32 x: 32 elements per step (four independent FMA
/// chains), `vcvtph2ps` for the row, the tail in scalar code. IEEE semantics (0·∞ = NaN), like
/// the portable loop.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C ([`supported`]); `a.len() == x.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dense_row(a: &[f16], x: &[f32]) -> f32 {
    let n = a.len().min(x.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, lane) in acc.iter_mut().enumerate() {
            let j = i + 8 * k;
            // SAFETY: j + 8 <= n, so both 8-element reads are inside `a` and `x`.
            let av = _mm256_cvtph_ps(_mm_loadu_si128(a.as_ptr().add(j) as *const __m128i));
            let xv = _mm256_loadu_ps(x.as_ptr().add(j));
            *lane = _mm256_fmadd_ps(av, xv, *lane);
        }
        i += 32;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps::<1>(sum));
    let quad = _mm_add_ps(half, _mm_movehl_ps(half, half));
    let mut total = _mm_cvtss_f32(_mm_add_ss(quad, _mm_shuffle_ps::<1>(quad, quad)));
    for j in i..n {
        total += a[j].to_f32() * x[j];
    }
    total
}
