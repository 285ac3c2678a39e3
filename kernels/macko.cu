// MACKO-16-4 sparse matrix-vector product y = A·x with binary16 values: the entry points of the
// row kernel (macko.cuh) for f16 values, its combine of split rows, and the flat kernel.
#ifndef MACKO_ROW_CUH
#include "macko.cuh"
#endif

// The row kernel's entries with binary16 values (no scales): `_big` entries run 1024-thread
// blocks (one per SM: for x too wide for two 512-thread blocks' shared memory), the others
// 512-thread blocks; the lean ones 512-thread blocks capped at 40 registers (macko.cuh).
#define MACKO_F16_NO_SCALES const MackoScales sc = {nullptr, 0u, 0u, 0u, false};
#define MACKO_SPMV_ENTRY(NAME, OUT, XM, BLOCK, MINB)                                           \
    extern "C" __global__ void __launch_bounds__(BLOCK, MINB)                                   \
        NAME(MACKO_SPMV_PARAMS(MackoF16, OUT)) {                                                \
        MACKO_F16_NO_SCALES                                                                     \
        MACKO_SPMV_BODY(MackoF16, OUT, XM)                                                      \
    }
#define MACKO_LEAN_ENTRY(NAME, OUT, XM)                                                         \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK, MACKO_LEAN_MINB)                  \
        NAME(MACKO_SPMV_PARAMS(MackoF16, OUT)) {                                                \
        MACKO_F16_NO_SCALES                                                                     \
        MACKO_LEAN_BODY(MackoF16, OUT, XM)                                                      \
    }

MACKO_SPMV_ENTRY(macko_spmv_xs_f16, unsigned short, MACKO_XP, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xs_f32, float, MACKO_XP, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xg_f16, unsigned short, MACKO_XG, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xg_f32, float, MACKO_XG, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xu_f16, unsigned short, MACKO_XU, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xu_f32, float, MACKO_XU, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xs_f16_big, unsigned short, MACKO_XP, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xs_f32_big, float, MACKO_XP, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xu_f16_big, unsigned short, MACKO_XU, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xu_f32_big, float, MACKO_XU, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xh_f16, unsigned short, MACKO_XH, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xh_f32, float, MACKO_XH, MACKO_BLOCK, MACKO_MINB)

MACKO_LEAN_ENTRY(macko_lean_f16, unsigned short, MACKO_XU)
MACKO_LEAN_ENTRY(macko_lean_f32, float, MACKO_XU)
MACKO_LEAN_ENTRY(macko_lean_xh_f16, unsigned short, MACKO_XH)
MACKO_LEAN_ENTRY(macko_lean_xh_f32, float, MACKO_XH)

// y[r] = the sum of row r's partials (items row_item[r] .. row_item[r + 1]) in item order: the
// second launch of a split matrix's product (see MackoSplit). One thread per row, grid-stride.
#define MACKO_COMBINE_ENTRY(NAME, OUT)                                                          \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK)                                  \
        NAME(const unsigned* __restrict__ row_item, const float* __restrict__ partials,         \
             OUT* __restrict__ y, unsigned rows) {                                              \
        for (unsigned r = blockIdx.x * blockDim.x + threadIdx.x; r < rows;                      \
             r += gridDim.x * blockDim.x) {                                                     \
            const unsigned first = __ldg(row_item + r), last = __ldg(row_item + r + 1u);        \
            float sum = 0.0f;                                                                   \
            for (unsigned j = first; j < last; ++j) sum += __ldg(partials + j);                 \
            macko_store(y, r, sum);                                                             \
        }                                                                                       \
    }

MACKO_COMBINE_ENTRY(macko_combine_f16, unsigned short)
MACKO_COMBINE_ENTRY(macko_combine_f32, float)

