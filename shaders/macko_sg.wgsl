// MACKO-16-4 SpMV with subgroup operations (after common.wgsl, macko.wgsl and the x layout).
// See shaders/README.md, "Files and composition" and the sections after it.
//
// One row at a time per subgroup (two, one per half, with HALF_ROWS: below). Rows are dealt by
// a fixed stride over the dispatch's subgroups, numbered across workgroups first: subgroup k of
// workgroup w is subgroup k · workgroups + w of n, and takes rows k, k + n, k + 2n, .. as the
// CUDA kernel's persistent warps do (the subgroups holding a partial last round of rows are
// spread over every workgroup, so over the GPU's multiprocessors). The kernel is correct
// whatever the subgroup size (4..128), however the adapter splits a workgroup into subgroups
// (`num_subgroups` is the same in every workgroup of a dispatch), and whether subgroups are
// full or not: a subgroup that is full with invocation ids 0..size ("exact", checked at entry,
// subgroup-uniformly) runs on the builtin id and size, which a driver with a fixed subgroup
// size (NVIDIA: 32) folds into constants, in pipelined steps (row_dot_piped); any other runs on
// a lane index and count it counts itself (an exclusive scan and a sum of 1), in unpipelined
// steps of 4 groups per lane (row_dot), with the zero select kept.
//
// A workgroup first stages x in workgroup memory where it fits (X_SHARED, see macko.wgsl), or,
// where it does not, one column tile at a time (X_TILED): then the whole row loop runs once per
// tile, over each row's part in that tile, and a row's sum is kept between tiles (finish_row).
//
// Within a row, each lane takes groups of 8 entries per step (see macko.wgsl); a group's codes
// stay raw words from load to use: only its total column step is computed before the scan
// (8 + the sum of its nibbles), and it is decoded right before its products. The column where
// each group starts is the running column of the row plus an exclusive scan of the groups'
// column steps across the subgroup, and the running column moves on by the step's total.
// Entries that do not belong to the row have their values zeroed (only in steps that touch the
// row's first or last group, and not at all in row-aligned uploads), so every entry is then one
// fma where the staged x is finite (a zero value selects x to 0 first where it is not).

// With X_TILED, each row's partial sum over the tiles done, from word params.partials on.
@group(0) @binding(4) var<storage, read_write> partial_sums: array<atomic<u32>>;

// Invocations per workgroup: a pipeline constant, so the backend can trade workgroups per
// compute unit against the staged copies of x.
override WORKGROUP: u32 = 128u;
// MASK_TABLE: a masked group's values are masked by a mask read from the table in the uniform
// (params.masks, indexed by its kept range) instead of one built by kept_mask, about 20 integer
// operations per group fewer in a step at a row's ends (shaders/README.md, "Value masks from a table").
override MASK_TABLE: bool = false;
// ALIGNED_ROWS: the block was uploaded row-aligned (macko_format::aligned): every row
// (with X_TILED, every row's part in each tile: src/backend/wgpu/tiles.rs) starts at a multiple
// of 8 entries and its last group is padded with zeros, and a group of zeros follows the last
// row (params.zero_group). Then a pipelined step masks nothing: no group
// holds another row's entries, and a group past the row's end is loaded from the zero group
// instead (a select of its index when the step is issued, nothing when it is computed). The
// backend sets it only for such blocks (shaders/README.md, "Rows aligned to groups").
override ALIGNED_ROWS: bool = false;
// HALF_ROWS: with ALIGNED_ROWS and x staged whole, an exact
// subgroup takes two rows at a time, one per half (`rows_loop_pairs`), as the CUDA kernel's
// half-warps do for short rows: a row's step is 2 groups per lane of its half, and the scan,
// the loads and the loop's costs of a step serve two rows. Subgroups that are not exact take the
// same rows one at a time. The backend sets it for short rows (shaders/README.md, "Two rows
// per subgroup").
override HALF_ROWS: bool = false;

// The dispatch's subgroup count (twice it with HALF_ROWS), by which a subgroup's rows step (set
// once at entry).
var<private> row_stride: u32;

