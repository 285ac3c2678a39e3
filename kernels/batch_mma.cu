// Few-token products on tensor cores (README.md, "Few-token products: tensor cores"): Y = A·X for
// a chunk of up to 16 vectors with mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (sm_80+),
// f32 accumulation, X read straight from its row-major [batch][cols] storage (cols % 8 == 0, so
// every vector's row starts on a 16-byte boundary): no transpose, no XT.
//
// Fragments of m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"),
// lane = 4·g + t (groupID g = lane / 4, threadID_in_group t = lane % 4):
//   A (16×16, row): a0 = A[g][2t, 2t+1]    a1 = A[g+8][2t, 2t+1]
//                   a2 = A[g][2t+8, 2t+9]  a3 = A[g+8][2t+8, 2t+9]
//   B (16×8, col):  b0 = B[2t, 2t+1][g]    b1 = B[2t+8, 2t+9][g]
//   C/D (16×8 f32): c0 = C[g][2t]  c1 = C[g][2t+1]  c2 = C[g+8][2t]  c3 = C[g+8][2t+1]
// The k index of a product is only summed over, so A and B may number the 16 columns of a step
// in any order both agree on. Here lane (g, t) holds one 16-byte word of 8 consecutive columns
// c .. c+7 (c = k0 + 8t) of row g, of row g+8 and of vector g, and feeds two mma steps: step 0
// takes halves 0–3 (k = 2t, 2t+1 ↔ c, c+1; k = 2t+8, 2t+9 ↔ c+2, c+3), step 1 halves 4–7. So 32
// columns per pair of steps, every operand one 16-byte load, nothing shuffled.
//
// Vectors: n-tile j holds vectors 8j .. 8j+7 of the chunk (NT = 1 tile for W ≤ 8, 2 for W = 16);
// vectors past the chunk's count, and columns past the last, load as zero and are never stored.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define MMA_BLOCK 512
#define MMA_WARPS (MMA_BLOCK / 32)

// D += A·B for one m16n8k16 step (fragments as above). On GPUs before sm_80 the kernels of this
// file are never planned (CudaCaps::tensor_cores); they still compile there, trapping.
__device__ __forceinline__ void mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                          unsigned a3, unsigned b0, unsigned b1) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

// The two mma steps of 32 columns: lo/hi are the 16-byte words of rows g and g+8, b the word of
// vector g of the n-tile (layout in the header).
__device__ __forceinline__ void mma_32cols(float (&d)[4], const uint4 lo, const uint4 hi,
                                           const uint4 b) {
    mma_16816(d, lo.x, hi.x, lo.y, hi.y, b.x, b.y);
    mma_16816(d, lo.z, hi.z, lo.w, hi.w, b.z, b.w);
}

// The 16-byte word of X for vector v of the chunk at column c (zero past the count or the last
// column). X rows are 16-byte aligned: cols % 8 == 0, checked by the planner.
__device__ __forceinline__ uint4 mma_load_x(const unsigned short* __restrict__ x, unsigned cols,
                                            unsigned first, unsigned count, unsigned v,
                                            unsigned c) {
    if (v >= count || c >= cols) return make_uint4(0u, 0u, 0u, 0u);
    return __ldg(reinterpret_cast<const uint4*>(x + (unsigned long long)(first + v) * cols + c));
}

// Sums the warps' C fragments of a band of R = 16·MT rows through shared memory (red: MMA_WARPS
// × R × 8·NT floats, vector-major) and stores the chunk's vectors of rows r0 .. r0 + R - 1 in
// y ([batch][rows]). Every thread of the block calls it; it synchronises the block before and
// after.
template <typename Out, int NT, int MT>
__device__ __forceinline__ void mma_reduce_store(float* red, const float (&acc)[MT][NT][4],
                                                 Out* __restrict__ y, unsigned rows, unsigned r0,
                                                 unsigned first, unsigned count) {
    constexpr unsigned R = 16u * MT, N = 8u * NT;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32u;
    const unsigned g = lane >> 2, t = lane & 3u;
    float* mine = red + warp * R * N;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const unsigned row = 16u * m + g, vec = 8u * j + 2u * t;
            mine[vec * R + row] = acc[m][j][0];
            mine[(vec + 1u) * R + row] = acc[m][j][1];
            mine[vec * R + row + 8u] = acc[m][j][2];
            mine[(vec + 1u) * R + row + 8u] = acc[m][j][3];
        }
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < R * N; i += blockDim.x) {
        float s = 0.0f;
#pragma unroll
        for (unsigned w = 0; w < MMA_WARPS; ++w) s += red[w * R * N + i];
        const unsigned vec = i / R, row = r0 + i % R;
        if (vec < count && row < rows) {
            macko_store(y + (unsigned long long)(first + vec) * rows, row, s);
        }
    }
    __syncthreads();
}

