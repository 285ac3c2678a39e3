// quant_word_int4.wgsl: int4 codes read as 16-byte words (after quant.wgsl, before
// quant_dense.wgsl and quant_dense_sg.wgsl): 32 codes per word, 8 per component, code k in
// bits 4k..4k+3 of its component. See shaders/README.md, "Quantized matrices".
//
// As quant_word_int8.wgsl: no integer-to-float conversion. Each nibble, offset by 8, is masked
// in place into the mantissa of 2^23 (nibbles 4..7 after one shift by 16) and the bias
// subtracted: nibble i of a half comes out times 16^i, exact, and meets x times 16^-i (exact).

@group(0) @binding(2) var<storage, read> qw: array<vec4<u32>>;

// Codes per 16-byte word.
const WORD_CODES: u32 = 32u;

// The 4 codes in the low 16 bits of `v` (already offset by 8 each) as exact f32:
// (q0, 16 q1, 256 q2, 4096 q3).
fn codes4(v: u32) -> vec4<f32> {
    let m = vec4<u32>(v) & vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
    return bitcast<vec4<f32>>(m | vec4<u32>(0x4b000000u))
        - vec4<f32>(8388616.0, 8388736.0, 8390656.0, 8421376.0);
}

// x elements 8j..8j+7 (x word j, `xv`) scaled to meet codes4: elements 4i..4i+3 in [i].
fn x_scaled(xv: vec4<u32>) -> array<vec4<f32>, 2> {
    let s = vec4<f32>(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack2x16float(xv.x), unpack2x16float(xv.y)) * s,
        vec4<f32>(unpack2x16float(xv.z), unpack2x16float(xv.w)) * s,
    );
}

// The x operands of word k of every row (x words 4k..4k+3), shared by the rows; with `guard`
// (a row's last word), words past x's end read as zeros.
fn x_ops(k: u32, guard: bool) -> array<vec4<f32>, 8> {
    let a = x_scaled(x_word(4u * k, guard));
    let b = x_scaled(x_word(4u * k + 1u, guard));
    let c = x_scaled(x_word(4u * k + 2u, guard));
    let d = x_scaled(x_word(4u * k + 3u, guard));
    return array<vec4<f32>, 8>(a[0], a[1], b[0], b[1], c[0], c[1], d[0], d[1]);
}

// The products of word `w`'s codes with `xo` (x_ops), codes 4i..4i+3 in [i] in code order:
// the 8 codes of sub-chunk j (component j) are [2j] and [2j + 1].
fn word_prods(w: vec4<u32>, xo: array<vec4<f32>, 8>) -> array<vec4<f32>, 8> {
    let v = w ^ vec4<u32>(0x88888888u);
    return array<vec4<f32>, 8>(
        codes4(v.x) * xo[0],
        codes4(v.x >> 16u) * xo[1],
        codes4(v.y) * xo[2],
        codes4(v.y >> 16u) * xo[3],
        codes4(v.z) * xo[4],
        codes4(v.z >> 16u) * xo[5],
        codes4(v.w) * xo[6],
        codes4(v.w >> 16u) * xo[7],
    );
}
