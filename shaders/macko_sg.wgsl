// MACKO-16-4 SpMV with subgroup operations (after common.wgsl and macko.wgsl). See NOTES.md.
//
// One row at a time per subgroup (two, one per half, with HALF_ROWS: below); rows are dealt
// by a fixed stride over the dispatch's subgroups (STATIC_ROWS, the backend's default since
// session 6, NOTES.md) or handed out through an atomic counter (the dispatch is bounded, so the
// counter balances rows of any lengths over the subgroups that are resident), and the kernel is
// correct whatever the subgroup size (4..128), however the adapter splits a workgroup into
// subgroups (the stride counts them with `num_subgroups`, the same in every workgroup of a
// dispatch), and whether subgroups are full or not. A lane's index and the number of lanes are
// counted by the subgroup itself (an exclusive scan and a sum of 1), never assumed.
//
// Rows are pipelined two deep: while row r is computed, the bounds of the next row (claimed one
// row earlier) are already loading and the row after it is being claimed, so neither the
// counter's latency nor the row pointers' lies between two rows.
//
// A workgroup first stages x in workgroup memory where it fits (X_SHARED, see macko.wgsl), or,
// where it does not, one column tile at a time (X_TILED): then the whole row loop runs once per
// tile, over each row's part in that tile, and a row's sum is kept between tiles (finish_row).
//
// Within a row, each lane takes 4 groups of 8 entries per step (see macko.wgsl); the column
// where each group starts is the running column of the row plus an exclusive scan of the
// groups' column steps across the subgroup (subgroupExclusiveAdd), and the running column moves
// on by the step's total (subgroupAdd). Entries that do not belong to the row have their values
// zeroed when loaded (only in steps that touch the row's first or last group), so every entry
// is then the same three instructions: a zero value selects x to 0, then one fma (one
// instruction, the fma, where the staged x is finite: FAST_FINITE in macko.wgsl). Groups of a
// step that lie wholly past the row are neither loaded nor computed (a subgroup-uniform test).

// Two counters per block: [2 slot] hands out rows, [2 slot + 1] counts the workgroups that are
// done. Zero at creation; the last workgroup of each product sets both back to zero (the end of
// main), so the next product finds them zero without a clear (a transfer and two more barriers
// per product).
@group(0) @binding(4) var<storage, read_write> counters: array<atomic<u32>>;

// Invocations per workgroup: a pipeline constant, so the backend can trade workgroups per
// compute unit against the staged copies of x.
override WORKGROUP: u32 = 128u;
// Sets of 4 groups a lane loads per step (1 or 2): 80 or 160 bytes in flight per lane.
override DEPTH: u32 = 1u;

