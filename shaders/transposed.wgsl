// The transposed products' shared prelude (prepended, after the family's, to
// csr_transposed_wg.wgsl and macko_transposed_wg.wgsl, and to transposed_combine_wg.wgsl, which
// adds the partial sums into y): the sparse x's bindings, the column tiles, the chunks of x and
// their partial sums. See shaders/README.md, "Transposed products with a sparse x".
//
// Each workgroup owns a tile of TILE consecutive columns of y, keeps the tile's sums in
// workgroup memory, and walks one chunk of x's entries (a sparse x's stored entries, or a dense
// x's rows): consecutive entries, one chunk per workgroup row of the grid's z dimension, so that
// each workgroup walks only its chunk's rows, not all of them: the work is tiles × chunks
// workgroups wide instead of tiles. A workgroup leaves its tile's sums over its chunk in
// `partials`; the combine pass adds each column's chunks in chunk order. The sums are thus in a
// fixed order (x's order within a chunk, then the chunks in order), the same on every run and
// device whatever the row blocks, since the chunks are cut from the whole x.
//
// Layout of `partials` (u32 words): word 0 holds the number of chunks (the grid's z, written by
// workgroup (0, 0, 0) for the combine pass), then from word PARTIALS_AT one row of `cols` f32
// sums (as bits) per chunk.

// x given dense (common.wgsl's x, its f32 copy) rather than as a sparse vector.
override DENSE_X: bool = false;

// The sparse x (group 1 at bindings 2..4, clear of common.wgsl's dense x at 0 and 1).
struct SparseXParams {
    // Stored entries (indices increasing, values non-zero).
    nnz: u32,
    unused0: u32,
    unused1: u32,
    unused2: u32,
}
@group(1) @binding(2) var<uniform> sx: SparseXParams;
@group(1) @binding(3) var<storage, read> sx_index: array<u32>;
@group(1) @binding(4) var<storage, read> sx_value: array<f32>;

@group(3) @binding(0) var<storage, read_write> partials: array<u32>;

const PARTIALS_AT: u32 = 4u;

// Invocations of every transposed kernel's workgroup.
const WORKGROUP: u32 = 64u;
// Columns of y one workgroup owns (even, so an f16 output word is never shared).
const TILE: u32 = 256u;

var<workgroup> acc: array<f32, TILE>;

// Chunk z of `chunks` over `count` entries: [lo, hi), the first count % chunks chunks one entry
// longer than the others, so that no chunk is empty where chunks <= count.
fn chunk_range(count: u32, z: u32, chunks: u32) -> vec2<u32> {
    let size = count / chunks;
    let extra = count % chunks;
    let lo = z * size + min(z, extra);
    return vec2<u32>(lo, lo + size + select(0u, 1u, z < extra));
}

// Word of chunk z's sum for column c.
fn partial_at(z: u32, c: u32) -> u32 {
    return PARTIALS_AT + z * params.cols + c;
}

// The first column of the workgroup's tile (params.cols or past it: no tile).
fn tile_start(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * TILE;
}

// Starts the tile c0..c1 of chunk z: zero in row block 0, else what the previous block left in
// the partial sums. Workgroup (0, 0, 0) records the chunk count for the combine pass.
fn begin_tile(t: u32, wid: vec3<u32>, chunks: u32, c0: u32, c1: u32) {
    if all(wid == vec3<u32>(0u)) && t == 0u {
        partials[0] = chunks;
    }
    let first = params.slot == 0u;
    for (var k = t; k < TILE; k += WORKGROUP) {
        let c = c0 + k;
        var v = 0.0;
        if !first && c < c1 {
            v = bitcast<f32>(partials[partial_at(wid.z, c)]);
        }
        acc[k] = v;
    }
    workgroupBarrier();
}

// Chunk z's entries of x in this row block: of the sparse x's stored entries, or of the whole
// matrix's rows (params.stride) those of this block, as offsets from its first row. An `if`, not
// a select: the branch DENSE_X rules out is removed before the driver sees the kernel, and with
// it every use of the x binding the pipeline does not have.
fn chunk_entries(z: u32, chunks: u32) -> vec2<u32> {
    if DENSE_X {
        let range = chunk_range(params.stride, z, chunks);
        let r0 = params.row_offset;
        let end = r0 + params.rows;
        return vec2<u32>(clamp(range.x, r0, end) - r0, clamp(range.y, r0, end) - r0);
    }
    return chunk_range(sx.nnz, z, chunks);
}

// Entry n of x (as chunk_entries counts it): the row of A it selects, and its value.
struct XEntry {
    row: u32,
    value: f32,
}

fn x_entry(n: u32) -> XEntry {
    if DENSE_X {
        let i = params.row_offset + n;
        return XEntry(i, load_x(i));
    }
    return XEntry(sx_index[n], sx_value[n]);
}

// Whether entry e selects a row of this block, its value not ±0. ±0 is skipped, a NaN is not:
// compared by its bits, since WGSL lets a float comparison assume no NaN (and SPIR-V's ordered
// != calls NaN equal to 0). Uniform over the workgroup (loads of read-only memory at a uniform
// index), so a barrier under it is reached by every invocation or by none.
fn selects_a_row(e: XEntry) -> bool {
    let r0 = params.row_offset;
    return e.row >= r0 && e.row < r0 + params.rows && (bitcast<u32>(e.value) & 0x7fffffffu) != 0u;
}

// Leaves the tile's sums over the chunk in the partial sums.
fn end_tile(t: u32, z: u32, c0: u32, c1: u32) {
    workgroupBarrier();
    for (var k = t; k < TILE; k += WORKGROUP) {
        let c = c0 + k;
        if c < c1 {
            partials[partial_at(z, c)] = bitcast<u32>(acc[k]);
        }
    }
}
