// Transposed CSR product y = Aᵀ·x, x sparse or dense (common.wgsl, csr.wgsl and
// transposed.wgsl are prepended).
// See shaders/README.md, "Transposed products with a sparse x".
//
// x's non-zeros select rows of A; only those rows are read. Each workgroup owns a tile of TILE
// consecutive columns of y and one chunk of x's entries (transposed.wgsl), and keeps
// the tile's sums in workgroup memory: it walks its chunk's entries in order and, for each
// selected row, finds the row's entries inside its tile by binary search (CSR columns increase
// within a row) and adds x_i·A[i, c] into its tile, its invocations striding over those
// entries. A row's columns are distinct, so within one row no two invocations add into one
// slot, and a barrier after each row orders the rows: the tile's sums over the chunk are in x's
// order, with no atomics. They go to the partial sums, which transposed_combine_wg.wgsl adds
// in chunk order into y.
//
// x is a sparse vector (group 1 at bindings 2..4), or with DENSE_X the dense x of common.wgsl
// (its f32 copy), whose rows are walked in order, its ±0 elements skipped.
//
// Row blocks: a split matrix is one dispatch per block, in order, over every tile and chunk.
// Block 0 starts each chunk's sums at zero; later blocks resume from what the previous block
// left in the partial sums (unrounded f32), so the sums do not depend on where blocks split.

override DENSE_X: bool = false;

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;

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

const WORKGROUP: u32 = 64u;
// Columns of y one workgroup owns (even, so an f16 output word is never shared).
const TILE: u32 = 256u;

var<workgroup> acc: array<f32, TILE>;

// The first entry in [lo, hi) of the block's arrays whose column is at least c (hi if none).
fn lower_bound(lo0: u32, hi0: u32, c: u32) -> u32 {
    var lo = lo0;
    var hi = hi0;
    loop {
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo) / 2u;
        if col_idx[mid] < c {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo;
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let c0 = (wid.x + wid.y * nwg.x) * TILE;
    if c0 >= params.cols {
        return;
    }
    let c1 = min(c0 + TILE, params.cols);
    let z = wid.z;
    let chunks = nwg.z;
    if all(wid == vec3<u32>(0u)) && t == 0u {
        partials[0] = chunks;
    }
    let first = params.slot == 0u;
    for (var k = t; k < TILE; k += WORKGROUP) {
        let c = c0 + k;
        var v = 0.0;
        if !first && c < c1 {
            v = bitcast<f32>(partials[partial_at(z, c)]);
        }
        acc[k] = v;
    }
    workgroupBarrier();
    let r0 = params.row_offset;
    // The chunk's entries of x: of the sparse x's stored entries, or of the whole matrix's rows
    // (params.stride) those in this block. An `if`, not a select: the branch DENSE_X rules out
    // is removed before the driver sees the kernel, and with it every use of the x binding the
    // pipeline does not have.
    var lo: u32;
    var hi: u32;
    if DENSE_X {
        let range = chunk_range(params.stride, z, chunks);
        let end = r0 + params.rows;
        lo = clamp(range.x, r0, end) - r0;
        hi = clamp(range.y, r0, end) - r0;
    } else {
        let range = chunk_range(sx.nnz, z, chunks);
        lo = range.x;
        hi = range.y;
    }
    for (var n = lo; n < hi; n++) {
        var i: u32;
        var xv: f32;
        if DENSE_X {
            i = r0 + n;
            xv = load_x(i);
        } else {
            i = sx_index[n];
            xv = sx_value[n];
        }
        // ±0 is skipped, a NaN is not: compared by its bits, since WGSL lets a float
        // comparison assume no NaN (and SPIR-V's ordered != calls NaN equal to 0). Uniform
        // over the workgroup (loads of read-only memory at a uniform index), so the barrier
        // inside is reached by every invocation or by none.
        let live = (bitcast<u32>(xv) & 0x7fffffffu) != 0u;
        if i >= r0 && i < r0 + params.rows && live {
            let r = i - r0;
            let j0 = lower_bound(row_ptr[r], row_ptr[r + 1u], c0);
            let j1 = lower_bound(j0, row_ptr[r + 1u], c1);
            for (var j = j0 + t; j < j1; j += WORKGROUP) {
                let bits = csr_value_bits(j);
                // A stored zero adds nothing, even where x is NaN or ±∞.
                if (bits & 0x7fffu) != 0u {
                    let k = col_idx[j] - c0;
                    acc[k] += unpack2x16float(bits).x * xv;
                }
            }
            workgroupBarrier();
        }
    }
    workgroupBarrier();
    for (var k = t; k < TILE; k += WORKGROUP) {
        let c = c0 + k;
        if c < c1 {
            partials[partial_at(z, c)] = bitcast<u32>(acc[k]);
        }
    }
}