// Variants of the row loop (issue 7; NOTES.md, "Session 3" and "Session 6"), each off here and
// selected by the backend from its own environment knob (src/backend/wgpu/mod.rs says which are
// on by default):
// - LATE_DECODE: a step's groups stay raw code words from load to use; only each group's total
//   column step is computed before the scan (8 + the sum of its nibbles), and a group is decoded
//   right before its products. Holds 1 word per group across the scans instead of 2 (the
//   decoded halves). In steps touching the row's first group, the codes of entries before the
//   row are zeroed (one column each, CUDA's trick) and the group's start moved back by their
//   count; the codes after the row's end are left alone: they move only columns of entries whose
//   values are masked and the totals of groups after the row, which nothing reads.
// - ROW_AHEAD: rows in flight per subgroup. 2 (default): the next row's bounds load and the row
//   after it is claimed while a row is computed (4 words live across the row). 1: the next row
//   is claimed when a row starts and its bounds are loaded when it starts (1 word live; the
//   bounds' round trip is exposed once per row).
// - LANE_BUILTINS: where the subgroup is full and its invocation ids are 0..size (checked at
//   entry, subgroup-uniformly), the row loop uses subgroup_invocation_id and subgroup_size
//   instead of the counted lane and lane count, so a driver whose subgroup size is fixed (NVIDIA:
//   32) folds `lanes` into constants (load offsets, the step stride, the division by lanes);
//   other subgroups take the counted path (with the zero select kept).
// - STATIC_ROWS: rows dealt out by a fixed stride instead of the counter: subgroup k of the
//   dispatch (counted from the workgroup id, `subgroup_id` and `num_subgroups`) takes rows k,
//   k + n, k + 2n, .. where n is the dispatch's subgroup count, as the CUDA kernel's persistent
//   warps do. No atomics and no counter reset at the end; the rows are balanced only by their
//   count (a subgroup of long rows finishes late). Every subgroup of the dispatch deals the same
//   way. (Session 6's two rows per subgroup, masked and unpipelined, measured 20–40 % slower
//   than one row and was removed, commit a189843; HALF_ROWS below is session 9's, on
//   row-aligned rows.)
override LATE_DECODE: bool = false;
override ROW_AHEAD: u32 = 2u;
override LANE_BUILTINS: bool = false;
override STATIC_ROWS: bool = false;
// - INTERLEAVED_ROWS: with STATIC_ROWS, subgroups numbered across the workgroups first
//   (subgroup k of workgroup w is subgroup k · workgroups + w), so that the subgroups holding a
//   partial last round of rows are spread over every workgroup, and so over the GPU's
//   multiprocessors, instead of filling the first workgroups while the others idle (the CUDA
//   kernel's MACKO_INTERLEAVE, kernels/NOTES.md step 9).
override INTERLEAVED_ROWS: bool = false;
// SHUFFLE_SCAN (on by default): subgroups that are exact (as for LANE_BUILTINS) scan a step's
// column totals by shuffles up (`exact_scan`) instead of subgroupExclusiveAdd and subgroupAdd;
// see exact_scan for why.
override SHUFFLE_SCAN: bool = true;
// PIPELINE: with LATE_DECODE, exact subgroups (as for SHUFFLE_SCAN) and DEPTH 1, a row's steps
// are 2 groups per lane instead of 4, and the next step's loads are issued before the current
// step is scanned and computed (`row_dot_piped`): the same registers for groups in flight (two
// steps of 2 instead of one of 4), but a subgroup's loads stay in flight while it computes,
// where the unpipelined loop alternates a load phase and a compute phase (as the CUDA kernel's
// pipelined batches, kernels/NOTES.md step 3). The backend turns it on by default (NOTES.md,
// "Session 6").
override PIPELINE: bool = false;
// LATE_MASK (on by default): in pipelined steps, a step that touches the row's first or last
// group is loaded raw and masked when it is computed (`mask_step2`), not when it is loaded: a
// mask applied at load time makes the subgroup wait for those loads right there, before it
// computes the current step, so at the rows' ends (every step at d = 0.1) the pipeline stalled
// once per group (seen in the driver's SASS).
override LATE_MASK: bool = true;
// HELD_SUMS: with STATIC_ROWS and x staged whole (not X_TILED), a subgroup does not store each
// row's sum when the row ends: lane k keeps the sum of the k-th of its last rows, and once every
// lane holds one (or the rows run out) the lanes store them together (`store_held`). A row's
// store is then one select in every lane, and the f16 rounding and the two atomics of store_y
// are issued once per `lanes` rows instead of once per row by the first lane (NOTES.md,
// "Session 8").
override HELD_SUMS: bool = false;
// BUTTERFLY_SUM: exact subgroups sum a row's lanes by shuffles xor (`lane_sum`) instead of
// subgroupAdd, which the NVIDIA driver compiles as a call to a routine that first checks which
// lanes are active (NOTES.md, "Session 7").
override BUTTERFLY_SUM: bool = false;
// MASK_TABLE: a masked group's values are masked by a mask read from the table in the uniform
// (params.masks, indexed by the group's kept range) instead of one built by kept_mask, about 20
// integer operations per group fewer in a step at a row's ends (NOTES.md, "Session 8").
override MASK_TABLE: bool = false;
// ALIGNED_ROWS: the block was uploaded row-aligned (src/backend/row_aligned.rs): every row
// (with X_TILED, every row's part in each tile: src/backend/wgpu/tiles.rs) starts at a multiple
// of 8 entries and its last group is padded with zeros, and a group of zeros follows the last
// row (params.zero_group). Then a pipelined step masks nothing: no group
// holds another row's entries, and a group past the row's end is loaded from the zero group
// instead (a select of its index when the step is issued, nothing when it is computed). The
// backend sets it only for such blocks (NOTES.md, "Session 9").
override ALIGNED_ROWS: bool = false;
// HALF_ROWS: with ALIGNED_ROWS, STATIC_ROWS, x staged whole and the pipelined loop, an exact
// subgroup takes two rows at a time, one per half (`rows_loop_pairs`), as the CUDA kernel's
// half-warps do for short rows: a row's step is 2 groups per lane of its half, and the scan,
// the loads and the loop's costs of a step serve two rows. Subgroups that are not exact take the
// same rows one at a time. The backend sets it for short rows (NOTES.md, "Session 9").
override HALF_ROWS: bool = false;

