// Few-token products Y = A·X for a chunk of up to 16 vectors (README.md, "Few-token products"):
// MACKO-16-4, CSR and dense rows, one pass over the matrix per chunk, each decoded entry feeding
// W multiply-adds (W = 2, 4, 8 or 16: the chunk's vector count rounded up to a power of two).
//
// X is first transposed (batch_transpose) into XT, W binary16 lanes per column slot: slot s holds
// column s - MACKO_X_SLACK of vectors first .. first + W - 1 (lanes past the chunk's count, and
// the slack slots in front of column 0 and after the last column, are zero). An entry's W x
// values are then one 4-, 8-, 16- or 2×16-byte load, from shared memory where the block staged
// XT (XS: a plain copy of XT's 16-byte words, checking for ±∞/NaN on the way), else from global
// memory through the read-only cache. The slot layout is the batch-1 kernels' plain layout, so
// MACKO decoding (macko_mask, macko_prefix: common.cuh) computes the same slots, masked entries
// included, and needs no clamp.
//
// One warp per row, rows grid-stride over a persistent grid (warps numbered across blocks as in
// macko.cu). MACKO: each lane owns one aligned group of 8 entries per chunk (one 16-byte value
// load, one 32-bit code load), two chunks scanned at once. Each lane keeps W f32 accumulators;
// at the row's end a butterfly (batch_reduce) folds them over the warp in W - 1 + log2(32 / W)
// shuffles, leaving vector b's sum in lanes b·32/W .. (b + 1)·32/W - 1.
//
// Padding entries (value ±0) never contribute, even where X holds NaN or ±∞ (MACKO and CSR):
// their x words are ANDed with 0 (SAFE), never multiplied by 0. Where the staged XT is finite
// the AND is skipped (0·x = ±0 adds nothing). Dense rows are IEEE, as every GEMM: 0·∞ = NaN.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define BATCH_BLOCK 512
// Blocks per SM asked of the compiler: 2 (64 registers) up to W = 8, 1 (128) for W = 16, whose
// 16 accumulators and 8 words of x per entry would spill under 64.
#define BATCH_MINB(W) ((W) >= 16 ? 1 : 2)

// XT's W / 2 words of slot `slot` into w: from shared memory (XS) or global memory.
template <int W, bool XS>
__device__ __forceinline__ void batch_load_x(const unsigned* xt, unsigned slot,
                                             unsigned (&w)[W / 2]) {
    const unsigned* p = xt + slot * (unsigned)(W / 2);
    if constexpr (W == 2) {
        w[0] = XS ? p[0] : __ldg(p);
    } else if constexpr (W == 4) {
        const uint2 t = XS ? *reinterpret_cast<const uint2*>(p) : __ldg(reinterpret_cast<const uint2*>(p));
        w[0] = t.x;
        w[1] = t.y;
    } else {
#pragma unroll
        for (int q = 0; q < W / 8; ++q) {
            const uint4* p4 = reinterpret_cast<const uint4*>(p) + q;
            const uint4 t = XS ? *p4 : __ldg(p4);
            w[4 * q + 0] = t.x;
            w[4 * q + 1] = t.y;
            w[4 * q + 2] = t.z;
            w[4 * q + 3] = t.w;
        }
    }
}

// acc[b] += a · x[b] for the W lanes of slot `slot`. SAFE: a zero-valued entry adds nothing
// whatever x is (its x words are ANDed with 0; one select per entry, one AND per two lanes).
template <int W, bool XS, bool SAFE>
__device__ __forceinline__ void batch_entry(float a, const unsigned* xt, unsigned slot,
                                            float (&acc)[W]) {
    unsigned w[W / 2];
    batch_load_x<W, XS>(xt, slot, w);
    if (SAFE) {
        const unsigned keep = a != 0.0f ? 0xffffffffu : 0u;
#pragma unroll
        for (int j = 0; j < W / 2; ++j) w[j] &= keep;
    }
#pragma unroll
    for (int j = 0; j < W / 2; ++j) {
        float lo, hi;
        macko_unpack2(w[j], lo, hi);
        acc[2 * j] = fmaf(a, lo, acc[2 * j]);
        acc[2 * j + 1] = fmaf(a, hi, acc[2 * j + 1]);
    }
}

