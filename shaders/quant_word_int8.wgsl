// quant_word_int8.wgsl: int8 codes read as 16-byte words (after quant.wgsl, before
// quant_dense.wgsl and quant_dense_sg.wgsl): 16 codes per word, code k in byte k % 4 of
// component k / 4. See shaders/README.md, "Quantized matrices".
//
// Codes become f32 without an integer-to-float conversion (a quarter-rate instruction on
// NVIDIA GPUs, slower than the memory at 16 codes per word): the byte, offset by 128, is
// placed in the mantissa of 2^23 and the bias subtracted (exact). Bytes 1 and 3 stay at bit 8,
// so they come out times 256 and meet x times 1/256 (exact in f32: powers of two, far from
// its range's ends), which saves a shift per code; every product is then q · x exactly
// rounded, as with the code itself.

@group(0) @binding(2) var<storage, read> qw: array<vec4<u32>>;

// Codes per 16-byte word.
const WORD_CODES: u32 = 16u;

// The 4 codes of `u` as exact f32: (q0, 256 q1, q2, 256 q3).
fn codes4(u: u32) -> vec4<f32> {
    let v = u ^ 0x80808080u;
    let m = vec4<u32>(v, v, v >> 16u, v >> 16u) & vec4<u32>(0xffu, 0xff00u, 0xffu, 0xff00u);
    return bitcast<vec4<f32>>(m | vec4<u32>(0x4b000000u))
        - vec4<f32>(8388736.0, 8421376.0, 8388736.0, 8421376.0);
}

// x elements 8j..8j+7 (x word j, `xv`) scaled to meet codes4: elements 4i..4i+3 in [i].
fn x_scaled(xv: vec4<u32>) -> array<vec4<f32>, 2> {
    let s = vec4<f32>(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0);
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack2x16float(xv.x), unpack2x16float(xv.y)) * s,
        vec4<f32>(unpack2x16float(xv.z), unpack2x16float(xv.w)) * s,
    );
}

// The x operands of word k of every row (x words 2k and 2k + 1), shared by the rows; with
// `guard` (a row's last word), words past x's end read as zeros.
fn x_ops(k: u32, guard: bool) -> array<vec4<f32>, 8> {
    let a = x_scaled(x_word(2u * k, guard));
    let b = x_scaled(x_word(2u * k + 1u, guard));
    let z = vec4<f32>(0.0);
    return array<vec4<f32>, 8>(a[0], a[1], b[0], b[1], z, z, z, z);
}

// The products of word `w`'s codes with `xo` (x_ops), codes 4i..4i+3 in [i] in code order:
// the 8 codes of sub-chunk j are [2j] and [2j + 1]; [4..8] are zeros.
fn word_prods(w: vec4<u32>, xo: array<vec4<f32>, 8>) -> array<vec4<f32>, 8> {
    let z = vec4<f32>(0.0);
    return array<vec4<f32>, 8>(
        codes4(w.x) * xo[0],
        codes4(w.y) * xo[1],
        codes4(w.z) * xo[2],
        codes4(w.w) * xo[3],
        z,
        z,
        z,
        z,
    );
}
