// Dense binary16 GEMV y = A·x, row-major A, f32 accumulation.
//
// One warp per row, rows handed out grid-stride over a persistent grid. Each lane reads A in
// 16-byte words (8 halves), DENSE_CHUNKS words in flight before the first use, and the matching
// 16-byte words of x through the read-only cache (every warp reads the same x, so it stays in L1
// and L2). The warp's lanes are then summed with shuffles. IEEE semantics, as every dense GEMV:
// a stored zero times ∞ is NaN (README.md, "Dense GEMV, CSR and the streaming read").
//
// When cols is not a multiple of 8, a row does not start on a 16-byte boundary: its first
// (8 - (row·cols) mod 8) mod 8 elements are read one by one, the aligned middle in 16-byte words
// of A (x read per element there, since it is then misaligned with A), the rest one by one.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define DENSE_CHUNKS 4
#define DENSE_BLOCK 512

// acc0/acc1 += the 8 products of one 16-byte word of A and 8 f32 values of x.
__device__ __forceinline__ void dense_dot8(const uint4 a, const float* xv, float& acc0,
                                           float& acc1) {
    float a0, a1;
    macko_unpack2(a.x, a0, a1);
    acc0 = fmaf(a0, xv[0], acc0);
    acc1 = fmaf(a1, xv[1], acc1);
    macko_unpack2(a.y, a0, a1);
    acc0 = fmaf(a0, xv[2], acc0);
    acc1 = fmaf(a1, xv[3], acc1);
    macko_unpack2(a.z, a0, a1);
    acc0 = fmaf(a0, xv[4], acc0);
    acc1 = fmaf(a1, xv[5], acc1);
    macko_unpack2(a.w, a0, a1);
    acc0 = fmaf(a0, xv[6], acc0);
    acc1 = fmaf(a1, xv[7], acc1);
}

// The 8 halves of a 16-byte word of x, as f32.
__device__ __forceinline__ void dense_unpack8(const uint4 w, float* out) {
    macko_unpack2(w.x, out[0], out[1]);
    macko_unpack2(w.y, out[2], out[3]);
    macko_unpack2(w.z, out[4], out[5]);
    macko_unpack2(w.w, out[6], out[7]);
}

// A row whose start is 16-byte aligned (cols % 8 == 0): x is aligned with it.
__device__ __forceinline__ float dense_row_aligned(const uint4* __restrict__ a,
                                                   const uint4* __restrict__ x, unsigned nvec,
                                                   unsigned lane) {
    float acc0 = 0.0f, acc1 = 0.0f;
    for (unsigned base = lane; base < nvec; base += 32u * DENSE_CHUNKS) {
        uint4 va[DENSE_CHUNKS], vx[DENSE_CHUNKS];
#pragma unroll
        for (int u = 0; u < DENSE_CHUNKS; ++u) {
            const unsigned j = base + 32u * u;
            if (j < nvec) {
                va[u] = macko_load_stream(a + j);
                vx[u] = __ldg(x + j);
            } else {
                va[u] = make_uint4(0u, 0u, 0u, 0u);
                vx[u] = make_uint4(0u, 0u, 0u, 0u);
            }
        }
#pragma unroll
        for (int u = 0; u < DENSE_CHUNKS; ++u) {
            float xf[8];
            dense_unpack8(vx[u], xf);
            dense_dot8(va[u], xf, acc0, acc1);
        }
    }
    return acc0 + acc1;
}

// A row of any alignment: `a` points at the row's first element, `misalign` = its element offset
// modulo 8.
__device__ __forceinline__ float dense_row_unaligned(const unsigned short* __restrict__ a,
                                                     const unsigned short* __restrict__ x,
                                                     unsigned cols, unsigned misalign,
                                                     unsigned lane) {
    float acc0 = 0.0f, acc1 = 0.0f;
    const unsigned head = min((8u - misalign) & 7u, cols);
    if (lane < head) acc0 = fmaf(macko_h2f(a[lane]), macko_h2f(__ldg(x + lane)), acc0);
    const unsigned nvec = (cols - head) >> 3;
    const uint4* av = reinterpret_cast<const uint4*>(a + head);
    const unsigned short* xh = x + head;
    for (unsigned base = lane; base < nvec; base += 32u * DENSE_CHUNKS) {
        uint4 va[DENSE_CHUNKS];
#pragma unroll
        for (int u = 0; u < DENSE_CHUNKS; ++u) {
            const unsigned j = base + 32u * u;
            va[u] = j < nvec ? macko_load_stream(av + j) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < DENSE_CHUNKS; ++u) {
            const unsigned j = base + 32u * u;
            float xf[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                xf[k] = j < nvec ? macko_h2f(__ldg(xh + 8u * j + k)) : 0.0f;
            }
            dense_dot8(va[u], xf, acc0, acc1);
        }
    }
    for (unsigned c = head + 8u * nvec + lane; c < cols; c += 32u) {
        acc1 = fmaf(macko_h2f(a[c]), macko_h2f(__ldg(x + c)), acc1);
    }
    return acc0 + acc1;
}

template <typename Out, bool ALIGNED>
__device__ __forceinline__ void dense_gemv_impl(const unsigned short* __restrict__ a,
                                                const unsigned short* __restrict__ x,
                                                Out* __restrict__ y, unsigned rows,
                                                unsigned cols) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned row_stride = gridDim.x * warps_per_block;
    for (unsigned row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < rows;
         row += row_stride) {
        const unsigned long long first = (unsigned long long)row * cols;
        float acc;
        if (ALIGNED) {
            acc = dense_row_aligned(reinterpret_cast<const uint4*>(a + first),
                                    reinterpret_cast<const uint4*>(x), cols >> 3, lane);
        } else {
            acc = dense_row_unaligned(a + first, x, cols, (unsigned)(first & 7u), lane);
        }
        acc = macko_warp_sum(acc);
        if (lane == 0u) macko_store(y, row, acc);
    }
}

#define DENSE_GEMV_ENTRY(NAME, OUT, ALIGNED)                                                     \
    extern "C" __global__ void __launch_bounds__(DENSE_BLOCK, 2)                                \
        NAME(const unsigned short* __restrict__ a, const unsigned short* __restrict__ x,        \
             OUT* __restrict__ y, unsigned rows, unsigned cols) {                               \
        dense_gemv_impl<OUT, ALIGNED>(a, x, y, rows, cols);                                     \
    }

DENSE_GEMV_ENTRY(dense_gemv_a16_f16, unsigned short, true)
DENSE_GEMV_ENTRY(dense_gemv_a16_f32, float, true)
DENSE_GEMV_ENTRY(dense_gemv_any_f16, unsigned short, false)
DENSE_GEMV_ENTRY(dense_gemv_any_f32, float, false)
