// Dense few-token product Y = A·X for a chunk of W vectors (after common.wgsl and
// batch.wgsl), on both kernel paths: it needs no subgroup operation. See shaders/README.md,
// "Few-token products".
//
// A workgroup of 64 invocations computes ROWS = 2 consecutive rows. Invocation t reads the
// 16-byte words t, t + 64, ... of both rows (8 columns each; every load of the workgroup
// contiguous) and, per column, the W values of XT once for both rows. IEEE throughout: every
// entry is multiplied, so 0 · ∞ = NaN as in the reference; the padding of the stored rows
// (zeros) meets the zero columns of XT past x. The 2·W sums are one tree in workgroup memory.

@group(0) @binding(0) var<uniform> params: MatrixParams;
// Rows of `stride` vec4<u32> words each (8 binary16 per word).
@group(0) @binding(2) var<storage, read> values: array<vec4<u32>>;

const WORKGROUP: u32 = 64u;
const ROWS: u32 = 2u;

// The second row's sums (the first row's are batch.wgsl's acc0..acc3).
var<private> bcc0: vec4<f32>;
var<private> bcc1: vec4<f32>;
var<private> bcc2: vec4<f32>;
var<private> bcc3: vec4<f32>;

var<workgroup> partial: array<array<vec4<f32>, 8>, WORKGROUP>;

// Column c's W values of XT, 4 per vector (those past W zero).
struct Lanes {
    v0: vec4<f32>,
    v1: vec4<f32>,
    v2: vec4<f32>,
    v3: vec4<f32>,
}

fn xt_lanes(c: u32) -> Lanes {
    var l = Lanes(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    if W == 2u {
        l.v0 = vec4<f32>(unpack2x16float(xt1[c]), 0.0, 0.0);
    } else if W == 4u {
        l.v0 = halves(xt2[c]);
    } else if W == 8u {
        let w = xt4[c];
        l.v0 = halves(w.xy);
        l.v1 = halves(w.zw);
    } else {
        let w = xt4[2u * c];
        let v = xt4[2u * c + 1u];
        l.v0 = halves(w.xy);
        l.v1 = halves(w.zw);
        l.v2 = halves(v.xy);
        l.v3 = halves(v.zw);
    }
    return l;
}

// Column c times a (first row) and b (second row).
fn column_fma(c: u32, a: f32, b: f32) {
    let l = xt_lanes(c);
    acc0 = fma(vec4<f32>(a), l.v0, acc0);
    bcc0 = fma(vec4<f32>(b), l.v0, bcc0);
    if W > 4u {
        acc1 = fma(vec4<f32>(a), l.v1, acc1);
        bcc1 = fma(vec4<f32>(b), l.v1, bcc1);
    }
    if W > 8u {
        acc2 = fma(vec4<f32>(a), l.v2, acc2);
        bcc2 = fma(vec4<f32>(b), l.v2, bcc2);
        acc3 = fma(vec4<f32>(a), l.v3, acc3);
        bcc3 = fma(vec4<f32>(b), l.v3, bcc3);
    }
}

// Word k (columns 8k .. 8k + 8) of both rows, at word offsets r.x and r.y.
fn word_fma(k: u32, r: vec2<u32>) {
    let a = values[r.x + k];
    let b = values[r.y + k];
    for (var i = 0u; i < 4u; i++) {
        let fa = unpack2x16float(a[i]);
        let fb = unpack2x16float(b[i]);
        column_fma(8u * k + 2u * i, fa.x, fb.x);
        column_fma(8u * k + 2u * i + 1u, fa.y, fb.y);
    }
}

fn reduce_workgroup(t: u32) {
    partial[t] = array<vec4<f32>, 8>(acc0, acc1, acc2, acc3, bcc0, bcc1, bcc2, bcc3);
    workgroupBarrier();
    for (var half = WORKGROUP / 2u; half > 0u; half /= 2u) {
        if t < half {
            for (var q = 0u; q < 8u; q++) {
                partial[t][q] += partial[t + half][q];
            }
        }
        workgroupBarrier();
    }
}

// The sums of row i (0 or 1) of the workgroup into the accumulators batch.wgsl stores.
fn take_row(i: u32) {
    acc0 = partial[0][4u * i];
    acc1 = partial[0][4u * i + 1u];
    acc2 = partial[0][4u * i + 2u];
    acc3 = partial[0][4u * i + 3u];
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    if r0 >= params.rows {
        return;
    }
    let stride = params.stride;
    // A second row past the block's end re-reads its first (in bounds) and is not stored.
    let r = vec2<u32>(r0, select(r0, r0 + 1u, r0 + 1u < params.rows)) * stride;
    clear_acc();
    bcc0 = vec4<f32>(0.0);
    bcc1 = vec4<f32>(0.0);
    bcc2 = vec4<f32>(0.0);
    bcc3 = vec4<f32>(0.0);
    for (var k = t; k < stride; k += WORKGROUP) {
        word_fma(k, r);
    }
    reduce_workgroup(t);
    for (var i = 0u; i < ROWS; i++) {
        if r0 + i < params.rows {
            take_row(i);
            store_chunk(params.row_offset + r0 + i, t, WORKGROUP);
        }
    }
}