// What a subgroup needs to start on row `row` (in column tile `tile` with X_TILED, else 0):
// its entries s..e (x, y), the column count its first entry follows (z: 0 for a whole row, the
// table's slot base for a row's part in a tile) and, from the second tile on, the bits of the
// row's partial sum over the tiles before (w: 0 otherwise). All zero past the block's rows.
fn row_work(row: u32, tile: u32) -> vec4<u32> {
    if row >= params.rows {
        return vec4<u32>(0u);
    }
    if X_TILED {
        // Pairs (entry, column base) of plane `tile` and of the next plane (the part's end):
        // (params.tiles + 1) · params.rows pairs fit the binding, so no index wraps.
        let a = 2u * (tile * params.rows + row);
        let b = a + 2u * params.rows;
        var partial = 0u;
        if tile > 0u {
            partial = atomicLoad(&partial_sums[params.partials + row]);
        }
        return vec4<u32>(row_ptr[a], row_ptr[b], row_ptr[a + 1u], partial);
    }
    return vec4<u32>(row_ptr[row], row_ptr[row + 1u], 0u, 0u);
}

// Row `row`'s sum over the entries of `work` (from row_work) is `sum`: stored into y, or with
// X_TILED added to the partial sum of the tiles before and kept for the next tile, and stored
// (in tile order: the same sum in every run) after the last tile. By the row's subgroup's first
// lane, the only invocation that ever touches the row's partial (rows by stride: the same
// subgroup in every tile), so its own store is what it loads in the next tile.
fn finish_row(row: u32, tile: u32, work: vec4<u32>, sum: f32) {
    if X_TILED {
        var total = sum;
        if tile > 0u {
            total = bitcast<f32>(work.w) + sum;
        }
        if tile + 1u < params.tiles {
            atomicStore(&partial_sums[params.partials + row], bitcast<u32>(total));
        } else {
            store_y(params.row_offset + row, total);
        }
    } else {
        store_y(params.row_offset + row, sum);
    }
}


// Two entries packed in one u32 of values at columns c_lo, c_hi: acc += a * x. With `guard`, a
// zero value (padding, or masked) selects x to 0 first, so NaN or infinity in x never meets it;
// without, the caller knows x finite (see stage_x in macko.wgsl). `guard` is a literal at every call of
// the row loop, so each inlined copy keeps one form. With `shifted` (a literal too: the
// pipelined loop), c_lo and c_hi are shifted columns (x_at_shifted). With SPARSE_X, an entry
// counts only where neither its value nor x is ±0, whatever `guard` says.
fn pair_fma(v: u32, c_lo: u32, c_hi: u32, acc: vec2<f32>, guard: bool, shifted: bool) -> vec2<f32> {
    let a = unpack2x16float(v);
    var xv: vec2<f32>;
    if shifted {
        xv = vec2<f32>(x_at_shifted(c_lo), x_at_shifted(c_hi));
    } else {
        xv = vec2<f32>(x_at(c_lo), x_at(c_hi));
    }
    if SPARSE_X {
        // x's zeros add nothing even under a NaN or ±∞ of A, nor A's zeros even over one of x
        // (macko.wgsl, SPARSE_X): the term is selected, whatever `guard` says. `!(v == 0.0)`:
        // naga's `!=` on floats is ordered, false for a NaN that must still count.
        let live = !(a == vec2<f32>(0.0)) & !(xv == vec2<f32>(0.0));
        return select(acc, fma(a, xv, acc), live);
    }
    if guard {
        return fma(a, select(vec2<f32>(0.0), xv, a != vec2<f32>(0.0)), acc);
    }
    return fma(a, xv, acc);
}

// A step's scan: the exclusive scan of the lanes' packed totals and their sum over the subgroup.
struct Scan {
    before: vec2<u32>,
    all: vec2<u32>,
}

// ---- Groups kept as raw code words until their products -----------------------------------

// A step's 4 groups as loaded: values and raw code words.
struct Raw {
    v0: vec4<u32>,
    v1: vec4<u32>,
    v2: vec4<u32>,
    v3: vec4<u32>,
    c0: u32,
    c1: u32,
    c2: u32,
    c3: u32,
}

// One group of a step that touches the row's first or last group.
struct RawGroup {
    vals: vec4<u32>,
    code: u32,
}



// The packed step totals of a step's 4 groups, as four_totals.
fn raw_totals(r: Raw) -> vec2<u32> {
    return vec2<u32>(
        code_steps(r.c0) | (code_steps(r.c1) << 16u),
        code_steps(r.c2) | (code_steps(r.c3) << 16u),
    );
}

