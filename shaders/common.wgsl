// common.wgsl: prepended to every product kernel (macko_*, csr_*, dense_*) by the wgpu backend
// and by tests/wgpu_shaders.rs. It holds what every product shares: the vector bindings, the
// output precision switch, the f16 <-> f32 conversions and the MACKO code decoding. See NOTES.md.
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
    // Index of this block's row counter (subgroup kernels hand out rows through an atomic).
    slot: u32,
    // Dense only: vec4<u32> words per stored row (cols rounded up to 8 elements).
    stride: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

// x: padded with zeros to a whole number of 16-byte words, so dense kernels may read it as
// vec4<u32> and sparse kernels read the u32 holding element c.
@group(1) @binding(0) var<storage, read> x: array<vec4<u32>>;

// y: written with atomics so two rows sharing a u32 (f16 output) never lose each other's half,
// whichever invocations (or row blocks) produce them.
@group(2) @binding(0) var<storage, read_write> y: array<atomic<u32>>;

// x[c] widened to f32 (exact).
fn load_x(c: u32) -> f32 {
    let word = x[c >> 3u][(c >> 1u) & 3u];
    return unpack2x16float(word >> ((c & 1u) * 16u)).x;
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
        atomicAnd(&y[word], ~(0xffffu << shift));
        atomicOr(&y[word], f32_to_f16_bits(v) << shift);
    } else {
        atomicStore(&y[row], bitcast<u32>(v));
    }
}

// ---- MACKO group decoding -------------------------------------------------------------------
//
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

fn decode_group(code_word: u32, lo: u32, hi: u32) -> Decoded {
    var d: Decoded;
    d.low = steps4(code_word, byte_range(lo, hi));
    d.high = steps4(code_word >> 16u, byte_range(max(lo, 4u) - 4u, max(hi, 4u) - 4u));
    d.kept = ((1u << hi) - 1u) & ~((1u << lo) - 1u);
    d.total = (d.low >> 24u) + (d.high >> 24u);
    return d;
}

// Contribution of two entries packed in one u32 of values: entry `j` (low half) and j+1 (high
// half), whose inclusive steps are `step_lo` and `step_hi` past column `base`. An entry counts
// only when it belongs to the row and its value is not +-0 (padding); otherwise it contributes
// an exact 0 even if x there is NaN or infinite (select, never a multiplication by zero), and x
// is read at column 0 instead so no address depends on a masked entry.
fn pair_terms(v: u32, j: u32, kept: u32, base: u32, step_lo: u32, step_hi: u32) -> f32 {
    let f = unpack2x16float(v);
    let live_lo = ((kept >> j) & 1u) == 1u && (v & 0x7fffu) != 0u;
    let live_hi = ((kept >> (j + 1u)) & 1u) == 1u && (v & 0x7fff0000u) != 0u;
    let c_lo = select(0u, base + step_lo - 1u, live_lo);
    let c_hi = select(0u, base + step_hi - 1u, live_hi);
    let t_lo = select(0.0, f.x * load_x(c_lo), live_lo);
    let t_hi = select(0.0, f.y * load_x(c_hi), live_hi);
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

// Sum of 8 products of f16 pairs, in f32.
fn dot8(a: vec4<u32>, b: vec4<u32>) -> f32 {
    return dot(unpack2x16float(a.x), unpack2x16float(b.x))
        + dot(unpack2x16float(a.y), unpack2x16float(b.y))
        + dot(unpack2x16float(a.z), unpack2x16float(b.z))
        + dot(unpack2x16float(a.w), unpack2x16float(b.w));
}
