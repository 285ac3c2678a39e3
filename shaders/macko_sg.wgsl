// MACKO-16-4 SpMV with subgroup operations (common.wgsl is prepended). See NOTES.md.
//
// One row at a time per subgroup; rows are handed out through an atomic counter, so the kernel
// is correct whatever the subgroup size (4..128), however the adapter splits a workgroup into
// subgroups, and whether subgroups are full or not. A lane's index and the number of lanes are
// counted by the subgroup itself (an exclusive scan and a sum of 1), never assumed.
//
// Within a row, each lane takes UNROLL = 4 groups of 8 entries per step (group g0 + u*lanes +
// lane for u in 0..4: every load instruction of the subgroup is contiguous), 16 bytes of values
// and 4 bytes of codes per group, all issued before any is used. The column where each group
// starts is the running column of the row plus an exclusive scan of the groups' column steps
// across the subgroup; the 4 groups' step totals (at most 128 each, at most 16384 over 128
// lanes) travel packed as 16-bit halves of a vec2<u32>, so one scan and one sum serve them all.

@group(0) @binding(0) var<uniform> params: MatrixParams;
// Row pointers of this block, rebased so that entry 0 is the block's first 16-byte word.
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
// Entry values: 8 binary16 per vec4<u32>.
@group(0) @binding(2) var<storage, read> values: array<vec4<u32>>;
// Entry codes: 8 nibbles per u32, at the same index as their values.
@group(0) @binding(3) var<storage, read> codes: array<u32>;
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

struct Loaded {
    vals: vec4<u32>,
    code_word: u32,
    lo: u32,
    hi: u32,
}

// Group g of a row whose entries are s..e and whose groups end at gend. Lanes past the row
// read the row's last group again (a cached, in-bounds read) and keep no entry of it.
fn load_group(g: u32, gend: u32, s: u32, e: u32) -> Loaded {
    let gi = min(g, gend - 1u);
    var l: Loaded;
    l.vals = values[gi];
    l.code_word = codes[gi];
    l.lo = group_lo(g, s);
    l.hi = group_hi(g, e);
    return l;
}

// Row `row`'s dot product, summed over the subgroup (every lane gets it).
fn row_dot(row: u32, lane: u32, lanes: u32) -> f32 {
    let s = row_ptr[row];
    let e = row_ptr[row + 1u];
    var acc = 0.0;
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = 0u; // column steps of the row so far: the next entry's column + 1 - step
        for (var g0 = s / 8u; g0 < gend; g0 += 4u * lanes) {
            let l0 = load_group(g0 + lane, gend, s, e);
            let l1 = load_group(g0 + lanes + lane, gend, s, e);
            let l2 = load_group(g0 + 2u * lanes + lane, gend, s, e);
            let l3 = load_group(g0 + 3u * lanes + lane, gend, s, e);
            let d0 = decode_group(l0.code_word, l0.lo, l0.hi);
            let d1 = decode_group(l1.code_word, l1.lo, l1.hi);
            let d2 = decode_group(l2.code_word, l2.lo, l2.hi);
            let d3 = decode_group(l3.code_word, l3.lo, l3.hi);
            let mine = vec2<u32>(d0.total | (d1.total << 16u), d2.total | (d3.total << 16u));
            let before = subgroupExclusiveAdd(mine);
            let all = subgroupAdd(mine);
            let t0 = all.x & 0xffffu;
            let t1 = all.x >> 16u;
            let t2 = all.y & 0xffffu;
            let t3 = all.y >> 16u;
            acc += group_dot(l0.vals, d0, column + (before.x & 0xffffu));
            acc += group_dot(l1.vals, d1, column + t0 + (before.x >> 16u));
            acc += group_dot(l2.vals, d2, column + t0 + t1 + (before.y & 0xffffu));
            acc += group_dot(l3.vals, d3, column + t0 + t1 + t2 + (before.y >> 16u));
            column += t0 + t1 + t2 + t3;
        }
    }
    return subgroupAdd(acc);
}

@compute @workgroup_size(WORKGROUP)
fn main() {
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