// With STATIC_ROWS: the dispatch's subgroup count, by which a subgroup's rows step (set once at
// entry).
var<private> row_stride: u32;

// The next row for this subgroup: its first lane takes it from the counter, and it is
// broadcast from the first active lane, which is that lane (all lanes are active here).
fn next_row(lane: u32) -> u32 {
    var r = 0u;
    if lane == 0u {
        r = atomicAdd(&counters[2u * params.slot], 1u);
    }
    return subgroupBroadcastFirst(r);
}

// The row a subgroup takes after `prev`: with STATIC_ROWS, `prev` + the dispatch's subgroups
// (no wrap: prev < params.rows < 2^31 when asked for a row beyond it, or one stride past that);
// else the next claim from the counter.
fn row_after(lane: u32, prev: u32) -> u32 {
    if STATIC_ROWS {
        return prev + row_stride;
    }
    return next_row(lane);
}

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
            partial = atomicLoad(&counters[params.partials + row]);
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
            atomicStore(&counters[params.partials + row], bitcast<u32>(total));
        } else {
            store_y(params.row_offset + row, total);
        }
    } else {
        store_y(params.row_offset + row, sum);
    }
}

// Group g of a step that touches the row's first or last group: values of entries outside the
// row's entries s..e zeroed, codes decoded as far as they belong to the row. Groups past the
// row read its last group again (in bounds) and keep nothing of it.
fn load_masked(g: u32, gend: u32, s: u32, e: u32) -> Group {
    let gi = min(g, gend - 1u);
    let d = decode_group(codes[gi], group_lo(g, s), group_hi(g, e));
    return Group(values[gi] & kept_mask(d.kept), d);
}

// The mask of a vec4<u32> of values that keeps the entries whose bits are set in `k` (entry j:
// bit j). Component c holds entries 2c (low half) and 2c + 1 (high half): bits 2c, 2c + 1 of k
// go to bits 0 and 16 (the multiplication by 0x8001 cannot carry: the two copies of the 8 bits
// lie in bits 0..7 and 15..22), then each to a whole half.
fn kept_mask(k: u32) -> vec4<u32> {
    let bits = vec4<u32>(k, k >> 2u, k >> 4u, k >> 6u);
    return ((bits * 0x8001u) & vec4<u32>(0x00010001u)) * 0xffffu;
}

// The 4 groups of a step that touches the row's first or last group; `live` groups (1..4) lie
// before the row's end, the others stay zero (no value, no step).
fn load_four_masked(g0: u32, lane: u32, lanes: u32, gend: u32, s: u32, e: u32, live: u32) -> Four {
    var f: Four;
    let a = load_masked(g0 + lane, gend, s, e);
    f.v0 = a.vals;
    f.d0 = a.d;
    if live > 1u {
        let b = load_masked(g0 + lanes + lane, gend, s, e);
        f.v1 = b.vals;
        f.d1 = b.d;
    }
    if live > 2u {
        let c = load_masked(g0 + 2u * lanes + lane, gend, s, e);
        f.v2 = c.vals;
        f.d2 = c.d;
    }
    if live > 3u {
        let d = load_masked(g0 + 3u * lanes + lane, gend, s, e);
        f.v3 = d.vals;
        f.d3 = d.d;
    }
    return f;
}

