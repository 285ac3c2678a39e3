// 2:4 structured-sparsity products Y = A·X (README.md, "2:4 structured sparsity"): one vector
// (W = 1) or a chunk of up to 16 (W = 2, 4, 8, 16, the chunk's count rounded up to a power of
// two), binary16 values, f32 accumulation, f16 or f32 out.
//
// The matrix as uploaded (src/backend/sparse24_rows.rs, the layout the wgpu kernels read too):
// every row is `words` words of 8 groups (32 columns), padded with zero groups to whole words;
// word i = row · words + k holds
// - `vals[2i]`, `vals[2i + 1]`: two 16-byte words, u32 g of the pair the binary16 values of
//   group 8k + g (the first position's in the low half);
// - `pos[i]`: one u32, nibble g the positions of group 8k + g in its 4 columns (bits 0–1 the
//   first, 2–3 the second), the format's nibble.
// So a lane's loads per word are two 16-byte loads of values and one 4-byte load of positions
// (evict-first: the matrix is read once per product), and its columns start at a multiple of 32.
//
// Lanes: a row takes L = 2^lanes_log2 lanes (the host picks the smallest power of two covering
// the row's words, at most 32), so a warp multiplies 32 / L rows at once; a row's lanes take
// its words k, k + L, … and their sums meet by L-wide xor shuffles. Rows by stride over the
// grid's warps (persistent where the host caps the grid).
//
// x: with VEC (x's vectors start on 16-byte boundaries: the allocation is aligned and, for a
// batch, cols % 8 == 0; the host checks the pointer), a word's 32 columns of one vector are four
// 16-byte loads through the read-only cache (those at or past cols are not read: zero), from
// which each group picks its two halves; otherwise each live entry loads its own half. X is read
// as it is ([batch][cols]), no transposition: the chunk's vectors are W passes of these loads
// over the same word, the matrix word being decoded once for the W vectors.
//
// Zero values (a group's fill, padding positions at or past cols, padding groups) contribute
// nothing even where x holds NaN or ±∞: their x is selected to 0 before the multiplication,
// and a padding position's x is never loaded (scalar path) or lies in the zero-filled part of
// the word (VEC path, past cols). As in the CPU and reference products.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define S24_BLOCK 512

// The binary16 bits at position p (0..3) of the 4 columns held by words lo (positions 0, 1)
// and hi (2, 3).
__device__ __forceinline__ unsigned short s24_half(unsigned lo, unsigned hi, unsigned p) {
    return (unsigned short)(((p > 1u) ? hi : lo) >> ((p & 1u) << 4));
}

// x of word k's 16 entries for one vector `xv` (cols halves): xe[2g], xe[2g + 1] for the first
// and second value of group g; 0 where the value is ±0 (v: the 8 groups' value pairs, m: their
// positions).
template <bool VEC>
__device__ __forceinline__ void s24_gather(float (&xe)[16], const unsigned short* __restrict__ xv,
                                           unsigned c0, unsigned cols, unsigned m,
                                           const unsigned (&v)[8]) {
    if (VEC) {
        unsigned w[16];
        const uint4* p = reinterpret_cast<const uint4*>(xv + c0);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint4 t = (c0 + 8u * q < cols) ? __ldg(p + q) : make_uint4(0u, 0u, 0u, 0u);
            w[4 * q] = t.x;
            w[4 * q + 1] = t.y;
            w[4 * q + 2] = t.z;
            w[4 * q + 3] = t.w;
        }
#pragma unroll
        for (int g = 0; g < 8; ++g) {
            const unsigned n = (m >> (4 * g)) & 15u;
            const float x0 = macko_h2f(s24_half(w[2 * g], w[2 * g + 1], n & 3u));
            const float x1 = macko_h2f(s24_half(w[2 * g], w[2 * g + 1], n >> 2));
            xe[2 * g] = (v[g] & 0x7fffu) ? x0 : 0.0f;
            xe[2 * g + 1] = (v[g] & 0x7fff0000u) ? x1 : 0.0f;
        }
    } else {
#pragma unroll
        for (int g = 0; g < 8; ++g) {
            const unsigned n = (m >> (4 * g)) & 15u;
            const unsigned c = c0 + 4u * g;
            // A non-zero value lies below cols (the format's padding positions hold zeros).
            xe[2 * g] = (v[g] & 0x7fffu) ? macko_h2f(__ldg(xv + c + (n & 3u))) : 0.0f;
            xe[2 * g + 1] = (v[g] & 0x7fff0000u) ? macko_h2f(__ldg(xv + c + (n >> 2))) : 0.0f;
        }
    }
}