// Folds acc[0 .. 2N) into acc[0 .. N) across lanes `o` apart: the lane with bit `o` set keeps
// the upper half (adding its partner's upper half), the other the lower.
template <int W, int N>
__device__ __forceinline__ void batch_fold(float (&acc)[W], unsigned lane, unsigned o) {
    const bool up = (lane & o) != 0u;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const float send = up ? acc[i] : acc[i + N];
        const float keep = up ? acc[i + N] : acc[i];
        acc[i] = keep + __shfl_xor_sync(MACKO_FULL_MASK, send, o);
    }
}

// The warp's sums of the W accumulators: returns, in every lane, the sum of vector lane / (32 /
// W) (the folds at offsets 16, 8, … pick the vector by the lane's high bits; the plain sums at
// the lower offsets finish it).
template <int W>
__device__ __forceinline__ float batch_reduce(float (&acc)[W], unsigned lane) {
    batch_fold<W, W / 2>(acc, lane, 16u);
    if constexpr (W >= 4) batch_fold<W, W / 4>(acc, lane, 8u);
    if constexpr (W >= 8) batch_fold<W, W / 8>(acc, lane, 4u);
    if constexpr (W >= 16) batch_fold<W, W / 16>(acc, lane, 2u);
#pragma unroll
    for (unsigned o = 16u / W; o > 0u; o >>= 1) {
        acc[0] += __shfl_xor_sync(MACKO_FULL_MASK, acc[0], o);
    }
    return acc[0];
}

// Stores a row's sums: vector b = lane / (32 / W) from the first lane of its group, for the
// chunk's `count` vectors; y is [batch][rows].
template <int W, typename Out>
__device__ __forceinline__ void batch_store(Out* __restrict__ y, unsigned rows, unsigned row,
                                            unsigned first, unsigned count, unsigned lane,
                                            float s) {
    const unsigned b = lane / (32u / W);
    if (lane % (32u / W) == 0u && b < count) {
        macko_store(y + (unsigned long long)(first + b) * rows, row, s);
    }
}

// Copies XT (`words16` 16-byte words) into shared memory; returns whether the block's copy holds
// any ±∞ or NaN (every thread gets the answer; the block is synchronised).
__device__ __forceinline__ bool batch_stage(unsigned* xs, const unsigned* __restrict__ xt,
                                            unsigned words16) {
    bool nonfinite = false;
    const uint4* src = reinterpret_cast<const uint4*>(xt);
    uint4* dst = reinterpret_cast<uint4*>(xs);
    for (unsigned j = threadIdx.x; j < words16; j += blockDim.x) {
        const uint4 w = __ldg(src + j);
        nonfinite |= macko_h8_nonfinite(w);
        dst[j] = w;
    }
    return __syncthreads_or(nonfinite ? 1 : 0) != 0;
}

// ---------------------------------------------------------------------------------------------
// Transpose: XT[s][b] = X[first + b][s - MACKO_X_SLACK] for b < count and a real column, else 0.
// One thread per 32-bit word of XT (two lanes), grid-stride; `slots` is a multiple of 8.
extern "C" __global__ void __launch_bounds__(BATCH_BLOCK)
    batch_transpose(const unsigned short* __restrict__ x, unsigned* __restrict__ xt,
                    unsigned cols, unsigned first, unsigned count, unsigned width,
                    unsigned slots) {
    const unsigned half = width / 2u;
    const unsigned n = slots * half;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned s = i / half, b = 2u * (i % half);
        const unsigned c = s - MACKO_X_SLACK;  // wraps for the front slack: then >= cols
        unsigned lo = 0u, hi = 0u;
        if (s >= MACKO_X_SLACK && c < cols) {
            if (b < count) lo = __ldg(x + (unsigned long long)(first + b) * cols + c);
            if (b + 1u < count) hi = __ldg(x + (unsigned long long)(first + b + 1u) * cols + c);
        }
        xt[i] = lo | (hi << 16);
    }
}