// Two entries packed in one u32 of values at columns c_lo, c_hi: acc += a * x. With `guard`, a
// zero value (padding, or masked) selects x to 0 first, so NaN or infinity in x never meets it;
// without, the caller knows x finite (see FAST_FINITE). `guard` is a literal at every call of
// the row loop, so each inlined copy keeps one form. With `shifted` (a literal too: the
// pipelined loop), c_lo and c_hi are shifted columns (x_at_shifted).
fn pair_fma(v: u32, c_lo: u32, c_hi: u32, acc: vec2<f32>, guard: bool, shifted: bool) -> vec2<f32> {
    let a = unpack2x16float(v);
    var xv: vec2<f32>;
    if shifted {
        xv = vec2<f32>(x_at_shifted(c_lo), x_at_shifted(c_hi));
    } else {
        xv = vec2<f32>(x_at(c_lo), x_at(c_hi));
    }
    if guard {
        return fma(a, select(vec2<f32>(0.0), xv, a != vec2<f32>(0.0)), acc);
    }
    return fma(a, xv, acc);
}

// One group whose first entry follows column base - 1: entry j's column is base - 1 plus its
// inclusive step (byte j of low, or of high counted from entry 4).
fn group_fma(v: vec4<u32>, d: Decoded, base: u32, acc_in: vec2<f32>, guard: bool) -> vec2<f32> {
    let b0 = base - 1u;
    let b4 = b0 + (d.low >> 24u);
    let p = d.low;
    let q = d.high;
    var acc = pair_fma(v.x, b0 + (p & 0xffu), b0 + ((p >> 8u) & 0xffu), acc_in, guard, false);
    acc = pair_fma(v.y, b0 + ((p >> 16u) & 0xffu), b4, acc, guard, false);
    acc = pair_fma(v.z, b4 + (q & 0xffu), b4 + ((q >> 8u) & 0xffu), acc, guard, false);
    return pair_fma(v.w, b4 + ((q >> 16u) & 0xffu), b4 + (q >> 24u), acc, guard, false);
}

// Adds the `live` (1..4) groups of f, given the row's column count before them, the exclusive
// scan of their packed totals (`before`) and the sum of those over the subgroup (`all`).
fn four_fma(
    f: Four,
    column: u32,
    before: vec2<u32>,
    all: vec2<u32>,
    live: u32,
    acc_in: vec2<f32>,
    guard: bool,
) -> vec2<f32> {
    let t0 = all.x & 0xffffu;
    let t1 = all.x >> 16u;
    let t2 = all.y & 0xffffu;
    var acc = group_fma(f.v0, f.d0, column + (before.x & 0xffffu), acc_in, guard);
    if live > 1u {
        acc = group_fma(f.v1, f.d1, column + t0 + (before.x >> 16u), acc, guard);
    }
    if live > 2u {
        acc = group_fma(f.v2, f.d2, column + t0 + t1 + (before.y & 0xffffu), acc, guard);
    }
    if live > 3u {
        acc = group_fma(f.v3, f.d3, column + t0 + t1 + t2 + (before.y >> 16u), acc, guard);
    }
    return acc;
}

// A step's scan: the exclusive scan of the lanes' packed totals and their sum over the subgroup.
struct Scan {
    before: vec2<u32>,
    all: vec2<u32>,
}

// The scan of `v` over the subgroup. `exact` (a literal at every call) says the subgroup is
// exact, `lane` and `lanes` its builtin invocation id and size (LANE_BUILTINS), every lane
// active: then, with SHUFFLE_SCAN, an inclusive scan by shuffles up (log2(lanes) steps of one
// shuffle per component and an add) whose last lane holds the sum. Why: the NVIDIA driver (580,
// H100/H200) compiles subgroupExclusiveAdd into a scan over any set of active lanes, with no
// path for a full subgroup: each of its 5 steps makes 3 dependent shuffles (one of them to find
// the next active lane), 17 shuffles and about 55 instructions for a vec2, called as a
// subroutine (SASS from the driver's shader cache, scripts/gpu/vk_sass.py). Ends: d doubles
// up to lanes <= 128.
fn exact_scan(v: vec2<u32>, lane: u32, lanes: u32) -> Scan {
    var s = v;
    for (var d = 1u; d < lanes; d *= 2u) {
        let up = subgroupShuffleUp(s, d);
        s += select(vec2<u32>(0u), up, vec2<bool>(lane >= d));
    }
    return Scan(s - v, subgroupShuffle(s, lanes - 1u));
}

