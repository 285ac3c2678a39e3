// quant_macko.wgsl: the prelude of the quantized MACKO kernels (after common.wgsl, quant.wgsl
// and the width file; before quant_macko_sg.wgsl, quant_macko_wg.wgsl or, after batch.wgsl,
// quant_macko_batch_wg.wgsl): the row pointers and gap codes, and one aligned group of 8
// entries as a lane loads and multiplies it. See shaders/README.md, "Quantized matrices".
//
// The matrix is in the format's own layout (a group may hold the end of one row and the start
// of the next), so that a group's index is its index in the format and the storage-order scale
// index of PER_GROUP holds; the block's arrays start at an aligned group.

// Row pointers of this block, rebased so that entry 0 is the block's first group's first.
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
// Gap codes: 8 nibbles per u32, at the index of their group's codes in `qv`.
@group(0) @binding(3) var<storage, read> codes: array<u32>;

// One group as far as it belongs to the current row.
struct QGroup {
    // The gap codes, the nibbles of entries outside the row zeroed.
    code: u32,
    // The 8 value codes (load_q).
    q: vec2<u32>,
    // The row's entries in the group: lo <= j < hi (lo = hi: none).
    lo: u32,
    hi: u32,
    // The group's index in the block, clamped into the row (where its scale is).
    g: u32,
}

// Entries of group g (entries 8g..8g+8) that lie in the row's entries s..e, as lo..hi within
// 0..8 (lo = hi = 0 for a group past the row).
fn group_lo(g: u32, s: u32) -> u32 {
    let first = g * 8u;
    return min(max(s, first) - first, 8u);
}

fn group_hi(g: u32, e: u32) -> u32 {
    let first = g * 8u;
    return min(max(e, first) - first, 8u);
}

// Nibbles below nibble n (n in 0..=8) set.
fn nibbles_below(n: u32) -> u32 {
    return select((1u << (min(n, 7u) * 4u)) - 1u, 0xffffffffu, n >= 8u);
}

// Group g of a row whose entries are s..e and whose groups end at gend. A lane past the row
// re-reads the row's last group (a cached, in-bounds read) and keeps none of its entries.
fn load_qgroup(g: u32, gend: u32, s: u32, e: u32) -> QGroup {
    let gi = min(g, gend - 1u);
    let lo = group_lo(g, s);
    let hi = group_hi(g, e);
    let keep = nibbles_below(hi) & ~nibbles_below(lo);
    return QGroup(codes[gi] & keep, load_q(gi), lo, hi, gi);
}

// How far the row's column count advances over the group: one per kept entry plus their
// gaps (the nibble sums of even and odd entries bytewise, each byte <= 30, then the 4 bytes
// summed into the top one, <= 120: no carry between bytes).
fn qgroup_total(r: QGroup) -> u32 {
    let b = (r.code & 0x0f0f0f0fu) + ((r.code >> 4u) & 0x0f0f0f0fu);
    return ((b * 0x01010101u) >> 24u) + (r.hi - r.lo);
}

// Gap code of entry j (already zero outside the row).
fn gap(r: QGroup, j: u32) -> u32 {
    return (r.code >> (4u * j)) & 0xfu;
}

// Column of entry j, given the running `c` = column count before the group - lo + the gaps
// of entries 0..=j: entry j is the (j - lo)-th kept one after the count. Meaningful only for
// kept entries (u32 arithmetic wraps for the others, which are never read).
fn entry_column(c: u32, j: u32) -> u32 {
    return c + j;
}

// Whether entry j is the row's and its code is non-zero: only then does it contribute. A
// zero code (padding, tail padding, a zero weight) contributes an exact 0 even where x is NaN
// or ±∞: the term is selected away, never multiplied by zero.
fn entry_live(r: QGroup, j: u32, q: f32) -> bool {
    return j >= r.lo && j < r.hi && q != 0.0;
}

// Sum of q · x over the group's live entries, the row's column count before the group being
// `base`; x gathered from its f32 copy (column 0 for a dead entry, so no address depends on
// it).
fn qgroup_dot(r: QGroup, base: u32) -> f32 {
    var acc = 0.0;
    var c = base - r.lo;
    for (var j = 0u; j < 8u; j++) {
        c += gap(r, j);
        let q = q_code(r.q, j);
        let live = entry_live(r, j, q);
        acc += select(0.0, q * load_x(select(0u, entry_column(c, j), live)), live);
    }
    return acc;
}

// A lane's group term: the group's sum, times its scale with PER_GROUP (0 under a zero
// scale); per row the row's scale multiplies the row's whole sum (row_scaled).
fn qgroup_term(r: QGroup, base: u32) -> f32 {
    let p = qgroup_dot(r, base);
    if PER_GROUP {
        return scaled_sparse(p, scale_at(scale_index(r.g)));
    }
    return p;
}

// The row's sum of group terms, times the row's scale where scales are per row.
fn row_scaled(row: u32, sum: f32) -> f32 {
    if PER_GROUP {
        return sum;
    }
    return scaled_sparse(sum, scale_at(scale_index(row)));
}
