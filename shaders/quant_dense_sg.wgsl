// Quantized dense GEMV (int8 or int4 values, binary16 scales) with a subgroup reduction (after
// common.wgsl, quant.wgsl, the width file and quant_dense.wgsl). See shaders/README.md,
// "Quantized matrices".
//
// dense_sg.wgsl's shape: a workgroup of 256 invocations computes ROWS = 4 consecutive rows;
// invocation t reads chunks t, t + 256, ... of each row (8 codes in one 8-byte or 4-byte load,
// every load of the workgroup contiguous) and chunk k of x (one 16-byte load) once for the 4
// rows. Sums: subgroupAdd, then one partial per subgroup in workgroup memory (any subgroup
// size), added by invocation 0.

const WORKGROUP: u32 = 256u;
const ROWS: u32 = 4u;

var<workgroup> partial: array<vec4<f32>, WORKGROUP>;

// Chunk k of the 4 rows `r` (block rows).
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
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    if r0 >= params.rows {
        return;
    }
    let last = params.rows - 1u;
    // Rows past the block's end re-read its last row (in bounds) and are not stored.
    let r = vec4<u32>(r0, min(r0 + 1u, last), min(r0 + 2u, last), min(r0 + 3u, last));
    var acc = vec4<f32>(0.0);
    for (var k = t; k < params.stride; k += WORKGROUP) {
        acc += step(k, r);
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
                store_y(params.row_offset + r0 + i, row_scale(r[i], total[i]));
            }
        }
    }
}
