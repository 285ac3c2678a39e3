// macko_x_f16.wgsl: x staged as one f16 per column (after macko.wgsl, before macko_sg.wgsl), for
// adapters with SHADER_F16: the backend composes the kernel after an `enable f16;` line. Same
// space as f16 pairs (2 bytes per column), but a gather is a 16-bit load of the column itself
// and one widening: no word index (c >> 1), no half select ((c & 1) * 16) and variable shift,
// about 3 instructions of ~12 per entry fewer. See NOTES.md ("x").

// Staged columns: >= cols rounded up to 8 (the backend gives 2 * its word count).
override X_HALVES: u32 = 2u;
var<workgroup> xs: array<f16, X_HALVES>;

// x[c]. A column past x (only for masked entries, whose terms are discarded) stays a valid
// access: naga clamps indices into `xs`, and memory reads are bounded (see macko_x_words.wgsl).
fn x_at(c: u32) -> f32 {
    if X_SHARED {
        return f32(xs[c]);
    }
    return load_x(c);
}

// Copies x into xs, 16 bytes per load (8 columns), and zeroes the columns past it up to
// X_HALVES. The widening to f32 and back is exact for every binary16 value (±∞ and NaN
// included). Returns whether this invocation met a ±∞ or NaN in x.
fn copy_x(t: u32, invocations: u32) -> bool {
    var bad = false;
    let staged = 8u * ((params.cols + 7u) / 8u);
    for (var i = t; 8u * i < params.cols; i += invocations) {
        let v = x[i];
        bad = bad || word_nonfinite(v);
        let a = unpack2x16float(v.x);
        let b = unpack2x16float(v.y);
        let c = unpack2x16float(v.z);
        let d = unpack2x16float(v.w);
        xs[8u * i] = f16(a.x);
        xs[8u * i + 1u] = f16(a.y);
        xs[8u * i + 2u] = f16(b.x);
        xs[8u * i + 3u] = f16(b.y);
        xs[8u * i + 4u] = f16(c.x);
        xs[8u * i + 5u] = f16(c.y);
        xs[8u * i + 6u] = f16(d.x);
        xs[8u * i + 7u] = f16(d.y);
    }
    for (var i = staged + t; i < X_HALVES; i += invocations) {
        xs[i] = 0.0h;
    }
    return bad;
}
