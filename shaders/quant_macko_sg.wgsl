// Quantized MACKO SpMV (int8 or int4 values, binary16 scales) with subgroup operations (after
// common.wgsl, quant.wgsl, the width file and quant_macko.wgsl). See shaders/README.md,
// "Quantized matrices".
//
// One row at a time per subgroup, rows dealt by a fixed stride over the dispatch's subgroups
// (any subgroup size and layout: the lane index and count are counted at entry). Per step a
// lane loads 2 groups (groups g0 + lane and g0 + lanes + lane: every load of the subgroup
// contiguous), each its gap-code word next to its 8 value codes (one 8-byte or 4-byte load);
// the groups' column steps travel as the 16-bit halves of one u32 (a group advances at most
// 128 columns, a step of at most 128 lanes at most 16384), so one exclusive scan and one sum
// serve both. x is gathered from its f32 copy in memory.

const WORKGROUP: u32 = 128u;

fn row_dot(s: u32, e: u32, lane: u32, lanes: u32) -> f32 {
    var acc = 0.0;
    // The bounds are subgroup-uniform, so every loop's trip count is, and the subgroup
    // operations run in uniform control flow.
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = 0u;
        for (var g0 = s / 8u; g0 < gend; g0 += 2u * lanes) {
            let a = load_qgroup(g0 + lane, gend, s, e);
            let b = load_qgroup(g0 + lanes + lane, gend, s, e);
            let mine = qgroup_total(a) | (qgroup_total(b) << 16u);
            let before = subgroupExclusiveAdd(mine);
            let all = subgroupAdd(mine);
            let ta = all & 0xffffu;
            acc += qgroup_term(a, column + (before & 0xffffu));
            acc += qgroup_term(b, column + ta + (before >> 16u));
            column += ta + (all >> 16u);
        }
    }
    return subgroupAdd(acc);
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
) {
    let lane = subgroupExclusiveAdd(1u);
    let lanes = subgroupAdd(1u);
    let stride = nwg.x * nwg.y * nsg;
    for (var row = (wg.x + wg.y * nwg.x) * nsg + sg; row < params.rows; row += stride) {
        let sum = row_scaled(row, row_dot(row_ptr[row], row_ptr[row + 1u], lane, lanes));
        if lane == 0u {
            store_y(params.row_offset + row, sum);
        }
    }
}