template <int W, bool VEC, typename Out>
__device__ __forceinline__ void s24_impl(const uint4* __restrict__ vals,
                                         const unsigned* __restrict__ pos,
                                         const unsigned short* __restrict__ x,
                                         Out* __restrict__ y, unsigned rows, unsigned cols,
                                         unsigned words, unsigned lanes_log2, unsigned first,
                                         unsigned count) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned per_row = 1u << lanes_log2;
    const unsigned sub = lane >> lanes_log2;
    const unsigned sl = lane & (per_row - 1u);
    const unsigned rows_per_warp = 32u >> lanes_log2;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned long long warp =
        (unsigned long long)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const unsigned long long step = (unsigned long long)gridDim.x * warps_per_block * rows_per_warp;
    // The loop's bounds are the same for the whole warp, so every lane reaches the shuffles.
    for (unsigned long long base = warp * rows_per_warp; base < rows; base += step) {
        const unsigned long long row = base + sub;
        float acc[W];
#pragma unroll
        for (int b = 0; b < W; ++b) acc[b] = 0.0f;
        if (row < rows) {
            const unsigned long long r0 = row * words;
#pragma unroll 2
            for (unsigned k = sl; k < words; k += per_row) {
                const unsigned long long i = r0 + k;
                const uint4 va = macko_load_stream(vals + 2 * i);
                const uint4 vb = macko_load_stream(vals + 2 * i + 1);
                const unsigned m = macko_load_stream(pos + i);
                const unsigned v[8] = {va.x, va.y, va.z, va.w, vb.x, vb.y, vb.z, vb.w};
                float a[16];
#pragma unroll
                for (int g = 0; g < 8; ++g) macko_unpack2(v[g], a[2 * g], a[2 * g + 1]);
#pragma unroll
                for (int b = 0; b < W; ++b) {
                    if (b < (int)count) {
                        float xe[16];
                        const unsigned short* xv = x + (unsigned long long)(first + b) * cols;
                        s24_gather<VEC>(xe, xv, 32u * k, cols, m, v);
#pragma unroll
                        for (int e = 0; e < 16; ++e) acc[b] = fmaf(a[e], xe[e], acc[b]);
                    }
                }
            }
        }
#pragma unroll
        for (int b = 0; b < W; ++b) {
            float s = acc[b];
            for (unsigned offset = per_row >> 1; offset > 0u; offset >>= 1) {
                s += __shfl_xor_sync(MACKO_FULL_MASK, s, offset);
            }
            if (sl == 0u && row < rows && b < (int)count) {
                macko_store(y + (unsigned long long)(first + b) * rows, (unsigned)row, s);
            }
        }
    }
}

// Every entry takes the same arguments (one launch path on the host): `_spmv_` the single
// vector (W = 1, first = 0, count = 1), `_batch_` a chunk; `xv` x in 16-byte loads (VEC), `xh`
// one half per live entry; `_f16` / `_f32` the output.
#define S24_ENTRY(NAME, W, VEC, OUT)                                                             \
    extern "C" __global__ void __launch_bounds__(S24_BLOCK)                                     \
        NAME(const uint4* __restrict__ vals, const unsigned* __restrict__ pos,                  \
             const unsigned short* __restrict__ x, OUT* __restrict__ y, unsigned rows,          \
             unsigned cols, unsigned words, unsigned lanes_log2, unsigned first,                \
             unsigned count) {                                                                  \
        s24_impl<W, VEC, OUT>(vals, pos, x, y, rows, cols, words, lanes_log2, first, count);   \
    }

S24_ENTRY(sparse24_spmv_xv_f16, 1, true, unsigned short)
S24_ENTRY(sparse24_spmv_xv_f32, 1, true, float)
S24_ENTRY(sparse24_spmv_xh_f16, 1, false, unsigned short)
S24_ENTRY(sparse24_spmv_xh_f32, 1, false, float)
S24_ENTRY(sparse24_batch_xv_w2_f16, 2, true, unsigned short)
S24_ENTRY(sparse24_batch_xv_w2_f32, 2, true, float)
S24_ENTRY(sparse24_batch_xv_w4_f16, 4, true, unsigned short)
S24_ENTRY(sparse24_batch_xv_w4_f32, 4, true, float)
S24_ENTRY(sparse24_batch_xv_w8_f16, 8, true, unsigned short)
S24_ENTRY(sparse24_batch_xv_w8_f32, 8, true, float)
S24_ENTRY(sparse24_batch_xv_w16_f16, 16, true, unsigned short)
S24_ENTRY(sparse24_batch_xv_w16_f32, 16, true, float)
S24_ENTRY(sparse24_batch_xh_w2_f16, 2, false, unsigned short)
S24_ENTRY(sparse24_batch_xh_w2_f32, 2, false, float)
S24_ENTRY(sparse24_batch_xh_w4_f16, 4, false, unsigned short)
S24_ENTRY(sparse24_batch_xh_w4_f32, 4, false, float)
S24_ENTRY(sparse24_batch_xh_w8_f16, 8, false, unsigned short)
S24_ENTRY(sparse24_batch_xh_w8_f32, 8, false, float)
S24_ENTRY(sparse24_batch_xh_w16_f16, 16, false, unsigned short)
S24_ENTRY(sparse24_batch_xh_w16_f32, 16, false, float)
