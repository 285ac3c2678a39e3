// Quantized MACKO SpMV (int8 or int4 values, binary16 scales) with subgroup operations (after
// common.wgsl, quant.wgsl, the width file, quant_macko.wgsl and an x layout of macko_sg.wgsl:
// macko_x_words.wgsl, or macko_x_f16.wgsl after `enable f16;`). See shaders/README.md,
// "Quantized matrices".
//
// The first version (one row per subgroup, x gathered from its f32 copy, one step at a time,
// codes widened by integer-to-float conversions) reached 24 % (int8) and 15 % (int4) of the
// streaming-read ceiling on an H100, where macko_sg.wgsl reaches about 85 % on the same
// matrices. This one is a copy of what makes macko_sg fast, for codes instead of binary16
// values (the format's own layout: no row-aligned upload, so no HALF_ROWS; x staged whole or
// gathered from memory, no column tiles, whose partial sums binding 4 is the scales' here):
// - x staged in workgroup memory where it fits (X_SHARED, the x layout's copy_x and x_at),
//   the per-entry zero select dropped where the staged x is finite (stage_x);
// - rows dealt by stride over the dispatch's subgroups, numbered across workgroups first, and
//   row sums held in lanes and stored `lanes` rows at a time (rows_loop);
// - steps of 2 groups per lane, the next step loading while this one is computed, codes kept
//   raw until used and masked only in steps at a row's ends (row_dot_piped); exact subgroups
//   scan by shuffles and sum by a butterfly (exact_scan1, lane_sum), others by subgroup scans;
// - a group's 8 columns decoded in 7 operations (qgroup_fma, as group_fma_raw), its codes
//   turned into f32 in the mantissa of 2^23 (q_pair: no conversion instruction).
// Zero values contribute nothing even where x is NaN or ±∞: a zero code (padding, masked, a
// zero weight) selects x to 0 before its product wherever x is not known finite, and a group's
// (or, per row, the row's) sum under a zero scale is selected to 0 (scaled_sparse).

// Invocations per workgroup: a pipeline constant, set as macko_sg's.
override WORKGROUP: u32 = 128u;
// x staged whole in workgroup memory (set by the backend where it fits; the x layout's
// constants size it).
override X_SHARED: bool = false;
// Never set here: the kernel keeps naga's clamps (the x layouts read it).
const BOUNDED_GATHERS: bool = false;

var<workgroup> x_nonfinite: atomic<u32>;
var<workgroup> x_finite_copy: u32;

// The dispatch's subgroup count, by which a subgroup's rows step (set once at entry).
var<private> row_stride: u32;

// Whether any of the 8 binary16 values of a word of x is ±∞ or NaN (exponent bits all set).
fn word_nonfinite(v: vec4<u32>) -> bool {
    let lo = v & vec4<u32>(0x7c00u);
    let hi = v & vec4<u32>(0x7c000000u);
    return any(lo == vec4<u32>(0x7c00u)) || any(hi == vec4<u32>(0x7c000000u));
}

// Copies x into workgroup memory (with X_SHARED; every invocation calls it once, in uniform
// control flow) and returns, uniformly over the workgroup, whether the staged x is finite (then
// a zero code's product is an exact 0 without the select).
fn stage_x(t: u32) -> bool {
    if !X_SHARED {
        return false;
    }
    if t == 0u {
        atomicStore(&x_nonfinite, 0u);
    }
    workgroupBarrier();
    if copy_x(t, WORKGROUP, 0u, params.cols) {
        atomicOr(&x_nonfinite, 1u);
    }
    workgroupBarrier();
    if t == 0u {
        x_finite_copy = atomicLoad(&x_nonfinite);
    }
    return workgroupUniformLoad(&x_finite_copy) == 0u;
}

// The column step of a whole group, 8 + the sum of its 8 gap nibbles (<= 128), as macko.wgsl's
// code_steps.
fn code_steps(w: u32) -> u32 {
    let b = (w & 0x0f0f0f0fu) + ((w >> 4u) & 0x0f0f0f0fu) + 0x02020202u;
    return (b * 0x01010101u) >> 24u;
}

