// CSR sparse matrix-vector product y = A·x: u32 row pointers and column indices, binary16 values,
// f32 accumulation (README.md, "Dense GEMV, CSR and the streaming read"). The library's own CSR
// kernel, a comparison point for MACKO beside cuSPARSE.
//
// One warp per row over a persistent grid; lane l takes entries start + l, start + l + 32, …,
// CSR_CHUNKS of them in flight before the first use (coalesced: a warp reads 64 bytes of values
// and 128 bytes of indices per chunk). x is staged in shared memory as f32 when it fits (the
// layout of common.cuh), else gathered through the read-only cache. Zero-valued entries add
// nothing even where x is NaN or ±∞ (x is selected to 0, never multiplied by 0).
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define CSR_CHUNKS 4
#define CSR_BLOCK 512

template <bool XS>
__device__ __forceinline__ float csr_row(const unsigned* __restrict__ col_idx,
                                         const unsigned short* __restrict__ values,
                                         const float* xs, const unsigned short* __restrict__ x,
                                         unsigned start, unsigned end, unsigned lane) {
    float acc0 = 0.0f, acc1 = 0.0f;
    for (unsigned base = start + lane; base < end; base += 32u * CSR_CHUNKS) {
        unsigned short v[CSR_CHUNKS];
        unsigned c[CSR_CHUNKS];
#pragma unroll
        for (int u = 0; u < CSR_CHUNKS; ++u) {
            const unsigned i = base + 32u * u;
            if (i < end) {
                v[u] = macko_load_stream(values + i);
                c[u] = macko_load_stream(col_idx + i);
            } else {
                v[u] = 0;  // a zero value: adds nothing, and column 0 exists (cols >= 1)
                c[u] = 0u;
            }
        }
#pragma unroll
        for (int u = 0; u < CSR_CHUNKS; ++u) {
            const float a = macko_h2f(v[u]);
            const float xv =
                XS ? xs[macko_x_slot(c[u] + MACKO_X_SLACK)] : macko_h2f(__ldg(x + c[u]));
            const float t = a != 0.0f ? xv : 0.0f;
            if (u & 1) {
                acc1 = fmaf(a, t, acc1);
            } else {
                acc0 = fmaf(a, t, acc0);
            }
        }
    }
    return acc0 + acc1;
}

template <typename Out, bool XS>
__device__ __forceinline__ void csr_spmv_impl(const unsigned* __restrict__ row_ptr,
                                              const unsigned* __restrict__ col_idx,
                                              const unsigned short* __restrict__ values,
                                              const unsigned short* __restrict__ x,
                                              Out* __restrict__ y, unsigned rows, unsigned cols) {
    extern __shared__ float csr_xs[];
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned row_stride = gridDim.x * warps_per_block;
    if (XS) {
        macko_stage_x(csr_xs, x, cols);
        __syncthreads();
    }
    for (unsigned row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < rows;
         row += row_stride) {
        const unsigned start = __ldg(row_ptr + row), end = __ldg(row_ptr + row + 1u);
        float acc = csr_row<XS>(col_idx, values, csr_xs, x, start, end, lane);
        acc = macko_warp_sum(acc);
        if (lane == 0u) macko_store(y, row, acc);
    }
}

#define CSR_SPMV_ENTRY(NAME, OUT, XS)                                                            \
    extern "C" __global__ void __launch_bounds__(CSR_BLOCK, 2)                                  \
        NAME(const unsigned* __restrict__ row_ptr, const unsigned* __restrict__ col_idx,        \
             const unsigned short* __restrict__ values, const unsigned short* __restrict__ x,   \
             OUT* __restrict__ y, unsigned rows, unsigned cols) {                               \
        csr_spmv_impl<OUT, XS>(row_ptr, col_idx, values, x, y, rows, cols);                     \
    }

CSR_SPMV_ENTRY(csr_spmv_xs_f16, unsigned short, true)
CSR_SPMV_ENTRY(csr_spmv_xs_f32, float, true)
CSR_SPMV_ENTRY(csr_spmv_xg_f16, unsigned short, false)
CSR_SPMV_ENTRY(csr_spmv_xg_f32, float, false)