// ---------------------------------------------------------------------------------------------
// Dense rows (cols % 8 == 0). A block owns a band of 16·MT rows at a time (bands grid-stride over
// a persistent grid); its 16 warps split the columns: warp w takes the 32-column steps w, w + 16,
// … (so the block reads 1 KiB of each row at once), DENSE_MMA_UNROLL steps' loads in flight
// before the first mma. The warps' partial sums meet in shared memory (mma_reduce_store). IEEE
// as every GEMM: a stored zero times ∞ is NaN, tensor cores included.
#define DENSE_MMA_MT 2
#define DENSE_MMA_UNROLL 2

template <typename Out, int NT>
__device__ __forceinline__ void dense_mma_impl(const unsigned short* __restrict__ a,
                                               const unsigned short* __restrict__ x,
                                               Out* __restrict__ y, unsigned rows, unsigned cols,
                                               unsigned first, unsigned count) {
    constexpr int MT = DENSE_MMA_MT, U = DENSE_MMA_UNROLL;
    __shared__ float red[MMA_WARPS * 16 * MT * 8 * NT];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32u;
    const unsigned g = lane >> 2, t = lane & 3u;
    const unsigned steps = (cols + 31u) / 32u;
    const unsigned bands = (rows + 16u * MT - 1u) / (16u * MT);
    for (unsigned band = blockIdx.x; band < bands; band += gridDim.x) {
        const unsigned r0 = band * 16u * MT;
        float acc[MT][NT][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[m][j][q] = 0.0f;
        for (unsigned s0 = warp; s0 < steps; s0 += U * MMA_WARPS) {
            uint4 lo[U][MT], hi[U][MT], b[U][NT];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const unsigned c = 32u * (s0 + u * MMA_WARPS) + 8u * t;
#pragma unroll
                for (int m = 0; m < MT; ++m) {
                    const unsigned rl = r0 + 16u * m + g, rh = rl + 8u;
                    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
                    lo[u][m] = (c < cols && rl < rows)
                                   ? macko_load_stream(reinterpret_cast<const uint4*>(
                                         a + (unsigned long long)rl * cols + c))
                                   : z;
                    hi[u][m] = (c < cols && rh < rows)
                                   ? macko_load_stream(reinterpret_cast<const uint4*>(
                                         a + (unsigned long long)rh * cols + c))
                                   : z;
                }
#pragma unroll
                for (int j = 0; j < NT; ++j) b[u][j] = mma_load_x(x, cols, first, count, 8u * j + g, c);
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int j = 0; j < NT; ++j) mma_32cols(acc[m][j], lo[u][m], hi[u][m], b[u][j]);
        }
        mma_reduce_store<Out, NT, MT>(red, acc, y, rows, r0, first, count);
    }
}

// Blocks per SM asked of the compiler: 2 (64 registers) with one n-tile, 1 with two (their
// 16 accumulators and 8 words of A and X per step in flight do not fit 64).
#define DENSE_MMA_MINB(NT) ((NT) >= 2 ? 1 : 2)

#define DENSE_MMA_ENTRY(NAME, OUT, NT)                                                          \
    extern "C" __global__ void __launch_bounds__(MMA_BLOCK, DENSE_MMA_MINB(NT))                \
        NAME(const unsigned short* __restrict__ a, const unsigned short* __restrict__ x,        \
             OUT* __restrict__ y, unsigned rows, unsigned cols, unsigned first,                 \
             unsigned count) {                                                                  \
        dense_mma_impl<OUT, NT>(a, x, y, rows, cols, first, count);                             \
    }

// Widths 2, 4 and 8 share one n-tile (vectors past the count are zero columns of B).
DENSE_MMA_ENTRY(dense_batch_mma_w2_f16, unsigned short, 1)
DENSE_MMA_ENTRY(dense_batch_mma_w2_f32, float, 1)
DENSE_MMA_ENTRY(dense_batch_mma_w4_f16, unsigned short, 1)
DENSE_MMA_ENTRY(dense_batch_mma_w4_f32, float, 1)
DENSE_MMA_ENTRY(dense_batch_mma_w8_f16, unsigned short, 1)
DENSE_MMA_ENTRY(dense_batch_mma_w8_f32, float, 1)
DENSE_MMA_ENTRY(dense_batch_mma_w16_f16, unsigned short, 2)
DENSE_MMA_ENTRY(dense_batch_mma_w16_f32, float, 2)