// Whether the step of 2 groups per lane from group g0 lies wholly inside entries s..e.
fn step2_inside(g0: u32, lanes: u32, s: u32, e: u32) -> bool {
    return g0 * 8u >= s && (g0 + 2u * lanes) * 8u <= e;
}

// A step's 2 groups per lane as loaded (groups g0 + lane and g0 + lanes + lane): value codes,
// gap codes and, with PER_GROUP, the groups' scales.
struct QRaw2 {
    q0: vec2<u32>,
    q1: vec2<u32>,
    c0: u32,
    c1: u32,
    s0: f32,
    s1: f32,
}

// The step of 2 groups per lane from group g0 of a row whose groups end at gend, raw (the masks
// wait until the step is computed, so nothing here waits for these loads). A lane past the row
// re-reads its last group (in bounds, cached; masked later); the second group only where it lies
// before gend for some lane (otherwise zero: no value, a total that moves no entry of the row).
fn load_qstep2(g0: u32, lane: u32, lanes: u32, gend: u32) -> QRaw2 {
    var r: QRaw2;
    let a = min(g0 + lane, gend - 1u);
    r.q0 = load_q(a);
    r.c0 = codes[a];
    if PER_GROUP {
        r.s0 = scale_at(scale_index(a));
    }
    if g0 + lanes < gend {
        let b = min(g0 + lanes + lane, gend - 1u);
        r.q1 = load_q(b);
        r.c1 = codes[b];
        if PER_GROUP {
            r.s1 = scale_at(scale_index(b));
        }
    }
    return r;
}

// The masks of a step that touches the row's first or last group, applied when it is computed:
// value codes of entries outside s..e zeroed, gap codes of the entries before s zeroed (each
// then steps one column: the caller moves the group's start back by group_lo; only the row's
// first group has such entries, never a step's second group).
fn mask_qstep2(r: QRaw2, g0: u32, lane: u32, lanes: u32, s: u32, e: u32) -> QRaw2 {
    var m = r;
    let ga = g0 + lane;
    let gb = ga + lanes;
    let lo = group_lo(ga, s);
    m.q0 = keep_q(r.q0, lo, group_hi(ga, e));
    m.c0 = r.c0 & ~nibbles_below(lo);
    m.q1 = keep_q(r.q1, 0u, group_hi(gb, e));
    return m;
}

// Codes `qp` (q_pair) at shifted columns c_lo, c_hi: acc += q · x. With `guard`, a zero code
// selects x to 0 first, so NaN or ±∞ in x never meets it; without, the staged x is finite.
fn qpair_fma(qp: vec2<f32>, c_lo: u32, c_hi: u32, acc: vec2<f32>, guard: bool) -> vec2<f32> {
    let xv = vec2<f32>(x_at_shifted(c_lo), x_at_shifted(c_hi));
    if guard {
        return fma(qp, select(vec2<f32>(0.0), xv, qp != vec2<f32>(0.0)), acc);
    }
    return fma(qp, xv, acc);
}

// One group's products added to `acc_in`, its first entry following shifted column base - 1:
// the columns decoded pairwise as macko_sg.wgsl's group_fma_raw does (byte k of `q` the
// inclusive step count through entry 2k + 1, of `p` through entry 2k).
fn qgroup_fma(w: vec2<u32>, code: u32, base: u32, acc_in: vec2<f32>, guard: bool) -> vec2<f32> {
    let even = code & 0x0f0f0f0fu;
    let odd1 = ((code >> 4u) & 0x0f0f0f0fu) + 0x01010101u;
    let q = (even + odd1 + 0x01010101u) * 0x01010101u;
    let p = q - odd1;
    let b = base - 1u;
    var acc = qpair_fma(q_pair(w, 0u), b + (p & 0xffu), b + (q & 0xffu), acc_in, guard);
    let c1 = vec2<u32>(b + ((p >> 8u) & 0xffu), b + ((q >> 8u) & 0xffu));
    acc = qpair_fma(q_pair(w, 1u), c1.x, c1.y, acc, guard);
    let c2 = vec2<u32>(b + ((p >> 16u) & 0xffu), b + ((q >> 16u) & 0xffu));
    acc = qpair_fma(q_pair(w, 2u), c2.x, c2.y, acc, guard);
    return qpair_fma(q_pair(w, 3u), b + (p >> 24u), b + (q >> 24u), acc, guard);
}

