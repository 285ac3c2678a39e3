// Dense f16 GEMV without subgroup operations (common.wgsl is prepended). See shaders/README.md.
//
// The loads of dense_sg.wgsl (4 rows per workgroup of 256, 16-byte words, x read once per word
// for the 4 rows); the sums are a tree in workgroup memory.

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(2) var<storage, read> values: array<vec4<u32>>;

const WORKGROUP: u32 = 256u;
const ROWS: u32 = 4u;

var<workgroup> partial: array<vec4<f32>, WORKGROUP>;

fn step(k: u32, r: vec4<u32>, acc: ptr<function, vec4<f32>>) {
    let xv = x[k];
    (*acc).x += dot8(values[r.x + k], xv);
    (*acc).y += dot8(values[r.y + k], xv);
    (*acc).z += dot8(values[r.z + k], xv);
    (*acc).w += dot8(values[r.w + k], xv);
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
    let stride = params.stride;
    let r = vec4<u32>(r0, min(r0 + 1u, last), min(r0 + 2u, last), min(r0 + 3u, last)) * stride;
    var acc = vec4<f32>(0.0);
    var k = t;
    loop {
        if k + WORKGROUP >= stride {
            break;
        }
        step(k, r, &acc);
        step(k + WORKGROUP, r, &acc);
        k += 2u * WORKGROUP;
    }
    if k < stride {
        step(k, r, &acc);
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
                store_y(params.row_offset + r0 + i, total[i]);
            }
        }
    }
}
