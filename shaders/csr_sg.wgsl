// CSR SpMV (binary16 values, u32 column indices) with subgroup operations (common.wgsl is
// prepended). See shaders/README.md.
//
// One row at a time per subgroup, rows grid-strided over the dispatch's subgroups (any subgroup
// size and layout works). Lanes stride over the row's entries, two entries in
// flight per lane per step; zero-valued entries are masked (never multiplied), and the sum is
// a subgroupAdd.

@group(0) @binding(0) var<uniform> params: MatrixParams;
// Row pointers of this block, rebased so that entry 0 is the block's first (even) entry.
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
// Entry values, binary16 packed in pairs.
@group(0) @binding(2) var<storage, read> values: array<u32>;
// Entry columns.
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;

const WORKGROUP: u32 = 128u;

// Entry i's product, or an exact 0 for a zero-valued entry.
fn term(i: u32) -> f32 {
    let bits = csr_value_bits(i);
    let c = select(0u, col_idx[i], (bits & 0x7fffu) != 0u);
    let xv = load_x(c);
    return select(0.0, unpack2x16float(bits).x * xv, csr_live(bits, xv));
}

fn row_dot(row: u32, lane: u32, lanes: u32) -> f32 {
    let s = row_ptr[row];
    let e = row_ptr[row + 1u];
    var acc = 0.0;
    // The trip count is the same for every lane (the bounds are subgroup-uniform), so the
    // subgroupAdd below runs in uniform control flow. A loop whose exit differed per lane left
    // lanes unconverged on lavapipe and lost terms. Lanes past the row's end add an exact 0
    // (their index is clamped inside the row, the term discarded).
    for (var base = s; base < e; base += 2u * lanes) {
        let i = base + lane;
        let j = i + lanes;
        acc += select(0.0, term(min(i, e - 1u)), i < e) + select(0.0, term(min(j, e - 1u)), j < e);
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
    // Rows grid-stride over the subgroups of the dispatch, whatever their size and number per
    // workgroup. (Handing rows out through an atomic counter, as the MACKO kernel once did, lost
    // rows near the end of long-row matrices on lavapipe; this mapping needs no counter.)
    let stride = nwg.x * nwg.y * nsg;
    for (var row = (wg.x + wg.y * nwg.x) * nsg + sg; row < params.rows; row += stride) {
        let sum = row_dot(row, lane, lanes);
        if lane == 0u {
            store_y(params.row_offset + row, sum);
        }
    }
}
