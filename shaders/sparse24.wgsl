// sparse24.wgsl: the prelude of the 2:4 kernels (after common.wgsl; for the few-token kernels
// batch.wgsl follows it): the matrix's bindings and the product of one word of groups with x.
// See shaders/README.md, "2:4 structured sparsity".
//
// The matrix as uploaded (src/backend/wgpu/memory.rs, `sparse24_rows`): every row is
// `params.stride` words, word k of a row holding its groups 8k .. 8k + 7 (columns 32k ..
// 32k + 31), so a word's columns start at a multiple of 32 and x's 16-byte words 4k .. 4k + 3
// are exactly its columns:
// - `pos[r · stride + k]`: one u32, nibble i the positions of group 8k + i (bits 0–1 the first,
//   2–3 the second, first < second), as the format stores them;
// - `vals[2(r · stride + k)]` and the next: two vec4<u32>, component i (of the first for
//   groups 0–3, of the second for 4–7) the group's two binary16 values, the first position's
//   in the low half.
// Groups past a row's end (padding to whole words) have nibble 0 and zero values; so do the
// format's padding positions at or past `cols` in a row's last group.
//
// A zero value (group fill, padding) contributes nothing even where x holds NaN or ±∞: its x
// is selected to 0 before the multiplication, as in every sparse kernel here and in the CPU
// and reference products.

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(2) var<storage, read> vals: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;

// The binary16 value at position p (0..3) of the 4 columns `w` holds (two f16 pairs), as f32.
fn x_at(w: vec2<u32>, p: u32) -> f32 {
    return unpack2x16float(select(w.x, w.y, p > 1u) >> ((p & 1u) << 4u)).x;
}

// One group's two products: values `v` (f16 pair), positions nibble `n`, x of its 4 columns in
// `w`. A zero value (either sign) selects its x to 0.
fn group_dot(v: u32, n: u32, w: vec2<u32>) -> f32 {
    let a = unpack2x16float(v);
    let x0 = select(0.0, x_at(w, n & 3u), (v & 0x7fffu) != 0u);
    let x1 = select(0.0, x_at(w, n >> 2u), (v & 0x7fff0000u) != 0u);
    return fma(a.x, x0, a.y * x1);
}

// The sum of the products of word k of row `row` (of this block): one u32 of positions, two
// 16-byte loads of values, four 16-byte loads of x (8 columns each: two groups). x's words
// past its end (only a row's padding groups lie there, whose values are zero) are clamped to
// its last.
fn word_dot(row: u32, k: u32) -> f32 {
    let i = row * params.stride + k;
    let m = pos[i];
    let a = vals[2u * i];
    let b = vals[2u * i + 1u];
    let last = arrayLength(&x) - 1u;
    let c = 4u * k;
    let x0 = x[min(c, last)];
    let x1 = x[min(c + 1u, last)];
    let x2 = x[min(c + 2u, last)];
    let x3 = x[min(c + 3u, last)];
    let s0 = group_dot(a.x, m & 15u, x0.xy) + group_dot(a.y, (m >> 4u) & 15u, x0.zw);
    let s1 = group_dot(a.z, (m >> 8u) & 15u, x1.xy) + group_dot(a.w, (m >> 12u) & 15u, x1.zw);
    let s2 = group_dot(b.x, (m >> 16u) & 15u, x2.xy) + group_dot(b.y, (m >> 20u) & 15u, x2.zw);
    let s3 = group_dot(b.z, (m >> 24u) & 15u, x3.xy) + group_dot(b.w, m >> 28u, x3.zw);
    return (s0 + s1) + (s2 + s3);
}
