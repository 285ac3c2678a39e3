// Transposed product with a sparse x, y = Aᵀ·x, for CSR (README.md, "Transposed products with a
// sparse x"): x's non-zeros select rows of A, only those rows are read, and each is scattered
// into y with f32 atomicAdd. Binary16 values, u32 row pointers and columns (the layout of
// csr.cu); x as its non-zero entries, indices u32 and values widened to f32 once at upload.
//
// Three launches, in order on one stream:
//   1. transposed_zero: the f32 sums (y itself for f32 output, a scratch of `cols` floats for
//      f16 output) set to 0;
//   2. csr_transposed_sparse_x: one warp per entry of x (grid-stride), its lanes striding over
//      the selected row's entries (coalesced, as csr.cu reads a row), atomicAdd of x_i·A[i, c]
//      into sum c. A row's columns are distinct, so the lanes of one warp never collide; warps
//      of rows sharing a column do, in the L2's atomic units. The order of those adds is the
//      hardware's, so y may differ from run to run in its last bits (the wgpu kernel, which has
//      no float atomics, sums in x's order instead);
//   3. transposed_finish_f16 (f16 output only): each sum rounded once to binary16.
//
// Zero-valued entries of A add nothing even where x is NaN or ±∞ (skipped, never multiplied by
// 0); x's zeros were dropped at upload.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define TRANSPOSED_BLOCK 256

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    transposed_zero(float* __restrict__ sums, unsigned cols) {
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        sums[c] = 0.0f;
    }
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    csr_transposed_sparse_x(const unsigned* __restrict__ row_ptr,
                            const unsigned* __restrict__ col_idx,
                            const unsigned short* __restrict__ values,
                            const unsigned* __restrict__ x_index,
                            const float* __restrict__ x_value, unsigned nnz,
                            float* __restrict__ sums) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned stride = gridDim.x * warps_per_block;
    for (unsigned n = blockIdx.x * warps_per_block + (threadIdx.x >> 5); n < nnz; n += stride) {
        const unsigned i = __ldg(x_index + n);
        const float xv = __ldg(x_value + n);
        const unsigned start = __ldg(row_ptr + i), end = __ldg(row_ptr + i + 1u);
        for (unsigned j = start + lane; j < end; j += 32u) {
            const float a = macko_h2f(macko_load_stream(values + j));
            if (a != 0.0f) {
                atomicAdd(sums + macko_load_stream(col_idx + j), a * xv);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    transposed_finish_f16(const float* __restrict__ sums, unsigned short* __restrict__ y,
                          unsigned cols) {
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        macko_store(y, c, sums[c]);
    }
}
