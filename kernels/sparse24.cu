// 2:4 structured-sparsity products Y = A·X (README.md, "2:4 structured sparsity"): one vector
// (W = 1) or a chunk of up to 16 (W = 2, 4, 8, 16, the chunk's count rounded up to a power of
// two), binary16 values, f32 accumulation, f16 or f32 out. On the CUDA cores: the path of GPUs
// without sparse tensor cores (below compute capability 8.0; elsewhere sparse24_mma.cu runs,
// unless `cuda.s24_mma=off` forces these kernels).
//
// The matrix as uploaded (src/backend/sparse24_rows.rs, the layout the wgpu kernels read too):
// every row is `words` words of 8 groups (32 columns), padded with zero groups to whole words;
// word i = row · words + k holds
// - `vals[2i]`, `vals[2i + 1]`: two 16-byte words, u32 g of the pair the binary16 values of
//   group 8k + g (the first position's in the low half);
// - `pos[i]`: one u32 of the 8 groups' positions, in the order `s24_selectors` reads (the CUDA
//   upload permutes the format's nibbles into it; wgpu reads the nibbles as they are).
// So a lane's loads per word are two 16-byte loads of values and one 4-byte load of positions
// (evict-first: the matrix is read once per product), and its columns start at a multiple of 32.
//
// Lanes: a row takes L = 2^lanes_log2 lanes (the host picks the smallest power of two covering
// the row's words, at most 32), so a warp multiplies 32 / L rows at once; a row's lanes take
// its words k, k + L, … and their sums meet by L-wide xor shuffles. Rows by stride over the
// grid's warps (the host sizes the single-vector grid to the blocks resident at once).
//
// x: with VEC (x's vectors start on 16-byte boundaries: the allocation is aligned and, for a
// batch, cols % 8 == 0; the host checks the pointer), a word's 32 columns of one vector are four
// 16-byte loads through the read-only cache (those at or past cols are not read: zero), from
// which one `prmt` per group picks its two halves; otherwise each live entry loads its own half.
// XS (one vector, VEC): the block first copies x into dynamic shared memory and the four loads
// read it there. X is read
// as it is ([batch][cols]), no transposition: the chunk's vectors are W passes of these loads
// over the same word, the matrix word being decoded once for the W vectors.
//
// Zero values (a group's fill, padding positions at or past cols, padding groups) contribute
// nothing even where x holds NaN or ±∞: their x is masked to 0 before the multiplication,
// and a padding position's x is never loaded (scalar path) or lies in the zero-filled part of
// the word (VEC path, past cols). As in the CPU and reference products.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define S24_BLOCK 512

// Positions as uploaded (sparse24.rs, `selector_word`, a permutation of the format's nibbles):
// bits 8q + 2j and 8q + 2j + 1 of a word's u32 hold field q of groups 2j and 2j + 1 (q = 0, 1
// the first and second positions of group 2j; q = 2, 3 those of group 2j + 1). So
// (m >> 2j) & 0x03030303 holds one position per byte, and times 0x22 plus 0x10101010 it is
// the two groups' `prmt` selectors (low and high 16 bits): nibbles 2p and 2p + 1 pick position
// p's binary16 out of the group's 8 bytes of x, the first value's x into the low half. Three
// instructions for two groups, where extracting and selecting each position alone took ~5 per
// entry.
__device__ __forceinline__ unsigned s24_selectors(unsigned m, int j) {
    return ((m >> (2 * j)) & 0x03030303u) * 0x22u + 0x10101010u;
}

// 0xffff in each half of the value pair v that is not ±0 (a NaN value is live: it reaches y):
// the mask that keeps a zero value's x, NaN or ±∞ included, out of the product.
__device__ __forceinline__ unsigned s24_live(unsigned v) {
    unsigned r;
    asm("set.neu.u32.f16x2 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(0u));
    return r;
}

// Adds one vector's share of a word (8 groups at columns c0 ..) to acc: a the 16 values as
// f32, sel / live each group's selector and mask, xv the vector (cols halves).
template <bool VEC, bool XS>
__device__ __forceinline__ void s24_word_dot(float& acc, const unsigned short* __restrict__ xv,
                                             unsigned c0, unsigned cols, const float (&a)[16],
                                             const unsigned (&sel)[8],
                                             const unsigned (&live)[8]) {
    if (VEC) {
        unsigned w[16];
        const uint4* p = reinterpret_cast<const uint4*>(xv + c0);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint4 t = (c0 + 8u * q < cols) ? (XS ? p[q] : __ldg(p + q))
                                                 : make_uint4(0u, 0u, 0u, 0u);
            w[4 * q] = t.x;
            w[4 * q + 1] = t.y;
            w[4 * q + 2] = t.z;
            w[4 * q + 3] = t.w;
        }
#pragma unroll
        for (int g = 0; g < 8; ++g) {
            float x0, x1;
            macko_unpack2(__byte_perm(w[2 * g], w[2 * g + 1], sel[g]) & live[g], x0, x1);
            acc = fmaf(a[2 * g], x0, acc);
            acc = fmaf(a[2 * g + 1], x1, acc);
        }
    } else {
#pragma unroll
        for (int g = 0; g < 8; ++g) {
            const unsigned c = c0 + 4u * g;
            // A live value lies below cols (the format's padding positions hold zeros).
            const float x0 =
                (live[g] & 0xffffu) ? macko_h2f(__ldg(xv + c + ((sel[g] >> 1) & 3u))) : 0.0f;
            const float x1 =
                (live[g] >> 16) ? macko_h2f(__ldg(xv + c + ((sel[g] >> 9) & 3u))) : 0.0f;
            acc = fmaf(a[2 * g], x0, acc);
            acc = fmaf(a[2 * g + 1], x1, acc);
        }
    }
}

