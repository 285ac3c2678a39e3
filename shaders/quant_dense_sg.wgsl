// Quantized dense GEMV (int8 or int4 values, binary16 scales) with a subgroup reduction (after
// common.wgsl, quant.wgsl, the word file quant_word_int8.wgsl or quant_word_int4.wgsl, and
// quant_dense.wgsl). See shaders/README.md, "Quantized matrices".
//
// dense_sg.wgsl's shape, as the codes are what a row streams: a workgroup of 256 invocations
// computes ROWS = 4 consecutive rows; invocation t reads the 16-byte words t, t + 256, ... of
// each row (16 int8 or 32 int4 codes per load, every load of the workgroup contiguous) and the
// matching 2 or 4 words of x (binary16, as dense_sg reads them) once for the 4 rows; two words
// per row are in flight per step. Each row keeps 4 running sums (a vec4: one FMA per code where
// scales are per row). Scales, by `mode` (uniform, chosen once per dispatch):
// - ROW (per row): the row's sum times its scale at the end (row_scale);
// - WORD (per group, G and cols multiples of the word's codes): one scale per word;
// - CHUNK (per group, cols a multiple of 8): one scale per 8 codes (G is a multiple of 8);
// - SPLIT (per group, other cols): chunk_scales, a chunk of 8 possibly split between two.
// Sums: subgroupAdd, then one partial per subgroup in workgroup memory (any subgroup size),
// added by invocation 0. IEEE as the binary16 dense kernels: every code is multiplied.

const WORKGROUP: u32 = 256u;
const ROWS: u32 = 4u;
// Chunks of 8 codes per 16-byte word.
const CHUNKS: u32 = WORD_CODES / 8u;

const MODE_ROW: u32 = 0u;
const MODE_WORD: u32 = 1u;
const MODE_CHUNK: u32 = 2u;
const MODE_SPLIT: u32 = 3u;

var<workgroup> partial: array<vec4<f32>, WORKGROUP>;

// Word j of x (8 binary16). With `guard` (a row's last word, whose x words may lie past x's
// end: rows are padded to whole 16-byte words of codes, x only to 8 elements), words past the
// end read as zeros, so the padding adds 0 · 0.
fn x_word(j: u32, guard: bool) -> vec4<u32> {
    if guard {
        let n = row_chunks();
        return select(vec4<u32>(0u), x[min(j, n - 1u)], j < n);
    }
    return x[j];
}

// Chunk j of block row `row` (products `lo`, `hi`, from word_prods) under its scale, added to
// `s`. With `last` (the row's last word), chunks past the row's values are skipped: their
// scale index lies past the row (a later row's scale, or none of the block's).
fn chunk_add(
    s: vec4<f32>,
    lo: vec4<f32>,
    hi: vec4<f32>,
    row: u32,
    j: u32,
    mode: u32,
    last: bool,
) -> vec4<f32> {
    if last && j >= row_chunks() {
        return s;
    }
    if mode == MODE_CHUNK {
        return s + scale_at(scale_index(row * params.cols + 8u * j)) * (lo + hi);
    }
    let cs = chunk_scales(row, j);
    let split = vec4<u32>(bitcast<u32>(cs.z));
    let m0 = vec4<u32>(0u, 1u, 2u, 3u) < split;
    let m1 = vec4<u32>(4u, 5u, 6u, 7u) < split;
    let z = vec4<f32>(0.0);
    let first = select(z, lo, m0) + select(z, hi, m1);
    let second = select(lo, z, m0) + select(hi, z, m1);
    return s + cs.x * first + cs.y * second;
}

