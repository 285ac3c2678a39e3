// macko.wgsl: the MACKO-16-4 prelude, after common.wgsl and before macko_sg.wgsl or
// macko_wg.wgsl: the matrix bindings, the decoding of a group of 8 entries, and the loads of the
// 4 groups an invocation handles per step. See shaders/README.md.

@group(0) @binding(0) var<uniform> params: MatrixParams;
// Row pointers of this block, rebased so that entry 0 is the block's first 16-byte word (with
// X_TILED, the block's tile table instead, rebased the same way: see X_TILED below).
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
// Entry values: 8 binary16 per vec4<u32>.
@group(0) @binding(2) var<storage, read> values: array<vec4<u32>>;
// Entry codes: 8 nibbles per u32, at the same index as their values.
@group(0) @binding(3) var<storage, read> codes: array<u32>;

// Where x is gathered from. With X_SHARED (a pipeline constant, set by the backend when x fits,
// whole or one column tile at a time),
// every workgroup first copies x into workgroup memory and gathers from there: the 8 columns a
// lane needs per group are spread over the row, and workgroup memory serves such scattered reads
// far faster than the L1 cache. Otherwise x is gathered from its f32 copy in memory. How the
// staged copy is laid out is the business of the file composed after this one:
// macko_x_words.wgsl (32-bit words: f16 pairs or f32) or macko_x_f16.wgsl (one f16 per column,
// for adapters with SHADER_F16). Each defines `xs`, `x_at(c)` (x[c] as f32, from xs or from
// memory) and `copy_x(t, invocations, first, cols)` (the copy of columns first .. first + cols,
// first a multiple of 8; returns whether it met a non-finite x).
override X_SHARED: bool = false;
// With X_TILED (and X_SHARED: the backend sets it where x is too wide for workgroup memory),
// x is staged one column tile at a time (params.tiles tiles of params.tile_cols columns, a
// multiple of 64), and `row_ptr` holds, instead of row pointers, a table of where each row's
// part in each tile starts: params.tiles + 1 planes of params.rows pairs (entry index, the
// row's column count before that entry less the tile's first column, modulo 2^32), plane
// params.tiles holding the rows' ends (src/backend/wgpu/tiles.rs builds it). Column c of tile
// k sits at column c - k · tile_cols of the staged copy (at slot x_slot(that + X_FRONT) in the
// f16 layout), so a row part gets its slots by starting its column count at the pair's second
// word. See shaders/README.md, "x in column tiles".
override X_TILED: bool = false;
// Staging checks whether x holds any ±∞ or NaN; where it holds
// none, an entry whose value is zero (padding, or masked) adds 0·x = ±0 anyway, so the kernel
// drops the per-entry select that keeps such entries from meeting a non-finite x (two
// instructions of about twenty per entry). The check is OR-ed over the workgroup in
// `x_nonfinite`, and `x_finite_copy` carries it out through a uniform load. (Workgroup memory
// besides xs is reserved by the backend: MACKO_OTHER_WORKGROUP_BYTES in plan.rs.)
// With BOUNDED_GATHERS (set by the backend only with x staged as f16 scalars, where
// macko_x_f16.wgsl leaves slack around x, and only in a kernel it compiles without naga's
// per-access clamps), the pipelined row loop keeps every gather inside xs by construction
// (row_dot_piped: its column counts start X_FRONT slots in, and a step's group starts are
// clamped to the tile's width), so a gather is one load with no clamp; x_at, which the other
// row loops call, clamps explicitly. Every other index of the kernel is in range by
// construction (src/backend/wgpu/pipelines.rs, `create_module`, says why). See
// shaders/README.md, "Correctness: every gather in bounds".
override BOUNDED_GATHERS: bool = false;
var<workgroup> x_nonfinite: atomic<u32>;
var<workgroup> x_finite_copy: u32;

// y = A·x with x sparse (`Device::spmv_sparse_x`): x is the sparse vector's dense copy, and an
// entry whose x is ±0 adds nothing, even a NaN or ±∞ of A there (the reference's rule), as an
// entry whose value is ±0 (padding, or masked) adds nothing whatever x holds. Both are a select
// of the term, never a product with 0 (pair_terms_sparse_x here, pair_fma in macko_sg.wgsl).
// A pipeline constant: its `if` is pruned before the driver sees the ordinary product's module
// (src/backend/wgpu/specialize.rs), which keeps its code.
override SPARSE_X: bool = false;

// Whether any of the 8 binary16 values of a word of x is ±∞ or NaN (exponent bits all set).
fn word_nonfinite(v: vec4<u32>) -> bool {
    let lo = v & vec4<u32>(0x7c00u);
    let hi = v & vec4<u32>(0x7c000000u);
    return any(lo == vec4<u32>(0x7c00u)) || any(hi == vec4<u32>(0x7c000000u));
}

