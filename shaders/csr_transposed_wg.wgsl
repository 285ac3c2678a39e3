// Transposed CSR product y = Aᵀ·x, x sparse or dense (common.wgsl, csr.wgsl and
// transposed.wgsl are prepended).
// See shaders/README.md, "Transposed products with a sparse x".
//
// x's non-zeros select rows of A; only those rows are read. Each workgroup owns a tile of TILE
// consecutive columns of y and one chunk of x's entries (transposed.wgsl), and keeps
// the tile's sums in workgroup memory: it walks its chunk's entries in order and, for each
// selected row, finds the row's entries inside its tile (CSR columns increase within a row) by
// a search of the whole workgroup (parallel_bounds: about log_WORKGROUP(row length) rounds of
// one probe per invocation, where each invocation's own binary search took 2·log₂(row length)
// dependent loads; measured on an H100 2026-11-28, shaders/README.md) and adds x_i·A[i, c]
// into its tile, its invocations striding over those entries. A row's columns are distinct, so within one row no two invocations add into one
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

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;

// The probes of a round below c0 and below c1 (parallel_bounds), and their counts read back.
var<workgroup> below: array<atomic<u32>, 2>;
var<workgroup> below_counts: vec2<u32>;

// The first entries in [lo0, hi0) of the block's arrays whose columns are at least c0 and at
// least c1 (hi0 if none), found by the workgroup together. Each round cuts each
// interval [lo, hi) into WORKGROUP blocks of s = ⌈(hi − lo) / WORKGROUP⌉ entries; invocation t
// probes the last entry of block t, and the blocks whose last column is below the bound's are
// counted: with k of them, the bound lies in block k, before its last entry or at it (or at hi
// for a partial block), so the interval becomes [lo + k·s, min(lo + k·s + s − 1, hi)), at most
// s − 1 long; the search ends when both are empty. The counts come back through
// workgroupUniformLoad, so the loop is uniform and its barriers are met by every invocation.
// Called in uniform control flow.
fn parallel_bounds(lo0: u32, hi0: u32, c0: u32, c1: u32, t: u32) -> vec2<u32> {
    var lo = vec2<u32>(lo0, lo0);
    var hi = vec2<u32>(hi0, hi0);
    let bound = vec2<u32>(c0, c1);
    loop {
        let len = hi - lo;
        if max(len.x, len.y) == 0u {
            break;
        }
        // At least 1: an empty interval stays empty (no probe counts for it).
        let s = max((len + vec2<u32>(WORKGROUP - 1u)) / WORKGROUP, vec2<u32>(1u));
        for (var i = 0u; i < 2u; i++) {
            let p = lo[i] + t * s[i] + s[i] - 1u;
            if len[i] > 0u && p < hi[i] && col_idx[p] < bound[i] {
                atomicAdd(&below[i], 1u);
            }
        }
        workgroupBarrier();
        if t == 0u {
            below_counts = vec2<u32>(atomicExchange(&below[0], 0u), atomicExchange(&below[1], 0u));
        }
        let k = workgroupUniformLoad(&below_counts);
        let start = lo + k * s;
        hi = min(start + s - vec2<u32>(1u), hi);
        lo = min(start, hi);
    }
    return lo;
}

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(local_invocation_index) t: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let c0 = tile_start(wid, nwg);
    if c0 >= params.cols {
        return;
    }
    let c1 = min(c0 + TILE, params.cols);
    begin_tile(t, wid, nwg.z, c0, c1);
    let entries = chunk_entries(wid.z, nwg.z);
    for (var n = entries.x; n < entries.y; n++) {
        let e = x_entry(n);
        if selects_a_row(e) {
            let r = e.row - params.row_offset;
            let bounds = parallel_bounds(row_ptr[r], row_ptr[r + 1u], c0, c1, t);
            let j0 = bounds.x;
            let j1 = bounds.y;
            for (var j = j0 + t; j < j1; j += WORKGROUP) {
                let bits = csr_value_bits(j);
                // A stored zero adds nothing, even where x is NaN or ±∞.
                if (bits & 0x7fffu) != 0u {
                    acc[col_idx[j] - c0] += unpack2x16float(bits).x * e.value;
                }
            }
            workgroupBarrier();
        }
    }
    end_tile(t, wid.z, c0, c1);
}
