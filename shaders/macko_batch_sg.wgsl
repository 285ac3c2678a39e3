// MACKO-16-4 few-token product Y = A·X for a chunk of W vectors, with subgroup operations
// (after common.wgsl, macko.wgsl, macko_x_words.wgsl, batch.wgsl and macko_batch.wgsl). See
// shaders/README.md, "Few-token products".
//
// One row at a time per subgroup, rows dealt by stride over the dispatch's subgroups (any
// subgroup size and layout). A subgroup that is full with invocation ids 0..size, size >= W
// ("exact", checked at entry as macko_sg.wgsl does) runs macko_sg.wgsl's pipelined loop: steps
// of 2 raw groups per lane, the next step loading while this one is computed, the column steps
// scanned by shuffles (exact_scan1), each group decoded right before its products, each entry
// adding its value times the W values of its column of XT (one or two wide loads) into W
// accumulators; at the row's end one butterfly (fold_sums) folds the W sums over the subgroup
// in W - 1 + log2(size / W) shuffles, and the lane holding vector b's sum stores it. Any other
// subgroup runs the unpipelined loop (4 decoded groups per lane per step, subgroupAdd scans)
// and W subgroupAdds.

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

// ---- Exact subgroups: pipelined steps and one butterfly per row ----------------------------

// The scan of `v` over an exact subgroup (macko_sg.wgsl's exact_scan1: shuffles up, not
// subgroupExclusiveAdd, which the NVIDIA driver compiles into a scan over any set of active
// lanes): the exclusive scan and the sum. Ends: d doubles up to lanes <= 128.
fn exact_scan1(v: u32, lane: u32, lanes: u32) -> vec2<u32> {
    var s = v;
    for (var d = 1u; d < lanes; d *= 2u) {
        let up = subgroupShuffleUp(s, d);
        s += select(0u, up, lane >= d);
    }
    return vec2<u32>(s - v, subgroupShuffle(s, lanes - 1u));
}

// The row's entries s..e from column count c0 into the accumulators, in pipelined steps of 2
// groups per lane (macko_sg.wgsl's row_dot_piped without staged x: `lane`, `lanes` are an exact
// subgroup's builtin id and size). Ends: g0 grows by 2 · lanes >= 2 towards gend <= 2^29.
fn row_batch_piped(s: u32, e: u32, c0: u32, lane: u32, lanes: u32) {
    if e <= s {
        return;
    }
    let gend = (e + 7u) / 8u;
    var column = c0;
    var g0 = s / 8u;
    var cur = load_step2(g0, lane, lanes, gend);
    // Entries of the row's first group before s (only in the first step's group 0).
    var lo0 = group_lo(g0 + lane, s);
    loop {
        let gn = g0 + 2u * lanes;
        let more = gn < gend;
        var nxt: Raw2;
        if more {
            nxt = load_step2(gn, lane, lanes, gend);
        }
        if !step2_inside(g0, lanes, s, e) {
            cur = mask_step2(cur, g0, lane, lanes, s, e);
        }
        // Group 0's total counts only its entries from s on (lo0 <= 7 < 8 <= its steps).
        let mine = (code_steps(cur.c0) - lo0) | (code_steps(cur.c1) << 16u);
        let scan = exact_scan1(mine, lane, lanes);
        let t0 = scan.y & 0xffffu;
        // Wraps below 0 for the row's first group (lo0 > 0) or a tile part's start count: the
        // kept entries' columns come out right modulo 2^32, masked ones read the zero column.
        group_raw(cur.v0, cur.c0, column + (scan.x & 0xffffu) - lo0);
        if g0 + lanes < gend {
            group_raw(cur.v1, cur.c1, column + t0 + (scan.x >> 16u));
        }
        column += t0 + (scan.y >> 16u);
        if !more {
            break;
        }
        cur = nxt;
        g0 = gn;
        lo0 = 0u;
    }
}