// The first column of x staged for tile `tile` (0 without tiles) and how many columns it holds.
fn tile_first(tile: u32) -> u32 {
    if X_TILED {
        return tile * params.tile_cols;
    }
    return 0u;
}

fn tile_width(tile: u32) -> u32 {
    if X_TILED {
        return min(params.tile_cols, params.cols - tile_first(tile));
    }
    return params.cols;
}

// Copies x (with X_TILED, column tile `tile` of it) into workgroup memory (with X_SHARED; copy_x
// also zeroes the staged slots past x: masked entries may read them, and without the select they
// must read finite values). Every invocation of the workgroup calls it in uniform control flow:
// once, at the start, or once per tile after a barrier that ends the previous tile's gathers.
// Returns, uniformly over the workgroup, whether the per-entry zero select may be skipped:
// X_SHARED and no ±∞ or NaN in the staged x.
fn stage_x(t: u32, invocations: u32, tile: u32) -> bool {
    let check = X_SHARED;
    if check {
        if t == 0u {
            atomicStore(&x_nonfinite, 0u);
        }
        workgroupBarrier();
    }
    if X_SHARED {
        let bad = copy_x(t, invocations, tile_first(tile), tile_width(tile));
        if check && bad {
            atomicOr(&x_nonfinite, 1u);
        }
    }
    workgroupBarrier();
    if !check {
        return false;
    }
    if t == 0u {
        x_finite_copy = atomicLoad(&x_nonfinite);
    }
    return workgroupUniformLoad(&x_finite_copy) == 0u;
}

// A group is 8 entries: one vec4<u32> of values (entry 2k in the low half of component k,
// entry 2k+1 in the high half) and one u32 of codes (entry j in bits 4j..4j+3).

// Byte mask of the bytes below byte n (n in 0..=4+): bytes 0..n set.
fn bytes_below(n: u32) -> u32 {
    return select((1u << (min(n, 3u) * 8u)) - 1u, 0xffffffffu, n >= 4u);
}

// Bytes lo..hi (clamped to 0..4) set.
fn byte_range(lo: u32, hi: u32) -> u32 {
    return bytes_below(hi) & ~bytes_below(lo);
}

// The 4 nibbles of the low 16 bits of `w`, one per byte (nibble j to byte j).
fn spread4(w: u32) -> u32 {
    var v = w & 0xffffu;
    v = (v | (v << 8u)) & 0x00ff00ffu;
    return (v | (v << 4u)) & 0x0f0f0f0fu;
}

// Byte j of the result is the sum over kept entries k <= j of (code_k + 1): the column step
// from the previous entry. Each byte is at most 4 * 16 = 64, so no byte carries into the next.
fn steps4(w: u32, keep: u32) -> u32 {
    return ((spread4(w) + 0x01010101u) & keep) * 0x01010101u;
}

// One group, as far as it belongs to the current row: which entries (bits lo..hi of 0..8)
// count, and the inclusive column steps of its two halves.
struct Decoded {
    // Inclusive steps of entries 0..3, one per byte (entries outside lo..hi step 0).
    low: u32,
    // Inclusive steps of entries 4..7, counted from the start of entry 4.
    high: u32,
    // Bit j set when entry j belongs to the row (lo <= j < hi).
    kept: u32,
    // Sum of the steps of the kept entries: how far the row's column advances.
    total: u32,
}

// Bits lo..hi (within 0..=8) set: the entries j of a group with lo <= j < hi.
fn kept_bits(lo: u32, hi: u32) -> u32 {
    return ((1u << hi) - 1u) & ~((1u << lo) - 1u);
}

fn decode_group(code_word: u32, lo: u32, hi: u32) -> Decoded {
    var d: Decoded;
    d.low = steps4(code_word, byte_range(lo, hi));
    d.high = steps4(code_word >> 16u, byte_range(max(lo, 4u) - 4u, max(hi, 4u) - 4u));
    d.kept = kept_bits(lo, hi);
    d.total = (d.low >> 24u) + (d.high >> 24u);
    return d;
}