// ---------------------------------------------------------------------------------------------
// Flat ranges (`macko_flat_*`): each warp walks one contiguous range of stored entries, whatever
// the rows look like, as one stream of two-chunk batches (the next batch's loads issued before the
// current one is used), so every warp moves the same number of bytes and no warp waits on a row's
// bounds before its loads. The range is cut at upload (src/backend/cuda/flat.rs): at a row's
// start where one lies near the even cut, else on a multiple of 8 entries inside a row. Rows end
// where the warp meets their successor's start in row_ptr: a window of the next 64 row starts is
// kept in two registers per lane, and a chunk that holds row starts ("boundaries") splits its
// entries between rows: entries before the boundary in its lane add to one row, those after to
// the next, with each row's column base rebuilt from the prefix sum at the boundary. Rows wholly
// inside the range go to y; the part of a row cut by the range's start goes to partials[2w] (the
// head), the part cut by its end to partials[2w + 1] (the tail), and macko_combine_rows (a second
// launch, only where some row is cut) adds them up in range order. The host uses this kernel only
// for matrices whose rows all hold at least 9 entries (so a lane's 8 entries meet at most one
// boundary and a chunk of 256 entries at most 29), with x staged in shared memory.

// A range (desc[w], a uint4): its first stored entry, the row holding it, that row's column after
// its last entry before the range (0 when the row starts there), and the row's first entry;
// desc[ranges].x closes the last range.

// Row start i (row_ptr[i]), or "never" past the last row.
__device__ __forceinline__ unsigned macko_row_start(const unsigned* __restrict__ row_ptr,
                                                    unsigned rows, unsigned i) {
    return i <= rows ? __ldg(row_ptr + i) : 0xffffffffu;
}

// The inclusive prefix (gap + 1 summed) of a lane's entries 0..=k, from the words of
// macko_prefix (k warp-uniform but known only at run time).
__device__ __forceinline__ unsigned macko_prefix_at(unsigned pl, unsigned ph, unsigned k) {
    return k < 4u ? __byte_perm(pl, 0u, 0x4440u | k) : (pl >> 24) + __byte_perm(ph, 0u, 0x4440u | (k - 4u));
}

// Adds one lane's 8 entries split at entry kb (8: not split): entries k < kb at slot b0h + byte k
// of the prefix into acch, the others at b0t + byte k into acct.
template <int XM, bool SAFE>
__device__ __forceinline__ void macko_chunk_split(const uint4 v, unsigned pl, unsigned ph,
                                                  unsigned b0h, unsigned b0t, unsigned kb,
                                                  const float* xs, float& acch, float& acct) {
    float a[8];
    macko_unpack2(v.x, a[0], a[1]);
    macko_unpack2(v.y, a[2], a[3]);
    macko_unpack2(v.z, a[4], a[5]);
    macko_unpack2(v.w, a[6], a[7]);
#pragma unroll
    for (unsigned k = 0; k < 8u; ++k) {
        const bool head = k < kb;
        const unsigned slot = (head ? b0h : b0t) + macko_prefix_at(pl, ph, k);
        const float xv = macko_xs_at<XM>(xs, slot);
        const float t = SAFE ? (a[k] != 0.0f ? xv : 0.0f) : xv;
        if (head) {
            acch = fmaf(a[k], t, acch);
        } else {
            acct = fmaf(a[k], t, acct);
        }
    }
}

// The state a warp carries from chunk to chunk of its range (all of it warp-uniform but the
// accumulators and the window).
struct MackoFlatState {
    unsigned row;         // the open row (the one the next entry belongs to)
    unsigned ncol;        // its column after its last entry so far
    unsigned open_start;  // its first entry
    unsigned wbase;       // window: lane l holds row starts wbase + l (wl) and wbase + 32 + l (wh)
    unsigned wl, wh;
    unsigned nextb;       // the next row start (row + 1's first entry): warp-uniform
    float acc0, acc1;     // this lane's part of the open row
};

// Stores a finished row's sum: to y, or to the range's head partial when it is the row the
// range's start cut.
template <typename Out>
__device__ __forceinline__ void macko_flat_store(Out* __restrict__ y, float* __restrict__ partials,
                                                 unsigned w, bool head_cut, unsigned head_row,
                                                 unsigned r, float s) {
    if (head_cut && r == head_row) {
        partials[2u * w] = s;
    } else {
        macko_store(y, r, s);
    }
}

