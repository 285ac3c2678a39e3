// MACKO-16-4 SpMV without subgroup operations (after common.wgsl and macko.wgsl). See
// shaders/README.md.
//
// For adapters without SUBGROUP (GL, browsers) and for tests of this path everywhere: one row
// per workgroup of 64 invocations, with the loads and decoding of macko_sg.wgsl (4 groups per
// invocation per step). The exclusive scan of the groups' column steps runs in workgroup memory
// (Hillis-Steele, log2(64) = 6 steps), and the row's sum is a tree in workgroup memory. Nothing
// here depends on how the adapter schedules invocations.

const WORKGROUP: u32 = 64u;

var<workgroup> scan: array<vec2<u32>, WORKGROUP>;
var<workgroup> partial: array<f32, WORKGROUP>;

// Inclusive scan of `v` over the workgroup (invocation t gets the sum over 0..=t); the total
// stays in scan[WORKGROUP - 1] until the next call.
fn workgroup_scan(v: vec2<u32>, t: u32) -> vec2<u32> {
    workgroupBarrier(); // the previous call's readers are done with `scan`
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

// The products of one step's 4 groups; advances `column` by the step's total.
fn scan_and_dot(f: Four, t: u32, column: ptr<function, u32>) -> f32 {
    let mine = four_totals(f);
    let upto = workgroup_scan(mine, t);
    let all = scan[WORKGROUP - 1u];
    // Packed halves never borrow: each half of `upto` includes the same half of `mine`.
    let acc = four_dot(f, *column, upto - mine, all);
    *column += step_total(all);
    return acc;
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
        for (var g0 = s / 8u; g0 < gend; g0 += 4u * WORKGROUP) {
            if step_inside(g0, WORKGROUP, s, e) {
                acc += scan_and_dot(load_four_inside(g0, t, WORKGROUP), t, &column);
            } else {
                acc += scan_and_dot(load_four(g0, t, WORKGROUP, gend, s, e), t, &column);
            }
        }
    }
    let sum = workgroup_sum(acc, t);
    if t == 0u {
        store_y(params.row_offset + row, sum);
    }
}