// ---------------------------------------------------------------------------------------------
// MACKO-16-4.

// One lane's 8 entries of a chunk (values v, prefix words pl/ph, `b0` the slot of the row's
// previous column minus lo, as in macko.cu's macko_chunk). The chunk's XT pointer is taken once,
// so an entry's address is one byte of the prefix scaled and added (PRMT + LEA).
template <int W, bool XS, bool SAFE>
__device__ __forceinline__ void batch_macko_chunk(const uint4 v, unsigned pl, unsigned ph,
                                                  unsigned b0, const unsigned* xt,
                                                  float (&acc)[W]) {
    const unsigned* xa = xt + b0 * (unsigned)(W / 2);
    const unsigned* xb = xa + (pl >> 24) * (unsigned)(W / 2);
    float a[8];
    macko_unpack2(v.x, a[0], a[1]);
    macko_unpack2(v.y, a[2], a[3]);
    macko_unpack2(v.z, a[4], a[5]);
    macko_unpack2(v.w, a[6], a[7]);
    batch_entry<W, XS, SAFE>(a[0], xa, __byte_perm(pl, 0u, 0x4440), acc);
    batch_entry<W, XS, SAFE>(a[1], xa, __byte_perm(pl, 0u, 0x4441), acc);
    batch_entry<W, XS, SAFE>(a[2], xa, __byte_perm(pl, 0u, 0x4442), acc);
    batch_entry<W, XS, SAFE>(a[3], xb, 0u, acc);
    batch_entry<W, XS, SAFE>(a[4], xb, __byte_perm(ph, 0u, 0x4440), acc);
    batch_entry<W, XS, SAFE>(a[5], xb, __byte_perm(ph, 0u, 0x4441), acc);
    batch_entry<W, XS, SAFE>(a[6], xb, __byte_perm(ph, 0u, 0x4442), acc);
    batch_entry<W, XS, SAFE>(a[7], xb, ph >> 24, acc);
}

// One batch of two chunks (64 groups from wb) of row [start, end) into acc; `next` is the column
// after the row's previous entry (warp-uniform) and advances past the batch. Both chunks are
// loaded before either is used and scanned at once (16-bit halves of one word, as in macko_row).
// INTERIOR: every group of the batch lies wholly inside the row, so nothing is masked and no load
// is bounds-checked (the caller's warp-uniform test).
template <int W, bool XS, bool SAFE, bool INTERIOR>
__device__ __forceinline__ void batch_macko_batch(const uint4* __restrict__ values,
                                                  const unsigned* __restrict__ codes,
                                                  const unsigned* xt, unsigned wb, unsigned start,
                                                  unsigned end, unsigned w_end, unsigned lane,
                                                  unsigned& next, float (&acc)[W]) {
    uint4 v[2];
    unsigned c[2];
    unsigned lo_a = 0u, hi_a = 8u, lo_b = 0u, hi_b = 8u;
    if (INTERIOR) {
        v[0] = macko_load_stream(values + wb + lane);
        c[0] = macko_load_stream(codes + wb + lane);
        v[1] = macko_load_stream(values + wb + 32u + lane);
        c[1] = macko_load_stream(codes + wb + 32u + lane);
    } else {
        macko_load_batch<32u, 2>(values, codes, wb, w_end, lane, v, c);
        macko_mask(wb + lane, start, end, v[0], c[0], lo_a, hi_a);
        macko_mask(wb + 32u + lane, start, end, v[1], c[1], lo_b, hi_b);
    }
    unsigned pl_a, ph_a, pl_b, ph_b;
    macko_prefix(c[0], pl_a, ph_a);
    macko_prefix(c[1], pl_b, ph_b);
    unsigned excl, total;
    macko_scan_pair<32u>(pl_a, ph_a, lo_a, hi_a, pl_b, ph_b, lo_b, hi_b, lane, excl, total);
    const unsigned base_a = next + (excl & 0xffffu);
    const unsigned next_a = next + (total & 0xffffu);
    const unsigned base_b = next_a + (excl >> 16);
    next = next_a + (total >> 16);
    batch_macko_chunk<W, XS, SAFE>(v[0], pl_a, ph_a, base_a + (MACKO_X_SLACK - 1u) - lo_a, xt,
                                   acc);
    // Warp-uniform: the second chunk holds entries of the row.
    if (INTERIOR || wb + 32u < w_end) {
        batch_macko_chunk<W, XS, SAFE>(v[1], pl_b, ph_b, base_b + (MACKO_X_SLACK - 1u) - lo_b, xt,
                                       acc);
    }
}

