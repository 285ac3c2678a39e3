// 2:4 products Y = A·X on the sparse tensor cores (README.md, "2:4 structured sparsity: tensor
// cores"): mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 (sm_80+), one
// vector or a chunk of up to 16 (NT = 1 n-tile of 8 vectors for counts up to 8, 2 for up to
// 16), f32 accumulation, X read as it is ([batch][cols]).
//
// Fragments (PTX ISA, "Matrix fragments for mma.sp.m16n8k32 with .f16"; lane = 4·g + t):
//   A (16×32, 2:4, row): four u32, each the two kept values of one group of 4 columns
//     (chunk) of one row: r0 = row g chunk t, r1 = row g+8 chunk t, r2 = row g chunk t+4,
//     r3 = row g+8 chunk t+4 (the first position's value in the low half);
//   metadata: lane 4g + s (s = 0, 1; sparsity selector 0) holds the positions of chunks
//     4s .. 4s+3 of row g in bits 0–15 and of row g+8 in bits 16–31, a nibble per chunk
//     (first position in its low two bits: the format's nibble);
//   B (32×8, col): b_i = X[vector g][k0 + 2t + 8i, +1] for i = 0..3;
//   C/D (16×8 f32): c0, c1 = row g, vectors 2t, 2t+1; c2, c3 = row g+8.
//
// The matrix as uploaded (src/backend/cuda/sparse24_tiles.rs): tiles of 16 rows (their count
// even, the last rows zero), each cut into quads of four k-steps of 32 columns (128 columns;
// columns past the last zero). Per (tile, quad): `vals` 4 × 32 lanes × 16 bytes, one lane's A
// fragment of one k-step per 16 bytes, and `meta` 16 × 16 bytes, meta lane 2g + s's words of the
// four k-steps. So a warp's matrix loads are one coalesced 16-byte load per lane per k-step and
// one per meta lane per quad, with no decoding at all.
//
// A block of S24M_WARPS warps owns a band of MT tiles (16·MT rows; bands grid-stride); its warps
// split the band's quads into contiguous ranges, each warp loading a quad's A fragments (MT × 4
// 16-byte loads), metadata and X fragments (NT × 4 × 4-byte loads through the read-only cache,
// shared by the MT tiles) before its first mma. The warps' sums meet in shared memory
// (mma_reduce_store).
//
// Zeros never meet NaN or ±∞ of x (as in the other 2:4 kernels and the reference): a tensor
// core would multiply a group's stored zero by its x. So each quad's X fragments are checked
// (x·0 + … in f16x2: ±0 unless some x is not finite); where any lane of the warp finds a
// non-finite x, the warp multiplies that quad on the CUDA cores instead (s24m_exact_quad),
// skipping zero values as the reference does. Healthy activations never take that path.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define S24M_BLOCK 256
#define S24M_WARPS (S24M_BLOCK / 32)
// Tiles of a band: two, whose mma share each X fragment (measured against one on an H200:
// the same speed for one to four vectors, much faster for 8 and 16, whose X loads bound the
// kernel; kernels/README.md, "2:4 on the sparse tensor cores").
#define S24M_MT 2

// D += A·B for one k-step: a the lane's A fragment, b its B fragment, e its metadata word.
__device__ __forceinline__ void mma_sp_16832(float (&d)[4], const uint4 a, const unsigned (&b)[4],
                                             unsigned e) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),
          "r"(e));
#else
    __trap();
#endif
}

// Word kk of a uint4.
__device__ __forceinline__ unsigned s24m_word(const uint4 v, int kk) {
    return kk == 0 ? v.x : kk == 1 ? v.y : kk == 2 ? v.z : v.w;
}

// acc + w·0 in f16x2: stays ±0 while every x seen is finite, NaN from the first ±∞ or NaN.
__device__ __forceinline__ unsigned s24m_poison(unsigned acc, unsigned w) {
    unsigned r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(w), "r"(0u), "r"(acc));
    return r;
}

// The pair of binary16 of vector row `xv` at columns c, c + 1 (zero at or past cols). PAIRS:
// cols is even, so the pair is one aligned 4-byte load.
template <bool PAIRS>
__device__ __forceinline__ unsigned s24m_x_pair(const unsigned short* __restrict__ xv, unsigned c,
                                                unsigned cols) {
    if (PAIRS) return c < cols ? __ldg(reinterpret_cast<const unsigned*>(xv + c)) : 0u;
    const unsigned lo = c < cols ? __ldg(xv + c) : 0u;
    const unsigned hi = c + 1u < cols ? __ldg(xv + c + 1u) : 0u;
    return lo | (hi << 16);
}

// The quad starting at column k0 on the CUDA cores, exactly as the reference: each lane takes
// the values of its A fragments (rows g, g+8; chunks t, t+4 of each k-step), finds their columns
// in the metadata words of lanes 4g and 4g + 1, skips zero values and multiplies the rest by
// x; the four lanes of a row meet by shuffles and the lane holding (row, vector) in C adds it.
template <int NT, int MT, bool PAIRS>
__device__ __forceinline__ void s24m_exact_quad(float (&acc)[MT][NT][4], const uint4 (&a)[MT][4],
                                             const uint4 (&e)[MT],
                                             const unsigned short* __restrict__ x,
                                             unsigned cols, unsigned k0, unsigned first,
                                             unsigned count) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned t = lane & 3u;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const uint4 v = a[mt][kk];
            const unsigned ew = s24m_word(e[mt], kk);
            // pair[r][h]: row g + 8r, chunk t + 4h; nib the same group's positions.
            const unsigned pair[2][2] = {{v.x, v.z}, {v.y, v.w}};
            unsigned nib[2][2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const unsigned mw = __shfl_sync(MACKO_FULL_MASK, ew, (lane & ~3u) | (unsigned)h);
                nib[0][h] = (mw >> (4u * t)) & 15u;
                nib[1][h] = (mw >> (16u + 4u * t)) & 15u;
            }
            const unsigned step = k0 + 32u * kk;
