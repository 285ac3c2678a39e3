// Quantized dense GEMV without subgroup operations (after common.wgsl, quant.wgsl, the width
// file and quant_dense.wgsl). See shaders/README.md, "Quantized matrices".
//
// The loads of quant_dense_sg.wgsl (4 rows per workgroup of 256, chunk k of x read once for
// the 4 rows); the sums are a tree in workgroup memory.

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
    for (var k = t; k < params.stride; k += WORKGROUP) {
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
