// CSR few-token product Y = A·X for a chunk of W vectors, with subgroup operations (after
// common.wgsl and batch.wgsl). See shaders/README.md, "Few-token products".
//
// csr_sg.wgsl with W accumulators: one row at a time per subgroup, rows by stride over the
// dispatch's subgroups, lanes striding over the row's entries; each entry adds its value times
// its column of XT. A zero-valued entry (and a lane past the row's end) adds 0 · XT[zero_col].

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;

// Invocations per workgroup: a pipeline constant (WgpuTuning::batch_workgroup).
override WORKGROUP: u32 = 128u;

// Entry i of the row's entries ..e, if i < e and its value is not ±0.
fn entry_batch(i: u32, e: u32) {
    let k = min(i, e - 1u);
    let bits = csr_value_bits(k);
    let live = i < e && (bits & 0x7fffu) != 0u;
    add_entry(
        select(0.0, unpack2x16float(bits).x, live),
        select(chunk.zero_col, col_idx[k], live),
    );
}

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
    let workgroups = nwg.x * nwg.y;
    let stride = workgroups * nsg;
    for (var row = sg * workgroups + wg.x + wg.y * nwg.x; row < params.rows; row += stride) {
        clear_acc();
        let s = row_ptr[row];
        let e = row_ptr[row + 1u];
        // Uniform trip count (s, e are subgroup-uniform): see csr_sg.wgsl.
        for (var base = s; base < e; base += 2u * lanes) {
            entry_batch(base + lane, e);
            entry_batch(base + lanes + lane, e);
        }
        reduce_subgroup();
        store_chunk(params.row_offset + row, lane, lanes);
    }
}
