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

@group(0) @binding(0) var<uniform> params: MatrixParams;
@group(0) @binding(1) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read> col_idx: array<u32>;

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
            let j0 = lower_bound(row_ptr[r], row_ptr[r + 1u], c0);
            let j1 = lower_bound(j0, row_ptr[r + 1u], c1);
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
