// macko_x_f16.wgsl: x staged as one f16 per column (after macko.wgsl, before macko_sg.wgsl), for
// adapters with SHADER_F16: the backend composes the kernel after an `enable f16;` line. Same
// space as f16 pairs (2 bytes per column), but a gather is a 16-bit load of the column itself
// and one widening: no word index (c >> 1), no half select ((c & 1) * 16) and variable shift,
// about 3 instructions of ~12 per entry fewer. See NOTES.md ("x").

// Staged slots: >= x_slot of cols rounded up to 8 (the backend gives 2 * its word count).
override X_HALVES: u32 = 2u;
var<workgroup> xs: array<f16, X_HALVES>;

// With X_PAD (set by the backend for nearly dense matrices), column c sits at slot
// c + 2 * (c >> 6): one unused 32-bit word after every 32. In a gather the lanes of a nearly
// dense row read columns about 8 apart (lane l: entry j of its group, column 8 l + j past the
// step's start), 16 bytes apart, so plain slots put 4 lanes in each bank (4 wavefronts); the pad
// moves each run of 8 lanes on by one bank (1 wavefront). At lower densities the lanes' columns
// are spread at random, and the pad would only cost its 2 instructions per gather. (The CUDA
// kernel's padded x, kernels/common.cuh, for the same rows.)
override X_PAD: bool = false;

// The slot of column c.
fn x_slot(c: u32) -> u32 {
    if X_PAD {
        return c + ((c >> 6u) << 1u);
    }
    return c;
}

// x[c] (with X_TILED, c counts from the tile's first column). A column past x or the tile, or
// wrapped below it (only for masked entries, whose terms are discarded) stays a valid access:
// naga clamps indices into `xs` (onto its last slot, which lies in the zeroed tail or in the
// tile's data: XForm::words), and memory reads are bounded (see macko_x_words.wgsl).
fn x_at(c: u32) -> f32 {
    if X_SHARED {
        return f32(xs[x_slot(c)]);
    }
    return load_x(c);
}

// Copies columns first .. first + cols of x (first a multiple of 8: the whole x, or one column
// tile) into xs from slot 0, 16 bytes per load (8 columns), and zeroes the slots past them up
// to X_HALVES. The widening to f32 and back is exact for every binary16 value (±∞ and NaN
// included). Returns whether this invocation met a ±∞ or NaN in x.
//
// Each invocation issues 4 loads before its first store, so a workgroup copies up to
// 4 · invocations words per memory round trip: the copy of 12288 columns by 512 invocations is
// one round trip instead of three, of 11008 columns by 256 two instead of six. Every workgroup
// waits for its copy (a barrier) before its first row, so these round trips are a fixed cost of
// each product, large at low density.
fn copy_x(t: u32, invocations: u32, first: u32, cols: u32) -> bool {
    var bad = false;
    let words = (cols + 7u) / 8u;
    // Word i of the copy is word base + i of x.
    let base = first / 8u;
    // Loads past the columns read their last word again (in bounds, cached); their stores are
    // skipped.
    let last = base + max(words, 1u) - 1u;
    // Ends: i0 grows by 4 · invocations >= 4 towards words < 2^29.
    for (var i0 = t; i0 < words; i0 += 4u * invocations) {
        let i1 = i0 + invocations;
        let i2 = i1 + invocations;
        let i3 = i2 + invocations;
        let v0 = x[base + i0];
        let v1 = x[min(base + i1, last)];
        let v2 = x[min(base + i2, last)];
        let v3 = x[min(base + i3, last)];
        bad = bad || word_nonfinite(v0);
        store_word(i0, v0);
        if i1 < words {
            bad = bad || word_nonfinite(v1);
            store_word(i1, v1);
        }
        if i2 < words {
            bad = bad || word_nonfinite(v2);
            store_word(i2, v2);
        }
        if i3 < words {
            bad = bad || word_nonfinite(v3);
            store_word(i3, v3);
        }
    }
    // The slots after x's (pads between them are never read).
    for (var i = x_slot(8u * words) + t; i < X_HALVES; i += invocations) {
        xs[i] = 0.0h;
    }
    return bad;
}

// Word i of x (columns 8i .. 8i + 7, consecutive slots: a pad falls only between multiples of
// 64 columns) into xs.
fn store_word(i: u32, w: vec4<u32>) {
    let a = unpack2x16float(w.x);
    let b = unpack2x16float(w.y);
    let c = unpack2x16float(w.z);
    let d = unpack2x16float(w.w);
    let s = x_slot(8u * i);
    xs[s] = f16(a.x);
    xs[s + 1u] = f16(a.y);
    xs[s + 2u] = f16(b.x);
    xs[s + 3u] = f16(b.y);
    xs[s + 4u] = f16(c.x);
    xs[s + 5u] = f16(c.y);
    xs[s + 6u] = f16(d.x);
    xs[s + 7u] = f16(d.y);
}