// Row [start, end) of a MACKO matrix into acc, batch after batch: the batches wholly inside the
// row (every batch of a long row but its first and last) skip the masks and the bounds checks.
template <int W, bool XS, bool SAFE>
__device__ __forceinline__ void batch_macko_row(const uint4* __restrict__ values,
                                                const unsigned* __restrict__ codes,
                                                const unsigned* xt, unsigned start, unsigned end,
                                                unsigned lane, float (&acc)[W]) {
    const unsigned w_end = (end + 7u) >> 3;
    // Groups wholly inside the row: [w_in, w_out). start + 7 cannot wrap (start <= P <= 2^32 - 8).
    const unsigned w_in = (start + 7u) >> 3, w_out = end >> 3;
    unsigned next = 0u;  // the column after the row's previous entry (warp-uniform)
    for (unsigned wb = start >> 3; wb < w_end; wb += 64u) {
        if (wb >= w_in && wb + 64u <= w_out) {
            batch_macko_batch<W, XS, SAFE, true>(values, codes, xt, wb, start, end, w_end, lane,
                                                 next, acc);
        } else {
            batch_macko_batch<W, XS, SAFE, false>(values, codes, xt, wb, start, end, w_end, lane,
                                                  next, acc);
        }
    }
}

template <typename Out, int W, bool XS, bool SAFE>
__device__ __forceinline__ void batch_macko_rows(const unsigned* __restrict__ row_ptr,
                                                 const uint4* __restrict__ values,
                                                 const unsigned* __restrict__ codes,
                                                 const unsigned* xt, Out* __restrict__ y,
                                                 unsigned rows, unsigned first, unsigned count) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps = gridDim.x * (blockDim.x / 32u);
    for (unsigned row = (threadIdx.x / 32u) * gridDim.x + blockIdx.x; row < rows; row += warps) {
        float acc[W];
#pragma unroll
        for (int b = 0; b < W; ++b) acc[b] = 0.0f;
        const unsigned start = __ldg(row_ptr + row), end = __ldg(row_ptr + row + 1u);
        batch_macko_row<W, XS, SAFE>(values, codes, xt, start, end, lane, acc);
        batch_store<W>(y, rows, row, first, count, lane, batch_reduce<W>(acc, lane));
    }
}

template <typename Out, int W, bool XS>
__device__ __forceinline__ void batch_macko_impl(const unsigned* __restrict__ row_ptr,
                                                 const uint4* __restrict__ values,
                                                 const unsigned* __restrict__ codes,
                                                 const unsigned* __restrict__ xt,
                                                 Out* __restrict__ y, unsigned rows,
                                                 unsigned slots, unsigned first, unsigned count) {
    extern __shared__ uint4 batch_xs[];
    if (XS) {
        unsigned* xs = reinterpret_cast<unsigned*>(batch_xs);
        if (batch_stage(xs, xt, slots * W / 8u)) {
            batch_macko_rows<Out, W, true, true>(row_ptr, values, codes, xs, y, rows, first, count);
        } else {
            batch_macko_rows<Out, W, true, false>(row_ptr, values, codes, xs, y, rows, first,
                                                  count);
        }
    } else {
        batch_macko_rows<Out, W, false, true>(row_ptr, values, codes, xt, y, rows, first, count);
    }
}