// One chunk of a range: lane `lane` holds group `g` (entries [8g, 8g + 8)) with its values `v`,
// masked range bounds [lo, hi) in the group, prefix words pl/ph, and `excl`/`total` (the chunk's
// exclusive scan of column advances at this lane, and its total). `lim` = min(chunk end, range
// end): row starts up to it end rows in this chunk.
template <typename Out, int XM, bool SAFE>
__device__ __forceinline__ void macko_flat_chunk(
    const unsigned* __restrict__ row_ptr, Out* __restrict__ y, float* __restrict__ partials,
    const float* xs, unsigned rows, unsigned w, bool head_cut, unsigned head_row, unsigned lane,
    unsigned e0, unsigned lim, const uint4 v, unsigned pl, unsigned ph, unsigned lo, unsigned excl,
    unsigned total, MackoFlatState& st) {
    const unsigned lane_base = excl + (MACKO_X_SLACK - 1u) - lo;
    if (st.nextb > lim) {
        // No row ends here: the whole chunk belongs to the open row.
        macko_chunk<MackoF16, XM, SAFE>(v, pl, ph, st.ncol + lane_base, xs, nullptr, 0u, st.acc0,
                                        st.acc1);
        st.ncol += total;
        return;
    }
    // The window of row starts from the open row's successor on: c of them are behind it.
    unsigned c = st.row + 1u - st.wbase;
    if (c >= 32u) {
        st.wbase += 32u;
        st.wl = st.wh;
        st.wh = macko_row_start(row_ptr, rows, st.wbase + 32u + lane);
        c -= 32u;
    }
    const unsigned src = c + lane;
    const unsigned bl = __shfl_sync(MACKO_FULL_MASK, st.wl, src & 31u);
    const unsigned bh = __shfl_sync(MACKO_FULL_MASK, st.wh, src & 31u);
    const unsigned bj = src < 32u ? bl : (src < 64u ? bh : 0xffffffffu);
    // At least one (nextb <= lim): the first nb lanes' row starts lie in this chunk.
    const unsigned nb = __popc(__ballot_sync(MACKO_FULL_MASK, bj <= lim));
    // Rows end here. For each boundary j (row start b_j in (chunk start, lim]): the prefix sum
    // before it (from the lane holding entry b_j - 1) gives the new row's column base; lanes from
    // the one starting at or after b_j belong to it; the lane holding b_j inside its group splits.
    unsigned bhead = st.ncol, btail = 0u, kb = 8u, cnt = 0u, last_s = 0u;
#pragma unroll 1
    for (unsigned j = 0; j < nb; ++j) {
        const unsigned b = __shfl_sync(MACKO_FULL_MASK, bj, j);
        const unsigned pos = b - e0;  // 1 .. 256
        const unsigned ol = (pos - 1u) >> 3, ok = (pos - 1u) & 7u;
        const unsigned mine = excl + macko_prefix_at(pl, ph, ok) - lo;
        const unsigned s = __shfl_sync(MACKO_FULL_MASK, mine, ol);
        last_s = s;
        // Column of an entry of the new row = (prefix at the entry) - s - 1.
        const unsigned base = 0u - s;
        if (lane >= ((pos + 7u) >> 3)) {
            bhead = base;
            cnt = j + 1u;
        }
        if (lane == ol && (pos & 7u) != 0u) {
            kb = pos & 7u;
            btail = base;
        }
    }
    float acch = 0.0f, acct = 0.0f;
    macko_chunk_split<XM, SAFE>(v, pl, ph, bhead + lane_base, btail + lane_base, kb, xs, acch,
                                acct);
    // Each row that ended: the sum of its lanes' parts (the open row's earlier chunks included).
    const bool split_lane = kb < 8u;
    const float open = st.acc0 + st.acc1;
#pragma unroll 1
    for (unsigned j = 0; j < nb; ++j) {
        float part = (cnt == j ? acch : 0.0f) + (split_lane && cnt + 1u == j ? acct : 0.0f);
        if (j == 0u) part += open;
        const float s = macko_warp_sum(part);
        if (lane == 0u) {
            macko_flat_store(y, partials, w, head_cut, head_row, st.row + j, s);
        }
    }
    st.acc0 = (cnt == nb ? acch : 0.0f) + (split_lane && cnt + 1u == nb ? acct : 0.0f);
    st.acc1 = 0.0f;
    st.open_start = __shfl_sync(MACKO_FULL_MASK, bj, nb - 1u);
    st.row += nb;
    st.ncol = total - last_s;
    // The next row start: window entry c + nb (< 64, as c < 32 and nb <= 29).
    const unsigned cn = c + nb;
    const unsigned nl = __shfl_sync(MACKO_FULL_MASK, st.wl, cn & 31u);
    const unsigned nh = __shfl_sync(MACKO_FULL_MASK, st.wh, cn & 31u);
    st.nextb = cn < 32u ? nl : nh;
}

