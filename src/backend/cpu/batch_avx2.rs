//! The few-token MACKO rows with AVX2 + FMA + F16C: [`macko_row`] for chunks of 8 or 16 lanes
//! (W a multiple of 8: each entry's W multiply-adds are W / 8 whole `ymm` FMAs), and
//! [`macko_row4`] for 4 lanes (one `xmm` FMA per entry; chunks of 2 to 4 vectors).
//!
//! Per group of 8 entries, about 6 instructions per entry instead of the portable loop's
//! 10 (counted in the disassembly): one 32-bit load of codes, the nibbles spread to bytes in a
//! vector register and prefix-summed with one multiplication ([`group_steps`]); the 8 column
//! offsets scaled to bytes as 8 u16 in two registers (2 instructions per entry to take one
//! out); the 8 values widened twice, 4 at a time into both halves of a register, so that each
//! entry's broadcast is one in-lane `vshufps`; the group's last column bounds all 8, so it is
//! checked once. The 8 entries of a group feed 8 independent accumulators: 8 chains of FMAs
//! keep both FMA units busy through the 4-cycle latency (the portable loop has 4).
//!
//! Every accumulator index is a constant after unrolling: one variable index (say `i % 8` for
//! the row's head and tail) makes the compiler keep all 8 in memory, a store and a load around
//! every FMA.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use macko_format::{code_at, MackoMatrix, GROUP};

#[cfg(target_arch = "x86_64")]
use super::decode::widen1;

/// Independent accumulators of a row (8 chains of FMAs: 2 FMA units × 4 cycles of latency).
#[cfg(target_arch = "x86_64")]
pub(super) const ACCS: usize = 8;

/// Row `r`'s W sums into `out` (`out.len() == W`), W a multiple of 8 up to 64 (group offsets
/// are u16: 127 columns · 64 lanes · 4 bytes < 2¹⁶). `xt` holds W lanes for each of the `cols`
/// columns. With `MASK`, a zero-valued entry (padding) is skipped so NaN or ±∞ in X cannot
/// leak through it; without, 0 · x = ±0 adds nothing (every X finite, checked once per chunk
/// by the caller).
///
/// Not `#[target_feature]` itself, so that it inlines into its caller, which must have AVX2,
/// FMA and F16C enabled (`batch::rows_fma`).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `xt.len() >= cols · W`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn macko_row<const W: usize, const MASK: bool>(
    m: &MackoMatrix,
    r: usize,
    (xt, cols): (&[f32], usize),
    out: &mut [f32],
) {
    let (values, codes) = (m.values(), m.codes());
    let range = m.row_range(r);
    let (mut i, end) = (range.start, range.end);
    let mut next = 0usize; // the column after the previous entry
    let mut acc = [_mm256_setzero_ps(); ACCS];
    let stride = W * 4; // bytes of X per column
    let base = xt.as_ptr() as *const u8;
    while i < end {
        let word = codes
            .get(i / 2..i / 2 + 4)
            .and_then(|c| <&[u8; 4]>::try_from(c).ok());
        let group = word.zip(values.get(i..i + GROUP));
        if let (0, true, Some((c, h))) = (i % GROUP, i + GROUP <= end, group) {
            let steps = group_steps(u32::from_le_bytes(*c));
            let span = (steps >> 56) as usize; // the group's last column + 1 − next
            if next + span <= cols {
                // Entry j's column − next, times the stride, as 8 u16 (at most 127 · 64 bytes).
                let rel =
                    _mm_cvtepu8_epi16(_mm_cvtsi64_si128((steps - 0x0101_0101_0101_0101) as i64));
                let rel = _mm_mullo_epi16(rel, _mm_set1_epi16(stride as i16));
                let mut lo = _mm_cvtsi128_si64(rel) as u64;
                let mut hi = _mm_extract_epi64::<1>(rel) as u64;
                // Values 0–3 (then 4–7) widened into both halves, so that each entry's
                // broadcast is one in-lane permute.
                let p = h.as_ptr() as *const i64;
                let dup_lo = _mm256_cvtph_ps(_mm_set1_epi64x(p.read_unaligned()));
                let dup_hi = _mm256_cvtph_ps(_mm_set1_epi64x(p.add(1).read_unaligned()));
                // SAFETY: next + span ≤ cols: the group's columns are inside `xt`.
                let gbase = base.add(next * stride);
                for (j, value) in h.iter().enumerate() {
                    let half = if j < 4 { &mut lo } else { &mut hi };
                    let off = (*half & 0xffff) as usize;
                    *half >>= 16;
                    if MASK && value.to_bits() & 0x7fff == 0 {
                        continue;
                    }
                    let dup = if j < 4 { dup_lo } else { dup_hi };
                    let a = _mm256_permutevar_ps(dup, _mm256_set1_epi32(j as i32 % 4));
                    fma_entry::<W>(&mut acc, j, a, gbase.add(off));
                }
                next += span;
                i += GROUP;
                continue;
            }
        }
        // One entry alone: the row's head and tail, outside whole groups.
        let c = next + code_at(codes, i) as usize;
        assert!(c < cols, "row {r}: column {c} outside a validated matrix");
        next = c + 1;
        let a = widen1(values[i]);
        if !(MASK && a == 0.0) {
            // Accumulator 0, a constant index: a variable one would keep `acc` in memory.
            fma_entry::<W>(&mut acc, 0, _mm256_set1_ps(a), base.add(c * stride));
        }
        i += 1;
    }
    let v_count = W / 8;
    for (v, o) in out.chunks_exact_mut(8).enumerate() {
        let mut sum = _mm256_setzero_ps();
        for (k, a) in acc.iter().enumerate() {
            if k % v_count == v {
                sum = _mm256_add_ps(sum, *a);
            }
        }
        // SAFETY: `o` holds 8 f32.
        _mm256_storeu_ps(o.as_mut_ptr(), sum);
    }
}