#define BATCH_MACKO_ENTRY(NAME, OUT, W, XS)                                                     \
    extern "C" __global__ void __launch_bounds__(BATCH_BLOCK, BATCH_MINB(W))                   \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const unsigned* __restrict__ xt,               \
             OUT* __restrict__ y, unsigned rows, unsigned slots, unsigned first,                \
             unsigned count) {                                                                  \
        batch_macko_impl<OUT, W, XS>(row_ptr, values, codes, xt, y, rows, slots, first, count); \
    }

BATCH_MACKO_ENTRY(macko_batch_xs_w2_f16, unsigned short, 2, true)
BATCH_MACKO_ENTRY(macko_batch_xs_w2_f32, float, 2, true)
BATCH_MACKO_ENTRY(macko_batch_xs_w4_f16, unsigned short, 4, true)
BATCH_MACKO_ENTRY(macko_batch_xs_w4_f32, float, 4, true)
BATCH_MACKO_ENTRY(macko_batch_xs_w8_f16, unsigned short, 8, true)
BATCH_MACKO_ENTRY(macko_batch_xs_w8_f32, float, 8, true)
BATCH_MACKO_ENTRY(macko_batch_xs_w16_f16, unsigned short, 16, true)
BATCH_MACKO_ENTRY(macko_batch_xs_w16_f32, float, 16, true)
BATCH_MACKO_ENTRY(macko_batch_xg_w2_f16, unsigned short, 2, false)
BATCH_MACKO_ENTRY(macko_batch_xg_w2_f32, float, 2, false)
BATCH_MACKO_ENTRY(macko_batch_xg_w4_f16, unsigned short, 4, false)
BATCH_MACKO_ENTRY(macko_batch_xg_w4_f32, float, 4, false)
BATCH_MACKO_ENTRY(macko_batch_xg_w8_f16, unsigned short, 8, false)
BATCH_MACKO_ENTRY(macko_batch_xg_w8_f32, float, 8, false)
BATCH_MACKO_ENTRY(macko_batch_xg_w16_f16, unsigned short, 16, false)
BATCH_MACKO_ENTRY(macko_batch_xg_w16_f32, float, 16, false)

// ---------------------------------------------------------------------------------------------
// CSR: lane l takes entries start + l, start + l + 32, …, four in flight before the first use.

#define BATCH_CSR_CHUNKS 4

template <typename Out, int W, bool XS, bool SAFE>
__device__ __forceinline__ void batch_csr_rows(const unsigned* __restrict__ row_ptr,
                                               const unsigned* __restrict__ col_idx,
                                               const unsigned short* __restrict__ values,
                                               const unsigned* xt, Out* __restrict__ y,
                                               unsigned rows, unsigned first, unsigned count) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps = gridDim.x * (blockDim.x / 32u);
    for (unsigned row = (threadIdx.x / 32u) * gridDim.x + blockIdx.x; row < rows; row += warps) {
        float acc[W];
#pragma unroll
        for (int b = 0; b < W; ++b) acc[b] = 0.0f;
        const unsigned start = __ldg(row_ptr + row), end = __ldg(row_ptr + row + 1u);
        for (unsigned base = start + lane; base < end; base += 32u * BATCH_CSR_CHUNKS) {
            unsigned short v[BATCH_CSR_CHUNKS];
            unsigned c[BATCH_CSR_CHUNKS];
#pragma unroll
            for (int u = 0; u < BATCH_CSR_CHUNKS; ++u) {
                const unsigned i = base + 32u * u;
                // Past the row: a zero value at slot 0 (front slack, zero), adding nothing.
                v[u] = i < end ? macko_load_stream(values + i) : (unsigned short)0;
                c[u] = i < end ? macko_load_stream(col_idx + i) + MACKO_X_SLACK : 0u;
            }
#pragma unroll
            for (int u = 0; u < BATCH_CSR_CHUNKS; ++u) {
                batch_entry<W, XS, SAFE>(macko_h2f(v[u]), xt, c[u], acc);
            }
        }
        batch_store<W>(y, rows, row, first, count, lane, batch_reduce<W>(acc, lane));
    }
}