fn step_scan(v: vec2<u32>, lane: u32, lanes: u32, exact: bool) -> Scan {
    if SHUFFLE_SCAN && exact {
        return exact_scan(v, lane, lanes);
    }
    return Scan(subgroupExclusiveAdd(v), subgroupAdd(v));
}

// Row entries s..e, summed over the subgroup (every lane gets the sum). A step is DEPTH sets of
// 4 groups per lane, all loaded before the first is used.
fn row_dot(s: u32, e: u32, c0: u32, lane: u32, lanes: u32, guard: bool, exact: bool) -> f32 {
    var acc = vec2<f32>(0.0);
    if e > s {
        let gend = (e + 7u) / 8u;
        // The row's column count before the current step (from c0: see row_work).
        var column = c0;
        // Ends: g0 grows by at least 4 (lanes >= 1) towards gend <= 2^29 (P <= 2^32 entries),
        // so it never wraps.
        for (var g0 = s / 8u; g0 < gend; g0 += 4u * DEPTH * lanes) {
            var f: Four;
            var h: Four;
            // Groups of the step with g0 + u * lanes < gend, subgroup-uniform (1..4 * DEPTH).
            var live = 4u * DEPTH;
            if step_inside(g0, DEPTH * lanes, s, e) {
                f = load_four_inside(g0, lane, lanes);
                if DEPTH == 2u {
                    h = load_four_inside(g0 + 4u * lanes, lane, lanes);
                }
            } else {
                live = min((gend - g0 + lanes - 1u) / lanes, 4u * DEPTH);
                f = load_four_masked(g0, lane, lanes, gend, s, e, min(live, 4u));
                if DEPTH == 2u && live > 4u {
                    h = load_four_masked(g0 + 4u * lanes, lane, lanes, gend, s, e, live - 4u);
                }
            }
            if DEPTH == 2u {
                let mine = vec4<u32>(four_totals(f), four_totals(h));
                let before = subgroupExclusiveAdd(mine);
                let all = subgroupAdd(mine);
                acc = four_fma(f, column, before.xy, all.xy, min(live, 4u), acc, guard);
                column += step_total(all.xy);
                if live > 4u {
                    acc = four_fma(h, column, before.zw, all.zw, live - 4u, acc, guard);
                    column += step_total(all.zw);
                }
            } else {
                let scan = step_scan(four_totals(f), lane, lanes, exact);
                acc = four_fma(f, column, scan.before, scan.all, live, acc, guard);
                column += step_total(scan.all);
            }
        }
    }
    return lane_sum(acc.x + acc.y, lanes, exact);
}

// ---- LATE_DECODE: groups kept as raw code words until their products ----------------------

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

// Nibbles below nibble n (n in 0..=8) set.
fn nibbles_below(n: u32) -> u32 {
    return select((1u << (min(n, 7u) * 4u)) - 1u, 0xffffffffu, n >= 8u);
}