/// [`macko_row`] for 4 lanes (B = 3 or 4; B = 2 is widened to 4 lanes by the caller): each
/// entry is one `xmm` FMA with its 4 values of X as the memory operand.
///
/// Unlike [`macko_row`], the row's whole groups are sliced once, so the group loop carries no
/// per-group bounds checks but the column bound, and entry j's offset is taken from a byte
/// (its column − next, doubled: at most 254) and scaled by the address (× 8 = × 16 bytes),
/// one to three scalar instructions. The loop body is 61 instructions per group of 8 in the
/// disassembly. Measured (2-core VM, d = 0.5, B = 4, same session): 10.2–10.3 ms on 8192² and
/// 7.9–8.3 ms on 4096×14336, against 10.9–11.1 and 9.6 ms with [`macko_row`]'s per-group checks
/// and u16 offsets, and 10.5–10.6 and 8.6–8.7 ms with the slicing but u16 offsets.
/// Offsets stored as u16 and read back (`vpextrw`, two micro-ops each here) were slower still.
///
/// Rejected without building, by instruction count: a 2-lane row (B = 2) saves nothing, since
/// each entry still needs its own load, broadcast and FMA; packing two entries into one
/// register (2 lanes each in an `xmm`, or 4 each in a `ymm` with `vinsertf128`) halves the FMAs
/// but adds a second load per pair that cannot be folded into the FMA: the same count.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `xt.len() >= cols · 4`; `out.len() == 4`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn macko_row4<const MASK: bool>(
    m: &MackoMatrix,
    r: usize,
    (xt, cols): (&[f32], usize),
    out: &mut [f32],
) {
    let (values, codes) = (m.values(), m.codes());
    let range = m.row_range(r);
    let (mut i, end) = (range.start, range.end);
    let mut next = 0usize; // the column after the previous entry
    let mut acc = [_mm_setzero_ps(); ACCS];
    const STRIDE: usize = 16; // bytes of X per column
    let base = xt.as_ptr() as *const u8;
    // One entry alone: the row's head and tail, outside whole groups.
    let single = |i: usize, next: &mut usize, acc: &mut __m128| {
        let c = *next + code_at(codes, i) as usize;
        assert!(c < cols, "row {r}: column {c} outside a validated matrix");
        *next = c + 1;
        let a = widen1(values[i]);
        if !(MASK && a == 0.0) {
            // SAFETY: c < cols (checked above).
            let x = unsafe { _mm_loadu_ps(base.add(c * STRIDE) as *const f32) };
            *acc = _mm_fmadd_ps(_mm_set1_ps(a), x, *acc);
        }
    };
    while i < end && i % GROUP != 0 {
        single(i, &mut next, &mut acc[0]);
        i += 1;
    }
    // The whole groups, their values and code words sliced once.
    let n = (end - i.min(end)) / GROUP;
    let groups = values
        .get(i..i + n * GROUP)
        .zip(codes.get(i / 2..i / 2 + n * 4));
    if let Some((gv, gc)) = groups {
        for (h, c) in gv.chunks_exact(GROUP).zip(gc.chunks_exact(4)) {
            let steps = group_steps(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            let span = (steps >> 56) as usize; // the group's last column + 1 − next
            if next + span > cols {
                break; // unreachable for a validated matrix; `single` then checks each entry
            }
            // Entry j's column − next, doubled, in byte j: times 8 in the address.
            let rel2 = doubled_columns(steps);
            let p = h.as_ptr() as *const i64;
            let v_lo = _mm_cvtph_ps(_mm_loadl_epi64(p as *const __m128i));
            let v_hi = _mm_cvtph_ps(_mm_loadl_epi64(p.add(1) as *const __m128i));
            // SAFETY: next + span ≤ cols: the group's columns are inside `xt`.
            let gbase = base.add(next * STRIDE);
            for (j, value) in h.iter().enumerate() {
                let off = ((rel2 >> (8 * j)) & 0xff) as usize * 8;
                if MASK && value.to_bits() & 0x7fff == 0 {
                    continue;
                }
                let v = if j < 4 { v_lo } else { v_hi };
                let a = _mm_permutevar_ps(v, _mm_set1_epi32(j as i32 % 4));
                let x = _mm_loadu_ps(gbase.add(off) as *const f32);
                acc[j] = _mm_fmadd_ps(a, x, acc[j]);
            }
            next += span;
            i += GROUP;
        }
    }
    while i < end {
        single(i, &mut next, &mut acc[0]);
        i += 1;
    }
    let sum = acc.iter().fold(_mm_setzero_ps(), |s, a| _mm_add_ps(s, *a));
    if let Ok(o) = <&mut [f32; 4]>::try_from(out) {
        // SAFETY: `o` holds 4 f32.
        _mm_storeu_ps(o.as_mut_ptr(), sum);
    }
}

/// One entry's W / 8 FMAs: `av` (the entry's value in every lane) times the W lanes at `x`,
/// into accumulators chosen by the entry's place `j` in its group.
///
/// # Safety
/// AVX2 and FMA enabled in the caller; `x` points at W readable f32.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn fma_entry<const W: usize>(
    acc: &mut [__m256; ACCS],
    j: usize,
    av: __m256,
    x: *const u8,
) {
    let v_count = W / 8;
    for v in 0..v_count {
        let k = (j * v_count + v) % ACCS;
        let xv = _mm256_loadu_ps((x as *const f32).add(8 * v));
        acc[k] = _mm256_fmadd_ps(av, xv, acc[k]);
    }
}