// The 4 groups of a step wholly inside the row.
fn load_raw_inside(g0: u32, lane: u32, lanes: u32) -> Raw {
    let g = g0 + lane;
    return Raw(
        values[g],
        values[g + lanes],
        values[g + 2u * lanes],
        values[g + 3u * lanes],
        codes[g],
        codes[g + lanes],
        codes[g + 2u * lanes],
        codes[g + 3u * lanes],
    );
}

// Group g of a step that touches the row's first or last group: values outside the row's
// entries s..e zeroed, codes of the entries before s zeroed (each then steps one
// column: the caller moves the group's start back by group_lo(g, s), nonzero only for the row's
// first group).
fn load_masked_raw(g: u32, gend: u32, s: u32, e: u32) -> RawGroup {
    let gi = min(g, gend - 1u);
    let lo = group_lo(g, s);
    return RawGroup(values[gi] & values_mask(lo, group_hi(g, e)), codes[gi] & ~nibbles_below(lo));
}

// The mask of a vec4<u32> of values that keeps entries lo <= j < hi (lo, hi in 0..=8): from the
// table with MASK_TABLE (index at most 80 of its 96), else built.
fn values_mask(lo: u32, hi: u32) -> vec4<u32> {
    if MASK_TABLE {
        return params.masks[lo * 9u + hi];
    }
    return kept_mask(kept_bits(lo, hi));
}

// The 4 groups of a step that touches the row's first or last group; `live` (1..4) as in
// the unpipelined loop (the others stay zero: no value; their totals, 8, only move groups after
// the row).
fn load_raw_masked(g0: u32, lane: u32, lanes: u32, gend: u32, s: u32, e: u32, live: u32) -> Raw {
    var r: Raw;
    let a = load_masked_raw(g0 + lane, gend, s, e);
    r.v0 = a.vals;
    r.c0 = a.code;
    if live > 1u {
        let b = load_masked_raw(g0 + lanes + lane, gend, s, e);
        r.v1 = b.vals;
        r.c1 = b.code;
    }
    if live > 2u {
        let c = load_masked_raw(g0 + 2u * lanes + lane, gend, s, e);
        r.v2 = c.vals;
        r.c2 = c.code;
    }
    if live > 3u {
        let d = load_masked_raw(g0 + 3u * lanes + lane, gend, s, e);
        r.v3 = d.vals;
        r.c3 = d.code;
    }
    return r;
}

// One group decoded here, from its raw code word, whose first entry follows column base - 1.
// Pair k of the values (component k: entries 2k, 2k + 1) is decoded as a pair, in 7 operations
// for the whole group instead of decode_group's ~20: byte k of `odd1` is entry 2k + 1's step
// (gap + 1), of `even + odd1 + 0x01010101` both steps of pair k (<= 32), and the multiplication
// by 0x01010101 sums those bytes into every byte above (byte 3 <= 128: no carry), so byte k of
// `q` is the inclusive step count through entry 2k + 1 and of `q - odd1` through entry 2k (each
// byte of q is at least that of odd1: no borrow between bytes).
fn group_fma_raw(
    v: vec4<u32>,
    code: u32,
    base: u32,
    acc_in: vec2<f32>,
    guard: bool,
    shifted: bool,
) -> vec2<f32> {
    let even = code & 0x0f0f0f0fu;
    let odd1 = ((code >> 4u) & 0x0f0f0f0fu) + 0x01010101u;
    let q = (even + odd1 + 0x01010101u) * 0x01010101u;
    let p = q - odd1;
    let b = base - 1u;
    var acc = pair_fma(v.x, b + (p & 0xffu), b + (q & 0xffu), acc_in, guard, shifted);
    acc = pair_fma(v.y, b + ((p >> 8u) & 0xffu), b + ((q >> 8u) & 0xffu), acc, guard, shifted);
    acc = pair_fma(v.z, b + ((p >> 16u) & 0xffu), b + ((q >> 16u) & 0xffu), acc, guard, shifted);
    return pair_fma(v.w, b + (p >> 24u), b + (q >> 24u), acc, guard, shifted);
}

