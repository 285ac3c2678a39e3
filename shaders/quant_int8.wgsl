// quant_int8.wgsl: int8 codes (after quant.wgsl): 8 codes in one 8-byte load, code k in byte
// k % 4 of word k / 4. See shaders/README.md, "Quantized matrices".

// The codes, 8 per vec2<u32>: a MACKO group's at the group's index, a dense row's 8 values
// of chunk k at the row's first chunk + k.
@group(0) @binding(2) var<storage, read> qv: array<vec2<u32>>;

// The 8 codes of chunk i.
fn load_q(i: u32) -> vec2<u32> {
    return qv[i];
}

// Code k (0..8) of a chunk, sign-extended.
fn q_code(w: vec2<u32>, k: u32) -> f32 {
    let word = select(w.x, w.y, k >= 4u);
    return f32(extractBits(bitcast<i32>(word), 8u * (k & 3u), 8u));
}
