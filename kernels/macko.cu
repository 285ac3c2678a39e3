// MACKO-16-4 sparse matrix-vector product y = A·x (see ../shared/design/FORMAT.md and NOTES.md).
//
// One warp per row, rows handed out grid-stride over a persistent grid. A row's entries are
// walked in batches of MACKO_CHUNKS "chunks"; in a chunk, lane l owns the 8 entries of one
// aligned group: their values as one 16-byte load and their 8 gap codes as one 32-bit load, at
// the same group index. A row may begin and end inside a group: the entries of the neighbouring
// rows are masked (codes and values zeroed). The column of each entry is the running column of
// the row (shared by the warp, broadcast with __shfl_sync) plus an exclusive prefix sum, across
// lanes, of each lane's column advance (gaps + 1 per entry), taken with 5 __shfl_up_sync steps;
// two chunks are scanned at once, packed as two 16-bit halves of one word. Inside a lane, the
// byte-wise prefix sums of the 8 gaps come from one multiplication. Entries whose value is zero
// (padding) contribute nothing even where x is NaN or ±∞: x is *selected* to 0 for them, never
// multiplied by 0. Accumulation in f32; y is f32 or rounded once to f16.
//
// Two ways to read x: staged once per block in shared memory as f32 (MACKO_X_SMEM = 1, the fast
// path, as long as x fits), or gathered from global memory through the read-only cache.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

// Chunks per batch: loads of this many 16-byte value words and 4-byte code words are in flight
// per lane before the first is used. Even: chunks are scanned in pairs.
#ifndef MACKO_CHUNKS
#define MACKO_CHUNKS 4
#endif
// Threads per block the host launches; the register cap follows from it (two blocks per SM).
#define MACKO_BLOCK 512

// Masks the entries of group `w` that lie outside the row's [start, end): their codes and values
// become 0. Returns in lo/hi the range [lo, hi) of the group's 8 entries that belong to the row.
// Only a row's first and last groups (and groups past the row's end, already zero) are partial,
// so the masking runs on few lanes and the branch is usually skipped by the whole warp.
__device__ __forceinline__ void macko_mask(unsigned w, unsigned start, unsigned end, uint4& v,
                                           unsigned& c, unsigned& lo, unsigned& hi) {
    const unsigned first = w * 8u;
    lo = start > first ? min(start - first, 8u) : 0u;
    hi = end > first ? min(end - first, 8u) : 0u;
    if (lo != 0u || hi != 8u) {
        // Nibble k of m is 0xf when entry k is in the row (hi >= lo always holds here).
        const unsigned m = (unsigned)((1ull << (4u * hi)) - (1ull << (4u * lo)));
        c &= m;
        // Byte j of ee (oo) is 0xff when entry 2j (2j + 1) is in the row.
        const unsigned ee = (m & 0x0f0f0f0fu) * 0x11u;
        const unsigned oo = ((m >> 4) & 0x0f0f0f0fu) * 0x11u;
        v.x &= __byte_perm(ee, oo, 0x4400);
        v.y &= __byte_perm(ee, oo, 0x5511);
        v.z &= __byte_perm(ee, oo, 0x6622);
        v.w &= __byte_perm(ee, oo, 0x7733);
    }
}

// Byte k of pl (k < 4) and of ph (entries 4 + k) is the inclusive prefix sum of (gap + 1) over
// the 4 entries of its half: each byte sum is at most 4 * 16 = 64, so the multiplication by
// 0x01010101 (which adds every byte into all the bytes above it) never carries across bytes.
__device__ __forceinline__ void macko_prefix(unsigned c, unsigned& pl, unsigned& ph) {
    const unsigned even = c & 0x0f0f0f0fu;         // gaps 0, 2, 4, 6 in bytes 0..3
    const unsigned odd = (c >> 4) & 0x0f0f0f0fu;   // gaps 1, 3, 5, 7
    pl = (__byte_perm(even, odd, 0x5140) + 0x01010101u) * 0x01010101u;  // gaps 0..3
    ph = (__byte_perm(even, odd, 0x7362) + 0x01010101u) * 0x01010101u;  // gaps 4..7
}

// x at staged slot `slot` (column slot - MACKO_X_SLACK).
template <bool XS>
__device__ __forceinline__ float macko_x_at(const float* xs, const unsigned short* __restrict__ x,
                                            unsigned slot, unsigned cols_m1) {
    if (XS) return xs[macko_x_slot(slot)];
    // Masked entries may point up to 8 columns before 0 (wrapping to a huge unsigned value) or
    // up to 15 after cols - 1: one min() keeps the gather inside x; their value is 0 anyway.
    return macko_h2f(__ldg(x + min(slot - MACKO_X_SLACK, cols_m1)));
}

