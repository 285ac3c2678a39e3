// The partial sums of the transposed products (csr_transposed_wg.wgsl, macko_transposed_wg.wgsl,
// and transposed_combine_wg.wgsl, which adds them into y). See shaders/README.md, "Transposed
// products with a sparse x".
//
// x's entries (a sparse x's stored entries, or a dense x's rows) are dealt in CHUNKS of
// consecutive entries, one chunk per workgroup row of the grid's z dimension, so that each
// workgroup walks only its chunk's rows, not all of them: the work is tiles × chunks
// workgroups wide instead of tiles. A workgroup leaves its tile's sums over its chunk in
// `partials`; the combine pass adds each column's chunks in chunk order. The sums are thus in a
// fixed order (x's order within a chunk, then the chunks in order), the same on every run and
// device whatever the row blocks, since the chunks are cut from the whole x.
//
// Layout of `partials` (u32 words): word 0 holds the number of chunks (the grid's z, written by
// workgroup (0, 0, 0) for the combine pass), then from word PARTIALS_AT one row of `cols` f32
// sums (as bits) per chunk.
@group(3) @binding(0) var<storage, read_write> partials: array<u32>;

const PARTIALS_AT: u32 = 4u;

// Chunk z of `chunks` over `count` entries: [lo, hi), each ceil(count / chunks) entries long
// but the last ones, which may be shorter or empty.
fn chunk_range(count: u32, z: u32, chunks: u32) -> vec2<u32> {
    let size = count / chunks + select(0u, 1u, count % chunks != 0u);
    let lo = min(z * size, count);
    return vec2<u32>(lo, lo + min(size, count - lo));
}

// Word of chunk z's sum for column c.
fn partial_at(z: u32, c: u32) -> u32 {
    return PARTIALS_AT + z * params.cols + c;
}
