// quant_dense.wgsl: the prelude of the quantized dense kernels (after common.wgsl, quant.wgsl
// and the width file; before quant_dense_sg.wgsl, quant_dense_wg.wgsl or, after batch.wgsl,
// quant_dense_batch_wg.wgsl): a chunk of 8 values of a row and its scales. See
// shaders/README.md, "Quantized matrices".
//
// Rows are stored padded with zero codes to whole chunks of 8 values (params.stride chunks
// per row); scales keep the format's storage order (value c of row r is value r · cols + c),
// so with a G that does not divide cols a chunk may hold the end of one scale group and the
// start of the next: `chunk_scales` says where it splits. IEEE arithmetic throughout, as the
// dense binary16 kernels: every code is multiplied, 0 · ∞ = NaN.

// With PER_GROUP, the scales of chunk k of block row r for its values up to the row's end:
// the first scale (x), the second (y: that of values j >= split, or 0 where the chunk's
// values all take the first) and the split (z, as bits: values j < split take x).
fn chunk_scales(r: u32, k: u32) -> vec3<f32> {
    let first = r * params.cols + 8u * k;
    let l = scale_index(first);
    // The chunk's first value is unit `into` of its scale group (scale_index's units).
    let into = params.scale_phase + first - l * params.scale_unit;
    let split = params.scale_unit - into;
    let real = min(params.cols - 8u * k, 8u);
    var second = 0.0;
    if split < real {
        second = scale_at(l + 1u);
    }
    return vec3<f32>(scale_at(l), second, bitcast<f32>(min(split, 8u)));
}

// Sums of q · x over chunk `qw` of a row and chunk `xv` of x (8 binary16): values j < split
// (x) and j >= split (y).
fn chunk_dot(qw: vec2<u32>, xv: vec4<u32>, split: u32) -> vec2<f32> {
    var lo = 0.0;
    var hi = 0.0;
    for (var i = 0u; i < 4u; i++) {
        let f = unpack2x16float(xv[i]);
        let t0 = q_code(qw, 2u * i) * f.x;
        let t1 = q_code(qw, 2u * i + 1u) * f.y;
        lo += select(0.0, t0, 2u * i < split) + select(0.0, t1, 2u * i + 1u < split);
        hi += select(t0, 0.0, 2u * i < split) + select(t1, 0.0, 2u * i + 1u < split);
    }
    return vec2<f32>(lo, hi);
}

// Chunk k of block row r times chunk k of x (`xv`): scaled per chunk with PER_GROUP (values
// past the row's end in a second part sum 0 · 0, under a second scale of 0), the raw sum per
// row (the row's scale multiplies its whole sum: row_scale).
fn chunk_term(r: u32, k: u32, xv: vec4<u32>) -> f32 {
    let qw = load_q(r * params.stride + k);
    if PER_GROUP {
        let s = chunk_scales(r, k);
        let p = chunk_dot(qw, xv, bitcast<u32>(s.z));
        return s.x * p.x + s.y * p.y;
    }
    return chunk_dot(qw, xv, 8u).x;
}

// Row r's sum of chunk terms, times the row's scale where scales are per row (IEEE: a zero
// scale times a non-finite sum is NaN, as in the reference).
fn row_scale(r: u32, sum: f32) -> f32 {
    if PER_GROUP {
        return sum;
    }
    return scale_at(scale_index(r)) * sum;
}