#pragma unroll
            for (int n = 0; n < 8 * NT; ++n) {
                if ((unsigned)n >= count) break;
                const unsigned short* xv = x + (unsigned long long)(first + n) * cols;
                float s[2] = {0.0f, 0.0f};
#pragma unroll
                for (int r = 0; r < 2; ++r) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const unsigned c = step + 4u * (t + 4u * h);
                        const unsigned p = pair[r][h], m = nib[r][h];
                        // A live value lies below cols (padding positions hold zeros).
                        if (p & 0x7fffu) {
                            s[r] = fmaf(macko_h2f((unsigned short)p), macko_h2f(__ldg(xv + c + (m & 3u))), s[r]);
                        }
                        if (p & 0x7fff0000u) {
                            s[r] = fmaf(macko_h2f((unsigned short)(p >> 16)),
                                        macko_h2f(__ldg(xv + c + (m >> 2))), s[r]);
                        }
                    }
                    s[r] += __shfl_xor_sync(MACKO_FULL_MASK, s[r], 1);
                    s[r] += __shfl_xor_sync(MACKO_FULL_MASK, s[r], 2);
                }
                if (t == (unsigned)((n & 7) >> 1)) {
                    acc[mt][n >> 3][n & 1] += s[0];
                    acc[mt][n >> 3][2 + (n & 1)] += s[1];
                }
            }
        }
    }
}

template <int NT, int MT, bool PAIRS, typename Out>
__device__ __forceinline__ void s24m_impl(const uint4* __restrict__ vals,
                                          const uint4* __restrict__ meta,
                                          const unsigned short* __restrict__ x,
                                          Out* __restrict__ y, unsigned rows, unsigned cols,
                                          unsigned tiles, unsigned quads, unsigned first,
                                          unsigned count) {
    __shared__ float red[S24M_WARPS * 16 * MT * 8 * NT];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned g = lane >> 2, t = lane & 3u;
    const unsigned bands = tiles / MT;
    const unsigned per_warp = (quads + S24M_WARPS - 1u) / S24M_WARPS;
    const unsigned q0 = min(warp * per_warp, quads), q1 = min(q0 + per_warp, quads);
    // This lane's vector of each n-tile (B fragment column g), or none past the chunk.
    const unsigned short* xv[NT];
    bool live[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const unsigned v = 8u * nt + g;
        live[nt] = v < count;
        xv[nt] = x + (unsigned long long)(first + (live[nt] ? v : 0u)) * cols;
    }
    for (unsigned band = blockIdx.x; band < bands; band += gridDim.x) {
        float acc[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
        for (unsigned q = q0; q < q1; ++q) {
            uint4 a[MT][4], e[MT];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const unsigned long long tq = (unsigned long long)(band * MT + mt) * quads + q;
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) a[mt][kk] = macko_load_stream(vals + (tq * 4u + kk) * 32u + lane);
                e[mt] = t < 2u ? macko_load_stream(meta + tq * 16u + 2u * g + t)
                               : make_uint4(0u, 0u, 0u, 0u);
            }
            const unsigned k0 = 128u * q;
            unsigned b[4][NT][4];
            unsigned poison = 0u;
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const unsigned c = k0 + 32u * kk + 2u * t + 8u * i;
                        b[kk][nt][i] = live[nt] ? s24m_x_pair<PAIRS>(xv[nt], c, cols) : 0u;
                        poison = s24m_poison(poison, b[kk][nt][i]);
                    }
            if (__any_sync(MACKO_FULL_MASK, (poison & 0x7fff7fffu) != 0u)) {
                s24m_exact_quad<NT, MT, PAIRS>(acc, a, e, x, cols, k0, first, count);
                continue;
            }
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
                        mma_sp_16832(acc[mt][nt], a[mt][kk], b[kk][nt], s24m_word(e[mt], kk));
        }
        (void)mma_reduce_store<Out, NT, MT, S24M_WARPS>(red, acc, y, rows, band * 16u * MT, first,
                                                         count);
    }
}

// `sparse24_mma_n{NT}_{p,h}_{f16,f32}`: NT n-tiles (counts up to 8 or 16), `p` x read in pairs
// (cols even) or `h` in halves.
#define S24M_ENTRY(NAME, NT, PAIRS, OUT)                                                         \
    extern "C" __global__ void __launch_bounds__(S24M_BLOCK)                                    \
        NAME(const uint4* __restrict__ vals, const uint4* __restrict__ meta,                    \
             const unsigned short* __restrict__ x, OUT* __restrict__ y, unsigned rows,          \
             unsigned cols, unsigned tiles, unsigned quads, unsigned first, unsigned count) {   \
        s24m_impl<NT, S24M_MT, PAIRS, OUT>(vals, meta, x, y, rows, cols, tiles, quads, first,   \
                                           count);                                              \
    }

S24M_ENTRY(sparse24_mma_n1_p_f16, 1, true, unsigned short)
S24M_ENTRY(sparse24_mma_n1_p_f32, 1, true, float)
S24M_ENTRY(sparse24_mma_n2_p_f16, 2, true, unsigned short)
S24M_ENTRY(sparse24_mma_n2_p_f32, 2, true, float)
S24M_ENTRY(sparse24_mma_n1_h_f16, 1, false, unsigned short)
S24M_ENTRY(sparse24_mma_n1_h_f32, 1, false, float)
S24M_ENTRY(sparse24_mma_n2_h_f16, 2, false, unsigned short)
S24M_ENTRY(sparse24_mma_n2_h_f32, 2, false, float)