// Contribution of two entries packed in one u32 of values: entry `j` (low half) and j+1 (high
// half), whose inclusive steps are `step_lo` and `step_hi` past column `base`. An entry counts
// only when it belongs to the row (bit of `kept`) and its value is not +-0 (padding);
// otherwise it contributes an exact 0 even if x there is NaN or infinite (select, never a
// multiplication by zero), and x is read at column 0 instead so no address depends on a masked
// entry. With `kept` a constant 0xff (groups wholly inside the row) the row test folds away.
// The value test is `!(f.x == 0.0)`: naga emits `!=` on floats as the ordered not-equal, false
// for a NaN value, which must count (IEEE: the row's sum is NaN; tests/agreement.rs).
fn pair_terms(v: u32, j: u32, kept: u32, base: u32, step_lo: u32, step_hi: u32) -> f32 {
    if SPARSE_X {
        return pair_terms_sparse_x(v, j, kept, base, step_lo, step_hi);
    }
    let f = unpack2x16float(v);
    let live_lo = ((kept >> j) & 1u) == 1u && !(f.x == 0.0);
    let live_hi = ((kept >> (j + 1u)) & 1u) == 1u && !(f.y == 0.0);
    let c_lo = select(0u, base + step_lo - 1u, live_lo);
    let c_hi = select(0u, base + step_hi - 1u, live_hi);
    let t_lo = select(0.0, f.x * x_at(c_lo), live_lo);
    let t_hi = select(0.0, f.y * x_at(c_hi), live_hi);
    return t_lo + t_hi;
}

// pair_terms with SPARSE_X: an entry counts only where it belongs to the row, its value is not
// ±0 and x there is not ±0. The zero tests are `!(a == 0.0)`: naga emits `!=` on floats as an
// ordered compare, false for a NaN, and a NaN of A (or of x) met by a non-zero must reach y.
fn pair_terms_sparse_x(v: u32, j: u32, kept: u32, base: u32, step_lo: u32, step_hi: u32) -> f32 {
    let f = unpack2x16float(v);
    let in_lo = ((kept >> j) & 1u) == 1u && !(f.x == 0.0);
    let in_hi = ((kept >> (j + 1u)) & 1u) == 1u && !(f.y == 0.0);
    let x_lo = x_at(select(0u, base + step_lo - 1u, in_lo));
    let x_hi = x_at(select(0u, base + step_hi - 1u, in_hi));
    let t_lo = select(0.0, f.x * x_lo, in_lo && !(x_lo == 0.0));
    let t_hi = select(0.0, f.y * x_hi, in_hi && !(x_hi == 0.0));
    return t_lo + t_hi;
}

// Sum of the live entries of one decoded group whose first kept entry follows column base - 1
// (base = the row's column count before this group).
fn group_dot(vals: vec4<u32>, d: Decoded, base: u32) -> f32 {
    let b4 = base + (d.low >> 24u);
    var s = pair_terms(vals.x, 0u, d.kept, base, d.low & 0xffu, (d.low >> 8u) & 0xffu);
    s += pair_terms(vals.y, 2u, d.kept, base, (d.low >> 16u) & 0xffu, d.low >> 24u);
    s += pair_terms(vals.z, 4u, d.kept, b4, d.high & 0xffu, (d.high >> 8u) & 0xffu);
    s += pair_terms(vals.w, 6u, d.kept, b4, (d.high >> 16u) & 0xffu, d.high >> 24u);
    return s;
}

// Entries of group g (entries 8g..8g+8) that lie in the row's entries s..e, as lo..hi within
// 0..8 (lo >= hi, so nothing counts, for a group outside the row).
fn group_lo(g: u32, s: u32) -> u32 {
    let first = g * 8u;
    return min(max(s, first) - first, 8u);
}

fn group_hi(g: u32, e: u32) -> u32 {
    let first = g * 8u;
    return min(max(e, first) - first, 8u);
}

// ---- Four groups per invocation ------------------------------------------------------------
//
// Both MACKO kernels give each invocation the groups g0 + u * lanes + lane, u in 0..4, per step
// (every load instruction of the subgroup or workgroup is contiguous), issue all 8 loads before
// using any, and scan the 4 groups' column steps at once: a group's total is at most
// 8 * 16 = 128 and a scan over at most 128 invocations at most 16384, so the 4 totals travel as
// the 16-bit halves of a vec2<u32> and one scan and one sum serve all 4.

struct Four {
    v0: vec4<u32>,
    v1: vec4<u32>,
    v2: vec4<u32>,
    v3: vec4<u32>,
    d0: Decoded,
    d1: Decoded,
    d2: Decoded,
    d3: Decoded,
}

// One loaded group: its values and its decoded codes.
struct Group {
    vals: vec4<u32>,
    d: Decoded,
}

// Group g of a row whose entries are s..e and whose groups end at gend, decoded as far as it
// belongs to the row. Invocations past the row read the row's last group again (a cached,
// in-bounds read) and keep no entry of it.
fn load_partial(g: u32, gend: u32, s: u32, e: u32) -> Group {
    let gi = min(g, gend - 1u);
    return Group(values[gi], decode_group(codes[gi], group_lo(g, s), group_hi(g, e)));
}

