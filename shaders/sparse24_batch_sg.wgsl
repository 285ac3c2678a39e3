// 2:4 few-token product Y = A·X for a chunk of W vectors, with subgroup operations (after
// common.wgsl, sparse24.wgsl and batch.wgsl). See shaders/README.md, "2:4 structured
// sparsity" and "Few-token products".
//
// sparse24_sg.wgsl with W accumulators: one row at a time per subgroup, rows by stride over
// the dispatch's subgroups, lanes taking the row's words in turn; each of a word's 16 entries
// adds its value times its column of XT. A zero value (group fill, padding) and a lane past
// the row's end add 0 · XT[zero_col].

// Invocations per workgroup: a pipeline constant (WgpuTuning::batch_workgroup).
override WORKGROUP: u32 = 128u;

// One group's two entries: values `v`, positions nibble `n`, first column `c`; `live` false
// masks both (a lane past the row's end).
fn group_batch(v: u32, n: u32, c: u32, live: bool) {
    let a = unpack2x16float(v);
    let l0 = live && (v & 0x7fffu) != 0u;
    let l1 = live && (v & 0x7fff0000u) != 0u;
    add_entry(select(0.0, a.x, l0), select(chunk.zero_col, c + (n & 3u), l0));
    add_entry(select(0.0, a.y, l1), select(chunk.zero_col, c + (n >> 2u), l1));
}

// Word k of row `row` (k < the row's words), masked unless `live`.
fn word_batch(row: u32, k: u32, live: bool) {
    let i = row * params.stride + k;
    let m = pos[i];
    let a = vals[2u * i];
    let b = vals[2u * i + 1u];
    let c = 32u * k;
    group_batch(a.x, m & 15u, c, live);
    group_batch(a.y, (m >> 4u) & 15u, c + 4u, live);
    group_batch(a.z, (m >> 8u) & 15u, c + 8u, live);
    group_batch(a.w, (m >> 12u) & 15u, c + 12u, live);
    group_batch(b.x, (m >> 16u) & 15u, c + 16u, live);
    group_batch(b.y, (m >> 20u) & 15u, c + 20u, live);
    group_batch(b.z, (m >> 24u) & 15u, c + 24u, live);
    group_batch(b.w, m >> 28u, c + 28u, live);
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
    let words = params.stride;
    for (var row = sg * workgroups + wg.x + wg.y * nwg.x; row < params.rows; row += stride) {
        clear_acc();
        // Uniform trip count (words is uniform): see sparse24_sg.wgsl.
        for (var base = 0u; base < words; base += lanes) {
            let k = base + lane;
            word_batch(row, min(k, words - 1u), k < words);
        }
        reduce_subgroup();
        store_chunk(params.row_offset + row, lane, lanes);
    }
}