// A group's products added to the row's sums: per group, the group's own sum times its scale
// (0 under a zero scale), in .x; per row, straight into the sums (the row's scale comes last).
fn qgroup_add(
    w: vec2<u32>,
    code: u32,
    scale: f32,
    base: u32,
    acc: vec2<f32>,
    guard: bool,
) -> vec2<f32> {
    if PER_GROUP {
        let g = qgroup_fma(w, code, base, vec2<f32>(0.0), guard);
        return acc + vec2<f32>(scaled_sparse(g.x + g.y, scale), 0.0);
    }
    return qgroup_fma(w, code, base, acc, guard);
}

// The scan of `v` over an exact subgroup (`lane`, `lanes` its builtin id and size): exclusive
// scan and sum by shuffles up, as macko_sg.wgsl's exact_scan1 (whose comment says why not
// subgroupExclusiveAdd on NVIDIA). Ends: d doubles up to lanes <= 128.
fn exact_scan1(v: u32, lane: u32, lanes: u32) -> vec2<u32> {
    var s = v;
    for (var d = 1u; d < lanes; d *= 2u) {
        let up = subgroupShuffleUp(s, d);
        s += select(0u, up, lane >= d);
    }
    return vec2<u32>(s - v, subgroupShuffle(s, lanes - 1u));
}

// The sum of `v` over an exact subgroup in every lane, by a butterfly of shuffles, as
// macko_sg.wgsl's lane_sum. Ends: d halves from lanes / 2 to 0.
fn lane_sum(v: f32, lanes: u32) -> f32 {
    var s = v;
    for (var d = lanes / 2u; d > 0u; d /= 2u) {
        s += subgroupShuffleXor(s, d);
    }
    return s;
}

// A step's scan (exclusive, total) of the packed totals: by shuffles in an exact subgroup,
// by the subgroup operations (over the active lanes) in any other.
fn step_scan(v: u32, lane: u32, lanes: u32, exact: bool) -> vec2<u32> {
    if exact {
        return exact_scan1(v, lane, lanes);
    }
    return vec2<u32>(subgroupExclusiveAdd(v), subgroupAdd(v));
}

