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
// after. Returns, in every thread, whether any stored sum is NaN.
template <typename Out, int NT, int MT>
__device__ __forceinline__ bool mma_reduce_store(float* red, const float (&acc)[MT][NT][4],
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
    bool nan = false;
    for (unsigned i = threadIdx.x; i < R * N; i += blockDim.x) {
        float s = 0.0f;
#pragma unroll
        for (unsigned w = 0; w < MMA_WARPS; ++w) s += red[w * R * N + i];
        const unsigned vec = i / R, row = r0 + i % R;
        if (vec < count && row < rows) {
            nan |= s != s;
            macko_store(y + (unsigned long long)(first + vec) * rows, row, s);
        }
    }
    return __syncthreads_or(nan ? 1 : 0) != 0;
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
        (void)mma_reduce_store<Out, NT, MT>(red, acc, y, rows, r0, first, count);
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

// ---------------------------------------------------------------------------------------------
// MACKO-16-4 rows: load as sparse, compute as dense. A block owns a band of 16 rows at a time
// (bands grid-stride over a persistent grid); warp w of its 16 takes the band's columns
// [w·sw, (w+1)·sw) (sw: `split_width`, a multiple of 32), starting each row at the cursor the
// upload computed for that column (src/backend/cuda/cursors.rs: the group holding the row's
// first entry at or after the split's first column, and the column after the entry before that
// group), and walks them in windows of K columns (K: `window`, a multiple of 32):
//
//   1. zero the warp's 16 × K tile of binary16 in shared memory (rows padded by MMA_TILE_PAD
//      halves, so that the 16-byte reads of rows g and g+8 in step 3 fall in different banks);
//   2. decode: teams of L lanes (`lanes`: 4, 8, 16 or 32, by the stored density) take one row
//      each (32 / L rows at once, 16 rows in L / 2 rounds); each lane of a team one aligned group of 8 entries (one 16-byte value load,
//      one 32-bit code load: common.cuh's macko_mask and macko_prefix), the team's prefix sum of
//      the groups' column advances giving every entry its column; the entries inside the window
//      are stored in the tile.
//      A group with an entry at or past the window's end is kept as the row's cursor (its
//      entries below the end are stored now, the rest in the next window);
//   3. K/32 pairs of mma steps as in the dense kernel: A from the tile, B straight from X.
//
// The warps' sums meet in shared memory (the tiles' space, once every warp is done with them).
//
// Padding never contributes, even where X holds ±∞ or NaN: a zero of the tile times ∞ is NaN on
// tensor cores too. A NaN that such a product makes survives every addition, so a band whose
// sums hold no NaN is exact; a band with a NaN sum is computed again on CUDA cores from the same
// tiles (mma_exact_window: only the tile's non-zero entries are multiplied), which also
// reproduces the NaN where a real entry meets a non-finite x. Finite X never takes that path.
#define MMA_TILE_PAD 32

// The tile row stride in halves for a window of `window` columns.
__device__ __forceinline__ unsigned mma_tile_stride(unsigned window) {
    return window + MMA_TILE_PAD;
}

// Zeroes the first `window` columns of the warp's 16 tile rows (16-byte stores).
__device__ __forceinline__ void mma_zero_tile(unsigned short* tile, unsigned window,
                                              unsigned lane) {
    const unsigned words = window / 8u;  // 16-byte words per row
    for (unsigned i = lane; i < 16u * words; i += 32u) {
        const unsigned r = i / words, w = i % words;
        *reinterpret_cast<uint4*>(tile + r * mma_tile_stride(window) + 8u * w) =
            make_uint4(0u, 0u, 0u, 0u);
    }
}

// Stores value half `h` (entry bits) at column `col` of the tile row when it is inside the
// window [k0, k0 + kw). Zero values are stored too: a padding entry, or a masked entry of the
// row's last group (columns after the row's last entry), writes 0 where the tile is 0 already
// (a row's columns strictly increase, so no real entry shares its column); masked entries of
// the row's first group fall below column 0 (wrapping past the window).
__device__ __forceinline__ void mma_scatter1(unsigned short* trow, unsigned short h, unsigned col,
                                             unsigned k0, unsigned kw) {
    if (col - k0 < kw) trow[col - k0] = h;
}

// One group's 8 entries into the tile row (b0: the column of the group's entry before its
// first, minus lo, as in batch.cu's batch_macko_chunk).
__device__ __forceinline__ void mma_scatter_group(unsigned short* trow, const uint4 v, unsigned pl,
                                                  unsigned ph, unsigned b0, unsigned k0,
                                                  unsigned kw) {
    const unsigned b1 = b0 + (pl >> 24);
    mma_scatter1(trow, (unsigned short)(v.x & 0xffffu), b0 + __byte_perm(pl, 0u, 0x4440), k0, kw);
    mma_scatter1(trow, (unsigned short)(v.x >> 16), b0 + __byte_perm(pl, 0u, 0x4441), k0, kw);
    mma_scatter1(trow, (unsigned short)(v.y & 0xffffu), b0 + __byte_perm(pl, 0u, 0x4442), k0, kw);
    mma_scatter1(trow, (unsigned short)(v.y >> 16), b1, k0, kw);
    mma_scatter1(trow, (unsigned short)(v.z & 0xffffu), b1 + __byte_perm(ph, 0u, 0x4440), k0, kw);
    mma_scatter1(trow, (unsigned short)(v.z >> 16), b1 + __byte_perm(ph, 0u, 0x4441), k0, kw);
    mma_scatter1(trow, (unsigned short)(v.w & 0xffffu), b1 + __byte_perm(ph, 0u, 0x4442), k0, kw);
    mma_scatter1(trow, (unsigned short)(v.w >> 16), b1 + (ph >> 24), k0, kw);
}

// Per-row decoding state of a warp's split, held by lane r (and r + 16) for band row r: the
// row's entry range, the cursor group and the column after the entry before it.
struct MmaCursor {
    unsigned start, end, group, next;
};

// Decodes one row per team of L lanes (L: 4, 8, 16 or 32) for the window [k0, k0 + kw) into
// its tile row, from cursor (group, next), which it advances. Called by every lane of the warp;
// loops while any team of the warp has groups left in the window.
__device__ __forceinline__ void mma_decode_row(const uint4* __restrict__ values,
                                               const unsigned* __restrict__ codes,
                                               unsigned short* trow, unsigned start, unsigned end,
                                               unsigned& group, unsigned& next, unsigned k0,
                                               unsigned kw, unsigned lane, unsigned L) {
    const unsigned tl = lane % L, team = lane / L;
    const unsigned kend = k0 + kw;
    const unsigned w_end = (end + 7u) >> 3;
    bool active = group < w_end;
    while (__any_sync(MACKO_FULL_MASK, active)) {
        const unsigned w = group + tl;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        unsigned c = 0u;
        if (active && w < w_end) {
            v = __ldg(values + w);
            c = __ldg(codes + w);
        }
        unsigned lo, hi;
        macko_mask(w, start, end, v, c, lo, hi);
        if (!active) lo = hi = 0u;
        unsigned pl, ph;
        macko_prefix(c, pl, ph);
        // Columns the group advances the row by (0 for a group with no entry of the row).
        const unsigned adv = (pl >> 24) + (ph >> 24) - 8u + (hi - lo);
        unsigned incl = adv;
        for (unsigned off = 1u; off < L; off <<= 1) {
            const unsigned up = __shfl_up_sync(MACKO_FULL_MASK, incl, off, (int)L);
            if (tl >= off) incl += up;
        }
        const unsigned total = __shfl_sync(MACKO_FULL_MASK, incl, (int)L - 1, (int)L);
        const unsigned base = next + incl - adv;  // the column after the entry before the group
        if (active) mma_scatter_group(trow, v, pl, ph, base - 1u - lo, k0, kw);
        // A group with an entry at or past the window's end stays the cursor.
        const bool unfinished = active && adv != 0u && base + adv > kend;
        const unsigned ballot = __ballot_sync(MACKO_FULL_MASK, unfinished);
        const unsigned mine = (ballot >> (team * L)) & (L == 32 ? 0xffffffffu : ((1u << L) - 1u));
        const unsigned f = mine != 0u ? (unsigned)__ffs(mine) - 1u : 0u;
        const unsigned f_base = __shfl_sync(MACKO_FULL_MASK, base, (int)f, (int)L);
        if (active) {
            if (mine != 0u) {
                group += f;
                next = f_base;
                active = false;
            } else {
                group += L;
                next += total;
                active = group < w_end;
            }
        }
    }
}

// Step 2 for the warp's 16 rows: L / 2 rounds of 32 / L rows; each row's cursor comes from
// lane r of `cur` and goes back there.
__device__ __forceinline__ void mma_decode_window(const uint4* __restrict__ values,
                                                  const unsigned* __restrict__ codes,
                                                  unsigned short* tile, unsigned stride,
                                                  MmaCursor& cur, unsigned k0, unsigned kw,
                                                  unsigned lane, unsigned L) {
    const unsigned T = 32u / L;  // rows decoded at once
    const unsigned team = lane / L;
#pragma unroll 1
    for (unsigned q = 0; q < 16u; q += T) {
        const unsigned rr = q + team;
        const unsigned start = __shfl_sync(MACKO_FULL_MASK, cur.start, rr);
        const unsigned end = __shfl_sync(MACKO_FULL_MASK, cur.end, rr);
        unsigned group = __shfl_sync(MACKO_FULL_MASK, cur.group, rr);
        unsigned next = __shfl_sync(MACKO_FULL_MASK, cur.next, rr);
        mma_decode_row(values, codes, tile + rr * stride, start, end, group, next, k0, kw, lane, L);
        // Lane r takes back row r's cursor from the first lane of its team.
        const unsigned r = lane & 15u;
        const unsigned src = ((r - q) & (T - 1u)) * L;
        const unsigned g2 = __shfl_sync(MACKO_FULL_MASK, group, src);
        const unsigned n2 = __shfl_sync(MACKO_FULL_MASK, next, src);
        if (r >= q && r < q + T) {
            cur.group = g2;
            cur.next = n2;
        }
    }
}

// Step 3: the window's tile times X's columns k0 .. k0 + kw (rounded up to 32: the tile is zero
// past kw, X zero past the last column).
template <int NT>
__device__ __forceinline__ void mma_window(const unsigned short* tile, unsigned stride,
                                           const unsigned short* __restrict__ x, unsigned cols,
                                           unsigned first, unsigned count, unsigned k0,
                                           unsigned kw, unsigned lane, float (&acc)[NT][4]) {
    const unsigned g = lane >> 2, t = lane & 3u;
    const unsigned short* rg = tile + g * stride + 8u * t;
    const unsigned short* rh = rg + 8u * stride;
    for (unsigned s = 0; s < kw; s += 32u) {
        const uint4 lo = *reinterpret_cast<const uint4*>(rg + s);
        const uint4 hi = *reinterpret_cast<const uint4*>(rh + s);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const uint4 b = mma_load_x(x, cols, first, count, 8u * j + g, k0 + s + 8u * t);
            mma_32cols(acc[j], lo, hi, b);
        }
    }
}

