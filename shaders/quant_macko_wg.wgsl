// Quantized MACKO SpMV without subgroup operations (after common.wgsl, quant.wgsl, the width
// file and quant_macko.wgsl). See shaders/README.md, "Quantized matrices".
//
// One row per workgroup of 64 invocations, with quant_macko_sg.wgsl's loads (2 groups per
// invocation per step, their column steps packed in one u32); the exclusive scan runs in
// workgroup memory (Hillis-Steele, 6 steps) and the row's sum is a tree. The row and its
// bounds are uniform over the workgroup, so every barrier is in uniform control flow.

const WORKGROUP: u32 = 64u;

var<workgroup> scan: array<u32, WORKGROUP>;
var<workgroup> partial: array<f32, WORKGROUP>;

// Inclusive scan of `v` over the workgroup; the total stays in scan[WORKGROUP - 1] until the
// next call.
fn workgroup_scan(v: u32, t: u32) -> u32 {
    workgroupBarrier(); // the previous call's readers are done with `scan`
    scan[t] = v;
    workgroupBarrier();
    for (var offset = 1u; offset < WORKGROUP; offset *= 2u) {
        let add = select(0u, scan[select(0u, t - offset, t >= offset)], t >= offset);
        workgroupBarrier();
        scan[t] += add;
        workgroupBarrier();
    }
    return scan[t];
}

fn workgroup_sum(v: f32, t: u32) -> f32 {
    partial[t] = v;
    workgroupBarrier();
    for (var half = WORKGROUP / 2u; half > 0u; half /= 2u) {
        if t < half {
            partial[t] += partial[t + half];
        }
        workgroupBarrier();
    }
    return partial[0];
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
    let s = row_ptr[row];
    let e = row_ptr[row + 1u];
    var acc = 0.0;
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = 0u;
        for (var g0 = s / 8u; g0 < gend; g0 += 2u * WORKGROUP) {
            let a = load_qgroup(g0 + t, gend, s, e);
            let b = load_qgroup(g0 + WORKGROUP + t, gend, s, e);
            let mine = qgroup_total(a) | (qgroup_total(b) << 16u);
            // Packed halves never borrow: each half of the inclusive scan includes the same
            // half of `mine`.
            let before = workgroup_scan(mine, t) - mine;
            let all = scan[WORKGROUP - 1u];
            let ta = all & 0xffffu;
            acc += qgroup_term(a, column + (before & 0xffffu));
            acc += qgroup_term(b, column + ta + (before >> 16u));
            column += ta + (all >> 16u);
        }
    }
    let sum = row_scaled(row, workgroup_sum(acc, t));
    if t == 0u {
        store_y(params.row_offset + row, sum);
    }
}
