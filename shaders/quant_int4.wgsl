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
