// macko_batch.wgsl: the MACKO part of the few-token kernels (after common.wgsl, macko.wgsl,
// macko_x_words.wgsl and batch.wgsl; before macko_batch_sg.wgsl or macko_batch_wg.wgsl): the
// products of a step's 4 decoded groups with a chunk of W vectors, and where a row (with
// X_TILED, a row's part in a column tile) starts. The loads, decoding and scans are the
// single-vector kernels' (macko.wgsl); only the products differ: an entry's column selects
// one XT load of W values instead of one x value. See shaders/README.md, "Few-token products".

// Two entries packed in one u32 of values (entries j, j + 1 of a group), at inclusive steps
// step_lo, step_hi past column `base`. An entry counts only when it belongs to the row (bit
// of `kept`) and its value is not ±0; otherwise it adds 0 · XT[zero_col] = 0 (see add_entry).
// `!(f.x == 0.0)`, not `!=`: a NaN value must count (macko.wgsl, pair_terms).
fn pair_batch(v: u32, j: u32, kept: u32, base: u32, step_lo: u32, step_hi: u32) {
    let f = unpack2x16float(v);
    let live_lo = ((kept >> j) & 1u) == 1u && !(f.x == 0.0);
    let live_hi = ((kept >> (j + 1u)) & 1u) == 1u && !(f.y == 0.0);
    add_entry(select(0.0, f.x, live_lo), select(chunk.zero_col, base + step_lo - 1u, live_lo));
    add_entry(select(0.0, f.y, live_hi), select(chunk.zero_col, base + step_hi - 1u, live_hi));
}

// One decoded group whose first kept entry follows column base - 1 (group_dot's layout).
fn group_batch(vals: vec4<u32>, d: Decoded, base: u32) {
    let b4 = base + (d.low >> 24u);
    pair_batch(vals.x, 0u, d.kept, base, d.low & 0xffu, (d.low >> 8u) & 0xffu);
    pair_batch(vals.y, 2u, d.kept, base, (d.low >> 16u) & 0xffu, d.low >> 24u);
    pair_batch(vals.z, 4u, d.kept, b4, d.high & 0xffu, (d.high >> 8u) & 0xffu);
    pair_batch(vals.w, 6u, d.kept, b4, (d.high >> 16u) & 0xffu, d.high >> 24u);
}

// The 4 groups' products (four_dot's arguments).
fn four_batch(f: Four, column: u32, before: vec2<u32>, all: vec2<u32>) {
    let t0 = all.x & 0xffffu;
    let t1 = all.x >> 16u;
    let t2 = all.y & 0xffffu;
    group_batch(f.v0, f.d0, column + (before.x & 0xffffu));
    group_batch(f.v1, f.d1, column + t0 + (before.x >> 16u));
    group_batch(f.v2, f.d2, column + t0 + t1 + (before.y & 0xffffu));
    group_batch(f.v3, f.d3, column + t0 + t1 + t2 + (before.y >> 16u));
}

// Row `row`'s entries s..e (x, y) and the column count before entry s (z); with X_TILED its
// part in column tile `tile` (the table of macko.wgsl, X_TILED), with the count made absolute.
fn row_part(row: u32, tile: u32) -> vec3<u32> {
    if X_TILED {
        let a = 2u * (tile * params.rows + row);
        let b = a + 2u * params.rows;
        return vec3<u32>(row_ptr[a], row_ptr[b], row_ptr[a + 1u] + tile_first(tile));
    }
    return vec3<u32>(row_ptr[row], row_ptr[row + 1u], 0u);
}

// The parts a row is stored in: the tiles with X_TILED, else 1.
fn row_parts() -> u32 {
    if X_TILED {
        return params.tiles;
    }
    return 1u;
}

// ---- Raw groups, decoded at their products (the pipelined loop of macko_batch_sg.wgsl) ------
//
// macko_sg.wgsl's pipelined steps (row_dot_piped), with one XT load of W values per entry
// instead of one gather of x. The helpers both loops use (Raw2, code_steps, nibbles_below,
// kept_mask, step2_inside) are in macko.wgsl; the ones below differ from macko_sg.wgsl's.





// The step of 2 groups per lane from group g0 of a row whose groups end at gend, raw (masked
// when computed: mask_step2), reads clamped to the row's last group; the second group only
// where it starts before gend for some lane (otherwise zero: no value, a total that moves no
// entry of the row).
fn load_step2(g0: u32, lane: u32, lanes: u32, gend: u32) -> Raw2 {
    var r: Raw2;
    let a = min(g0 + lane, gend - 1u);
    r.v0 = values[a];
    r.c0 = codes[a];
    if g0 + lanes < gend {
        let b = min(g0 + lanes + lane, gend - 1u);
        r.v1 = values[b];
        r.c1 = codes[b];
    }
    return r;
}


// Values of entries outside the row's entries s..e zeroed, codes of the entries before s
// zeroed (each then steps one column; only the row's first group has any, and the second group
// of a step never is that group).
fn mask_step2(r: Raw2, g0: u32, lane: u32, lanes: u32, s: u32, e: u32) -> Raw2 {
    var m = r;
    let ga = g0 + lane;
    let gb = ga + lanes;
    let lo = group_lo(ga, s);
    m.v0 = r.v0 & kept_mask(kept_bits(lo, group_hi(ga, e)));
    m.c0 = r.c0 & ~nibbles_below(lo);
    m.v1 = r.v1 & kept_mask(kept_bits(0u, group_hi(gb, e)));
    return m;
}

// Two entries packed in one u32 of values at columns c_lo, c_hi: a zero value (padding, masked,
// or a stored zero) reads the zero column instead, so it adds 0 · 0 whatever x holds.
fn pair_raw(v: u32, c_lo: u32, c_hi: u32) {
    let f = unpack2x16float(v);
    add_entry(f.x, select(chunk.zero_col, c_lo, f.x != 0.0));
    add_entry(f.y, select(chunk.zero_col, c_hi, f.y != 0.0));
}

// One group decoded from its raw code word (macko_sg.wgsl's group_fma_raw: byte k of q is the
// inclusive step count through entry 2k + 1, of p through entry 2k), whose first entry follows
// column base - 1.
fn group_raw(v: vec4<u32>, code: u32, base: u32) {
    let even = code & 0x0f0f0f0fu;
    let odd1 = ((code >> 4u) & 0x0f0f0f0fu) + 0x01010101u;
    let q = (even + odd1 + 0x01010101u) * 0x01010101u;
    let p = q - odd1;
    let b = base - 1u;
    pair_raw(v.x, b + (p & 0xffu), b + (q & 0xffu));
    pair_raw(v.y, b + ((p >> 8u) & 0xffu), b + ((q >> 8u) & 0xffu));
    pair_raw(v.z, b + ((p >> 16u) & 0xffu), b + ((q >> 16u) & 0xffu));
    pair_raw(v.w, b + (p >> 24u), b + (q >> 24u));
}