// acc += a * x, except that a zero-valued entry adds nothing whatever x is.
__device__ __forceinline__ float macko_term(float acc, float a, float xv) {
    return fmaf(a, a != 0.0f ? xv : 0.0f, acc);
}

// Adds one lane's 8 entries. `b0` is the slot of the row's previous column minus `lo` (so that
// slot = b0 + byte k of the prefix), see macko_spmv_impl.
template <bool XS>
__device__ __forceinline__ void macko_chunk(const uint4 v, unsigned pl, unsigned ph, unsigned b0,
                                            const float* xs, const unsigned short* __restrict__ x,
                                            unsigned cols_m1, float& acc0, float& acc1) {
    const unsigned b1 = b0 + (pl >> 24);
    float a0, a1, a2, a3, a4, a5, a6, a7;
    macko_unpack2(v.x, a0, a1);
    macko_unpack2(v.y, a2, a3);
    macko_unpack2(v.z, a4, a5);
    macko_unpack2(v.w, a6, a7);
    // Byte k of a prefix word, zero-extended, in one PRMT.
    acc0 = macko_term(acc0, a0, macko_x_at<XS>(xs, x, b0 + __byte_perm(pl, 0u, 0x4440), cols_m1));
    acc1 = macko_term(acc1, a1, macko_x_at<XS>(xs, x, b0 + __byte_perm(pl, 0u, 0x4441), cols_m1));
    acc0 = macko_term(acc0, a2, macko_x_at<XS>(xs, x, b0 + __byte_perm(pl, 0u, 0x4442), cols_m1));
    acc1 = macko_term(acc1, a3, macko_x_at<XS>(xs, x, b1, cols_m1));
    acc0 = macko_term(acc0, a4, macko_x_at<XS>(xs, x, b1 + __byte_perm(ph, 0u, 0x4440), cols_m1));
    acc1 = macko_term(acc1, a5, macko_x_at<XS>(xs, x, b1 + __byte_perm(ph, 0u, 0x4441), cols_m1));
    acc0 = macko_term(acc0, a6, macko_x_at<XS>(xs, x, b1 + __byte_perm(ph, 0u, 0x4442), cols_m1));
    acc1 = macko_term(acc1, a7, macko_x_at<XS>(xs, x, b1 + (ph >> 24), cols_m1));
}

// One row: entries [start, end), groups start/8 .. ceil(end/8). Returns this lane's partial sum.
template <bool XS>
__device__ __forceinline__ float macko_row(const uint4* __restrict__ values,
                                           const unsigned* __restrict__ codes, const float* xs,
                                           const unsigned short* __restrict__ x, unsigned cols_m1,
                                           unsigned start, unsigned end, unsigned lane) {
    float acc0 = 0.0f, acc1 = 0.0f;
    const unsigned w_end = (end + 7u) >> 3;
    unsigned next = 0u;  // the column after the row's previous entry (warp-uniform)
    for (unsigned wb = start >> 3; wb < w_end; wb += 32u * MACKO_CHUNKS) {
        // Issue every load of the batch before the first use.
        uint4 v[MACKO_CHUNKS];
        unsigned c[MACKO_CHUNKS];
#pragma unroll
        for (int u = 0; u < MACKO_CHUNKS; ++u) {
            const unsigned w = wb + 32u * u + lane;
            if (w < w_end) {
                v[u] = macko_load_stream(values + w);
                c[u] = macko_load_stream(codes + w);
            } else {
                v[u] = make_uint4(0u, 0u, 0u, 0u);
                c[u] = 0u;
            }
        }
#pragma unroll
        for (int p = 0; p < MACKO_CHUNKS; p += 2) {
            if (wb + 32u * p >= w_end) break;  // warp-uniform: the row ended in an earlier chunk
            const unsigned wa = wb + 32u * p + lane;
            unsigned lo_a, hi_a, lo_b, hi_b;
            macko_mask(wa, start, end, v[p], c[p], lo_a, hi_a);
            macko_mask(wa + 32u, start, end, v[p + 1], c[p + 1], lo_b, hi_b);
            unsigned pl_a, ph_a, pl_b, ph_b;
            macko_prefix(c[p], pl_a, ph_a);
            macko_prefix(c[p + 1], pl_b, ph_b);
            // Column advance of each lane's group: masked gaps + entries in the row (<= 128).
            const unsigned t_a = (pl_a >> 24) + (ph_a >> 24) - 8u + (hi_a - lo_a);
            const unsigned t_b = (pl_b >> 24) + (ph_b >> 24) - 8u + (hi_b - lo_b);
            // Inclusive scan of both chunks at once: 16-bit halves never carry (32 * 128 < 2^16).
            const unsigned packed = t_a | (t_b << 16);
            unsigned incl = packed;
#pragma unroll
            for (unsigned off = 1u; off < 32u; off <<= 1) {
                const unsigned up = __shfl_up_sync(MACKO_FULL_MASK, incl, off);
                if (lane >= off) incl += up;
            }
            const unsigned total = __shfl_sync(MACKO_FULL_MASK, incl, 31);
            const unsigned excl = incl - packed;
            const unsigned base_a = next + (excl & 0xffffu);
            const unsigned next_a = next + (total & 0xffffu);
            const unsigned base_b = next_a + (excl >> 16);
            next = next_a + (total >> 16);
            // Slot of entry k = base + MACKO_X_SLACK - 1 - lo + byte k of the prefix (>= 0, as
            // lo <= 7 whenever base is 0).
            macko_chunk<XS>(v[p], pl_a, ph_a, base_a + (MACKO_X_SLACK - 1u) - lo_a, xs, x, cols_m1,
                            acc0, acc1);
            macko_chunk<XS>(v[p + 1], pl_b, ph_b, base_b + (MACKO_X_SLACK - 1u) - lo_b, xs, x,
                            cols_m1, acc0, acc1);
        }
    }
    return acc0 + acc1;
}