/// Byte j: entry j's column − the group's base column (`next`), doubled, from
/// [`group_steps`]' prefix sums. At most 2 · 127 = 254, so each fits its byte, and × 8 in an
/// address makes it the byte offset of the column's 4 lanes (16 bytes).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn doubled_columns(steps: u64) -> u64 {
    (steps - 0x0101_0101_0101_0101) << 1
}

/// `decode::column_steps` of a code word, with the nibbles spread to bytes by four vector
/// instructions (the scalar spread takes three rounds of shift, or and mask): byte j is
/// Σ_{k≤j} (g_k + 1), entry j's column − the previous group's end + 1.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn group_steps(word: u32) -> u64 {
    let bytes = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(word as i32));
    let nibbles = _mm_and_si128(
        _mm_or_si128(bytes, _mm_slli_epi16::<4>(bytes)),
        _mm_set1_epi16(0x0f0f),
    );
    let gaps = _mm_cvtsi128_si64(nibbles) as u64;
    (gaps + 0x0101_0101_0101_0101).wrapping_mul(0x0101_0101_0101_0101)
}

#[cfg(test)]
#[cfg(target_arch = "x86_64")]
mod tests {
    use super::*;
    use crate::backend::cpu::avx2;
    use crate::backend::cpu::decode::column_steps;

    #[test]
    fn group_steps_equal_the_scalar_column_steps() {
        if !avx2::supported() {
            return;
        }
        let mut w = 0x0123_4567u32;
        for _ in 0..100_000 {
            // SAFETY: AVX2 is present (checked above); `group_steps` needs only SSE4.1.
            let fast = unsafe { group_steps(w) };
            assert_eq!(fast, column_steps(w), "{w:#010x}");
            w = w.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        }
        // SAFETY: as above.
        let ones = unsafe { group_steps(u32::MAX) };
        assert_eq!(ones, column_steps(u32::MAX));
    }

    #[test]
    fn doubled_columns_are_twice_the_scalar_columns() {
        let mut w = 0x89ab_cdefu32;
        for k in 0..100_001 {
            let w_k = if k == 100_000 { u32::MAX } else { w };
            let steps = super::super::decode::column_steps(w_k);
            let fast = doubled_columns(steps);
            for j in 0..GROUP {
                let column = ((steps >> (8 * j)) & 0xff) - 1;
                assert_eq!(
                    (fast >> (8 * j)) & 0xff,
                    2 * column,
                    "{w_k:#010x} entry {j}"
                );
            }
            w = w.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        }
    }
}
