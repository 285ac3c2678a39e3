// macko_x_words.wgsl: x staged as binary16 pairs in 32-bit words (after macko.wgsl, before the
// kernel; X_WORDS >= (cols + 1) / 2 rounded up to 4). The layout every adapter can compile;
// macko_x_f16.wgsl is the one-f16-per-column layout of adapters with SHADER_F16. See
// shaders/README.md, "x staged in workgroup memory" (an f32 copy and a swizzled layout were
// slower: "Measured and removed").
override X_WORDS: u32 = 1u;
var<workgroup> xs: array<u32, X_WORDS>;

// x[c] (with X_TILED, c counts from the tile's first column). A column past x or the tile, or
// wrapped below it (only ever computed for a masked entry, or for a row-aligned upload's
// padding entries and zero group, whose terms are zero or discarded) reads
// an unspecified value but stays a valid access: indices into `xs` are clamped by naga
// (BoundsCheckPolicy::Restrict, always on for arrays in wgpu), and memory reads are bounded.
fn x_at(c: u32) -> f32 {
    if X_SHARED {
        return unpack2x16float(xs[c >> 1u] >> ((c & 1u) * 16u)).x;
    }
    return load_x(c);
}

// This layout has no slack around x (BOUNDED_GATHERS is never set with it): the pipelined row
// loop's shifted columns are the columns themselves.
const X_FRONT: u32 = 0u;

fn x_at_shifted(k: u32) -> f32 {
    return x_at(k);
}

// Copies columns first .. first + cols of x (first a multiple of 8: the whole x, or one column
// tile) into xs from slot 0, 16 bytes per load, and zeroes the words past them up to X_WORDS.
// Returns whether this invocation met a ±∞ or NaN in them (see stage_x in macko.wgsl).
fn copy_x(t: u32, invocations: u32, first: u32, cols: u32) -> bool {
    // Word i of the copy is word base + i of x.
    let base = first / 8u;
    var bad = false;
    // Words of xs written from x; those after it, up to X_WORDS, are zeroed below.
    let words = (cols + 1u) / 2u;
    let staged = 4u * ((words + 3u) / 4u);
    for (var i = t; 4u * i < words; i += invocations) {
        let v = x[base + i];
        bad = bad || word_nonfinite(v);
        xs[4u * i] = v.x;
        xs[4u * i + 1u] = v.y;
        xs[4u * i + 2u] = v.z;
        xs[4u * i + 3u] = v.w;
    }
    // After this, every slot holds x or zero.
    for (var i = staged + t; i < X_WORDS; i += invocations) {
        xs[i] = 0u;
    }
    return bad;
}
