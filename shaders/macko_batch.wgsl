// macko_batch.wgsl: the MACKO part of the few-token kernels (after common.wgsl, macko.wgsl,
// macko_x_words.wgsl and batch.wgsl; before macko_batch_sg.wgsl or macko_batch_wg.wgsl): the
// products of a step's 4 decoded groups with a chunk of W vectors, and where a row (with
// X_TILED, a row's part in a column tile) starts. The loads, decoding and scans are the
// single-vector kernels' (macko.wgsl); only the products differ: an entry's column selects
// one XT load of W values instead of one x value. See shaders/README.md, "Few-token products".

// Two entries packed in one u32 of values (entries j, j + 1 of a group), at inclusive steps
// step_lo, step_hi past column `base`. An entry counts only when it belongs to the row (bit
// of `kept`) and its value is not ±0; otherwise it adds 0 · XT[zero_col] = 0 (see add_entry).
fn pair_batch(v: u32, j: u32, kept: u32, base: u32, step_lo: u32, step_hi: u32) {
    let f = unpack2x16float(v);
    let live_lo = ((kept >> j) & 1u) == 1u && f.x != 0.0;
    let live_hi = ((kept >> (j + 1u)) & 1u) == 1u && f.y != 0.0;
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