// group_fma_raw over a step's 4 groups; the first one's start moved back by `lo0` (zeroed codes).
fn four_fma_raw(
    r: Raw,
    column: u32,
    before: vec2<u32>,
    all: vec2<u32>,
    live: u32,
    lo0: u32,
    acc_in: vec2<f32>,
    guard: bool,
) -> vec2<f32> {
    let t0 = all.x & 0xffffu;
    let t1 = all.x >> 16u;
    let t2 = all.y & 0xffffu;
    // Wraps below 0 for the first group of a row or of a row's part in a tile (lo0 > 0, and a
    // part's start count may itself be below 0 modulo 2^32: row_work): its kept entries'
    // columns come out right modulo 2^32, the masked ones' are clamped reads whose values are
    // zero.
    var acc = group_fma_raw(r.v0, r.c0, column + (before.x & 0xffffu) - lo0, acc_in, guard, false);
    if live > 1u {
        acc = group_fma_raw(r.v1, r.c1, column + t0 + (before.x >> 16u), acc, guard, false);
    }
    if live > 2u {
        let base2 = column + t0 + t1 + (before.y & 0xffffu);
        acc = group_fma_raw(r.v2, r.c2, base2, acc, guard, false);
    }
    if live > 3u {
        let base3 = column + t0 + t1 + t2 + (before.y >> 16u);
        acc = group_fma_raw(r.v3, r.c3, base3, acc, guard, false);
    }
    return acc;
}

// Row entries s..e (the first following column count c0: see row_work) summed over the
// subgroup (every lane gets the sum), in steps of 4 groups per lane, all loaded before the first
// is used: the loop of subgroups that are not exact (`lane`, `lanes` counted). Ends: g0 grows by
// at least 4 (lanes >= 1) towards gend <= 2^29 (P <= 2^32 entries), so it never wraps.
fn row_dot(s: u32, e: u32, c0: u32, lane: u32, lanes: u32, guard: bool) -> f32 {
    var acc = vec2<f32>(0.0);
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = c0;
        for (var g0 = s / 8u; g0 < gend; g0 += 4u * lanes) {
            var f: Raw;
            var live = 4u;
            // Entries of the row's first group before s (only ever in the first step's group 0).
            var lo0 = 0u;
            if step_inside(g0, lanes, s, e) {
                f = load_raw_inside(g0, lane, lanes);
            } else {
                live = min((gend - g0 + lanes - 1u) / lanes, 4u);
                f = load_raw_masked(g0, lane, lanes, gend, s, e, live);
                lo0 = group_lo(g0 + lane, s);
            }
            // Group 0's total counts only its entries from s on (lo0 <= 7 < 8 <= its steps: no
            // borrow from the high half).
            let first = raw_totals(f) - vec2<u32>(lo0, 0u);
            let before = subgroupExclusiveAdd(first);
            let all = subgroupAdd(first);
            acc = four_fma_raw(f, column, before, all, live, lo0, acc, guard);
            column += step_total(all);
        }
    }
    return subgroupAdd(acc.x + acc.y);
}

// ---- Steps of 2 groups, the next step loading while this one is computed -----------------


// The step of 2 groups per lane from group g0 of a row whose entries are s..e and whose groups
// end at gend: without masks where the step lies wholly inside the row (subgroup-uniform), else
// masked as load_masked_raw (the second group only where it lies before gend for some lane:
// `live` in row_dot_piped; otherwise it stays zero, no value and a total that moves no entry of
// the row).
fn load_step2(g0: u32, lane: u32, lanes: u32, gend: u32, s: u32, e: u32) -> Raw2 {
    var r: Raw2;
    if step2_inside(g0, lanes, s, e) {
        let g = g0 + lane;
        r.v0 = values[g];
        r.v1 = values[g + lanes];
        r.c0 = codes[g];
        r.c1 = codes[g + lanes];
    } else if ALIGNED_ROWS {
        // Groups past the row's end read the zero group: no value, a total that moves only
        // columns after the row's (which nothing reads but clamped gathers of zero values).
        let a = select(params.zero_group, g0 + lane, g0 + lane < gend);
        r.v0 = values[a];
        r.c0 = codes[a];
        if g0 + lanes < gend {
            let b = select(params.zero_group, g0 + lanes + lane, g0 + lanes + lane < gend);
            r.v1 = values[b];
            r.c1 = codes[b];
        }
    } else {
        // Raw: the masks (mask_step2) wait until the step is computed, so that nothing here
        // waits for these loads (a mask applied at load time made the subgroup wait for those
        // loads before it computed the current step: at the rows' ends, every step at d = 0.1,
        // the pipeline stalled once per group).
        r.v0 = values[min(g0 + lane, gend - 1u)];
        r.c0 = codes[min(g0 + lane, gend - 1u)];
        if g0 + lanes < gend {
            r.v1 = values[min(g0 + lanes + lane, gend - 1u)];
            r.c1 = codes[min(g0 + lanes + lane, gend - 1u)];
        }
    }
    return r;
}