template <typename Out, bool XS>
__device__ __forceinline__ void macko_spmv_impl(const unsigned* __restrict__ row_ptr,
                                                const uint4* __restrict__ values,
                                                const unsigned* __restrict__ codes,
                                                const unsigned short* __restrict__ x,
                                                Out* __restrict__ y, unsigned rows,
                                                unsigned cols) {
    extern __shared__ float macko_xs[];
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned first_row = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const unsigned row_stride = gridDim.x * warps_per_block;
    // Used only for rows with entries, which exist only when cols >= 1.
    const unsigned cols_m1 = cols - 1u;

    unsigned start = 0u, end = 0u;
    if (first_row < rows) {
        start = __ldg(row_ptr + first_row);
        end = __ldg(row_ptr + first_row + 1u);
    }
    if (XS) {
        // Start the first batch of this warp's first row on its way to L2 while the block stages
        // x, so DRAM is busy during the staging.
        const unsigned w_end = (end + 7u) >> 3;
#pragma unroll
        for (int u = 0; u < MACKO_CHUNKS; ++u) {
            const unsigned w = (start >> 3) + 32u * u + lane;
            if (start < end && w < w_end) {
                macko_prefetch_l2(values + w);
                macko_prefetch_l2(codes + w);
            }
        }
        macko_stage_x(macko_xs, x, cols);
        __syncthreads();
    }
    for (unsigned row = first_row; row < rows; row += row_stride) {
        // Fetch the next row's bounds before working on this one.
        const unsigned next_row = row + row_stride;
        unsigned next_start = 0u, next_end = 0u;
        if (next_row < rows) {
            next_start = __ldg(row_ptr + next_row);
            next_end = __ldg(row_ptr + next_row + 1u);
        }
        float acc = 0.0f;
        if (start < end) {  // warp-uniform; an empty row is +0.0
            acc = macko_row<XS>(values, codes, macko_xs, x, cols_m1, start, end, lane);
        }
        acc = macko_warp_sum(acc);
        if (lane == 0u) macko_store(y, row, acc);
        start = next_start;
        end = next_end;
    }
}

#define MACKO_SPMV_ENTRY(NAME, OUT, XS)                                                          \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK, 2)                                \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const unsigned short* __restrict__ x,          \
             OUT* __restrict__ y, unsigned rows, unsigned cols) {                               \
        macko_spmv_impl<OUT, XS>(row_ptr, values, codes, x, y, rows, cols);                     \
    }

MACKO_SPMV_ENTRY(macko_spmv_xs_f16, unsigned short, true)
MACKO_SPMV_ENTRY(macko_spmv_xs_f32, float, true)
MACKO_SPMV_ENTRY(macko_spmv_xg_f16, unsigned short, false)
MACKO_SPMV_ENTRY(macko_spmv_xg_f32, float, false)