// The 4 groups of an invocation in a step that may touch the row's first or last group.
fn load_four(g0: u32, lane: u32, lanes: u32, gend: u32, s: u32, e: u32) -> Four {
    let a = load_partial(g0 + lane, gend, s, e);
    let b = load_partial(g0 + lanes + lane, gend, s, e);
    let c = load_partial(g0 + 2u * lanes + lane, gend, s, e);
    let d = load_partial(g0 + 3u * lanes + lane, gend, s, e);
    return Four(a.vals, b.vals, c.vals, d.vals, a.d, b.d, c.d, d.d);
}

// The 4 groups of an invocation in a step whose groups all lie wholly inside the row: no
// clamping, and the constant lo = 0, hi = 8 lets the compiler drop every row test.
fn load_four_inside(g0: u32, lane: u32, lanes: u32) -> Four {
    let g = g0 + lane;
    var f: Four;
    f.v0 = values[g];
    f.v1 = values[g + lanes];
    f.v2 = values[g + 2u * lanes];
    f.v3 = values[g + 3u * lanes];
    f.d0 = decode_group(codes[g], 0u, 8u);
    f.d1 = decode_group(codes[g + lanes], 0u, 8u);
    f.d2 = decode_group(codes[g + 2u * lanes], 0u, 8u);
    f.d3 = decode_group(codes[g + 3u * lanes], 0u, 8u);
    return f;
}

// Whether the step starting at group g0 (4 * lanes groups) lies wholly inside entries s..e.
fn step_inside(g0: u32, lanes: u32, s: u32, e: u32) -> bool {
    return g0 * 8u >= s && (g0 + 4u * lanes) * 8u <= e;
}

// The 4 column-step totals, packed as 16-bit halves.
fn four_totals(f: Four) -> vec2<u32> {
    return vec2<u32>(f.d0.total | (f.d1.total << 16u), f.d2.total | (f.d3.total << 16u));
}

// Sum of the 4 packed totals of a whole step.
fn step_total(all: vec2<u32>) -> u32 {
    return (all.x & 0xffffu) + (all.x >> 16u) + (all.y & 0xffffu) + (all.y >> 16u);
}

// The 4 groups' products, given the row's column count before the step, the exclusive scan of
// the packed totals (`before`) and their sum over the step (`all`).
fn four_dot(f: Four, column: u32, before: vec2<u32>, all: vec2<u32>) -> f32 {
    let t0 = all.x & 0xffffu;
    let t1 = all.x >> 16u;
    let t2 = all.y & 0xffffu;
    var acc = group_dot(f.v0, f.d0, column + (before.x & 0xffffu));
    acc += group_dot(f.v1, f.d1, column + t0 + (before.x >> 16u));
    acc += group_dot(f.v2, f.d2, column + t0 + t1 + (before.y & 0xffffu));
    acc += group_dot(f.v3, f.d3, column + t0 + t1 + t2 + (before.y >> 16u));
    return acc;
}

// ---- Shared by the pipelined subgroup loops of macko_sg.wgsl and macko_batch.wgsl ----

// A step's 2 groups per lane as loaded (groups g0 + lane and g0 + lanes + lane).
struct Raw2 {
    v0: vec4<u32>,
    v1: vec4<u32>,
    c0: u32,
    c1: u32,
}

// The column step of a whole group, 8 + the sum of its 8 nibbles (<= 128): the nibbles of even
// and odd entries added bytewise (each byte <= 30, + 2), then the 4 bytes summed into the top one
// (<= 128: no carry between bytes).
fn code_steps(w: u32) -> u32 {
    let b = (w & 0x0f0f0f0fu) + ((w >> 4u) & 0x0f0f0f0fu) + 0x02020202u;
    return (b * 0x01010101u) >> 24u;
}

// Nibbles below nibble n (n in 0..=8) set.
fn nibbles_below(n: u32) -> u32 {
    return select((1u << (min(n, 7u) * 4u)) - 1u, 0xffffffffu, n >= 8u);
}

// The mask of a vec4<u32> of values that keeps the entries whose bits are set in `k` (entry j:
// bit j). Component c holds entries 2c (low half) and 2c + 1 (high half): bits 2c, 2c + 1 of k
// go to bits 0 and 16 (the multiplication by 0x8001 cannot carry: the two copies of the 8 bits
// lie in bits 0..7 and 15..22), then each to a whole half.
fn kept_mask(k: u32) -> vec4<u32> {
    let bits = vec4<u32>(k, k >> 2u, k >> 4u, k >> 6u);
    return ((bits * 0x8001u) & vec4<u32>(0x00010001u)) * 0xffffu;
}

// Whether the step of 2 groups per lane from group g0 lies wholly inside entries s..e (then
// load_step2 loaded it without masks).
fn step2_inside(g0: u32, lanes: u32, s: u32, e: u32) -> bool {
    return g0 * 8u >= s && (g0 + 2u * lanes) * 8u <= e;
}
