//! Decoding a group's 8 gap codes into column steps with one multiplication: a leaf module,
//! shared by the portable group loop (mod.rs) and the AVX2 one (avx2.rs).

/// Spreads the 8 nibbles of a code word into the 8 bytes of a u64 (nibble j to byte j).
#[inline(always)]
fn spread_nibbles(w: u32) -> u64 {
    let mut v = w as u64;
    v = (v | (v << 16)) & 0x0000_ffff_0000_ffff;
    v = (v | (v << 8)) & 0x00ff_00ff_00ff_00ff;
    (v | (v << 4)) & 0x0f0f_0f0f_0f0f_0f0f
}

/// Byte j of the result is Σ_{k≤j} (g_k + 1): the column step from the previous group's end to
/// entry j, plus one. Each partial sum is at most 8·16 = 128, so bytes never carry.
#[inline(always)]
pub(super) fn column_steps(w: u32) -> u64 {
    (spread_nibbles(w) + 0x0101_0101_0101_0101).wrapping_mul(0x0101_0101_0101_0101)
}