template <typename Out, int XM, bool SAFE>
__device__ __forceinline__ void macko_flat_range(
    const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,
    const unsigned* __restrict__ codes, const float* xs, Out* __restrict__ y,
    float* __restrict__ partials, unsigned rows, unsigned w, const uint4 d, unsigned a_end,
    unsigned lane, unsigned wl, unsigned wh, uint4 (&v)[2], unsigned (&c)[2]) {
    const unsigned a_start = d.x, head_row = d.y;
    const bool head_cut = d.w < a_start;
    MackoFlatState st;
    st.row = head_row;
    st.ncol = d.z;
    st.open_start = d.w;
    st.wbase = head_row + 1u;
    st.wl = wl;
    st.wh = wh;
    st.nextb = __shfl_sync(MACKO_FULL_MASK, wl, 0);
    st.acc0 = 0.0f;
    st.acc1 = 0.0f;
    const unsigned g_end = (a_end + 7u) >> 3;
    // Groups wholly inside the range: [g_in, g_out).
    const unsigned g_in = (a_start + 7u) >> 3, g_out = a_end >> 3;
    for (unsigned gb = a_start >> 3; gb < g_end; gb += 64u) {
        uint4 vn[2];
        unsigned cn[2];
        const bool more = gb + 64u < g_end;
        if (more) macko_load_batch<32u, 2>(values, codes, gb + 64u, g_end, lane, vn, cn);
        const bool interior = gb >= g_in && gb + 64u <= g_out;
        unsigned lo_a = 0u, hi_a = 8u, lo_b = 0u, hi_b = 8u;
        if (!interior) {
            macko_mask(gb + lane, a_start, a_end, v[0], c[0], lo_a, hi_a);
            macko_mask(gb + 32u + lane, a_start, a_end, v[1], c[1], lo_b, hi_b);
        }
        unsigned pl_a, ph_a, pl_b, ph_b;
        macko_prefix(c[0], pl_a, ph_a);
        macko_prefix(c[1], pl_b, ph_b);
        unsigned excl, total;
        macko_scan_pair<32u>(pl_a, ph_a, lo_a, hi_a, pl_b, ph_b, lo_b, hi_b, lane, excl, total);
        const unsigned e0 = gb * 8u;
        macko_flat_chunk<Out, XM, SAFE>(row_ptr, y, partials, xs, rows, w, head_cut, head_row,
                                        lane, e0, min(e0 + 256u, a_end), v[0], pl_a, ph_a, lo_a,
                                        excl & 0xffffu, total & 0xffffu, st);
        if (gb + 32u < g_end) {
            macko_flat_chunk<Out, XM, SAFE>(row_ptr, y, partials, xs, rows, w, head_cut, head_row,
                                            lane, e0 + 256u, min(e0 + 512u, a_end), v[1], pl_b,
                                            ph_b, lo_b, excl >> 16, total >> 16, st);
        }
        if (more) {
            v[0] = vn[0];
            v[1] = vn[1];
            c[0] = cn[0];
            c[1] = cn[1];
        }
    }
    // The open row, if the range's end cuts it: its part goes to the tail partial (or, when the
    // range's start cut it too, to the head partial, the tail partial then being 0).
    if (st.row < rows && st.open_start < a_end) {
        const float s = macko_warp_sum(st.acc0 + st.acc1);
        if (lane == 0u) {
            if (head_cut && st.row == head_row) {
                partials[2u * w] = s;
                partials[2u * w + 1u] = 0.0f;
            } else {
                partials[2u * w + 1u] = s;
            }
        }
    }
}