template <typename Out, int W, bool XS>
__device__ __forceinline__ void batch_csr_impl(const unsigned* __restrict__ row_ptr,
                                               const unsigned* __restrict__ col_idx,
                                               const unsigned short* __restrict__ values,
                                               const unsigned* __restrict__ xt,
                                               Out* __restrict__ y, unsigned rows,
                                               unsigned slots, unsigned first, unsigned count) {
    extern __shared__ uint4 batch_xs[];
    if (XS) {
        unsigned* xs = reinterpret_cast<unsigned*>(batch_xs);
        if (batch_stage(xs, xt, slots * W / 8u)) {
            batch_csr_rows<Out, W, true, true>(row_ptr, col_idx, values, xs, y, rows, first, count);
        } else {
            batch_csr_rows<Out, W, true, false>(row_ptr, col_idx, values, xs, y, rows, first,
                                                count);
        }
    } else {
        batch_csr_rows<Out, W, false, true>(row_ptr, col_idx, values, xt, y, rows, first, count);
    }
}

#define BATCH_CSR_ENTRY(NAME, OUT, W, XS)                                                       \
    extern "C" __global__ void __launch_bounds__(BATCH_BLOCK, BATCH_MINB(W))                   \
        NAME(const unsigned* __restrict__ row_ptr, const unsigned* __restrict__ col_idx,        \
             const unsigned short* __restrict__ values, const unsigned* __restrict__ xt,        \
             OUT* __restrict__ y, unsigned rows, unsigned slots, unsigned first,                \
             unsigned count) {                                                                  \
        batch_csr_impl<OUT, W, XS>(row_ptr, col_idx, values, xt, y, rows, slots, first, count); \
    }

BATCH_CSR_ENTRY(csr_batch_xs_w2_f16, unsigned short, 2, true)
BATCH_CSR_ENTRY(csr_batch_xs_w2_f32, float, 2, true)
BATCH_CSR_ENTRY(csr_batch_xs_w4_f16, unsigned short, 4, true)
BATCH_CSR_ENTRY(csr_batch_xs_w4_f32, float, 4, true)
BATCH_CSR_ENTRY(csr_batch_xs_w8_f16, unsigned short, 8, true)
BATCH_CSR_ENTRY(csr_batch_xs_w8_f32, float, 8, true)
BATCH_CSR_ENTRY(csr_batch_xs_w16_f16, unsigned short, 16, true)
BATCH_CSR_ENTRY(csr_batch_xs_w16_f32, float, 16, true)
BATCH_CSR_ENTRY(csr_batch_xg_w2_f16, unsigned short, 2, false)
BATCH_CSR_ENTRY(csr_batch_xg_w2_f32, float, 2, false)
BATCH_CSR_ENTRY(csr_batch_xg_w4_f16, unsigned short, 4, false)
BATCH_CSR_ENTRY(csr_batch_xg_w4_f32, float, 4, false)
BATCH_CSR_ENTRY(csr_batch_xg_w8_f16, unsigned short, 8, false)
BATCH_CSR_ENTRY(csr_batch_xg_w8_f32, float, 8, false)
BATCH_CSR_ENTRY(csr_batch_xg_w16_f16, unsigned short, 16, false)
BATCH_CSR_ENTRY(csr_batch_xg_w16_f32, float, 16, false)

// ---------------------------------------------------------------------------------------------
// Dense rows, IEEE (no masking). ALIGNED (cols % 8 == 0): lane l reads 16-byte words l, l + 32,
// … of the row, DENSE_BATCH_CHUNKS in flight, each word's 8 columns at slots SLACK + 8j + k.
// Otherwise element by element (rows start anywhere).

#define DENSE_BATCH_CHUNKS 2

