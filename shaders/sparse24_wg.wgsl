// 2:4 SpMV without subgroup operations (after common.wgsl and sparse24.wgsl). See
// shaders/README.md, "2:4 structured sparsity".
//
// One row per workgroup of 64 invocations taking the row's words in turn; tree sum in
// workgroup memory.

const WORKGROUP: u32 = 64u;

var<workgroup> partial: array<f32, WORKGROUP>;

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let row = wid.x + wid.y * nwg.x;
    // Uniform: the whole workgroup leaves (or stays) together, so the barriers below are in
    // workgroup-uniform control flow.
    if row >= params.rows {
        return;
    }
    var acc = 0.0;
    for (var k = t; k < params.stride; k += WORKGROUP) {
        acc += word_dot(row, k);
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
        store_y(params.row_offset + row, partial[0]);
    }
}