template <typename Out, int XM>
__device__ __forceinline__ void macko_flat_impl(const unsigned* __restrict__ row_ptr,
                                                const uint4* __restrict__ values,
                                                const unsigned* __restrict__ codes,
                                                const unsigned short* __restrict__ x,
                                                Out* __restrict__ y, unsigned rows, unsigned cols,
                                                const uint4* __restrict__ desc,
                                                float* __restrict__ partials, unsigned ranges) {
    extern __shared__ float macko_xs[];
    const unsigned lane = threadIdx.x & 31u;
    const unsigned w = blockIdx.x * (blockDim.x / 32u) + threadIdx.x / 32u;
    uint4 d = make_uint4(0u, 0u, 0u, 0u);
    unsigned a_end = 0u;
    uint4 v[2];
    unsigned c[2];
    unsigned wl = 0u, wh = 0u;
    if (w < ranges) {
        d = __ldg(desc + w);
        a_end = __ldg(&desc[w + 1u].x);
        // The first batch and the window of row starts are on their way while the block stages x.
        macko_load_batch<32u, 2>(values, codes, d.x >> 3, (a_end + 7u) >> 3, lane, v, c);
        wl = macko_row_start(row_ptr, rows, d.y + 1u + lane);
        wh = macko_row_start(row_ptr, rows, d.y + 33u + lane);
    }
    const bool nonfinite = macko_stage_x_as<XM>(macko_xs, x, cols);
    const bool finite_x = __syncthreads_or(nonfinite ? 1 : 0) == 0;
    if (w >= ranges) return;
    if (finite_x) {
        macko_flat_range<Out, XM, false>(row_ptr, values, codes, macko_xs, y, partials, rows, w, d,
                                         a_end, lane, wl, wh, v, c);
    } else {
        macko_flat_range<Out, XM, true>(row_ptr, values, codes, macko_xs, y, partials, rows, w, d,
                                        a_end, lane, wl, wh, v, c);
    }
}

#define MACKO_FLAT_ENTRY(NAME, OUT, XM)                                                         \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK, MACKO_MINB)                       \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const unsigned short* __restrict__ x,          \
             OUT* __restrict__ y, unsigned rows, unsigned cols, const uint4* __restrict__ desc, \
             float* __restrict__ partials, unsigned ranges) {                                   \
        macko_flat_impl<OUT, XM>(row_ptr, values, codes, x, y, rows, cols, desc, partials,      \
                                 ranges);                                                       \
    }

MACKO_FLAT_ENTRY(macko_flat_xs_f16, unsigned short, MACKO_XP)
MACKO_FLAT_ENTRY(macko_flat_xs_f32, float, MACKO_XP)
MACKO_FLAT_ENTRY(macko_flat_xu_f16, unsigned short, MACKO_XU)
MACKO_FLAT_ENTRY(macko_flat_xu_f32, float, MACKO_XU)
MACKO_FLAT_ENTRY(macko_flat_xh_f16, unsigned short, MACKO_XH)
MACKO_FLAT_ENTRY(macko_flat_xh_f32, float, MACKO_XH)

// The rows that flat ranges cut: y[row] = partials[first] + ... + partials[end - 1], in order
// (entry i of `cut`: (row, first, end, 0)). One thread per cut row, grid-stride.
#define MACKO_COMBINE_ROWS_ENTRY(NAME, OUT)                                                     \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK)                                  \
        NAME(const uint4* __restrict__ cut, const float* __restrict__ partials,                 \
             OUT* __restrict__ y, unsigned count) {                                             \
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count;                     \
             i += gridDim.x * blockDim.x) {                                                     \
            const uint4 e = __ldg(cut + i);                                                     \
            float sum = 0.0f;                                                                   \
            for (unsigned j = e.y; j < e.z; ++j) sum += __ldg(partials + j);                    \
            macko_store(y, e.x, sum);                                                           \
        }                                                                                       \
    }

MACKO_COMBINE_ROWS_ENTRY(macko_combine_rows_f16, unsigned short)
MACKO_COMBINE_ROWS_ENTRY(macko_combine_rows_f32, float)