template <typename Out, int W, bool ALIGNED>
__device__ __forceinline__ void dense_batch_impl(const unsigned short* __restrict__ a,
                                                 const unsigned* __restrict__ xt,
                                                 Out* __restrict__ y, unsigned rows,
                                                 unsigned cols, unsigned first, unsigned count) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps = gridDim.x * (blockDim.x / 32u);
    for (unsigned row = (threadIdx.x / 32u) * gridDim.x + blockIdx.x; row < rows; row += warps) {
        float acc[W];
#pragma unroll
        for (int b = 0; b < W; ++b) acc[b] = 0.0f;
        const unsigned long long row_first = (unsigned long long)row * cols;
        if (ALIGNED) {
            const uint4* ar = reinterpret_cast<const uint4*>(a + row_first);
            const unsigned nvec = cols >> 3;
            for (unsigned base = lane; base < nvec; base += 32u * DENSE_BATCH_CHUNKS) {
                uint4 va[DENSE_BATCH_CHUNKS];
#pragma unroll
                for (int u = 0; u < DENSE_BATCH_CHUNKS; ++u) {
                    const unsigned j = base + 32u * u;
                    va[u] = j < nvec ? macko_load_stream(ar + j) : make_uint4(0u, 0u, 0u, 0u);
                }
#pragma unroll
                for (int u = 0; u < DENSE_BATCH_CHUNKS; ++u) {
                    const unsigned j = base + 32u * u;
                    // Past the row: zero values at the slack slots past the last column.
                    const unsigned s = j < nvec ? MACKO_X_SLACK + 8u * j : MACKO_X_SLACK + cols;
                    float e[8];
                    macko_unpack2(va[u].x, e[0], e[1]);
                    macko_unpack2(va[u].y, e[2], e[3]);
                    macko_unpack2(va[u].z, e[4], e[5]);
                    macko_unpack2(va[u].w, e[6], e[7]);
#pragma unroll
                    for (int k = 0; k < 8; ++k) {
                        batch_entry<W, false, false>(e[k], xt, j < nvec ? s + k : s, acc);
                    }
                }
            }
        } else {
            for (unsigned c = lane; c < cols; c += 32u) {
                batch_entry<W, false, false>(macko_h2f(a[row_first + c]), xt, MACKO_X_SLACK + c,
                                             acc);
            }
        }
        batch_store<W>(y, rows, row, first, count, lane, batch_reduce<W>(acc, lane));
    }
}

#define DENSE_BATCH_ENTRY(NAME, OUT, W, ALIGNED)                                                \
    extern "C" __global__ void __launch_bounds__(BATCH_BLOCK, BATCH_MINB(W))                   \
        NAME(const unsigned short* __restrict__ a, const unsigned* __restrict__ xt,             \
             OUT* __restrict__ y, unsigned rows, unsigned cols, unsigned first,                 \
             unsigned count) {                                                                  \
        dense_batch_impl<OUT, W, ALIGNED>(a, xt, y, rows, cols, first, count);                  \
    }

DENSE_BATCH_ENTRY(dense_batch_a16_w2_f16, unsigned short, 2, true)
DENSE_BATCH_ENTRY(dense_batch_a16_w2_f32, float, 2, true)
DENSE_BATCH_ENTRY(dense_batch_a16_w4_f16, unsigned short, 4, true)
DENSE_BATCH_ENTRY(dense_batch_a16_w4_f32, float, 4, true)
DENSE_BATCH_ENTRY(dense_batch_a16_w8_f16, unsigned short, 8, true)
DENSE_BATCH_ENTRY(dense_batch_a16_w8_f32, float, 8, true)
DENSE_BATCH_ENTRY(dense_batch_a16_w16_f16, unsigned short, 16, true)
DENSE_BATCH_ENTRY(dense_batch_a16_w16_f32, float, 16, true)
DENSE_BATCH_ENTRY(dense_batch_any_w2_f16, unsigned short, 2, false)
DENSE_BATCH_ENTRY(dense_batch_any_w2_f32, float, 2, false)
DENSE_BATCH_ENTRY(dense_batch_any_w4_f16, unsigned short, 4, false)
DENSE_BATCH_ENTRY(dense_batch_any_w4_f32, float, 4, false)
DENSE_BATCH_ENTRY(dense_batch_any_w8_f16, unsigned short, 8, false)
DENSE_BATCH_ENTRY(dense_batch_any_w8_f32, float, 8, false)
DENSE_BATCH_ENTRY(dense_batch_any_w16_f16, unsigned short, 16, false)
DENSE_BATCH_ENTRY(dense_batch_any_w16_f32, float, 16, false)
