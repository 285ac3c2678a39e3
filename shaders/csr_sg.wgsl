// CSR SpMV (binary16 values, u32 column indices) with subgroup operations (common.wgsl is
// prepended). See NOTES.md.
//
// One row at a time per subgroup, rows handed out by an atomic counter as in macko_sg.wgsl (so
// any subgroup size and layout works). Lanes stride over the row's entries, two entries in
// flight per lane per step; zero-valued entries are masked (never multiplied), and the sum is
// a subgroupAdd.

@group(0) @binding(0) var<uniform> params: MatrixParams;
// Row pointers of this block, rebased so that entry 0 is the block's first (even) entry.
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
// Entry values, binary16 packed in pairs.
@group(0) @binding(2) var<storage, read> values: array<u32>;
// Entry columns.
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;
@group(0) @binding(4) var<storage, read_write> counters: array<atomic<u32>>;

const WORKGROUP: u32 = 128u;

fn next_row(lane: u32) -> u32 {
    var r = 0u;
    if lane == 0u {
        r = atomicAdd(&counters[params.slot], 1u);
    }
    return subgroupBroadcastFirst(r);
}

// Entry i's product, or an exact 0 for a zero-valued entry.
fn term(i: u32) -> f32 {
    let bits = (values[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu;
    let live = (bits & 0x7fffu) != 0u;
    let c = select(0u, col_idx[i], live);
    return select(0.0, unpack2x16float(bits).x * load_x(c), live);
}

fn row_dot(row: u32, lane: u32, lanes: u32) -> f32 {
    let s = row_ptr[row];
    let e = row_ptr[row + 1u];
    var acc = 0.0;
    var i = s + lane;
    loop {
        if i + lanes >= e {
            break;
        }
        acc += term(i) + term(i + lanes);
        i += 2u * lanes;
    }
    if i < e {
        acc += term(i);
    }
    return subgroupAdd(acc);
}

@compute @workgroup_size(WORKGROUP)
fn main() {
    let lane = subgroupExclusiveAdd(1u);
    let lanes = subgroupAdd(1u);
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