// Word k (codes `w`) of block row `row` times the x operands `xo`, added to the row's running
// sums `a` as `mode` says.
fn word_term(
    w: vec4<u32>,
    row: u32,
    k: u32,
    xo: array<vec4<f32>, 8>,
    mode: u32,
    last: bool,
    a: vec4<f32>,
) -> vec4<f32> {
    let p = word_prods(w, xo);
    var s = a;
    if mode == MODE_ROW {
        s += p[0];
        s += p[1];
        s += p[2];
        s += p[3];
        if CHUNKS == 4u {
            s += p[4];
            s += p[5];
            s += p[6];
            s += p[7];
        }
        return s;
    }
    if mode == MODE_WORD {
        var t = p[0] + p[1];
        t += p[2];
        t += p[3];
        if CHUNKS == 4u {
            t += p[4];
            t += p[5];
            t += p[6];
            t += p[7];
        }
        return s + scale_at(scale_index(row * params.cols + WORD_CODES * k)) * t;
    }
    let j = CHUNKS * k;
    s = chunk_add(s, p[0], p[1], row, j, mode, last);
    s = chunk_add(s, p[2], p[3], row, j + 1u, mode, last);
    if CHUNKS == 4u {
        s = chunk_add(s, p[4], p[5], row, j + 2u, mode, last);
        s = chunk_add(s, p[6], p[7], row, j + 3u, mode, last);
    }
    return s;
}

// Word k of the 4 rows `r` (block rows; `words` per row) added to their sums `acc`.
fn step(
    k: u32,
    r: vec4<u32>,
    words: u32,
    mode: u32,
    last: bool,
    acc: ptr<function, array<vec4<f32>, 4>>,
) {
    let xo = x_ops(k, last);
    let b = r * words + vec4<u32>(k);
    let w0 = qw[b.x];
    let w1 = qw[b.y];
    let w2 = qw[b.z];
    let w3 = qw[b.w];
    (*acc)[0] = word_term(w0, r.x, k, xo, mode, last, (*acc)[0]);
    (*acc)[1] = word_term(w1, r.y, k, xo, mode, last, (*acc)[1]);
    (*acc)[2] = word_term(w2, r.z, k, xo, mode, last, (*acc)[2]);
    (*acc)[3] = word_term(w3, r.w, k, xo, mode, last, (*acc)[3]);
}

// This invocation's running sums of the 4 rows `r` over their words t, t + 256, ...: two
// steps per iteration; the row's last word (the only one whose x words may lie past x's end)
// alone guarded.
fn rows_sums(t: u32, r: vec4<u32>, mode: u32) -> array<vec4<f32>, 4> {
    var acc = array<vec4<f32>, 4>();
    let words = params.stride / CHUNKS;
    let last = max(words, 1u) - 1u;
    var k = t;
    loop {
        if k + WORKGROUP >= last {
            break;
        }
        step(k, r, words, mode, false, &acc);
        step(k + WORKGROUP, r, words, mode, false, &acc);
        k += 2u * WORKGROUP;
    }
    if k < last {
        step(k, r, words, mode, false, &acc);
        k += WORKGROUP;
    }
    if k == last && k < words {
        step(k, r, words, mode, true, &acc);
    }
    return acc;
}

fn hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    if r0 >= params.rows {
        return;
    }
    let last = params.rows - 1u;
    // Rows past the block's end re-read its last row (in bounds) and are not stored.
    let r = vec4<u32>(r0, min(r0 + 1u, last), min(r0 + 2u, last), min(r0 + 3u, last));
    // Each mode's loop is a call with a constant mode, so the compiler folds its branches.
    var acc: array<vec4<f32>, 4>;
    if !PER_GROUP {
        acc = rows_sums(t, r, MODE_ROW);
    } else if params.scale_unit % WORD_CODES == 0u && params.cols % WORD_CODES == 0u {
        acc = rows_sums(t, r, MODE_WORD);
    } else if params.cols % 8u == 0u {
        acc = rows_sums(t, r, MODE_CHUNK);
    } else {
        acc = rows_sums(t, r, MODE_SPLIT);
    }
    let s = subgroupAdd(vec4<f32>(hsum(acc[0]), hsum(acc[1]), hsum(acc[2]), hsum(acc[3])));
    if subgroupExclusiveAdd(1u) == 0u {
        partial[sg] = s;
    }
    workgroupBarrier();
    if t == 0u {
        var total = partial[0];
        for (var i = 1u; i < nsg; i++) {
            total += partial[i];
        }
        for (var i = 0u; i < ROWS; i++) {
            if r0 + i < params.rows {
                store_y(params.row_offset + r0 + i, row_scale(r[i], total[i]));
            }
        }
    }
}
