// Transposed MACKO product y = Aᵀ·x, x sparse or dense (common.wgsl, macko.wgsl,
// macko_x_words.wgsl and transposed.wgsl are prepended; of the MACKO ones it uses the matrix
// bindings and the decoding of a group, never the staged x). See shaders/README.md,
// "Transposed products with a sparse x".
//
// The scheme is csr_transposed_wg.wgsl's: each workgroup owns a tile of TILE consecutive
// columns of y in workgroup memory and one chunk of x's entries (transposed.wgsl), walks the
// chunk's entries in order and adds x_i·A[i, c] of every selected row into its tile, with a
// barrier after each row, and leaves the tile's sums in the partial sums, which
// transposed_combine_wg.wgsl adds in chunk order into y (a fixed order, no atomics). What
// differs is how a row finds its entries in the tile: a MACKO row gives an entry's column only
// as a prefix sum of gap codes, so no binary search can find the tile's part. Each workgroup
// decodes every selected row from its start instead, in steps of WORKGROUP groups of 8 entries
// (one per invocation, as in macko_wg.wgsl): the groups' column advances are scanned across
// the workgroup (workgroup memory and barriers), each invocation then knows its group's
// columns and adds the entries whose column falls in the tile. Columns increase along a row,
// so the walk stops at the first step that starts at or past the tile's end.
//
// Zeros: an entry whose value is ±0 (MACKO's own padding, the zero entries that pad a
// row-aligned upload's rows and may name columns up to 7 past the last one, masked entries of a
// neighbouring row) adds nothing even where x is NaN or ±∞, compared by its bits; x's ±0
// entries are skipped (dropped at upload, or with DENSE_X compared by their bits).
//
// The row pointers are the upload's: row pointers rebased to the block's arrays, or, where the
// matrix was uploaded with x in column tiles (params.tiles > 0), the tile table of macko.wgsl's
// X_TILED (each row's part in each tile, with the column count before it), whose parts are
// walked one after another, those outside the workgroup's columns skipped.
//
// x is a sparse vector (group 1 at bindings 2..4), or with DENSE_X the dense x of common.wgsl
// (its f32 copy), whose rows are walked in order, its ±0 elements skipped. Row blocks as in
// csr_transposed_wg.wgsl: block 0 starts each chunk's sums at zero, later blocks resume from
// what the previous one left in the partial sums.

var<workgroup> steps: array<u32, WORKGROUP>;
// The column advance of the whole step, read back uniformly (workgroupUniformLoad).
var<workgroup> scan_total: u32;

// Inclusive scan of `v` over the workgroup (Hillis-Steele); the total goes to scan_total.
fn scan_steps(v: u32, t: u32) -> u32 {
    workgroupBarrier(); // the previous step's readers are done with `steps` and scan_total
    steps[t] = v;
    workgroupBarrier();
    for (var offset = 1u; offset < WORKGROUP; offset *= 2u) {
        let other = steps[select(0u, t - offset, t >= offset)];
        let add = select(0u, other, t >= offset);
        workgroupBarrier();
        steps[t] += add;
        workgroupBarrier();
    }
    let upto = steps[t];
    if t == WORKGROUP - 1u {
        scan_total = upto;
    }
    return upto;
}

// Adds x·A[i, c] for one entry (value `bits`, column c) where it belongs to the row (`kept`),
// its value is not ±0 (by its bits: a NaN or ±∞ of A must count) and c is in the tile. Within
// a row no two entries share a column, so no two invocations add into one slot.
fn scatter_one(bits: u32, kept: bool, c: u32, xv: f32, c0: u32, c1: u32) {
    if kept && (bits & 0x7fffu) != 0u && c >= c0 && c < c1 {
        acc[c - c0] += unpack2x16float(bits).x * xv;
    }
}

// The two entries of one u32 of values: entry j (low half) and j + 1 (high half), their
// inclusive column steps past column `base`.
fn scatter_pair(
    v: u32, j: u32, kept: u32, base: u32, lo: u32, hi: u32, xv: f32, c0: u32, c1: u32,
) {
    scatter_one(v & 0xffffu, ((kept >> j) & 1u) == 1u, base + lo - 1u, xv, c0, c1);
    scatter_one(v >> 16u, ((kept >> (j + 1u)) & 1u) == 1u, base + hi - 1u, xv, c0, c1);
}

// The kept entries of one decoded group whose first kept entry follows column base - 1.
fn scatter_group(vals: vec4<u32>, d: Decoded, base: u32, xv: f32, c0: u32, c1: u32) {
    let b4 = base + (d.low >> 24u);
    scatter_pair(vals.x, 0u, d.kept, base, d.low & 0xffu, (d.low >> 8u) & 0xffu, xv, c0, c1);
    scatter_pair(vals.y, 2u, d.kept, base, (d.low >> 16u) & 0xffu, d.low >> 24u, xv, c0, c1);
    scatter_pair(vals.z, 4u, d.kept, b4, d.high & 0xffu, (d.high >> 8u) & 0xffu, xv, c0, c1);
    scatter_pair(vals.w, 6u, d.kept, b4, (d.high >> 16u) & 0xffu, d.high >> 24u, xv, c0, c1);
}

// Entries s..e of the block's arrays (one row, or its part in one column tile), whose column
// count before entry s is `column0`, scattered into the tile c0..c1. Called in uniform control
// flow with uniform arguments: every loop bound and break below is uniform.
fn scatter_part(s: u32, e: u32, column0: u32, xv: f32, c0: u32, c1: u32, t: u32) {
    if e <= s {
        return;
    }
    let gend = (e + 7u) / 8u;
    var column = column0;
    for (var g0 = s / 8u; g0 < gend; g0 += WORKGROUP) {
        // Columns only grow along the row: nothing from here on is in the tile.
        if column >= c1 {
            break;
        }
        // Invocations past the part read its last group again and keep none of it.
        let g = g0 + t;
        let gi = min(g, gend - 1u);
        let d = decode_group(codes[gi], group_lo(g, s), group_hi(g, e));
        let upto = scan_steps(d.total, t);
        let total = workgroupUniformLoad(&scan_total);
        scatter_group(values[gi], d, column + upto - d.total, xv, c0, c1);
        column += total;
    }
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let c0 = tile_start(wid, nwg);
    if c0 >= params.cols {
        return;
    }
    let c1 = min(c0 + TILE, params.cols);
    begin_tile(t, wid, nwg.z, c0, c1);
    // Parts per row: one (the row), or one per column tile of the upload's tile table.
    let tiled = params.tiles > 0u;
    let parts = select(1u, params.tiles, tiled);
    let entries = chunk_entries(wid.z, nwg.z);
    for (var n = entries.x; n < entries.y; n++) {
        let e = x_entry(n);
        if selects_a_row(e) {
            let r = e.row - params.row_offset;
            for (var p = 0u; p < parts; p++) {
                if tiled {
                    // Part p holds only columns of tile p (its zero padding aside).
                    let tile0 = p * params.tile_cols;
                    if tile0 >= c1 {
                        break;
                    }
                    if tile0 + params.tile_cols > c0 {
                        let at = 2u * (p * params.rows + r);
                        let end = row_ptr[2u * ((p + 1u) * params.rows + r)];
                        let column0 = row_ptr[at + 1u] + tile0;
                        scatter_part(row_ptr[at], end, column0, e.value, c0, c1, t);
                    }
                } else {
                    scatter_part(row_ptr[r], row_ptr[r + 1u], 0u, e.value, c0, c1, t);
                }
            }
            workgroupBarrier();
        }
    }
    end_tile(t, wid.z, c0, c1);
}
