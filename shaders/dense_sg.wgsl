// Dense f16 GEMV with a subgroup reduction (common.wgsl is prepended). See shaders/README.md.
//
// A workgroup of 256 invocations computes ROWS = 4 consecutive rows. Invocation t reads the
// 16-byte words t, t + 256, ... of each of the 4 rows (every load of the workgroup contiguous)
// and the same word of x once for all 4 rows; two words per row are in flight per step (8 loads
// of the matrix plus 2 of x). Rows are stored padded to whole 16-byte words with zeros, and x is
// zero past its end, so the padding adds 0 * 0. Sums: subgroupAdd, then one value per subgroup
// in workgroup memory, added by invocation 0. Correct for any subgroup size: subgroup_id and
// num_subgroups say where each subgroup's partial goes.

@group(0) @binding(0) var<uniform> params: MatrixParams;
// Rows of `stride` vec4<u32> words each (8 binary16 per word).
@group(0) @binding(2) var<storage, read> values: array<vec4<u32>>;

const WORKGROUP: u32 = 256u;
const ROWS: u32 = 4u;

var<workgroup> partial: array<vec4<f32>, WORKGROUP>;

// Adds word k of the 4 rows starting at row_base (word offsets) to acc.
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
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    if r0 >= params.rows {
        return;
    }
    let last = params.rows - 1u;
    let stride = params.stride;
    // Rows past the block's end re-read its last row (in bounds) and are not stored.
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
    let s = subgroupAdd(acc);
    if subgroupExclusiveAdd(1u) == 0u {
        partial[sg] = s;
    }
    workgroupBarrier();
    if t == 0u {
        var total = partial[0];
        for (var i = 1u; i < nsg; i++) {
            total += partial[i];
        }
        for (var i = 0u; i < ROWS; i++) {
            if r0 + i < params.rows {
                store_y(params.row_offset + r0 + i, total[i]);
            }
        }
    }
}
