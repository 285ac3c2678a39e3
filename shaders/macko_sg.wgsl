// MACKO-16-4 SpMV with subgroup operations (after common.wgsl and macko.wgsl). See NOTES.md.
//
// One row at a time per subgroup; rows are handed out through an atomic counter, so the kernel
// is correct whatever the subgroup size (4..128), however the adapter splits a workgroup into
// subgroups, and whether subgroups are full or not. A lane's index and the number of lanes are
// counted by the subgroup itself (an exclusive scan and a sum of 1), never assumed.
//
// A workgroup first stages x in workgroup memory where it fits (X_SHARED, see macko.wgsl); the
// backend then dispatches a bounded number of workgroups that each work through many rows.
//
// Within a row, each lane takes 4 groups of 8 entries per step (see macko.wgsl); the column
// where each group starts is the running column of the row plus an exclusive scan of the
// groups' column steps across the subgroup (subgroupExclusiveAdd), and the running column moves
// on by the step's total (subgroupAdd). Steps wholly inside the row take a path without row
// tests. The row's sum is a subgroupAdd of the lanes' f32 accumulators.

// One row counter per block, zeroed before every product.
@group(0) @binding(4) var<storage, read_write> counters: array<atomic<u32>>;

const WORKGROUP: u32 = 128u;

// The next row for this subgroup: its first lane takes it from the counter, and it is
// broadcast from the first active lane, which is that lane (all lanes are active here).
fn next_row(lane: u32) -> u32 {
    var r = 0u;
    if lane == 0u {
        r = atomicAdd(&counters[params.slot], 1u);
    }
    return subgroupBroadcastFirst(r);
}

// Row `row`'s dot product, summed over the subgroup (every lane gets it).
fn row_dot(row: u32, lane: u32, lanes: u32) -> f32 {
    let s = row_ptr[row];
    let e = row_ptr[row + 1u];
    var acc = 0.0;
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = 0u; // the row's column count before the current step
        for (var g0 = s / 8u; g0 < gend; g0 += 4u * lanes) {
            if step_inside(g0, lanes, s, e) {
                let f = load_four_inside(g0, lane, lanes);
                let mine = four_totals(f);
                let all = subgroupAdd(mine);
                acc += four_dot(f, column, subgroupExclusiveAdd(mine), all);
                column += step_total(all);
            } else {
                let f = load_four(g0, lane, lanes, gend, s, e);
                let mine = four_totals(f);
                let all = subgroupAdd(mine);
                acc += four_dot(f, column, subgroupExclusiveAdd(mine), all);
                column += step_total(all);
            }
        }
    }
    return subgroupAdd(acc);
}

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(local_invocation_index) t: u32) {
    stage_x(t, WORKGROUP);
    let lane = subgroupExclusiveAdd(1u);
    let lanes = subgroupAdd(1u);
    // The next row is claimed before the current one is computed, so the counter's latency
    // hides behind the row's loads.
    var row = next_row(lane);
    loop {
        if row >= params.rows {
            break;
        }
        let following = next_row(lane);
        let sum = row_dot(row, lane, lanes);
        if lane == 0u {
            store_y(params.row_offset + row, sum);
        }
        row = following;
    }
}