// The exact path of step 3 on CUDA cores: lane (g, t) adds, for its fragment's rows g, g+8 and
// vectors 8j + 2t, 8j + 2t + 1, the products of the tile's non-zero entries only.
template <int NT>
__device__ __forceinline__ void mma_exact_window(const unsigned short* tile, unsigned stride,
                                                 const unsigned short* __restrict__ x,
                                                 unsigned cols, unsigned first, unsigned count,
                                                 unsigned k0, unsigned kw, unsigned lane,
                                                 float (&acc)[NT][4]) {
    const unsigned g = lane >> 2, t = lane & 3u;
    for (unsigned k = 0; k < kw && k0 + k < cols; ++k) {
        const unsigned short hg = tile[g * stride + k], hh = tile[(g + 8u) * stride + k];
        if (((hg | hh) & 0x7fffu) == 0u) continue;
        const float ag = macko_h2f(hg), ah = macko_h2f(hh);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
            for (unsigned e = 0; e < 2u; ++e) {
                const unsigned v = 8u * j + 2u * t + e;
                if (v >= count) continue;
                const float xv =
                    macko_h2f(__ldg(x + (unsigned long long)(first + v) * cols + k0 + k));
                if (hg & 0x7fffu) acc[j][e] = fmaf(ag, xv, acc[j][e]);
                if (hh & 0x7fffu) acc[j][2 + e] = fmaf(ah, xv, acc[j][2 + e]);
            }
        }
    }
}

