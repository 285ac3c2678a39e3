// Streaming read: the ceiling a memory-bound product is measured against (common.wgsl is
// prepended; x and y are not used). See shaders/README.md.
//
// Reads `words` 16-byte words once, in the pattern the products use: each invocation loads 4
// words per step at a distance of one grid apart (every load instruction of the dispatch
// contiguous), folds them into a u32 sum so no load can be optimised away, and each workgroup
// writes one u32.

struct StreamParams {
    // 16-byte words to read.
    words: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> stream: StreamParams;
@group(0) @binding(1) var<storage, read> data: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> sums: array<u32>;

const WORKGROUP: u32 = 256u;

var<workgroup> total: atomic<u32>;

fn fold(v: vec4<u32>) -> u32 {
    return v.x + v.y + v.z + v.w;
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let grid = nwg.x * WORKGROUP;
    let n = stream.words;
    var acc = 0u;
    var i = wid.x * WORKGROUP + t;
    loop {
        if i + 3u * grid >= n {
            break;
        }
        let a = data[i];
        let b = data[i + grid];
        let c = data[i + 2u * grid];
        let d = data[i + 3u * grid];
        acc += fold(a) + fold(b) + fold(c) + fold(d);
        i += 4u * grid;
    }
    for (; i < n; i += grid) {
        acc += fold(data[i]);
    }
    atomicAdd(&total, acc);
    workgroupBarrier();
    if t == 0u {
        sums[wid.x] = atomicLoad(&total);
    }
}
