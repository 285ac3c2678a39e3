// 2:4 SpMV with subgroup operations (after common.wgsl and sparse24.wgsl). See
// shaders/README.md, "2:4 structured sparsity".
//
// One row at a time per subgroup, rows by stride over the dispatch's subgroups (any subgroup
// size and layout). Lanes take the row's words (8 groups, 32 columns) in turn, two words in
// flight per lane per step; the sum is a subgroupAdd.

const WORKGROUP: u32 = 128u;

fn row_dot(row: u32, lane: u32, lanes: u32) -> f32 {
    let words = params.stride;
    var acc0 = 0.0;
    var acc1 = 0.0;
    // The trip count is the same for every lane (words is uniform), so the subgroupAdd below
    // runs in uniform control flow. A lane past the row's end re-reads its last word (clamped:
    // the loads stay unconditional, so both words' loads issue before their products) and
    // discards the sum.
    for (var base = 0u; base < words; base += 2u * lanes) {
        let k0 = base + lane;
        let k1 = k0 + lanes;
        acc0 += select(0.0, word_dot(row, min(k0, words - 1u)), k0 < words);
        acc1 += select(0.0, word_dot(row, min(k1, words - 1u)), k1 < words);
    }
    return subgroupAdd(acc0 + acc1);
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
    let workgroups = nwg.x * nwg.y;
    let stride = workgroups * nsg;
    // Subgroup k of workgroup w starts at row k · workgroups + w (a partial last round spreads
    // over every multiprocessor, as in the MACKO kernel).
    for (var row = sg * workgroups + wg.x + wg.y * nwg.x; row < params.rows; row += stride) {
        let sum = row_dot(row, lane, lanes);
        if lane == 0u {
            store_y(params.row_offset + row, sum);
        }
    }
}