// One band: every warp's split, window by window, then the block's sums into y. Returns whether
// a stored sum is NaN (every thread).
template <typename Out, int NT, bool EXACT>
__device__ __forceinline__ bool macko_mma_band(
    const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,
    const unsigned* __restrict__ codes, const uint2* __restrict__ cursors,
    const unsigned short* __restrict__ x, Out* __restrict__ y, unsigned short* tiles,
    unsigned rows, unsigned cols, unsigned split_width, unsigned window, unsigned lanes,
    unsigned first, unsigned count, unsigned r0) {
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32u;
    const unsigned stride = mma_tile_stride(window);
    unsigned short* tile = tiles + warp * 16u * stride;
    float acc[1][NT][4];  // one m-tile: the layout mma_reduce_store takes
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[0][j][q] = 0.0f;
    const unsigned lo_col = warp * split_width;
    const unsigned hi_col = min(lo_col + split_width, cols);
    if (lo_col < hi_col) {
        const unsigned row = r0 + (lane & 15u);
        MmaCursor cur = {0u, 0u, 0u, 0u};
        if (row < rows) {
            cur.start = __ldg(row_ptr + row);
            cur.end = __ldg(row_ptr + row + 1u);
            const uint2 c = __ldg(cursors + (unsigned long long)row * MMA_WARPS + warp);
            cur.group = c.x;
            cur.next = c.y;
        }
        for (unsigned k0 = lo_col; k0 < hi_col; k0 += window) {
            const unsigned kw = min(window, hi_col - k0);
            mma_zero_tile(tile, window, lane);
            __syncwarp();
            mma_decode_window(values, codes, tile, stride, cur, k0, kw, lane, lanes);
            __syncwarp();
            if (EXACT) {
                mma_exact_window<NT>(tile, stride, x, cols, first, count, k0, kw, lane, acc[0]);
            } else {
                mma_window<NT>(tile, stride, x, cols, first, count, k0, kw, lane, acc[0]);
            }
            __syncwarp();
        }
    }
    __syncthreads();  // the partial sums reuse the tiles' shared memory
    return mma_reduce_store<Out, NT, 1>(reinterpret_cast<float*>(tiles), acc, y, rows, r0, first,
                                        count);
}