// Row entries s..e summed over the subgroup (every lane gets the sum), in steps of 2 groups per
// lane, the next step loading while this one is computed. The 2 groups' column totals travel as
// the 16-bit halves of one u32 (a group advances at most 128 columns, a step of at most 128
// lanes at most 16384), so one scan serves both. Columns count from X_FRONT (x_at_shifted).
// Ends: g0 grows by 2 · lanes >= 2 towards gend <= 2^29.
fn row_dot_piped(s: u32, e: u32, lane: u32, lanes: u32, guard: bool, exact: bool) -> f32 {
    var acc = vec2<f32>(0.0);
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = X_FRONT;
        var g0 = s / 8u;
        var cur = load_qstep2(g0, lane, lanes, gend);
        // Entries of the row's first group before s (only in the first step's group 0).
        var lo0 = group_lo(g0 + lane, s);
        loop {
            let gn = g0 + 2u * lanes;
            let more = gn < gend;
            var nxt: QRaw2;
            if more {
                nxt = load_qstep2(gn, lane, lanes, gend);
            }
            if !step2_inside(g0, lanes, s, e) {
                cur = mask_qstep2(cur, g0, lane, lanes, s, e);
            }
            // Group 0's total counts only its entries from s on (lo0 <= 7 < 8 <= its steps).
            let mine = (code_steps(cur.c0) - lo0) | (code_steps(cur.c1) << 16u);
            let scan = step_scan(mine, lane, lanes, exact);
            let t0 = scan.y & 0xffffu;
            // Wraps below 0 for the row's first group with the x words layout (X_FRONT = 0):
            // its kept entries' columns come out right modulo 2^32, the masked ones' are
            // clamped reads under zero codes.
            let start0 = column + (scan.x & 0xffffu) - lo0;
            let start1 = column + t0 + (scan.x >> 16u);
            acc = qgroup_add(cur.q0, cur.c0, cur.s0, start0, acc, guard);
            if g0 + lanes < gend {
                acc = qgroup_add(cur.q1, cur.c1, cur.s1, start1, acc, guard);
            }
            column += t0 + (scan.y >> 16u);
            if !more {
                break;
            }
            cur = nxt;
            g0 = gn;
            lo0 = 0u;
        }
    }
    if exact {
        return lane_sum(acc.x + acc.y, lanes);
    }
    return subgroupAdd(acc.x + acc.y);
}

// Row `row`'s entries (x) and end (y); zeros past the block's rows.
fn row_work(row: u32) -> vec2<u32> {
    if row >= params.rows {
        return vec2<u32>(0u);
    }
    return vec2<u32>(row_ptr[row], row_ptr[row + 1u]);
}

// Stores the `count` held sums (1..=lanes; `held` in lanes 0..count) of the subgroup's rows
// before `next`: lane k's row is next - (count - k) · row_stride. Lanes store in parallel.
fn store_held(next: u32, held: f32, count: u32, lane: u32) {
    if lane < count {
        store_y(params.row_offset + next - (count - lane) * row_stride, held);
    }
}

// Works through rows from `first` by the stride until they run past the block. A row's sum is
// held by lane k (the k-th of the subgroup's last rows) and the lanes store their rows together
// once every lane holds one, as macko_sg.wgsl's rows_loop. `guard` as in qpair_fma; `exact`:
// the subgroup is full with ids 0..size, `lane` and `lanes` its builtin ones. Ends: each
// iteration adds row_stride >= 1 to a row below params.rows < 2^31.
fn rows_loop(first: u32, lane: u32, lanes: u32, guard: bool, exact: bool) {
    var row = first;
    var work = row_work(row);
    var held = 0.0;
    var held_count = 0u;
    loop {
        if row >= params.rows {
            break;
        }
        let next = row + row_stride;
        let sum = row_scaled(row, row_dot_piped(work.x, work.y, lane, lanes, guard, exact));
        held = select(held, sum, lane == held_count);
        held_count += 1u;
        row = next;
        work = row_work(next);
        if held_count == lanes {
            store_held(row, held, held_count, lane);
            held_count = 0u;
        }
    }
    if held_count > 0u {
        store_held(row, held, held_count, lane);
    }
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) sg_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
) {
    let lane = subgroupExclusiveAdd(1u);
    let lanes = subgroupAdd(1u);
    // Whether this subgroup is full with ids 0..size (subgroup-uniform).
    let exact = subgroupAll(lane == sg_id && lanes == sg_size);
    // Subgroups numbered across workgroups first, as macko_sg.wgsl's.
    let workgroups = nwg.x * nwg.y * nwg.z;
    let w = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;
    row_stride = workgroups * nsg;
    let row = sg * workgroups + w;
    let finite = stage_x(t);
    // Three copies of the row loop: builtin ids without the zero select (staged x finite),
    // builtin ids with it, counted lanes with it.
    if finite && exact {
        rows_loop(row, sg_id, sg_size, false, true);
    } else if exact {
        rows_loop(row, sg_id, sg_size, true, true);
    } else {
        rows_loop(row, lane, lanes, true, false);
    }
}
