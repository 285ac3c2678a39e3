// macko_x_words.wgsl: x staged as 32-bit words (after macko.wgsl, before the kernel): f16 pairs
// by default, or f32 with X_F32. The layout every adapter can compile; macko_x_f16.wgsl is the
// one-f16-per-column alternative. See NOTES.md ("x").

// With X_F32 the staged copy is f32, one word per column (X_WORDS >= cols rounded up to 8): a
// gather is one workgroup load; without it, f16 pairs (X_WORDS >= (cols + 1) / 2 rounded up to
// 4), half the space, but a shift and a conversion more per entry.
override X_F32: bool = false;
override X_WORDS: u32 = 1u;
// Staged word i lives at slot i ^ ((i >> 5) & 7): a permutation within each aligned block of
// 8 words (X_WORDS is a multiple of 8, so every slot stays in range) that moves the 8-word
// blocks of each 32-word row of banks apart. A dense row (d = 1) gathers columns 8 apart across
// lanes: unswizzled, only 4 banks (f32) or 8 (f16 pairs) take the 32 reads of one gather
// (8- or 4-way conflicts); swizzled, 32. Random columns (d < 1) are as random either way.
override X_SWIZZLE: bool = false;
var<workgroup> xs: array<u32, X_WORDS>;

fn x_slot(i: u32) -> u32 {
    if X_SWIZZLE {
        return i ^ ((i >> 5u) & 7u);
    }
    return i;
}

// x[c] (with X_TILED, c counts from the tile's first column). A column past x or the tile, or
// wrapped below it (only ever computed for a masked entry, or for a row-aligned upload's
// padding entries and zero group, whose terms are zero or discarded) reads
// an unspecified value but stays a valid access: indices into `xs` are clamped by naga
// (BoundsCheckPolicy::Restrict, always on for arrays in wgpu), and memory reads are bounded.
fn x_at(c: u32) -> f32 {
    if X_SHARED {
        if X_F32 {
            return bitcast<f32>(xs[x_slot(c)]);
        }
        return unpack2x16float(xs[x_slot(c >> 1u)] >> ((c & 1u) * 16u)).x;
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
    var staged = 0u;
    if X_F32 {
        // 8 columns per 16-byte word of x; X_WORDS is a multiple of 8 (the backend's granule)
        // covering every column, and x is zero-padded to whole 16-byte words.
        staged = 8u * ((cols + 7u) / 8u);
        for (var i = t; 8u * i < cols; i += invocations) {
            let v = x[base + i];
            bad = bad || word_nonfinite(v);
            let a = unpack2x16float(v.x);
            let b = unpack2x16float(v.y);
            let c = unpack2x16float(v.z);
            let d = unpack2x16float(v.w);
            xs[x_slot(8u * i)] = bitcast<u32>(a.x);
            xs[x_slot(8u * i + 1u)] = bitcast<u32>(a.y);
            xs[x_slot(8u * i + 2u)] = bitcast<u32>(b.x);
            xs[x_slot(8u * i + 3u)] = bitcast<u32>(b.y);
            xs[x_slot(8u * i + 4u)] = bitcast<u32>(c.x);
            xs[x_slot(8u * i + 5u)] = bitcast<u32>(c.y);
            xs[x_slot(8u * i + 6u)] = bitcast<u32>(d.x);
            xs[x_slot(8u * i + 7u)] = bitcast<u32>(d.y);
        }
    } else {
        let words = (cols + 1u) / 2u;
        staged = 4u * ((words + 3u) / 4u);
        for (var i = t; 4u * i < words; i += invocations) {
            let v = x[base + i];
            bad = bad || word_nonfinite(v);
            xs[x_slot(4u * i)] = v.x;
            xs[x_slot(4u * i + 1u)] = v.y;
            xs[x_slot(4u * i + 2u)] = v.z;
            xs[x_slot(4u * i + 3u)] = v.w;
        }
    }
    // x_slot is a permutation of 0..X_WORDS, so the slots of the words past x are exactly
    // those no word of x took: after this, every slot holds x or zero.
    for (var i = staged + t; i < X_WORDS; i += invocations) {
        xs[x_slot(i)] = 0u;
    }
    return bad;
}
