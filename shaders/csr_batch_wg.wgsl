// CSR few-token product Y = A·X for a chunk of W vectors without subgroup operations (after
// common.wgsl and batch.wgsl). See shaders/README.md, "Few-token products".
//
// csr_wg.wgsl with W accumulators: one row per workgroup of 64 invocations striding over its
// entries, the W sums one tree in workgroup memory, stored by invocations 0..count.

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;

const WORKGROUP: u32 = 64u;

var<workgroup> partial: array<array<vec4<f32>, 4>, WORKGROUP>;

// Entry i (below the row's end), unless its value is ±0.
fn entry_batch(i: u32) {
    let bits = csr_value_bits(i);
    let live = (bits & 0x7fffu) != 0u;
    add_entry(
        select(0.0, unpack2x16float(bits).x, live),
        select(chunk.zero_col, col_idx[i], live),
    );
}

fn reduce_workgroup(t: u32) {
    partial[t] = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    workgroupBarrier();
    for (var half = WORKGROUP / 2u; half > 0u; half /= 2u) {
        if t < half {
            for (var q = 0u; q < 4u; q++) {
                partial[t][q] += partial[t + half][q];
            }
        }
        workgroupBarrier();
    }
    acc0 = partial[0][0];
    acc1 = partial[0][1];
    acc2 = partial[0][2];
    acc3 = partial[0][3];
}

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
    let e = row_ptr[row + 1u];
    for (var i = row_ptr[row] + t; i < e; i += WORKGROUP) {
        entry_batch(i);
    }
    reduce_workgroup(t);
    store_chunk(params.row_offset + row, t, WORKGROUP);
}
