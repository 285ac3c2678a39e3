// quant_dense.wgsl: the prelude of the quantized dense kernels (after common.wgsl, quant.wgsl
// and the width file, quant_word_int8/int4.wgsl for quant_dense_sg.wgsl; before
// quant_dense_sg.wgsl, quant_dense_wg.wgsl or, after batch.wgsl, quant_dense_batch_wg.wgsl):
// the chunks of 8 values of a row and their scales. See shaders/README.md, "Quantized
// matrices".
//
// Rows are stored padded with zero codes to whole 16-byte words (16 int8 or 32 int4 codes;
// params.stride chunks of 8 per row, a multiple of 2 or 4), so quant_dense_sg.wgsl reads a
// row in 16-byte loads; the chunks past row_chunks() are padding, which the kernels reading
// chunk by chunk skip (x has no columns there). Scales keep the format's storage order (value
// c of row r is value r · cols + c), so with a G that does not divide cols a chunk may hold
// the end of one scale group and the start of the next: `chunk_scales` says where it splits.
// IEEE arithmetic throughout, as the dense binary16 kernels: every code is multiplied,
// 0 · ∞ = NaN.

// The chunks of 8 values that hold a row's values (the rest of params.stride is padding).
fn row_chunks() -> u32 {
    return (params.cols + 7u) / 8u;
}

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

// Row r's sum of chunk terms, times the row's scale where scales are per row (IEEE: a zero
// scale times a non-finite sum is NaN, as in the reference).
fn row_scale(r: u32, sum: f32) -> f32 {
    if PER_GROUP {
        return sum;
    }
    return scale_at(scale_index(r)) * sum;
}
