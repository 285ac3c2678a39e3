// macko_x_f16.wgsl: x staged as one f16 per column (after macko.wgsl, before macko_sg.wgsl), for
// adapters with SHADER_F16: the backend composes the kernel after an `enable f16;` line. Same
// space as f16 pairs (2 bytes per column), but a gather is a 16-bit load of the column itself
// and one widening: no word index (c >> 1), no half select ((c & 1) * 16) and variable shift,
// about 3 instructions of ~12 per entry fewer (shaders/README.md, "x staged in workgroup memory").

// Staged slots: > x_slot(X_FRONT + cols rounded up to 8 + X_TAIL - 1) (the backend gives 2 * its
// word count: XForm::words, whose constants a unit test ties to X_FRONT and X_TAIL here).
override X_HALVES: u32 = 2u;
var<workgroup> xs: array<f16, X_HALVES>;

// Column c of the staged x (of the tile, with X_TILED) sits at slot x_slot(c + X_FRONT); the
// X_FRONT slots before it and at least X_TAIL after the last column are zero. The slack is what
// lets the pipelined row loop keep every gather within xs without a clamp (BOUNDED_GATHERS in
// macko.wgsl): a masked entry's column is at most 22 before a row's (or a tile part's) first
// counted column and at most 127 past a group start that is clamped to the tile's width.
const X_FRONT: u32 = 32u;
const X_TAIL: u32 = 128u;

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
// the index into `xs` is clamped onto its last slot (in the zeroed tail), by naga or, in a
// kernel compiled without naga's clamps (BOUNDED_GATHERS), here; memory reads are bounded (see
// macko_x_words.wgsl).
fn x_at(c: u32) -> f32 {
    if X_SHARED {
        let slot = x_slot(c + X_FRONT);
        if BOUNDED_GATHERS {
            return f32(xs[min(slot, X_HALVES - 1u)]);
        }
        return f32(xs[slot]);
    }
    return load_x(c);
}

// x at the shifted column k = c + X_FRONT, for the pipelined row loop, which starts its column
// counts at X_FRONT: no add per gather and, with BOUNDED_GATHERS, no clamp (its masked entries'
// columns stay within the slack: row_dot_piped).
fn x_at_shifted(k: u32) -> f32 {
    if X_SHARED {
        let slot = x_slot(k);
        if GATHER_PROBE && slot >= X_HALVES {
            // A NaN (from a runtime value: no constant NaN in WGSL) that reaches y even through
            // a masked entry's zero value: tests/plans/wgpu.rs, gather_probe*.
            return bitcast<f32>(0x7fc00000u | (slot & 0x1u));
        }
        return f32(xs[slot]);
    }
    return load_x(k - X_FRONT);
}

// A test hook (WgpuTuning::gather_probe, never in production): a gather of the pipelined loop
// outside xs, which BOUNDED_GATHERS rules out, reads NaN instead of a clamped slot.
override GATHER_PROBE: bool = false;

// Copies columns first .. first + cols of x (first a multiple of 8: the whole x, or one column
// tile) into xs from slot x_slot(X_FRONT), 16 bytes per load (8 columns), and zeroes the
// X_FRONT slots before them and the slots past them up to X_HALVES. The widening to f32 and back is exact for every binary16 value (±∞ and NaN
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
    // The slots before and after x's (pads between them are never read). Ends: i grows by
    // invocations >= 1 towards X_HALVES.
    for (var i = t; i < x_slot(X_FRONT); i += invocations) {
        xs[i] = 0.0h;
    }
    for (var i = x_slot(X_FRONT + 8u * words) + t; i < X_HALVES; i += invocations) {
        xs[i] = 0.0h;
    }
    return bad;
}

// Word i of x (columns 8i .. 8i + 7, consecutive slots: X_FRONT is a multiple of 8, and a pad
// falls only between multiples of 64 shifted columns) into xs.
fn store_word(i: u32, w: vec4<u32>) {
    let a = unpack2x16float(w.x);
    let b = unpack2x16float(w.y);
    let c = unpack2x16float(w.z);
    let d = unpack2x16float(w.w);
    let s = x_slot(X_FRONT + 8u * i);
    xs[s] = f16(a.x);
    xs[s + 1u] = f16(a.y);
    xs[s + 2u] = f16(b.x);
    xs[s + 3u] = f16(b.y);
    xs[s + 4u] = f16(c.x);
    xs[s + 5u] = f16(c.y);
    xs[s + 6u] = f16(d.x);
    xs[s + 7u] = f16(d.y);
}
