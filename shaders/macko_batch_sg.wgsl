// MACKO-16-4 few-token product Y = A·X for a chunk of W vectors, with subgroup operations
// (after common.wgsl, macko.wgsl, macko_x_words.wgsl, batch.wgsl and macko_batch.wgsl). See
// shaders/README.md, "Few-token products".
//
// One row at a time per subgroup, rows dealt by stride over the dispatch's subgroups (any
// subgroup size and layout). Per step each lane loads and decodes 4 groups (macko.wgsl); one
// exclusive scan and one sum of the packed column steps place every entry; each entry then
// adds its value times the W values of its column of XT (one or two wide loads) into W
// accumulators. The row's W sums are subgroupAdds, stored by lanes 0..count.

// Invocations per workgroup: a pipeline constant (WgpuTuning::batch_workgroup).
override WORKGROUP: u32 = 128u;

// The row's entries s..e from column count `column0`, into the accumulators. The trip count
// is subgroup-uniform (s, e are), so the scans run in uniform control flow.
fn row_batch(s: u32, e: u32, column0: u32, lane: u32, lanes: u32) {
    if e <= s {
        return;
    }
    let gend = (e + 7u) / 8u;
    var column = column0;
    for (var g0 = s / 8u; g0 < gend; g0 += 4u * lanes) {
        // Each branch computes its own step, so a step inside the row keeps its constant
        // kept bits (0xff) and drops every row test.
        if step_inside(g0, lanes, s, e) {
            let f = load_four_inside(g0, lane, lanes);
            let mine = four_totals(f);
            let all = subgroupAdd(mine);
            four_batch(f, column, subgroupExclusiveAdd(mine), all);
            column += step_total(all);
        } else {
            let f = load_four(g0, lane, lanes, gend, s, e);
            let mine = four_totals(f);
            let all = subgroupAdd(mine);
            four_batch(f, column, subgroupExclusiveAdd(mine), all);
            column += step_total(all);
        }
    }
}

// The subgroup's sums of the W accumulators, in every lane.
fn reduce_subgroup() {
    acc0 = subgroupAdd(acc0);
    if W > 4u {
        acc1 = subgroupAdd(acc1);
    }
    if W > 8u {
        acc2 = subgroupAdd(acc2);
        acc3 = subgroupAdd(acc3);
    }
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
    // Subgroup k of workgroup w starts at row k · workgroups + w (a partial last round spreads
    // over every workgroup), then steps by the dispatch's subgroups.
    let workgroups = nwg.x * nwg.y;
    let stride = workgroups * nsg;
    for (var row = sg * workgroups + wg.x + wg.y * nwg.x; row < params.rows; row += stride) {
        clear_acc();
        for (var part = 0u; part < row_parts(); part++) {
            let w = row_part(row, part);
            row_batch(w.x, w.y, w.z, lane, lanes);
        }
        reduce_subgroup();
        store_chunk(params.row_offset + row, lane, lanes);
    }
}
