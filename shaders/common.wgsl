// common.wgsl: prepended to every kernel by the wgpu backend and by tests/wgpu_shaders.rs (then
// the family's own prelude, e.g. macko.wgsl for macko_sg.wgsl, then the kernel). It holds what
// every product shares: the vector bindings, the output precision switch and the f16 <-> f32
// conversions. See shaders/README.md.
//
// Binding groups of every product kernel:
//   group 0: the matrix block (uniform MatrixParams at binding 0, the arrays after it),
//   group 1: x, binary16 packed in pairs, bound as vec4<u32> (8 elements per word),
//   group 2: y, one u32 word per f32 row or per two f16 rows.

// Whether y holds binary16 (two rows share one u32) or binary32. A pipeline constant, so one
// source gives both pipelines.
override Y_F16: bool = false;

// What every matrix kernel learns about its row block. Kernels read the fields they need.
struct MatrixParams {
    // Rows of this block.
    rows: u32,
    // Columns of the matrix (the length of x).
    cols: u32,
    // Row of y where this block's row 0 goes (blocks of a split matrix share one y).
    row_offset: u32,
    // Index of this block in its matrix (the transposed kernels start their sums at zero in
    // block 0, transposed.wgsl; the products deal rows by stride and do not read it).
    slot: u32,
    // Dense only: vec4<u32> words per stored row (cols rounded up to 8 elements). CSR and
    // MACKO: the rows of the whole matrix (the transposed kernels cut a dense x's rows into
    // chunks by it, transposed.wgsl).
    stride: u32,
    // MACKO subgroup kernel with x staged in column tiles only (X_TILED in macko.wgsl; 0
    // otherwise): the tiles, the columns of each (a multiple of 64; the last may hold fewer),
    // and the word of the partial sums array where this block's partial row sums start.
    tiles: u32,
    tile_cols: u32,
    partials: u32,
    // MACKO subgroup kernel with ALIGNED_ROWS (macko_sg.wgsl): the group of zeros after the
    // block's last row, read in place of a step's groups past a row's end.
    zero_group: u32,
    // Quantized matrices only (quant.wgsl, scale_index; 0 otherwise): the units per scale
    // (G / 8 MACKO groups or G dense values), its log2 where it is a power of two, and the
    // phase of the block's first unit. With zero_group, they keep `masks` at a multiple of 16
    // bytes.
    scale_unit: u32,
    scale_shift: u32,
    scale_phase: u32,
    // MACKO subgroup kernel with MASK_TABLE (macko_sg.wgsl): entry 9 lo + hi (lo, hi in 0..=8)
    // keeps, of a group's 8 binary16 values (entry 2k in the low half of component k, 2k + 1 in
    // the high half), those of entries lo <= j < hi. The same table in every block.
    masks: array<vec4<u32>, 96>,
}

// Few-token products (shaders/README.md, "Few-token products"): what the transposition pass
// (batch_xt.wgsl) and the batch kernels (batch.wgsl) learn about one chunk of vectors of a
// batch. One uniform per chunk, made once per matrix and chunk and bound as it is.
struct ChunkParams {
    // The chunk's first vector of the batch, and how many it multiplies (1..=W).
    first: u32,
    count: u32,
    // Rows of the whole matrix (the length of each vector of y) and its columns (of x).
    rows: u32,
    cols: u32,
    // Columns of the transposed chunk XT: cols rounded up to 8, plus 8 zero columns.
    xt_cols: u32,
    // A column of XT that is zero in every lane (at or past cols): masked entries read it.
    zero_col: u32,
    unused0: u32,
    unused1: u32,
}

// x as stored: binary16 pairs, padded with zeros to whole 16-byte words (dense kernels read
// it as vec4<u32>, 8 elements per load).
@group(1) @binding(0) var<storage, read> x: array<vec4<u32>>;
// The same x widened to f32 (kept in step by every writer): sparse kernels gather single
// elements, and a 4-byte load of an f32 is cheaper than picking and widening half a u32.
@group(1) @binding(1) var<storage, read> x_wide: array<f32>;

// y: written with atomics so two rows sharing a u32 (f16 output) never lose each other's half,
// whichever invocations (or row blocks) produce them.
@group(2) @binding(0) var<storage, read_write> y: array<atomic<u32>>;
// For f16 y only: the f32 copy that a later product reading this vector as x gathers from.
@group(2) @binding(1) var<storage, read_write> y_wide: array<f32>;

// x[c] as f32 (exact: it is the f16 value widened).
fn load_x(c: u32) -> f32 {
    return x_wide[c];
}

// Round-to-nearest-even f32 -> binary16 bits, with overflow to infinity, NaN kept and
// subnormals exact. Written out with integer operations because pack2x16float leaves rounding
// and out-of-range values to the implementation.
fn f32_to_f16_bits(f: f32) -> u32 {
    let b = bitcast<u32>(f);
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if a > 0x7f800000u {
        return sign | 0x7e00u; // NaN
    }
    if a >= 0x477ff000u {
        return sign | 0x7c00u; // >= 65520 rounds to infinity
    }
    if a >= 0x38800000u {
        // Normal binary16: rebias the exponent (127 - 15 = 112), keep 10 mantissa bits, round
        // half to even through the carry of the discarded 13 bits.
        let m = a - 0x38000000u;
        return sign | ((m + 0xfffu + ((m >> 13u) & 1u)) >> 13u);
    }
    if a <= 0x33000000u {
        return sign; // at most 2^-25: rounds to (signed) zero
    }
    // Subnormal binary16: value / 2^-24, rounded half to even.
    let e = a >> 23u;
    let mant = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - e;
    let q = mant >> shift;
    let rem = mant & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    let up = rem > half || (rem == half && (q & 1u) == 1u);
    return sign | (q + select(0u, 1u, up));
}

// Writes row `row` of y (absolute row index) in the precision the pipeline was built for.
fn store_y(row: u32, v: f32) {
    if Y_F16 {
        let shift = (row & 1u) * 16u;
        let word = row >> 1u;
        // The two halves of a word belong to two rows that may be written by different
        // invocations: clear ours, then set ours; the other half is never touched.
        let bits = f32_to_f16_bits(v);
        atomicAnd(&y[word], ~(0xffffu << shift));
        atomicOr(&y[word], bits << shift);
        y_wide[row] = unpack2x16float(bits).x;
    } else {
        atomicStore(&y[row], bitcast<u32>(v));
    }
}

// Sum of 8 products of f16 pairs, in f32.
fn dot8(a: vec4<u32>, b: vec4<u32>) -> f32 {
    return dot(unpack2x16float(a.x), unpack2x16float(b.x))
        + dot(unpack2x16float(a.y), unpack2x16float(b.y))
        + dot(unpack2x16float(a.z), unpack2x16float(b.z))
        + dot(unpack2x16float(a.w), unpack2x16float(b.w));
}
