// quant_int4.wgsl: int4 codes (after quant.wgsl): 8 codes in one 4-byte load, code k in bits
// 4k..4k+3 (the even code in the low nibble of its byte, like the gap codes). See
// shaders/README.md, "Quantized matrices".

// The codes, 8 per u32: a MACKO group's at the group's index, a dense row's 8 values of chunk
// k at the row's first chunk + k.
@group(0) @binding(2) var<storage, read> qv: array<u32>;

// The 8 codes of chunk i (in .x; .y unused), the shape quant_int8.wgsl returns.
fn load_q(i: u32) -> vec2<u32> {
    return vec2<u32>(qv[i], 0u);
}

// Code k (0..8) of a chunk, sign-extended.
fn q_code(w: vec2<u32>, k: u32) -> f32 {
    return f32(extractBits(bitcast<i32>(w.x), 4u * k, 4u));
}

// Nibbles below nibble n (n in 0..=8) set.
fn q_nibbles_below(n: u32) -> u32 {
    return select((1u << (min(n, 7u) * 4u)) - 1u, 0xffffffffu, n >= 8u);
}

// The codes of entries lo <= j < hi of a chunk (lo, hi in 0..=8), the others zeroed.
fn keep_q(w: vec2<u32>, lo: u32, hi: u32) -> vec2<u32> {
    return vec2<u32>(w.x & q_nibbles_below(hi) & ~q_nibbles_below(lo), 0u);
}

// Codes 2k and 2k + 1 of a chunk (k in 0..4, a constant where the kernels call it) as exact
// f32, without an integer-to-float conversion (a quarter-rate instruction on NVIDIA GPUs): the
// nibble, offset by 8, in the mantissa of 2^23, less the bias.
fn q_pair(w: vec2<u32>, k: u32) -> vec2<f32> {
    let v = w.x ^ 0x88888888u;
    let m = (vec2<u32>(v >> (8u * k), v >> (8u * k + 4u)) & vec2<u32>(0xfu))
        | vec2<u32>(0x4b000000u);
    return bitcast<vec2<f32>>(m) - vec2<f32>(8388616.0);
}
