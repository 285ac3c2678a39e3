// Quantized MACKO few-token product Y = A·X for a chunk of W vectors, on both kernel paths (no
// subgroup operation; after common.wgsl, quant.wgsl, the width file, quant_macko.wgsl,
// batch.wgsl and quant_batch.wgsl). See shaders/README.md, "Quantized matrices".
//
// quant_macko_wg.wgsl's row loop (one row per workgroup of 64, 2 groups per invocation per
// step, the scan in workgroup memory) with each live entry adding its value times its column
// of XT into the W accumulators (batch.wgsl's add_entry). An entry's value scale · q is formed
// in f32 (exact: 8 + 11 significant bits), so a zero value, from a zero code or a zero scale,
// is one test: it adds 0 · XT[zero_col], never meeting NaN or ±∞ in X.

var<workgroup> scan: array<u32, WORKGROUP>;

// Inclusive scan of `v` over the workgroup (quant_macko_wg.wgsl's); the total stays in
// scan[WORKGROUP - 1] until the next call.
fn workgroup_scan(v: u32, t: u32) -> u32 {
    workgroupBarrier();
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

// The group's live entries into the W sums, the row's column count before the group being
// `base` and `row_s` the row's scale (per row; the group's own with PER_GROUP).
fn qgroup_batch(r: QGroup, base: u32, row_s: f32) {
    var s = row_s;
    if PER_GROUP {
        s = scale_at(scale_index(r.g));
    }
    var c = base - r.lo;
    for (var j = 0u; j < 8u; j++) {
        c += gap(r, j);
        let a = q_code(r.q, j) * s;
        let live = entry_live(r, j, a);
        add_entry(select(0.0, a, live), select(chunk.zero_col, entry_column(c, j), live));
    }
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
    var row_s = 0.0;
    if !PER_GROUP {
        row_s = scale_at(scale_index(row));
    }
    let s = row_ptr[row];
    let e = row_ptr[row + 1u];
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = 0u;
        for (var g0 = s / 8u; g0 < gend; g0 += 2u * WORKGROUP) {
            let a = load_qgroup(g0 + t, gend, s, e);
            let b = load_qgroup(g0 + WORKGROUP + t, gend, s, e);
            let mine = qgroup_total(a) | (qgroup_total(b) << 16u);
            let before = workgroup_scan(mine, t) - mine;
            let all = scan[WORKGROUP - 1u];
            let ta = all & 0xffffu;
            qgroup_batch(a, column + (before & 0xffffu), row_s);
            qgroup_batch(b, column + ta + (before >> 16u), row_s);
            column += ta + (all >> 16u);
        }
    }
    reduce_workgroup(t);
    store_chunk(params.row_offset + row, t, WORKGROUP);
}