// Folds the row's W sums over an exact subgroup of `lanes` lanes (a power of two >= W): at
// each of log2(W) steps, lanes `d` apart swap halves of their sums (the lane with bit d set
// keeps the upper half, adding its partner's), then log2(lanes / W) plain butterfly steps.
// Lane l ends with the sum of vector l / (lanes / W) over the subgroup. W - 1 + log2(lanes / W)
// shuffles of one f32 (instead of W subgroupAdds). Ends: d halves from lanes / 2 to 0.
fn fold_sums(lane: u32, lanes: u32) -> f32 {
    var d = lanes / 2u;
    if W == 16u {
        let up = (lane & d) != 0u;
        let k0 = select(acc0, acc2, up);
        let k1 = select(acc1, acc3, up);
        acc0 = k0 + subgroupShuffleXor(select(acc2, acc0, up), d);
        acc1 = k1 + subgroupShuffleXor(select(acc3, acc1, up), d);
        d /= 2u;
    }
    if W >= 8u {
        let up = (lane & d) != 0u;
        acc0 = select(acc0, acc1, up) + subgroupShuffleXor(select(acc1, acc0, up), d);
        d /= 2u;
    }
    var pair = acc0.xy;
    if W >= 4u {
        let up = (lane & d) != 0u;
        pair = select(acc0.xy, acc0.zw, up) + subgroupShuffleXor(select(acc0.zw, acc0.xy, up), d);
        d /= 2u;
    }
    let up = (lane & d) != 0u;
    var sum = select(pair.x, pair.y, up) + subgroupShuffleXor(select(pair.y, pair.x, up), d);
    d /= 2u;
    for (; d > 0u; d /= 2u) {
        sum += subgroupShuffleXor(sum, d);
    }
    return sum;
}

// Rows from `first` by `stride` in an exact subgroup (`lane`, `lanes` its builtin id and size,
// lanes >= W): the first lane of each block of lanes / W stores its vector's sum. Ends: each
// iteration adds stride >= 1 to a row below params.rows < 2^31.
fn rows_exact(first: u32, stride: u32, lane: u32, lanes: u32) {
    let per = lanes / W;
    let b = lane / per;
    let stores = lane % per == 0u && b < chunk.count;
    for (var row = first; row < params.rows; row += stride) {
        clear_acc();
        for (var part = 0u; part < row_parts(); part++) {
            let w = row_part(row, part);
            row_batch_piped(w.x, w.y, w.z, lane, lanes);
        }
        let sum = fold_sums(lane, lanes);
        if stores {
            store_y((chunk.first + b) * chunk.rows + params.row_offset + row, sum);
        }
    }
}

// Rows from `first` by `stride` in any other subgroup (counted `lane`, `lanes`).
fn rows_counted(first: u32, stride: u32, lane: u32, lanes: u32) {
    for (var row = first; row < params.rows; row += stride) {
        clear_acc();
        for (var part = 0u; part < row_parts(); part++) {
            let w = row_part(row, part);
            row_batch(w.x, w.y, w.z, lane, lanes);
        }
        reduce_subgroup();
        store_chunk(params.row_offset + row, lane, lanes);
    }
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
    @builtin(subgroup_invocation_id) sg_id: u32,
    @builtin(subgroup_size) sg_size: u32,
) {
    let lane = subgroupExclusiveAdd(1u);
    let lanes = subgroupAdd(1u);
    // Full with ids 0..size, and wide enough for the butterfly (subgroup-uniform).
    let exact = subgroupAll(lane == sg_id && lanes == sg_size) && sg_size >= W;
    // Subgroup k of workgroup w starts at row k · workgroups + w (a partial last round spreads
    // over every workgroup), then steps by the dispatch's subgroups.
    let workgroups = nwg.x * nwg.y;
    let stride = workgroups * nsg;
    let first = sg * workgroups + wg.x + wg.y * nwg.x;
    if exact {
        rows_exact(first, stride, sg_id, sg_size);
    } else {
        rows_counted(first, stride, lane, lanes);
    }
}
