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

// Bytes below byte n (n in 0..=4) set.
fn q_bytes_below(n: u32) -> u32 {
    return select((1u << (min(n, 3u) * 8u)) - 1u, 0xffffffffu, n >= 4u);
}

// The codes of entries lo <= j < hi of a chunk (lo, hi in 0..=8), the others zeroed.
fn keep_q(w: vec2<u32>, lo: u32, hi: u32) -> vec2<u32> {
    let lo1 = max(lo, 4u) - 4u;
    let hi1 = max(hi, 4u) - 4u;
    return w & vec2<u32>(
        q_bytes_below(hi) & ~q_bytes_below(lo),
        q_bytes_below(hi1) & ~q_bytes_below(lo1),
    );
}

// Codes 2k and 2k + 1 of a chunk (k in 0..4, a constant where the kernels call it) as exact
// f32, without an integer-to-float conversion (a quarter-rate instruction on NVIDIA GPUs): the
// byte, offset by 128, in the mantissa of 2^23, less the bias.
fn q_pair(w: vec2<u32>, k: u32) -> vec2<f32> {
    let v = select(w.x, w.y, k >= 2u) ^ 0x80808080u;
    let sh = (k & 1u) * 16u;
    let m = (vec2<u32>(v >> sh, v >> (sh + 8u)) & vec2<u32>(0xffu)) | vec2<u32>(0x4b000000u);
    return bitcast<vec2<f32>>(m) - vec2<f32>(8388736.0);
}