// The column step of a whole group, 8 + the sum of its 8 nibbles (<= 128): the nibbles of even
// and odd entries added bytewise (each byte <= 30, + 2), then the 4 bytes summed into the top one
// (<= 128: no carry between bytes).
fn code_steps(w: u32) -> u32 {
    let b = (w & 0x0f0f0f0fu) + ((w >> 4u) & 0x0f0f0f0fu) + 0x02020202u;
    return (b * 0x01010101u) >> 24u;
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
// entries s..e zeroed (as load_masked), codes of the entries before s zeroed (each then steps one
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
// load_four_masked (the others stay zero: no value; their totals, 8, only move groups after the
// row).
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

// four_fma for raw groups; the first group's start moved back by `lo0` (its zeroed codes).
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

// row_dot with LATE_DECODE.
fn row_dot_late(s: u32, e: u32, c0: u32, lane: u32, lanes: u32, guard: bool, exact: bool) -> f32 {
    var acc = vec2<f32>(0.0);
    if e > s {
        let gend = (e + 7u) / 8u;
        var column = c0;
        for (var g0 = s / 8u; g0 < gend; g0 += 4u * DEPTH * lanes) {
            var f: Raw;
            var h: Raw;
            var live = 4u * DEPTH;
            // Entries of the row's first group before s (only ever in the first step's group 0).
            var lo0 = 0u;
            if step_inside(g0, DEPTH * lanes, s, e) {
                f = load_raw_inside(g0, lane, lanes);
                if DEPTH == 2u {
                    h = load_raw_inside(g0 + 4u * lanes, lane, lanes);
                }
            } else {
                live = min((gend - g0 + lanes - 1u) / lanes, 4u * DEPTH);
                f = load_raw_masked(g0, lane, lanes, gend, s, e, min(live, 4u));
                if DEPTH == 2u && live > 4u {
                    h = load_raw_masked(g0 + 4u * lanes, lane, lanes, gend, s, e, live - 4u);
                }
                lo0 = group_lo(g0 + lane, s);
            }
            // Group 0's total counts only its entries from s on (lo0 <= 7 < 8 <= its steps: no
            // borrow from the high half).
            let first = raw_totals(f) - vec2<u32>(lo0, 0u);
            if DEPTH == 2u {
                let mine = vec4<u32>(first, raw_totals(h));
                let before = subgroupExclusiveAdd(mine);
                let all = subgroupAdd(mine);
                acc = four_fma_raw(f, column, before.xy, all.xy, min(live, 4u), lo0, acc, guard);
                column += step_total(all.xy);
                if live > 4u {
                    acc = four_fma_raw(h, column, before.zw, all.zw, live - 4u, 0u, acc, guard);
                    column += step_total(all.zw);
                }
            } else {
                let scan = step_scan(first, lane, lanes, exact);
                acc = four_fma_raw(f, column, scan.before, scan.all, live, lo0, acc, guard);
                column += step_total(scan.all);
            }
        }
    }
    return lane_sum(acc.x + acc.y, lanes, exact);
}

// ---- PIPELINE: steps of 2 groups, the next step loading while this one is computed --------

// A step's 2 groups per lane as loaded (groups g0 + lane and g0 + lanes + lane).
struct Raw2 {
    v0: vec4<u32>,
    v1: vec4<u32>,
    c0: u32,
    c1: u32,
}

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
    } else if LATE_MASK {
        // Raw: the masks (mask_step2) wait until the step is computed, so that nothing here
        // waits for these loads.
        r.v0 = values[min(g0 + lane, gend - 1u)];
        r.c0 = codes[min(g0 + lane, gend - 1u)];
        if g0 + lanes < gend {
            r.v1 = values[min(g0 + lanes + lane, gend - 1u)];
            r.c1 = codes[min(g0 + lanes + lane, gend - 1u)];
        }
    } else {
        let a = load_masked_raw(g0 + lane, gend, s, e);
        r.v0 = a.vals;
        r.c0 = a.code;
        if g0 + lanes < gend {
            let b = load_masked_raw(g0 + lanes + lane, gend, s, e);
            r.v1 = b.vals;
            r.c1 = b.code;
        }
    }
    return r;
}

// Whether the step of 2 groups per lane from group g0 lies wholly inside entries s..e (then
// load_step2 loaded it without masks).
fn step2_inside(g0: u32, lanes: u32, s: u32, e: u32) -> bool {
    return g0 * 8u >= s && (g0 + 2u * lanes) * 8u <= e;
}

// The masks of load_masked_raw applied to a raw step (LATE_MASK): values of entries outside the
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

// The scan of a u32 over an exact subgroup, as exact_scan (the 2 groups' totals travel as its
// 16-bit halves: one shuffle per scan step instead of two).
fn exact_scan1(v: u32, lane: u32, lanes: u32) -> vec2<u32> {
    var s = v;
    for (var d = 1u; d < lanes; d *= 2u) {
        let up = subgroupShuffleUp(s, d);
        s += select(0u, up, lane >= d);
    }
    return vec2<u32>(s - v, subgroupShuffle(s, lanes - 1u));
}

// row_dot_late in steps of 2 groups per lane, pipelined (PIPELINE): `lane` and `lanes` are an
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
            if !ALIGNED_ROWS && LATE_MASK && !step2_inside(g0, lanes, s, e) {
                cur = mask_step2(cur, g0, lane, lanes, s, e);
            }
            // Group 0's total counts only its entries from s on (see row_dot_late).
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
    return lane_sum(acc.x + acc.y, lanes, true);
}

