// MACKO-16-4 SpMV without subgroup operations (common.wgsl is prepended). See NOTES.md.
//
// For adapters without SUBGROUP (GL, browsers) and for tests of this path everywhere: one row
// per workgroup of 64 invocations. The same per-group decoding as macko_sg.wgsl; the exclusive
// scan of the groups' column steps runs in workgroup memory (Hillis-Steele, log2(64) = 6
// steps), and the final reduction is a tree in workgroup memory. Nothing here depends on how
// the adapter schedules invocations.

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> codes: array<u32>;

const WORKGROUP: u32 = 64u;

var<workgroup> scan: array<vec2<u32>, WORKGROUP>;
var<workgroup> partial: array<f32, WORKGROUP>;

struct Loaded {
    vals: vec4<u32>,
    code_word: u32,
    lo: u32,
    hi: u32,
}

fn load_group(g: u32, gend: u32, s: u32, e: u32) -> Loaded {
    let gi = min(g, gend - 1u);
    var l: Loaded;
    l.vals = values[gi];
    l.code_word = codes[gi];
    l.lo = group_lo(g, s);
    l.hi = group_hi(g, e);
    return l;
}

// Inclusive scan of `v` over the workgroup (invocation t gets the sum over 0..=t); the last
// invocation's value, the total, stays in scan[WORKGROUP - 1] until the next call.
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
            let l0 = load_group(g0 + t, gend, s, e);
            let l1 = load_group(g0 + WORKGROUP + t, gend, s, e);
            let l2 = load_group(g0 + 2u * WORKGROUP + t, gend, s, e);
            let l3 = load_group(g0 + 3u * WORKGROUP + t, gend, s, e);
            let d0 = decode_group(l0.code_word, l0.lo, l0.hi);
            let d1 = decode_group(l1.code_word, l1.lo, l1.hi);
            let d2 = decode_group(l2.code_word, l2.lo, l2.hi);
            let d3 = decode_group(l3.code_word, l3.lo, l3.hi);
            let mine = vec2<u32>(d0.total | (d1.total << 16u), d2.total | (d3.total << 16u));
            let upto = workgroup_scan(mine, t);
            let all = scan[WORKGROUP - 1u];
            let before = upto - mine;
            let t0 = all.x & 0xffffu;
            let t1 = all.x >> 16u;
            let t2 = all.y & 0xffffu;
            let t3 = all.y >> 16u;
            acc += group_dot(l0.vals, d0, column + (before.x & 0xffffu));
            acc += group_dot(l1.vals, d1, column + t0 + (before.x >> 16u));
            acc += group_dot(l2.vals, d2, column + t0 + t1 + (before.y & 0xffffu));
            acc += group_dot(l3.vals, d3, column + t0 + t1 + t2 + (before.y >> 16u));
            column += t0 + t1 + t2 + t3;
        }
    }
    let sum = workgroup_sum(acc, t);
    if t == 0u {
        store_y(params.row_offset + row, sum);
    }
}
