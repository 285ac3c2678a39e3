//! The bitmap layout's row loop (bitmap.rs) with AVX2 + FMA + F16C, chosen at run time where
//! the CPU has them. Per block of 8 columns: the mask byte indexes a table of 8 lane indices,
//! 8 packed values (from the block's first kept one) are widened with one `vcvtph2ps` and moved
//! to their columns' lanes with one `vpermps`, lanes without a kept entry are zeroed by a blend
//! on the same indices' sign bits, and one FMA takes x's 8 columns with a plain load: no
//! gather. The value pointer then advances by the mask's population count. About 10 micro-ops
//! per 8 columns at any density, where the MACKO group loop spends a gather per 8 entries.
//!
//! No AVX-512 path: `vexpandps` would replace the table and the permutation, but the VM this
//! was measured on (AMD EPYC, Zen 3) has no AVX-512, and a path that cannot be run here is
//! not shipped untested.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::batch_avx2::{fma_entry, ACCS};
#[cfg(target_arch = "x86_64")]
use super::bitmap::{BitmapMatrix, BLOCK};
#[cfg(target_arch = "x86_64")]
use super::decode::widen1;

/// Blocks of the one-vector row whose FMAs go to independent accumulators (4-cycle FMA
/// latency; two FMA units).
#[cfg(target_arch = "x86_64")]
const ROW_ACCS: usize = 4;

/// For each mask byte, lane j's index into the block's packed values (the number of set bits
/// below j), with the sign bit set where bit j is set: `vpermps` reads the low 3 bits, the
/// blend reads the sign.
#[cfg(target_arch = "x86_64")]
#[repr(align(32))]
struct LaneTable([[i32; BLOCK]; 256]);

#[cfg(target_arch = "x86_64")]
static LANES: LaneTable = LaneTable(lane_table());

/// For each mask byte, a `pshufb` control that moves the block's packed binary16 values (16
/// bytes from its first kept one) to their columns' lanes and zeroes the lanes without a kept
/// entry (control byte 0x80): 16 bytes a mask, 4 KiB in all.
#[cfg(target_arch = "x86_64")]
#[repr(align(16))]
struct ShuffleTable([[u8; 2 * BLOCK]; 256]);

#[cfg(target_arch = "x86_64")]
static SHUFFLES: ShuffleTable = ShuffleTable(shuffle_table());

#[cfg(target_arch = "x86_64")]
const fn shuffle_table() -> [[u8; 2 * BLOCK]; 256] {
    let mut table = [[0x80u8; 2 * BLOCK]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut j, mut kept) = (0, 0u8);
        while j < BLOCK {
            if (mask >> j) & 1 == 1 {
                table[mask][2 * j] = 2 * kept;
                table[mask][2 * j + 1] = 2 * kept + 1;
                kept += 1;
            }
            j += 1;
        }
        mask += 1;
    }
    table
}

#[cfg(target_arch = "x86_64")]
const fn lane_table() -> [[i32; BLOCK]; 256] {
    let mut table = [[0i32; BLOCK]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut j, mut kept) = (0, 0);
        while j < BLOCK {
            if (mask >> j) & 1 == 1 {
                table[mask][j] = kept | i32::MIN;
                kept += 1;
            }
            j += 1;
        }
        mask += 1;
    }
    table
}

