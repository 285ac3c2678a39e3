// MACKO-16-4 few-token product Y = A·X for a chunk of W vectors without subgroup operations
// (after common.wgsl, macko.wgsl, macko_x_words.wgsl, batch.wgsl and macko_batch.wgsl). See
// shaders/README.md, "Few-token products".
//
// macko_wg.wgsl with W accumulators: one row per workgroup of 64 invocations, 4 groups per
// invocation per step, the exclusive scan of the column steps in workgroup memory, each entry
// adding its value times its column of XT into the W accumulators; the W sums are one tree in
// workgroup memory, stored by invocations 0..count.

const WORKGROUP: u32 = 64u;

var<workgroup> scan: array<vec2<u32>, WORKGROUP>;
var<workgroup> partial: array<array<vec4<f32>, 4>, WORKGROUP>;

// Inclusive scan of `v` over the workgroup (macko_wg.wgsl's); the total stays in
// scan[WORKGROUP - 1] until the next call.
fn workgroup_scan(v: vec2<u32>, t: u32) -> vec2<u32> {
    workgroupBarrier();
    scan[t] = v;
    workgroupBarrier();
    for (var offset = 1u; offset < WORKGROUP; offset *= 2u) {
        let other = scan[select(0u, t - offset, t >= offset)];
        let add = select(vec2<u32>(0u), other, t >= offset);
        workgroupBarrier();
        scan[t] += add;
        workgroupBarrier();
    }
    return scan[t];
}

// The products of one step's 4 groups; advances `column` by the step's total.
fn scan_and_batch(f: Four, t: u32, column: ptr<function, u32>) {
    let mine = four_totals(f);
    let upto = workgroup_scan(mine, t);
    let all = scan[WORKGROUP - 1u];
    four_batch(f, *column, upto - mine, all);
    *column += step_total(all);
}

// The workgroup's sums of the W accumulators, in every invocation.
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
    for (var part = 0u; part < row_parts(); part++) {
        let w = row_part(row, part);
        let s = w.x;
        let e = w.y;
        if e > s {
            let gend = (e + 7u) / 8u;
            var column = w.z;
            for (var g0 = s / 8u; g0 < gend; g0 += 4u * WORKGROUP) {
                if step_inside(g0, WORKGROUP, s, e) {
                    scan_and_batch(load_four_inside(g0, t, WORKGROUP), t, &column);
                } else {
                    scan_and_batch(load_four(g0, t, WORKGROUP, gend, s, e), t, &column);
                }
            }
        }
    }
    reduce_workgroup(t);
    store_chunk(params.row_offset + row, t, WORKGROUP);
}
