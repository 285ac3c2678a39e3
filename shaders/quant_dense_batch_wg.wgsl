// Quantized dense few-token product Y = A·X for a chunk of W vectors, on both kernel paths (no
// subgroup operation; after common.wgsl, quant.wgsl, the width file, quant_dense.wgsl,
// batch.wgsl and quant_batch.wgsl). See shaders/README.md, "Quantized matrices".
//
// One row per workgroup of 64 invocations; invocation t takes chunks t, t + 64, ... of the row
// (8 codes in one load) and adds each value scale · q (formed in f32, exact) times its column
// of XT into the W accumulators. IEEE throughout: every value is multiplied (0 · ∞ = NaN, as
// in the reference); the row's padding codes (0) meet XT's zero columns past x.

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let row = wid.x + wid.y * nwg.x;
    if row >= params.rows {
        return;
    }
    clear_acc();
    for (var k = t; k < row_chunks(); k += WORKGROUP) {
        let qw = load_q(row * params.stride + k);
        var s: vec3<f32>;
        if PER_GROUP {
            s = chunk_scales(row, k);
        } else {
            s = vec3<f32>(scale_at(scale_index(row)), 0.0, bitcast<f32>(8u));
        }
        let split = bitcast<u32>(s.z);
        for (var j = 0u; j < 8u; j++) {
            add_entry(q_code(qw, j) * select(s.y, s.x, j < split), 8u * k + j);
        }
    }
    reduce_workgroup(t);
    store_chunk(params.row_offset + row, t, WORKGROUP);
}
