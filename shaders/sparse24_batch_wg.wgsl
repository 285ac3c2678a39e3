// 2:4 few-token product Y = A·X for a chunk of W vectors without subgroup operations (after
// common.wgsl, sparse24.wgsl and batch.wgsl). See shaders/README.md, "2:4 structured
// sparsity" and "Few-token products".
//
// sparse24_wg.wgsl with W accumulators: one row per workgroup of 64 invocations taking its
// words in turn, the W sums one tree in workgroup memory, stored by invocations 0..count.

const WORKGROUP: u32 = 64u;

var<workgroup> partial: array<array<vec4<f32>, 4>, WORKGROUP>;

// One group's two entries: values `v`, positions nibble `n`, first column `c`. A zero value
// adds 0 · XT[zero_col].
fn group_batch(v: u32, n: u32, c: u32) {
    let a = unpack2x16float(v);
    let l0 = (v & 0x7fffu) != 0u;
    let l1 = (v & 0x7fff0000u) != 0u;
    add_entry(select(0.0, a.x, l0), select(chunk.zero_col, c + (n & 3u), l0));
    add_entry(select(0.0, a.y, l1), select(chunk.zero_col, c + (n >> 2u), l1));
}

// Word k of row `row` (k < the row's words).
fn word_batch(row: u32, k: u32) {
    let i = row * params.stride + k;
    let m = pos[i];
    let a = vals[2u * i];
    let b = vals[2u * i + 1u];
    let c = 32u * k;
    group_batch(a.x, m & 15u, c);
    group_batch(a.y, (m >> 4u) & 15u, c + 4u);
    group_batch(a.z, (m >> 8u) & 15u, c + 8u);
    group_batch(a.w, (m >> 12u) & 15u, c + 12u);
    group_batch(b.x, (m >> 16u) & 15u, c + 16u);
    group_batch(b.y, (m >> 20u) & 15u, c + 20u);
    group_batch(b.z, (m >> 24u) & 15u, c + 24u);
    group_batch(b.w, m >> 28u, c + 28u);
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
    for (var k = t; k < params.stride; k += WORKGROUP) {
        word_batch(row, k);
    }
    reduce_workgroup(t);
    store_chunk(params.row_offset + row, t, WORKGROUP);
}
