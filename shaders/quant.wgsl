// quant.wgsl: the prelude of the kernels of quantized matrices (after common.wgsl, before the
// width file quant_int8.wgsl or quant_int4.wgsl): the matrix's uniform, its scales and where a
// value finds its scale. See shaders/README.md, "Quantized matrices".
//
// A stored value is scale · q, q a two's complement code of 8 or 4 bits (docs/FORMAT.md,
// "Quantized values"). The kernels sum q · x in f32 and multiply by the scale once per sum:
// per row (PER_GROUP off) once at the row's end, per group of G values in storage order
// (PER_GROUP on) once per 8 entries (a lane's aligned MACKO group, or 8 dense values), since
// G is a multiple of 8 and the 8 share one scale.

@group(0) @binding(0) var<uniform> params: MatrixParams;
// The block's scales, binary16 pairs in u32 words (scale 2k in the low half of word k), from
// an even scale of the matrix on: the block's first scale is scale params.scale_phase / unit
// of this slice (see scale_index).
@group(0) @binding(4) var<storage, read> scales: array<u32>;

// Whether scales are per group of G stored values (else per row).
override PER_GROUP: bool = false;
// With PER_GROUP: whether params.scale_unit (the units per scale: G / 8 MACKO groups, or G
// dense values) is a power of two, params.scale_shift its log2; then a scale's index is a
// shift, else an integer division (G / 8 may be any integer from 1 to 2^21).
override SCALE_POW2: bool = true;

// Scale `l` of the block's slice, widened to f32 (exact).
fn scale_at(l: u32) -> f32 {
    return unpack2x16float(scales[l >> 1u] >> ((l & 1u) * 16u)).x;
}

// The slice index of the scale of unit `u` of the block (PER_GROUP: a MACKO group or a dense
// value counted from the block's first; per row: the block's row). params.scale_phase places
// the block's first unit in its scale group and the slice's first scale: the slice starts at
// an even scale, so the phase is the unit's offset in its group plus G units when the group's
// scale is odd (it is below 2^25, and u is below 2^31, so the sum never wraps).
fn scale_index(u: u32) -> u32 {
    if !PER_GROUP {
        return params.scale_phase + u;
    }
    if SCALE_POW2 {
        return (params.scale_phase + u) >> params.scale_shift;
    }
    return (params.scale_phase + u) / params.scale_unit;
}

// `sum` (a sum of q · x) times `scale`, or an exact 0 where the scale is 0: in MACKO every
// value under a zero scale is zero and contributes nothing, even where x is NaN or ±∞.
fn scaled_sparse(sum: f32, scale: f32) -> f32 {
    return select(sum * scale, 0.0, scale == 0.0);
}