template <typename Out, int NT>
__device__ __forceinline__ void macko_mma_impl(
    const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,
    const unsigned* __restrict__ codes, const uint2* __restrict__ cursors,
    const unsigned short* __restrict__ x, Out* __restrict__ y, unsigned rows, unsigned cols,
    unsigned split_width, unsigned window, unsigned lanes, unsigned first, unsigned count) {
    extern __shared__ uint4 mma_smem[];
    unsigned short* tiles = reinterpret_cast<unsigned short*>(mma_smem);
    const unsigned bands = (rows + 15u) / 16u;
    for (unsigned band = blockIdx.x; band < bands; band += gridDim.x) {
        const unsigned r0 = band * 16u;
        if (macko_mma_band<Out, NT, false>(row_ptr, values, codes, cursors, x, y, tiles, rows,
                                           cols, split_width, window, lanes, first, count,
                                           r0)) {
            (void)macko_mma_band<Out, NT, true>(row_ptr, values, codes, cursors, x, y, tiles,
                                                rows, cols, split_width, window, lanes, first,
                                                count, r0);
        }
    }
}

#define MACKO_MMA_ENTRY(NAME, OUT, NT)                                                          \
    extern "C" __global__ void __launch_bounds__(MMA_BLOCK, 2)                                 \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const uint2* __restrict__ cursors,             \
             const unsigned short* __restrict__ x, OUT* __restrict__ y, unsigned rows,          \
             unsigned cols, unsigned split_width, unsigned window, unsigned lanes,              \
             unsigned first, unsigned count) {                                                  \
        macko_mma_impl<OUT, NT>(row_ptr, values, codes, cursors, x, y, rows, cols,              \
                                split_width, window, lanes, first, count);                      \
    }

MACKO_MMA_ENTRY(macko_batch_mma_w2_f16, unsigned short, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w2_f32, float, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w4_f16, unsigned short, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w4_f32, float, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w8_f16, unsigned short, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w8_f32, float, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w16_f16, unsigned short, 2)
MACKO_MMA_ENTRY(macko_batch_mma_w16_f32, float, 2)