// The sum of `v` over the subgroup, in every lane. `exact` (a literal at every call) as in
// step_scan: then, with BUTTERFLY_SUM, log2(lanes) shuffles xor (lanes is a power of two: the
// builtin size) after which every lane holds the same sum (each step adds the same two values in
// both lanes of a pair, and addition commutes). Ends: d halves from lanes / 2 to 0.
fn lane_sum(v: f32, lanes: u32, exact: bool) -> f32 {
    if BUTTERFLY_SUM && exact {
        var s = v;
        for (var d = lanes / 2u; d > 0u; d /= 2u) {
            s += subgroupShuffleXor(s, d);
        }
        return s;
    }
    return subgroupAdd(v);
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

// The sum of a row's entries s..e, whose first follows column count c0 (see row_work), in the
// chosen variant.
fn row_sum(w: vec4<u32>, lane: u32, lanes: u32, guard: bool, exact: bool, limit: u32) -> f32 {
    if PIPELINE && LATE_DECODE && DEPTH == 1u && exact {
        return row_dot_piped(w.x, w.y, w.z, lane, lanes, guard, limit);
    }
    if LATE_DECODE {
        return row_dot_late(w.x, w.y, w.z, lane, lanes, guard, exact);
    }
    return row_dot(w.x, w.y, w.z, lane, lanes, guard, exact);
}

// Works through rows (with X_TILED, their parts in column tile `tile`) until they run past the
// block (the stride's or the counter's): `row` with its work `first_work` loaded (row_work),
// and `following` claimed. `guard` as in pair_fma, `exact` as in step_scan.
fn rows_loop(
    first: u32,
    first_work: vec4<u32>,
    second: u32,
    tile: u32,
    lane: u32,
    lanes: u32,
    guard: bool,
    exact: bool,
) {
    var row = first;
    var work = first_work;
    var following = second;
    // The shifted column count past the staged columns (row_dot_piped).
    let limit = X_FRONT + tile_width(tile);
    // Termination (why naga's loop bounding may be left out, MackoTuning::loop_bounds): every
    // iteration moves `row` on to a row claimed from the counter, one atomicAdd of 1 per claim,
    // so the claims of all subgroups are distinct values (the counter cannot wrap: a product
    // makes at most params.rows claims below params.rows plus 2 past it per subgroup, far below
    // 2^32). A
    // subgroup's claims below params.rows are distinct, so it runs at most params.rows + 2
    // iterations before `row` is at or past params.rows, whatever the counter held when the
    // product started. With STATIC_ROWS each iteration adds row_stride >= 1 to a row below
    // params.rows < 2^31 (no wrap), so `row` grows and leaves within params.rows iterations.
    // With HELD_SUMS (held_sums()): the sums of this subgroup's last `held_count` rows, the
    // k-th in lane k (held_count < lanes between rows).
    var held = 0.0;
    var held_count = 0u;
    loop {
        if row >= params.rows {
            break;
        }
        if ROW_AHEAD == 1u {
            // One row ahead: the next row is claimed now, its bounds loaded when it starts.
            let next = row_after(lane, row);
            let sum = row_sum(work, lane, lanes, guard, exact, limit);
            if held_sums() {
                held = select(held, sum, lane == held_count);
                held_count += 1u;
            } else if lane == 0u {
                finish_row(row, tile, work, sum);
            }
            row = next;
            work = row_work(next, tile);
        } else {
            // Loads and claims for the rows after this one, issued before this row's loads.
            let following_work = row_work(following, tile);
            let after = row_after(lane, following);
            let sum = row_sum(work, lane, lanes, guard, exact, limit);
            if held_sums() {
                held = select(held, sum, lane == held_count);
                held_count += 1u;
            } else if lane == 0u {
                finish_row(row, tile, work, sum);
            }
            row = following;
            work = following_work;
            following = after;
        }
        if held_sums() && held_count == lanes {
            store_held(row, held, held_count, lane);
            held_count = 0u;
        }
    }
    if held_sums() && held_count > 0u {
        store_held(row, held, held_count, lane);
    }
}

// Whether rows_loop holds its rows' sums in lanes (HELD_SUMS): only where a subgroup's rows are
// known from the stride (STATIC_ROWS) and each row is stored once (x staged whole: with
// X_TILED a row's sum is kept between tiles by finish_row).
fn held_sums() -> bool {
    return HELD_SUMS && STATIC_ROWS && !X_TILED;
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
    following: u32,
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
            rows_loop(row, work, following, tile, lane, lanes, true, false);
            let second = row + 1u;
            let after = row_after(lane, second);
            rows_loop(second, row_work(second, tile), after, tile, lane, lanes, true, false);
        }
        return;
    }
    if LANE_BUILTINS {
        // Three copies of the row loop: with the builtin ids (foldable sizes, scans by shuffles,
        // pipelined steps) without the zero select where the staged x is finite, and with it
        // where x is not known finite (gathered from memory, or ±∞ or NaN in it); counted and
        // guarded for subgroups that are not exact.
        if finite && exact {
            rows_loop(row, work, following, tile, sg_id, sg_size, false, true);
        } else if exact {
            rows_loop(row, work, following, tile, sg_id, sg_size, true, true);
        } else {
            rows_loop(row, work, following, tile, lane, lanes, true, false);
        }
    } else if finite {
        // Two copies of the row loop: without the zero select where the staged x is finite.
        rows_loop(row, work, following, tile, lane, lanes, false, false);
    } else {
        rows_loop(row, work, following, tile, lane, lanes, true, false);
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
    // Whether this subgroup is full with ids 0..size (LANE_BUILTINS; subgroup-uniform).
    let exact = LANE_BUILTINS && subgroupAll(lane == sg_id && lanes == sg_size);
    // The first row and its bounds, and (two rows ahead) the next row, are requested before x is
    // staged. With ROW_AHEAD = 1 the loop claims each next row itself: no claim here may go
    // unused.
    var row: u32;
    if STATIC_ROWS {
        // The dispatch is 1-D (products.rs) and holds far fewer than 2^31 subgroups.
        let workgroups = nwg.x * nwg.y * nwg.z;
        let w = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;
        row_stride = workgroups * nsg;
        row = select(w * nsg + sg, sg * workgroups + w, INTERLEAVED_ROWS);
        if HALF_ROWS {
            // Rows in pairs: subgroup k takes rows 2k, 2k + 1, then 2k + 2n, 2k + 2n + 1, ..
            row_stride *= 2u;
            row *= 2u;
        }
    } else {
        row = next_row(lane);
    }
    var following = 0u;
    if ROW_AHEAD != 1u {
        following = row_after(lane, row);
    }
    if X_TILED {
        // Tile by tile, each subgroup through its parts of its rows (the backend tiles only
        // with rows by stride: the same rows in every tile). The barrier keeps a tile's copy
        // from overwriting the one before while some subgroup still gathers from it. Ends:
        // `tile` counts up by 1 to params.tiles.
        for (var tile = 0u; tile < params.tiles; tile++) {
            let work = row_work(row, tile);
            if tile > 0u {
                workgroupBarrier();
            }
            let finite = stage_x(t, WORKGROUP, tile);
            rows_in_tile(row, work, following, tile, finite, exact, lane, lanes, sg_id, sg_size);
        }
        return;
    }
    let work = row_work(row, 0u);
    let finite = stage_x(t, WORKGROUP, 0u);
    rows_in_tile(row, work, following, 0u, finite, exact, lane, lanes, sg_id, sg_size);
    // Every claim of this workgroup has been made (each subgroup saw a row past the block).
    // The barrier's device-scope release orders them before the done count's increment; the
    // workgroup that completes the count acquires (second barrier), so every other workgroup's
    // claims precede its reset of the row counter. The next product's dispatch is ordered after
    // this one by the barrier wgpu puts between dispatches that write the counters.
    if STATIC_ROWS {
        // No claims were made: the counters stay as they were (zero).
        return;
    }
    storageBarrier();
    var last = false;
    if t == 0u {
        last = atomicAdd(&counters[2u * params.slot + 1u], 1u) == nwg.x * nwg.y * nwg.z - 1u;
    }
    storageBarrier();
    if last {
        atomicStore(&counters[2u * params.slot], 0u);
        atomicStore(&counters[2u * params.slot + 1u], 0u);
    }
}