/// Row `r` of y = A·x. `x` holds at least ⌈cols / 8⌉·8 elements (the caller pads it with
/// zeros), checked here. With `MASK` (x not all finite) the lanes without a kept entry are
/// zeroed after the multiplication, so NaN/∞ of x there cannot reach the sum: the values are
/// widened, permuted to their lanes ([`LANES`]), multiplied, and the products of other lanes
/// dropped. Without (every x finite, the common case), 0 · x = 0 adds nothing, so the values
/// are moved to their lanes and the others zeroed while still binary16, by one `pshufb`
/// ([`SHUFFLES`]), then widened: no mask, 9 instructions a block in the disassembly, where
/// widening, permuting and masking took 11 (11008×4096 at d = 0.5 on the 2-core VM, fastest
/// of 25: 2.9 ms against 3.7 ms, runs two minutes apart; the dense product 3.9 and 3.7 ms).
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and POPCNT (`avx2::supported()`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,popcnt")]
pub(super) unsafe fn row<const MASK: bool>(m: &BitmapMatrix, r: usize, x: &[f32]) -> f32 {
    let (masks, values) = m.row(r);
    let n = masks.len();
    assert!(
        x.len() >= n * BLOCK,
        "x of {} elements for {n} blocks",
        x.len()
    );
    let mut acc = [_mm256_setzero_ps(); ROW_ACCS];
    let mut v = values.as_ptr();
    let xp = x.as_ptr();
    let table = LANES.0.as_ptr();
    let shuffles = SHUFFLES.0.as_ptr();
    // One block: `k` picks the accumulator (a constant after unrolling).
    let mut block = |b: usize, k: usize, acc: &mut [__m256; ROW_ACCS]| {
        // SAFETY: b < n = masks.len(); the tables have 256 rows (of 8 i32, 32-byte aligned,
        // and of 16 bytes, 16-byte aligned).
        // `v` is at the block's first kept value, and the row's values are followed by at
        // least 8 more (BitmapMatrix's invariants), so 8 values (16 bytes) are readable.
        // x[8b..8b + 8] is inside x (asserted above).
        unsafe {
            let mask = *masks.get_unchecked(b);
            let xv = _mm256_loadu_ps(xp.add(b * BLOCK));
            acc[k] = if MASK {
                let idx = _mm256_load_si256(table.add(mask as usize) as *const __m256i);
                let packed = _mm256_cvtph_ps(_mm_loadu_si128(v as *const __m128i));
                let a = _mm256_permutevar8x32_ps(packed, idx);
                let keep = _mm256_castsi256_ps(idx);
                let product = _mm256_mul_ps(a, xv);
                _mm256_add_ps(acc[k], _mm256_blendv_ps(_mm256_setzero_ps(), product, keep))
            } else {
                let control = _mm_load_si128(shuffles.add(mask as usize) as *const __m128i);
                let packed = _mm_loadu_si128(v as *const __m128i);
                let a = _mm256_cvtph_ps(_mm_shuffle_epi8(packed, control));
                _mm256_fmadd_ps(a, xv, acc[k])
            };
            v = v.add(mask.count_ones() as usize);
        }
    };
    let mut b = 0;
    while b + ROW_ACCS <= n {
        for k in 0..ROW_ACCS {
            block(b + k, k, &mut acc);
        }
        b += ROW_ACCS;
    }
    while b < n {
        block(b, 0, &mut acc);
        b += 1;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps::<1>(sum));
    let quad = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(quad, _mm_shuffle_ps::<1>(quad, quad)))
}

/// For each mask byte, the positions of its set bits, in order, packed to the front (the
/// lanes past its population count are 0 and overwritten by the next block's).
#[cfg(target_arch = "x86_64")]
#[repr(align(32))]
struct PositionTable([[u32; BLOCK]; 256]);

#[cfg(target_arch = "x86_64")]
static POSITIONS: PositionTable = PositionTable(position_table());

#[cfg(target_arch = "x86_64")]
const fn position_table() -> [[u32; BLOCK]; 256] {
    let mut table = [[0u32; BLOCK]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut j, mut kept) = (0, 0);
        while j < BLOCK {
            if (mask >> j) & 1 == 1 {
                table[mask][kept] = j as u32;
                kept += 1;
            }
            j += 1;
        }
        mask += 1;
    }
    table
}

