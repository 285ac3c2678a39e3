// batch_xt.wgsl: the transposition pass of a few-token product (after common.wgsl). See
// shaders/README.md, "Few-token products".
//
// X is a batch of vectors stored one after another ([batch][cols] binary16, bound as x in
// group 1). For one chunk of `count` vectors from `first`, this writes XT: for each column c
// (0 .. xt_cols), the chunk's W values of column c side by side, W/2 binary16 pairs in u32
// words c·W/2 .. (c + 1)·W/2 (vector first + 2j in the low half of word j, first + 2j + 1 in
// the high half). Lanes past `count` and columns past `cols` are zero, so the batch kernels
// load one entry's W values as one u32, vec2<u32> or vec4<u32> (two for W = 16), and a masked
// entry reads a zero column. Values are copied bit for bit: NaN and ±∞ stay as they are.

@group(0) @binding(0) var<uniform> chunk: ChunkParams;
@group(0) @binding(1) var<storage, read_write> xt: array<u32>;

// Lanes per column (2, 4, 8 or 16).
override W: u32 = 16u;
const WORKGROUP: u32 = 64u;

// The binary16 bits of element e of the flat x.
fn x_half(e: u32) -> u32 {
    let word = x[e >> 3u];
    return (word[(e >> 1u) & 3u] >> ((e & 1u) * 16u)) & 0xffffu;
}

// Vector `first + b`'s value at column c, or 0 past the chunk or past x's columns.
fn lane_value(b: u32, c: u32) -> u32 {
    if b >= chunk.count || c >= chunk.cols {
        return 0u;
    }
    return x_half((chunk.first + b) * chunk.cols + c);
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let c = gid.x + gid.y * nwg.x * WORKGROUP;
    if c >= chunk.xt_cols {
        return;
    }
    let pairs = W / 2u;
    for (var j = 0u; j < pairs; j++) {
        xt[c * pairs + j] = lane_value(2u * j, c) | (lane_value(2u * j + 1u, c) << 16u);
    }
}
