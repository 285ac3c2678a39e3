// Quantized dense GEMV without subgroup operations (after common.wgsl, quant.wgsl, the width
// file and quant_dense.wgsl). See shaders/README.md, "Quantized matrices".
//
// The loads of quant_dense_sg.wgsl (4 rows per workgroup of 256, chunk k of x read once for
// the 4 rows); the sums are a tree in workgroup memory.

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

const WORKGROUP: u32 = 256u;
const ROWS: u32 = 4u;

var<workgroup> partial: array<vec4<f32>, WORKGROUP>;

fn step(k: u32, r: vec4<u32>) -> vec4<f32> {
    let xv = x[k];
    return vec4<f32>(
        chunk_term(r.x, k, xv),
        chunk_term(r.y, k, xv),
        chunk_term(r.z, k, xv),
        chunk_term(r.w, k, xv),
    );
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    if r0 >= params.rows {
        return;
    }
    let last = params.rows - 1u;
    let r = vec4<u32>(r0, min(r0 + 1u, last), min(r0 + 2u, last), min(r0 + 3u, last));
    var acc = vec4<f32>(0.0);
    for (var k = t; k < row_chunks(); k += WORKGROUP) {
        acc += step(k, r);
    }
    partial[t] = acc;
    workgroupBarrier();
    for (var half = WORKGROUP / 2u; half > 0u; half /= 2u) {
        if t < half {
            partial[t] += partial[t + half];
        }
        workgroupBarrier();
    }
    if t == 0u {
        let total = partial[0];
        for (var i = 0u; i < ROWS; i++) {
            if r0 + i < params.rows {
                store_y(params.row_offset + r0 + i, row_scale(r[i], total[i]));
            }
        }
    }
}