/// Row `r`'s W sums of a few-token product into `out` (`out.len() == W`, W = 4 or a multiple
/// of 8 up to 16), `xt` holding W lanes per column (`xt.len() >= cols · W`, `4 · xt.len()`
/// below 2³²). Decoded once, reused by every vector: the row's masks are first turned into
/// the byte offsets of its kept columns in `xt` (per block: 8 positions from a table, shifted
/// and offset, stored at once, the write pointer advanced by the population count: no
/// branch), then the kept entries are taken 8 at a time as in the MACKO rows of
/// batch_avx2.rs, each entry's value broadcast and multiplied with its column's W lanes,
/// 8 independent accumulators. Only kept (non-zero) entries are multiplied, so NaN/∞ of X at
/// other columns never reach the sums: nothing to mask.
///
/// Measured against the first bitmap few-token loop (each block's set bits in turn, the
/// portable `batch::bitmap_row`), which branched on every bit and ran 6–8× slower than the
/// MACKO rows (BENCHMARKS.md, "CPU products at a realistic size").
///
/// Not `#[target_feature]` itself, so that it inlines into its caller, which must have AVX2,
/// FMA, F16C and POPCNT enabled (`batch::rows_fma`).
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and POPCNT.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn row_few<const W: usize>(
    m: &BitmapMatrix,
    r: usize,
    xt: &[f32],
    offsets: &mut Vec<u32>,
    out: &mut [f32],
) {
    let (masks, values) = m.row(r);
    let (blocks, cols) = (masks.len(), m.shape().1);
    assert!(
        (W == 4 || W % 8 == 0) && xt.len() >= cols * W && xt.len() <= (u32::MAX / 4) as usize,
        "W = {W}, {} lanes of x for {cols} columns",
        xt.len()
    );
    let stride = W * 4; // bytes of X per column
                        // The row's kept columns as byte offsets into xt, 8 written per block (the slack past
                        // the kept ones is overwritten by the next block, or ignored).
    offsets.clear();
    offsets.reserve(blocks * BLOCK + BLOCK);
    let shift = _mm_cvtsi32_si128(stride.trailing_zeros() as i32);
    let step = _mm256_set1_epi32((BLOCK * stride) as i32);
    let mut base = _mm256_setzero_si256();
    let mut kept = 0usize;
    let table = POSITIONS.0.as_ptr();
    let dst = offsets.as_mut_ptr();
    for &mask in masks {
        // SAFETY: the table has 256 rows of 8 u32, 32-byte aligned; kept + 8 ≤ the 8 · blocks
        // + 8 reserved above (kept counts the set bits of the blocks before this one).
        let pos = _mm256_load_si256(table.add(mask as usize) as *const __m256i);
        let bytes = _mm256_add_epi32(_mm256_sll_epi32(pos, shift), base);
        _mm256_storeu_si256(dst.add(kept) as *mut __m256i, bytes);
        kept += mask.count_ones() as usize;
        base = _mm256_add_epi32(base, step);
    }
    // SAFETY: the first `kept` offsets were written above, kept ≤ capacity.
    offsets.set_len(kept);
    let x = xt.as_ptr() as *const u8;
    let mut k = 0;
    if W == 4 {
        let mut acc = [_mm_setzero_ps(); ACCS];
        while k + BLOCK <= kept {
            // SAFETY: values[k..k + 8] are the row's kept values (k + 8 ≤ kept); every
            // offset is a kept column's, below cols · 16 bytes ≤ 4 · xt.len() (asserted).
            let p = values.as_ptr().add(k) as *const __m128i;
            let v_lo = _mm_cvtph_ps(_mm_loadl_epi64(p));
            let v_hi = _mm_cvtph_ps(_mm_loadl_epi64((p as *const i64).add(1) as *const __m128i));
            for (j, a) in acc.iter_mut().enumerate() {
                let v = if j < 4 { v_lo } else { v_hi };
                let av = _mm_permutevar_ps(v, _mm_set1_epi32(j as i32 % 4));
                let off = *offsets.get_unchecked(k + j) as usize;
                *a = _mm_fmadd_ps(av, _mm_loadu_ps(x.add(off) as *const f32), *a);
            }
            k += BLOCK;
        }
        while k < kept {
            let av = _mm_set1_ps(widen1(values[k]));
            let off = offsets[k] as usize;
            // SAFETY: as above.
            acc[0] = _mm_fmadd_ps(av, _mm_loadu_ps(x.add(off) as *const f32), acc[0]);
            k += 1;
        }
        let sum = acc.iter().fold(_mm_setzero_ps(), |s, a| _mm_add_ps(s, *a));
        if let Ok(o) = <&mut [f32; 4]>::try_from(out) {
            // SAFETY: `o` holds 4 f32.
            _mm_storeu_ps(o.as_mut_ptr(), sum);
        }
        return;
    }
    let mut acc = [_mm256_setzero_ps(); ACCS];
    while k + BLOCK <= kept {
        // SAFETY: as in the 4-lane loop; each entry reads W f32 at its column's offset.
        let p = values.as_ptr().add(k) as *const i64;
        let dup_lo = _mm256_cvtph_ps(_mm_set1_epi64x(p.read_unaligned()));
        let dup_hi = _mm256_cvtph_ps(_mm_set1_epi64x(p.add(1).read_unaligned()));
        for j in 0..BLOCK {
            let dup = if j < 4 { dup_lo } else { dup_hi };
            let av = _mm256_permutevar_ps(dup, _mm256_set1_epi32(j as i32 % 4));
            let off = *offsets.get_unchecked(k + j) as usize;
            fma_entry::<W>(&mut acc, j, av, x.add(off));
        }
        k += BLOCK;
    }
    while k < kept {
        let av = _mm256_set1_ps(widen1(values[k]));
        // SAFETY: as above.
        fma_entry::<W>(&mut acc, 0, av, x.add(offsets[k] as usize));
        k += 1;
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

#[cfg(test)]
#[cfg(target_arch = "x86_64")]
mod tests {
    use super::*;

    #[test]
    fn shuffles_move_kept_values_to_their_lanes_and_zero_the_rest() {
        for mask in 0..256usize {
            let mut kept = 0u8;
            for j in 0..BLOCK {
                let pair = &SHUFFLES.0[mask][2 * j..2 * j + 2];
                if mask >> j & 1 == 1 {
                    assert_eq!(pair, [2 * kept, 2 * kept + 1], "mask {mask:#04x} lane {j}");
                    kept += 1;
                } else {
                    assert_eq!(pair, [0x80, 0x80], "mask {mask:#04x} lane {j}");
                }
            }
        }
    }

    #[test]
    fn lane_indices_count_the_set_bits_below() {
        for mask in 0..256usize {
            let mut kept = 0;
            for j in 0..BLOCK {
                let e = LANES.0[mask][j];
                if mask >> j & 1 == 1 {
                    assert_eq!(e, kept | i32::MIN, "mask {mask:#04x} lane {j}");
                    kept += 1;
                } else {
                    assert!(e >= 0, "mask {mask:#04x} lane {j}");
                }
            }
        }
    }
}
