// batch.wgsl: the prelude of every few-token kernel (after common.wgsl and the family's
// prelude, before the kernel): the chunk's bindings (group 3), the W accumulators of a row and
// the stores of its W sums. See shaders/README.md, "Few-token products".

// The chunk (ChunkParams in common.wgsl) and its transposed x, XT (batch_xt.wgsl), bound three
// times, so that one entry's W values are one load whatever W: as u32 (W = 2), vec2<u32>
// (W = 4) and vec4<u32> (W = 8; two for W = 16).
@group(3) @binding(0) var<uniform> chunk: ChunkParams;
@group(3) @binding(1) var<storage, read> xt1: array<u32>;
@group(3) @binding(2) var<storage, read> xt2: array<vec2<u32>>;
@group(3) @binding(3) var<storage, read> xt4: array<vec4<u32>>;

// Vectors per pass (2, 4, 8 or 16: the chunk's count rounded up to a power of two). The
// branches on it are removed before the driver sees the kernel (specialize.rs).
override W: u32 = 16u;

// The row's W sums: vector 4q + i in component i of acc_q. Those past W stay zero and unused.
var<private> acc0: vec4<f32>;
var<private> acc1: vec4<f32>;
var<private> acc2: vec4<f32>;
var<private> acc3: vec4<f32>;

fn clear_acc() {
    acc0 = vec4<f32>(0.0);
    acc1 = vec4<f32>(0.0);
    acc2 = vec4<f32>(0.0);
    acc3 = vec4<f32>(0.0);
}

fn halves(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// acc += a · XT[c]: the entry of value a at column c, for every vector of the chunk. The
// kernels pass a = 0 and c = chunk.zero_col for an entry that must not contribute (padding,
// masked, past the row), so NaN or ±∞ in x never meets it: no per-lane select.
fn add_entry(a: f32, c: u32) {
    if W == 2u {
        acc0 = vec4<f32>(fma(vec2<f32>(a), unpack2x16float(xt1[c]), acc0.xy), acc0.zw);
    } else if W == 4u {
        acc0 = fma(vec4<f32>(a), halves(xt2[c]), acc0);
    } else if W == 8u {
        let w = xt4[c];
        acc0 = fma(vec4<f32>(a), halves(w.xy), acc0);
        acc1 = fma(vec4<f32>(a), halves(w.zw), acc1);
    } else {
        let w = xt4[2u * c];
        let v = xt4[2u * c + 1u];
        acc0 = fma(vec4<f32>(a), halves(w.xy), acc0);
        acc1 = fma(vec4<f32>(a), halves(w.zw), acc1);
        acc2 = fma(vec4<f32>(a), halves(v.xy), acc2);
        acc3 = fma(vec4<f32>(a), halves(v.zw), acc3);
    }
}

// The sum of vector k of the chunk (k < W).
fn acc_at(k: u32) -> f32 {
    let q = k >> 2u;
    var v = acc0;
    if q == 1u {
        v = acc1;
    } else if q == 2u {
        v = acc2;
    } else if q == 3u {
        v = acc3;
    }
    return v[k & 3u];
}

// Stores the row's sums, vector b of the chunk into y[(first + b) · rows + row] (`row` counts
// from the matrix's first row), by invocations `t`, t + n, ... (t < n).
fn store_chunk(row: u32, t: u32, n: u32) {
    for (var b = t; b < chunk.count; b += n) {
        store_y((chunk.first + b) * chunk.rows + row, acc_at(b));
    }
}
