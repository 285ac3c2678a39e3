//! Decoding a group's 8 gap codes into column steps with one multiplication, binary16 values
//! into f32, and the masked term of the sparse formats: a leaf module, shared by the portable
//! group loops (mod.rs, batch.rs, sparse24.rs) and the AVX2 one (avx2.rs).

use half::f16;
use macko_format::GROUP;

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

/// One binary16 value to f32 in plain integer arithmetic (no per-value call or run-time
/// feature check, so loops over it vectorise). Exact for every input: the magnitude bits
/// shifted into an f32 and scaled by 2¹¹² give normals and subnormals; the all-ones exponent
/// (∞, NaN) is patched.
#[inline(always)]
pub(super) fn widen1(v: f16) -> f32 {
    let bits = v.to_bits() as u32;
    let magnitude = (bits & 0x7fff) << 13;
    let scaled = f32::from_bits(magnitude) * f32::from_bits(0x7780_0000); // × 2^112
    let special = f32::from_bits(0x7f80_0000 | (magnitude & 0x007f_ffff));
    let m = if bits & 0x7c00 == 0x7c00 {
        special
    } else {
        scaled
    };
    f32::from_bits(m.to_bits() | ((bits & 0x8000) << 16))
}

/// Eight binary16 values to f32 (see [`widen1`]).
#[inline(always)]
pub(super) fn widen8(h: &[f16]) -> [f32; GROUP] {
    let mut out = [0.0f32; GROUP];
    for (o, v) in out.iter_mut().zip(h) {
        *o = widen1(*v);
    }
    out
}

/// One term of a sparse row: zero-valued entries (padding) contribute nothing, even where x holds
/// NaN or ±∞, so they are masked rather than multiplied. When every element of x is finite
/// (`MASK == false`), 0·x is ±0.0, which adds nothing to a sum that starts at +0.0, so the mask
/// is skipped: the common case pays for no select.
#[inline(always)]
pub(super) fn term<const MASK: bool>(a: f32, x: f32) -> f32 {
    if !MASK || a != 0.0 {
        a * x
    } else {
        0.0
    }
}