// One word of a row for the chunk's vectors: its values unpacked, selectors and masks made once
// for the W vectors.
template <int W, bool VEC, bool XS>
__device__ __forceinline__ void s24_word(float (&acc)[W], const uint4 va, const uint4 vb,
                                         const unsigned m, const unsigned short* __restrict__ x,
                                         unsigned c0, unsigned cols, unsigned first,
                                         unsigned count) {
    const unsigned v[8] = {va.x, va.y, va.z, va.w, vb.x, vb.y, vb.z, vb.w};
    float a[16];
    unsigned sel[8], live[8];
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        macko_unpack2(v[g], a[2 * g], a[2 * g + 1]);
        live[g] = s24_live(v[g]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        sel[2 * j] = s24_selectors(m, j);
        sel[2 * j + 1] = sel[2 * j] >> 16;
    }
#pragma unroll
    for (int b = 0; b < W; ++b) {
        if (b < (int)count) {
            s24_word_dot<VEC, XS>(acc[b], x + (unsigned long long)(first + b) * cols, c0, cols, a,
                              sel, live);
        }
    }
}

// U words per lane in flight: a batch's matrix loads are all issued before its first word is
// used (words past the row are not loaded). XS (one vector, VEC): x copied into dynamic shared
// memory first (cols halves, the host sizes it), the words of x then read from there.
template <int W, int U, bool VEC, bool XS, typename Out>
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
    extern __shared__ uint4 s24_xs[];
    if (XS) {
        const uint4* x4 = reinterpret_cast<const uint4*>(x);
        for (unsigned i = threadIdx.x; i < cols / 8u; i += blockDim.x) s24_xs[i] = __ldg(x4 + i);
        __syncthreads();
        x = reinterpret_cast<const unsigned short*>(s24_xs);
    }
    // The loop's bounds are the same for the whole warp, so every lane reaches the shuffles.
    for (unsigned long long base = warp * rows_per_warp; base < rows; base += step) {
        const unsigned long long row = base + sub;
        float acc[W];
#pragma unroll
        for (int b = 0; b < W; ++b) acc[b] = 0.0f;
        if (row < rows) {
            const unsigned long long r0 = row * words;
            for (unsigned k0 = sl; k0 < words; k0 += U * per_row) {
                uint4 va[U], vb[U];
                unsigned m[U];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const unsigned k = k0 + u * per_row;
                    if (u == 0 || k < words) {
                        const unsigned long long i = r0 + k;
                        va[u] = macko_load_stream(vals + 2 * i);
                        vb[u] = macko_load_stream(vals + 2 * i + 1);
                        m[u] = macko_load_stream(pos + i);
                    }
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const unsigned k = k0 + u * per_row;
                    if (u == 0 || k < words) {
                        s24_word<W, VEC, XS>(acc, va[u], vb[u], m[u], x, 32u * k, cols, first,
                                         count);
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
// vector (W = 1, first = 0, count = 1), two words per lane in flight under 64 registers (two
// blocks per SM), `xs` with x staged in shared memory; `_batch_` a chunk (U = 2 for W = 2 and 4,
// 1 for W = 8 and 16, the counts that compile without spills); `xv` x in 16-byte loads (VEC),
// `xh` one half per live entry; `_f16` / `_f32` the output.
#define S24_ENTRY(NAME, W, U, VEC, XS, OUT, BOUNDS)                                              \
    extern "C" __global__ void __launch_bounds__ BOUNDS                                       \
        NAME(const uint4* __restrict__ vals, const unsigned* __restrict__ pos,                  \
             const unsigned short* __restrict__ x, OUT* __restrict__ y, unsigned rows,          \
             unsigned cols, unsigned words, unsigned lanes_log2, unsigned first,                \
             unsigned count) {                                                                  \
        s24_impl<W, U, VEC, XS, OUT>(vals, pos, x, y, rows, cols, words, lanes_log2, first,    \
                                     count);                                                    \
    }

S24_ENTRY(sparse24_spmv_xs_f16, 1, 2, true, true, unsigned short, (S24_BLOCK, 2))
S24_ENTRY(sparse24_spmv_xs_f32, 1, 2, true, true, float, (S24_BLOCK, 2))
S24_ENTRY(sparse24_spmv_xv_f16, 1, 2, true, false, unsigned short, (S24_BLOCK, 2))
S24_ENTRY(sparse24_spmv_xv_f32, 1, 2, true, false, float, (S24_BLOCK, 2))
S24_ENTRY(sparse24_spmv_xh_f16, 1, 2, false, false, unsigned short, (S24_BLOCK, 2))
S24_ENTRY(sparse24_spmv_xh_f32, 1, 2, false, false, float, (S24_BLOCK, 2))
S24_ENTRY(sparse24_batch_xv_w2_f16, 2, 2, true, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xv_w2_f32, 2, 2, true, false, float, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xv_w4_f16, 4, 2, true, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xv_w4_f32, 4, 2, true, false, float, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xv_w8_f16, 8, 1, true, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xv_w8_f32, 8, 1, true, false, float, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xv_w16_f16, 16, 1, true, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xv_w16_f32, 16, 1, true, false, float, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w2_f16, 2, 2, false, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w2_f32, 2, 2, false, false, float, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w4_f16, 4, 2, false, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w4_f32, 4, 2, false, false, float, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w8_f16, 8, 1, false, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w8_f32, 8, 1, false, false, float, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w16_f16, 16, 1, false, false, unsigned short, (S24_BLOCK))
S24_ENTRY(sparse24_batch_xh_w16_f32, 16, 1, false, false, float, (S24_BLOCK))