// The masks of load_masked_raw applied to a raw step when it is computed: values of entries outside the
// row's entries s..e zeroed, codes of the entries before s zeroed (only the row's first group
// has any; the second group of a step never is that group).
fn mask_step2(r: Raw2, g0: u32, lane: u32, lanes: u32, s: u32, e: u32) -> Raw2 {
    var m = r;
    let ga = g0 + lane;
    let gb = ga + lanes;
    let lo = group_lo(ga, s);
    m.v0 = r.v0 & values_mask(lo, group_hi(ga, e));
    m.c0 = r.c0 & ~nibbles_below(lo);
    // gb > s / 8: the second group never holds entries before s (its lo is 0).
    m.v1 = r.v1 & values_mask(0u, group_hi(gb, e));
    return m;
}

// The scan of `v` over an exact subgroup (`lane` and `lanes` its builtin invocation id and size,
// every lane active): the exclusive scan and the sum, by an inclusive scan of shuffles up
// (log2(lanes) steps of one shuffle and an add) whose last lane holds the sum. The 2 groups'
// totals travel as its 16-bit halves. Why not subgroupExclusiveAdd: the NVIDIA driver (580,
// H100/H200) compiles it into a scan over any set of active lanes, with no path for a full
// subgroup: each of its 5 steps makes 3 dependent shuffles (one of them to find the next active
// lane), called as a subroutine (SASS from the driver's shader cache, scripts/gpu/vk_sass.py).
// Ends: d doubles up to lanes <= 128.
fn exact_scan1(v: u32, lane: u32, lanes: u32) -> vec2<u32> {
    var s = v;
    for (var d = 1u; d < lanes; d *= 2u) {
        let up = subgroupShuffleUp(s, d);
        s += select(0u, up, lane >= d);
    }
    return vec2<u32>(s - v, subgroupShuffle(s, lanes - 1u));
}

// row_dot in steps of 2 groups per lane, pipelined: `lane` and `lanes` are an
// exact subgroup's builtin id and size. Ends: g0 grows by 2 · lanes >= 2 towards gend <= 2^29.
//
// Columns are counted shifted by X_FRONT (x_at_shifted). With BOUNDED_GATHERS every gather then
// lies within xs, whose slots 0 .. x_slot(X_FRONT + width + 128) exist (XForm::words), `limit`
// being X_FRONT + the tile's width (x's without tiles): a step's group starts are clamped to
// `limit`, which moves no group of the row (its first entry's column, start - 1 + its step >=
// start, is below limit), so every gather of a group, at start - 1 + at most 128, is below
// limit + 127. Below, the row's first group is the only one with entries before s; its codes
// there are zeroed (one column each) and its start moved back by lo0 <= 7, from a first count
// c0 >= -15 (0 for a whole row; a tile part's count follows an entry at most 15 columns before
// the tile: a gap code is 4 bits), so no gather lies more than 22 before X_FRONT = 32.
fn row_dot_piped(
    s: u32,
    e: u32,
    c0: u32,
    lane: u32,
    lanes: u32,
    guard: bool,
    limit: u32,
) -> f32 {
    var acc = vec2<f32>(0.0);
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = c0 + X_FRONT;
        var g0 = s / 8u;
        var cur = load_step2(g0, lane, lanes, gend, s, e);
        // Entries of the row's first group before s (only in the first step's group 0; none
        // where rows are aligned).
        var lo0 = 0u;
        if !ALIGNED_ROWS {
            lo0 = group_lo(g0 + lane, s);
        }
        loop {
            let gn = g0 + 2u * lanes;
            let more = gn < gend;
            var nxt: Raw2;
            if more {
                nxt = load_step2(gn, lane, lanes, gend, s, e);
            }
            if !ALIGNED_ROWS && !step2_inside(g0, lanes, s, e) {
                cur = mask_step2(cur, g0, lane, lanes, s, e);
            }
            // Group 0's total counts only its entries from s on (see row_dot).
            let mine = (code_steps(cur.c0) - lo0) | (code_steps(cur.c1) << 16u);
            let scan = exact_scan1(mine, lane, lanes);
            let t0 = scan.y & 0xffffu;
            var start0 = column + (scan.x & 0xffffu) - lo0;
            var start1 = column + t0 + (scan.x >> 16u);
            if BOUNDED_GATHERS {
                // Only groups past the row's end (their starts count the totals of the groups
                // before them in the step) ever move.
                start0 = min(start0, limit);
                start1 = min(start1, limit);
            }
            acc = group_fma_raw(cur.v0, cur.c0, start0, acc, guard, true);
            if g0 + lanes < gend {
                acc = group_fma_raw(cur.v1, cur.c1, start1, acc, guard, true);
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
    return lane_sum(acc.x + acc.y, lanes);
}

// The sum of `v` over an exact subgroup (`lanes` its builtin size, a power of two), in every
// lane: log2(lanes) shuffles xor, after which every lane holds the same sum (each step adds the
// same two values in both lanes of a pair, and addition commutes), instead of subgroupAdd,
// which the NVIDIA driver compiles as a call to a routine that first checks which lanes are
// active. Ends: d halves from lanes / 2 to 0.
fn lane_sum(v: f32, lanes: u32) -> f32 {
    var s = v;
    for (var d = lanes / 2u; d > 0u; d /= 2u) {
        s += subgroupShuffleXor(s, d);
    }
    return s;
}

// ---- HALF_ROWS: two rows per exact subgroup, one per half ----------------------------------

// Groups g0 + sub and g0 + hl + sub of a row-aligned row whose groups end at gend (ALIGNED_ROWS):
// groups at or past gend read the zero group (no value; their totals move only columns after
// the row's, whose gathers are clamped as row_dot_piped's).
fn load_half_step(g0: u32, sub: u32, hl: u32, gend: u32) -> Raw2 {
    var r: Raw2;
    let a = select(params.zero_group, g0 + sub, g0 + sub < gend);
    let b = select(params.zero_group, g0 + hl + sub, g0 + hl + sub < gend);
    r.v0 = values[a];
    r.c0 = codes[a];
    r.v1 = values[b];
    r.c1 = codes[b];
    return r;
}

// exact_scan1 within each half of an exact subgroup (halves of hl lanes, hl a power of two:
// `sub` is the lane's index in its half): the exclusive scan, and the half's total in every lane
// of it (from the half's last lane, lane | (hl - 1)). Ends: d doubles up to hl <= 64.
fn half_scan(v: u32, lane: u32, sub: u32, hl: u32) -> vec2<u32> {
    var s = v;
    for (var d = 1u; d < hl; d *= 2u) {
        let up = subgroupShuffleUp(s, d);
        s += select(0u, up, sub >= d);
    }
    return vec2<u32>(s - v, subgroupShuffle(s, lane | (hl - 1u)));
}

// The sum of `v` over each half (hl lanes) of an exact subgroup, in every lane of the half: the
// butterfly of lane_sum without its last step. Ends: d halves from hl / 2 to 0.
fn half_sum(v: f32, hl: u32) -> f32 {
    var s = v;
    for (var d = hl / 2u; d > 0u; d /= 2u) {
        s += subgroupShuffleXor(s, d);
    }
    return s;
}

// row_dot_piped for two rows at once: this lane's half works through its row-aligned row s..e
// (a whole row: its count starts at X_FRONT), `sub` being the lane's index in the half of hl
// lanes. The halves step together until both rows are done (the loop's test is
// subgroup-uniform: the shuffles need every lane); a half whose row is done loads the zero group
// and adds nothing. Gathers stay in the staged x as in row_dot_piped (starts clamped to
// `limit` with BOUNDED_GATHERS). Ends: g0 grows by 2 · hl >= 2 while some half's gn < gend
// <= 2^29.
fn row_pair_piped(
    s: u32,
    e: u32,
    lane: u32,
    sub: u32,
    hl: u32,
    guard: bool,
    limit: u32,
) -> f32 {
    var acc = vec2<f32>(0.0);
    let gend = (e + 7u) / 8u;
    var column = X_FRONT;
    var g0 = s / 8u;
    var cur = load_half_step(g0, sub, hl, gend);
    loop {
        let gn = g0 + 2u * hl;
        let more = gn < gend;
        var nxt: Raw2;
        if more {
            nxt = load_half_step(gn, sub, hl, gend);
        }
        let mine = code_steps(cur.c0) | (code_steps(cur.c1) << 16u);
        let scan = half_scan(mine, lane, sub, hl);
        let t0 = scan.y & 0xffffu;
        var start0 = column + (scan.x & 0xffffu);
        var start1 = column + t0 + (scan.x >> 16u);
        if BOUNDED_GATHERS {
            start0 = min(start0, limit);
            start1 = min(start1, limit);
        }
        acc = group_fma_raw(cur.v0, cur.c0, start0, acc, guard, true);
        if g0 + hl < gend {
            acc = group_fma_raw(cur.v1, cur.c1, start1, acc, guard, true);
        }
        column += t0 + (scan.y >> 16u);
        if !subgroupAny(more) {
            break;
        }
        // A half whose row is done keeps `nxt` as declared: zero, as the zero group.
        cur = nxt;
        g0 = gn;
    }
    return half_sum(acc.x + acc.y, hl);
}

// rows_loop for HALF_ROWS in an exact subgroup: the half of lane `lane` takes rows first + half,
// first + half + row_stride, .. (row_stride = twice the dispatch's subgroups: main), each with
// the next row's bounds loading while it is computed; each half's first lane stores its row.
// Ends: every iteration adds row_stride >= 2 to rows below params.rows < 2^31, and the loop
// leaves once both halves' rows are past it.
fn rows_loop_pairs(first: u32, lane: u32, lanes: u32, guard: bool) {
    let hl = lanes / 2u;
    let sub = lane & (hl - 1u);
    var row = first + lane / hl;
    var work = row_work(row, 0u);
    let limit = X_FRONT + tile_width(0u);
    loop {
        if subgroupAll(row >= params.rows) {
            break;
        }
        let next = row + row_stride;
        let next_work = row_work(next, 0u);
        let sum = row_pair_piped(work.x, work.y, lane, sub, hl, guard, limit);
        if sub == 0u && row < params.rows {
            store_y(params.row_offset + row, sum);
        }
        row = next;
        work = next_work;
    }
}

// The sum of a row's entries s..e, whose first follows column count c0 (see row_work): the
// pipelined loop in exact subgroups, the unpipelined one in the others.
fn row_sum(w: vec4<u32>, lane: u32, lanes: u32, guard: bool, exact: bool, limit: u32) -> f32 {
    if exact {
        return row_dot_piped(w.x, w.y, w.z, lane, lanes, guard, limit);
    }
    return row_dot(w.x, w.y, w.z, lane, lanes, guard);
}

// Works through rows (with X_TILED, their parts in column tile `tile`) from `first`, with its
// work `first_work` loaded (row_work), by the stride, until they run past the block. `guard` as
// in pair_fma, `exact`: the subgroup is full with ids 0..size, `lane` and `lanes` its builtin
// ones.
fn rows_loop(
    first: u32,
    first_work: vec4<u32>,
    tile: u32,
    lane: u32,
    lanes: u32,
    guard: bool,
    exact: bool,
) {
    var row = first;
    var work = first_work;
    // The shifted column count past the staged columns (row_dot_piped).
    let limit = X_FRONT + tile_width(tile);
    // Termination (why naga's loop bounding may be left out: pipelines.rs): each iteration adds
    // row_stride >= 1 to a row below params.rows < 2^31 (no wrap), so `row` grows and leaves
    // within params.rows iterations.
    // With x staged whole (held_sums()), a row's sum is not stored when the row ends: lane k
    // keeps the sum of the k-th of the subgroup's last `held_count` rows (held_count < lanes
    // between rows), and once every lane holds one (or the rows run out) the lanes store them
    // together (`store_held`). A row's store is then one select in every lane, and the f16
    // rounding and the two atomics of store_y are issued once per `lanes` rows instead of once
    // per row by the first lane (shaders/README.md, "Row sums").
    var held = 0.0;
    var held_count = 0u;
    loop {
        if row >= params.rows {
            break;
        }
        // The next row's bounds are loaded when it starts.
        let next = row + row_stride;
        let sum = row_sum(work, lane, lanes, guard, exact, limit);
        if held_sums() {
            held = select(held, sum, lane == held_count);
            held_count += 1u;
        } else if lane == 0u {
            finish_row(row, tile, work, sum);
        }
        row = next;
        work = row_work(next, tile);
        if held_sums() && held_count == lanes {
            store_held(row, held, held_count, lane);
            held_count = 0u;
        }
    }
    if held_sums() && held_count > 0u {
        store_held(row, held, held_count, lane);
    }
}

// Whether rows_loop holds its rows' sums in lanes: where each row is stored once (x staged
// whole: with X_TILED a row's sum is kept between tiles by finish_row).
fn held_sums() -> bool {
    return !X_TILED;
}

// Stores the `count` held sums (1..=lanes; `held` in lanes 0..count) of the subgroup's rows
// before `next`: lane k's row is next - (count - k) · row_stride (rows by stride, so no
// wrap: the oldest held row is at least 0). Lanes store in parallel.
fn store_held(next: u32, held: f32, count: u32, lane: u32) {
    if lane < count {
        store_y(params.row_offset + next - (count - lane) * row_stride, held);
    }
}

// rows_loop in the copy that fits: `finite` (stage_x's answer), `exact` (the subgroup is full
// with ids 0..size), the counted `lane` and `lanes`, and the builtin `sg_id` and `sg_size`.
fn rows_in_tile(
    row: u32,
    work: vec4<u32>,
    tile: u32,
    finite: bool,
    exact: bool,
    lane: u32,
    lanes: u32,
    sg_id: u32,
    sg_size: u32,
) {
    if HALF_ROWS {
        // Rows in pairs (main: `row` is the pair's first, row_stride twice the subgroups): exact
        // subgroups of 2 lanes or more take a pair at a time (halves of sg_size / 2 >= 1 lanes),
        // the others each row of it in turn, by stride as ever.
        let pairs = exact && sg_size >= 2u;
        if finite && pairs {
            rows_loop_pairs(row, sg_id, sg_size, false);
        } else if pairs {
            rows_loop_pairs(row, sg_id, sg_size, true);
        } else {
            rows_loop(row, work, tile, lane, lanes, true, false);
            let second = row + 1u;
            rows_loop(second, row_work(second, tile), tile, lane, lanes, true, false);
        }
        return;
    }
    // Three copies of the row loop: with the builtin ids (foldable sizes, scans by shuffles,
    // pipelined steps) without the zero select where the staged x is finite, and with it where x
    // is not known finite (gathered from memory, or ±∞ or NaN in it); counted and guarded for
    // subgroups that are not exact.
    if finite && exact {
        rows_loop(row, work, tile, sg_id, sg_size, false, true);
    } else if exact {
        rows_loop(row, work, tile, sg_id, sg_size, true, true);
    } else {
        rows_loop(row, work, tile, lane, lanes, true, false);
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
    // The dispatch is 1-D (plan.rs) and holds far fewer than 2^31 subgroups. Subgroups are
    // numbered across workgroups first (see the top of this file).
    let workgroups = nwg.x * nwg.y * nwg.z;
    let w = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;
    row_stride = workgroups * nsg;
    var row = sg * workgroups + w;
    if HALF_ROWS {
        // Rows in pairs: subgroup k takes rows 2k, 2k + 1, then 2k + 2n, 2k + 2n + 1, ..
        row_stride *= 2u;
        row *= 2u;
    }
    if X_TILED {
        // Tile by tile, each subgroup through its parts of its rows (the same rows in every
        // tile). The barrier keeps a tile's copy from overwriting the one before while some
        // subgroup still gathers from it. Ends: `tile` counts up by 1 to params.tiles.
        for (var tile = 0u; tile < params.tiles; tile++) {
            let work = row_work(row, tile);
            if tile > 0u {
                workgroupBarrier();
            }
            let finite = stage_x(t, WORKGROUP, tile);
            rows_in_tile(row, work, tile, finite, exact, lane, lanes, sg_id, sg_size);
        }
        return;
    }
    // The first row's bounds are requested before x is staged.
    let work = row_work(row, 0u);
    let finite = stage_x(t, WORKGROUP, 0u);
    rows_in_tile(row, work, 0u, finite, exact, lane, lanes, sg_id, sg_size);
}
