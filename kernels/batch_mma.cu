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

// ---------------------------------------------------------------------------------------------
// Dense rows (cols % 8 == 0). A block owns a band of 16·MT rows at a time (bands grid-stride over
// a persistent grid); its 16 warps split the columns: warp w takes the 32-column steps w, w + 16,
// … (so the block reads 1 KiB of each row at once), DENSE_MMA_UNROLL steps' loads in flight
// before the first mma. The warps' partial sums meet in shared memory (mma_reduce_store). IEEE
// as every GEMM: a stored zero times ∞ is NaN, tensor cores included. One m-tile per band and
// four steps in flight: measured on an H100 (2026-11-26, 8192², 28672×8192, 4096², 14336×4096,
// 4096×14336, medians over the shapes, two rounds each), our dense product against cuBLAS at
// B = 2 / 4 / 8 went from 0.92–0.95 (two m-tiles, two steps) to 0.96–1.00 (two m-tiles, four
// steps: a 4-byte spill at W ≤ 8) and 0.99–1.01 (two m-tiles, eight steps, one block per SM)
// or 0.99–1.01 (one m-tile, four steps, no spill: kept).
#define DENSE_MMA_MT 1
#define DENSE_MMA_UNROLL 4

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
        (void)mma_reduce_store<Out, NT, MT, MMA_WARPS>(red, acc, y, rows, r0, first, count);
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
// MACKO-16-4 rows: load as sparse, compute as dense, with the matrix's loads in flight while the
// tiles are decoded and multiplied. A block of MACKO_MMA_WARPS warps owns a band of 16 rows at a
// time (bands grid-stride over a persistent grid). The band's columns are cut into windows of
// MACKO_MMA_K columns; warp w takes windows w, w + NW, w + 2·NW, … An item is one window of one
// band; a warp walks its items (band after band) through a ring of MMA_STAGES shared-memory
// stages, the items' groups copied there with cp.async one item ahead of the one it decodes:
//
//   issue:  lane r (r < 16) describes row r of the item from the window cursors computed at
//           upload (src/backend/cuda/cursors.rs: per row and window, the group holding the row's
//           first entry at or after the window's first column and the column after the entry
//           before it); the next window's cursor bounds the row's groups. The rows' groups are
//           copied, row after row, into the stage (values and codes); the description goes to
//           the stage's 16-row table. Row pointers and cursors are loaded two items ahead.
//   decode: pairs of lanes decode one row each (16 rows at once), from the stage: a lane one
//           aligned group of 8 entries per step (common.cuh's macko_mask and macko_prefix), the
//           pair's prefix sum giving each entry its column; entries inside the window go to the
//           warp's 16 × K tile of binary16 (zeroed first; swizzled, mma_swizzle).
//   mma:    K / 32 pairs of mma steps as in the dense kernel: A from the tile, X's words loaded
//           (straight from its row-major storage) before the decode, so they arrive meanwhile.
//
// After a band's last item the warps' sums meet in a separate shared-memory area (the stages
// keep filling meanwhile). The window cursors make every item's loads known before any of its
// decoding, which the band-split design before this one lacked (each row's start in a window
// came from decoding the previous window): measured on an H100 (kernels/README.md, "Tensor
// cores"), that kernel reached 20–28 % of the streaming read at d = 0.5.
//
// Padding never contributes, even where X holds ±∞ or NaN: a zero of the tile times ∞ is NaN on
// tensor cores too. A NaN that such a product makes survives every addition, so a band whose
// sums hold no NaN is exact; a band with a NaN sum is computed again on CUDA cores (decoded from
// global memory into the tile; mma_exact_tile multiplies only the tile's non-zero entries),
// which also reproduces the NaN where a real entry meets a non-finite x. Finite X never takes
// that path.
#define MACKO_MMA_WARPS 8
#define MACKO_MMA_BLOCK (MACKO_MMA_WARPS * 32)
#define MACKO_MMA_K 128
#define MMA_TILE_STRIDE MACKO_MMA_K
// Stages of each warp's ring. Measured on an H100 (2026-11-26, 8192², 28672×8192, 4096²,
// 14336×4096 at d = 0.5 and 0.3, B = 2–16): 2 stages took 26–330 µs where 3 took 37–470 µs at
// d = 0.5 (with 2 a block's stages fit twice per SM: 16 warps instead of 8) and the same ±3 %
// at d = 0.3; 4 were slower still (up to 1.5× at d = 0.3).
#define MMA_STAGES 2

// The tile's layout: row r's column c is stored at r · K + (c ^ mma_swizzle(r)), i.e. its
// 16-byte chunks (8 columns) permuted by XOR with f(r) = 4·(r & 1) + ((r >> 1) & 3). Rows are
// 256 bytes (every row starts at bank 0), so without it the decode's scatter, in which the 16
// rows' lanes store entries of about the same column at once, hit the same banks: measured on
// an H100 (2026-11-26) the kernel took 128 µs at 8192², d = 0.5, whatever B (24 % of the
// streaming read), one entry per SM cycle. With f, rows 0–7 put the same column in 8 different
// 4-bank groups (rows r and r + 8 share one), and the mma reads stay conflict-free: in each
// quarter-warp phase rows 2q and 2q + 1 read chunks 4s .. 4s + 3, which f sends to the two
// complementary halves of the 8 groups (bit 2 of f is r & 1).
__device__ __forceinline__ unsigned mma_swizzle(unsigned r) {
    return ((((r & 1u) << 2) | ((r >> 1) & 3u)) << 3);
}
// Words of a row's description in a stage's table: first group, groups, stage offset, the
// column after the entry before the first group, the row's entry range.
#define MMA_DESC 6

// The shared-memory layout (bytes) of the MACKO tensor-core kernel: the block's sums area, then
// per warp its tile, its exact-path table, and MMA_STAGES × (table, values, codes). Must match
// `batch_plan::macko_mma_smem`.
__device__ __forceinline__ unsigned mma_red_bytes(unsigned nt) {
    return MACKO_MMA_WARPS * 16u * 8u * nt * 4u;
}
// A stage: its table, then the groups' values (16-byte words) and codes, rounded up to 16 bytes
// so that the next stage's values stay 16-byte aligned (cp.async's 16-byte copies need it).
__device__ __forceinline__ unsigned mma_stage_bytes(unsigned stage_groups) {
    return 16u * MMA_DESC * 4u + ((stage_groups * 20u + 15u) & ~15u);
}
__device__ __forceinline__ unsigned mma_warp_bytes(unsigned stage_groups) {
    return 16u * MMA_TILE_STRIDE * 2u + 16u * MMA_DESC * 4u +
           MMA_STAGES * mma_stage_bytes(stage_groups);
}

__device__ __forceinline__ unsigned mma_smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// cp.async (sm_80+): a 16-byte and a 4-byte copy from global to shared memory, committed as a
// group; mma_wait_stages waits until at most MMA_STAGES − 1 groups are pending (the item
// decoded next has arrived).
__device__ __forceinline__ void mma_copy16(void* dst, const void* src) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(mma_smem_addr(dst)), "l"(src));
#else
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}
__device__ __forceinline__ void mma_copy4(void* dst, const void* src) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(mma_smem_addr(dst)), "l"(src));
#else
    *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src);
#endif
}
__device__ __forceinline__ void mma_commit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;");
#endif
}
__device__ __forceinline__ void mma_wait_stages() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    static_assert(MMA_STAGES == 2, "the wait below leaves MMA_STAGES - 1 groups pending");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
#endif
}
__device__ __forceinline__ void mma_wait_all() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

// What an item's row descriptions are made from, loaded ahead: the row's entry range and its
// cursors for the window and the next (lane r and r + 16 hold row r).
struct MmaRaw {
    unsigned start, end, cur, cur_next;
    bool live;  // a row of the matrix in a window of it
};

// One row of an item, as the stage's table holds it.
struct MmaDesc {
    unsigned g0, n, next, start, end;
};

// Which band and window item i of this warp is (every warp has `per_band` items per band, the
// last ones empty where the windows do not divide evenly).
__device__ __forceinline__ void mma_item(unsigned i, unsigned per_band, unsigned warp,
                                         unsigned& band, unsigned& win) {
    band = blockIdx.x + (i / per_band) * gridDim.x;
    win = warp + (i % per_band) * MACKO_MMA_WARPS;
}

// Issues the loads of row (lane & 15)'s raw description of window `win` of band `band`.
__device__ __forceinline__ MmaRaw mma_raw(const unsigned* __restrict__ row_ptr,
                                          const unsigned* __restrict__ cursors, unsigned rows,
                                          unsigned nwin, unsigned band, unsigned win,
                                          unsigned lane) {
    MmaRaw r = {0u, 0u, 0u, 0u, false};
    const unsigned row = band * 16u + (lane & 15u);
    if (row >= rows || win >= nwin) return r;
    const unsigned long long at = (unsigned long long)row * nwin + win;
    r.start = __ldg(row_ptr + row);
    r.end = __ldg(row_ptr + row + 1u);
    r.cur = __ldg(cursors + at);
    r.cur_next = win + 1u < nwin ? __ldg(cursors + at + 1u) : 0xffffffffu;
    r.live = true;
    return r;
}

// The same for item i of this warp (nothing past its last item).
__device__ __forceinline__ MmaRaw mma_fetch(const unsigned* __restrict__ row_ptr,
                                            const unsigned* __restrict__ cursors, unsigned rows,
                                            unsigned nwin, unsigned i, unsigned items,
                                            unsigned per_band, unsigned warp, unsigned lane) {
    if (i >= items) return MmaRaw{0u, 0u, 0u, 0u, false};
    unsigned band, win;
    mma_item(i, per_band, warp, band, win);
    return mma_raw(row_ptr, cursors, rows, nwin, band, win, lane);
}

// The row's description from its raw one. A cursor packs the group relative to the row's first
// (start / 8) in bits 0–23 and the window's first column minus `next` (at most 128) in bits
// 24–31; the next window's cursor bounds the groups (its group may hold this window's last
// entries, so it is included); no next window: the row's last group.
__device__ __forceinline__ MmaDesc mma_describe(const MmaRaw& r, unsigned k0) {
    MmaDesc d = {0u, 0u, 0u, 0u, 0u};
    if (!r.live) return d;
    const unsigned base = r.start >> 3, w_end = (r.end + 7u) >> 3;
    d.g0 = base + (r.cur & 0xffffffu);
    d.next = k0 - (r.cur >> 24);
    d.start = r.start;
    d.end = r.end;
    const unsigned last = r.cur_next == 0xffffffffu ? w_end : min(base + (r.cur_next & 0xffffffu) + 1u, w_end);
    d.n = d.g0 < last ? last - d.g0 : 0u;
    return d;
}

// Writes the item's table and copies its rows' groups into the stage (every lane calls it; rows
// come from lanes 0–15). The upload sized the stages for the matrix's largest item
// (`cursors::stage_groups`); rows past that (never, for the uploaded matrix) are cut, not
// overrun.
__device__ __forceinline__ void mma_issue(unsigned* table, uint4* sv, unsigned* sc,
                                          const uint4* __restrict__ values,
                                          const unsigned* __restrict__ codes, MmaDesc d,
                                          unsigned stage_groups, unsigned lane) {
    const unsigned r = lane & 15u;
    unsigned incl = d.n;
#pragma unroll
    for (unsigned off = 1u; off < 16u; off <<= 1) {
        const unsigned up = __shfl_up_sync(MACKO_FULL_MASK, incl, off, 16);
        if (r >= off) incl += up;
    }
    const unsigned soff = min(incl - d.n, stage_groups);
    d.n = min(d.n, stage_groups - soff);
    if (lane < 16u) {
        unsigned* t = table + r * MMA_DESC;
        t[0] = d.g0;
        t[1] = d.n;
        t[2] = soff;
        t[3] = d.next;
        t[4] = d.start;
        t[5] = d.end;
    }
#pragma unroll 1
    for (unsigned p = 0; p < 16u; p += 2u) {
        const unsigned src = p + (lane >> 4);
        const unsigned n = __shfl_sync(MACKO_FULL_MASK, d.n, src);
        const unsigned g0 = __shfl_sync(MACKO_FULL_MASK, d.g0, src);
        const unsigned so = __shfl_sync(MACKO_FULL_MASK, soff, src);
        for (unsigned k = lane & 15u; k < n; k += 16u) {
            mma_copy16(sv + so + k, values + g0 + k);
            mma_copy4(sc + so + k, codes + g0 + k);
        }
    }
}

// Stores value half `h` (entry bits) at column `col` of the tile row when it is inside the
// window [k0, k0 + K). Zero values are stored too: a padding entry, or a masked entry of the
// row's last group (columns after the row's last entry), writes 0 where the tile is 0 already
// (a row's columns strictly increase, so no real entry shares its column); masked entries of
// the row's first group fall below column 0 (wrapping past the window); entries of the
// item's first and last groups outside the window are left to the neighbouring items.
__device__ __forceinline__ void mma_scatter1(unsigned short* trow, unsigned short h, unsigned col,
                                             unsigned k0, unsigned sw) {
    if (col - k0 < (unsigned)MACKO_MMA_K) trow[(col - k0) ^ sw] = h;
}

// One group's 8 entries into the tile row (b0: the column of the group's entry before its
// first, minus lo, as in batch.cu's batch_macko_chunk; sw: the row's mma_swizzle).
__device__ __forceinline__ void mma_scatter_group(unsigned short* trow, const uint4 v, unsigned pl,
                                                  unsigned ph, unsigned b0, unsigned k0,
                                                  unsigned sw) {
    const unsigned b1 = b0 + (pl >> 24);
    mma_scatter1(trow, (unsigned short)(v.x & 0xffffu), b0 + __byte_perm(pl, 0u, 0x4440), k0, sw);
    mma_scatter1(trow, (unsigned short)(v.x >> 16), b0 + __byte_perm(pl, 0u, 0x4441), k0, sw);
    mma_scatter1(trow, (unsigned short)(v.y & 0xffffu), b0 + __byte_perm(pl, 0u, 0x4442), k0, sw);
    mma_scatter1(trow, (unsigned short)(v.y >> 16), b1, k0, sw);
    mma_scatter1(trow, (unsigned short)(v.z & 0xffffu), b1 + __byte_perm(ph, 0u, 0x4440), k0, sw);
    mma_scatter1(trow, (unsigned short)(v.z >> 16), b1 + __byte_perm(ph, 0u, 0x4441), k0, sw);
    mma_scatter1(trow, (unsigned short)(v.w & 0xffffu), b1 + __byte_perm(ph, 0u, 0x4442), k0, sw);
    mma_scatter1(trow, (unsigned short)(v.w >> 16), b1 + (ph >> 24), k0, sw);
}

// Zeroes the warp's 16 tile rows (16-byte stores).
__device__ __forceinline__ void mma_zero_tile(unsigned short* tile, unsigned lane) {
    constexpr unsigned words = MACKO_MMA_K / 8u;  // 16-byte words per row
    for (unsigned i = lane; i < 16u * words; i += 32u) {
        const unsigned r = i / words, w = i % words;
        *reinterpret_cast<uint4*>(tile + r * MMA_TILE_STRIDE + 8u * w) = make_uint4(0u, 0u, 0u, 0u);
    }
}

// Maximum over the warp.
__device__ __forceinline__ unsigned mma_warp_max(unsigned v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = max(v, __shfl_xor_sync(MACKO_FULL_MASK, v, off));
    return v;
}

// Decodes the item described by `table` into the tile: lanes 2r and 2r + 1 take row r, one group
// each per step. STAGED: the groups are in the stage (sv, sc at the row's stage offset); else
// they are read from global memory (values, codes at the row's first group).
template <bool STAGED>
__device__ __forceinline__ void mma_decode(const unsigned* table, const uint4* vsrc,
                                           const unsigned* csrc, unsigned short* tile,
                                           unsigned k0, unsigned lane) {
    const unsigned rr = lane >> 1, tl = lane & 1u;
    const unsigned* t = table + rr * MMA_DESC;
    const unsigned g0 = t[0], n = t[1], start = t[4], end = t[5];
    unsigned next = t[3];
    const unsigned off = STAGED ? t[2] : g0;
    unsigned short* trow = tile + rr * MMA_TILE_STRIDE;
    const unsigned sw = mma_swizzle(rr);
    const unsigned steps = mma_warp_max((n + 1u) >> 1);
#pragma unroll 2
    for (unsigned s = 0; s < steps; ++s) {
        const unsigned k = 2u * s + tl;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        unsigned c = 0u, lo = 0u, hi = 0u;
        if (k < n) {
            if (STAGED) {
                v = vsrc[off + k];
                c = csrc[off + k];
            } else {
                v = __ldg(vsrc + off + k);
                c = __ldg(csrc + off + k);
            }
            macko_mask(g0 + k, start, end, v, c, lo, hi);
        }
        unsigned pl, ph;
        macko_prefix(c, pl, ph);
        // Columns the group advances the row by (0 for no group or one with no entry of the row).
        const unsigned adv = (pl >> 24) + (ph >> 24) - 8u + (hi - lo);
        const unsigned other = __shfl_xor_sync(MACKO_FULL_MASK, adv, 1);
        const unsigned base = next + (tl != 0u ? other : 0u);  // the column after the entry before
        if (k < n) mma_scatter_group(trow, v, pl, ph, base - 1u - lo, k0, sw);
        next += adv + other;
    }
}

// X's words of the item's K columns for the lane's fragments (zero past the count and the last
// column).
template <int NT>
__device__ __forceinline__ void mma_load_xs(const unsigned short* __restrict__ x, unsigned cols,
                                            unsigned first, unsigned count, unsigned k0,
                                            unsigned lane, uint4 (&b)[MACKO_MMA_K / 32][NT]) {
    const unsigned g = lane >> 2, t = lane & 3u;
#pragma unroll
    for (int s = 0; s < MACKO_MMA_K / 32; ++s)
#pragma unroll
        for (int j = 0; j < NT; ++j)
            b[s][j] = mma_load_x(x, cols, first, count, 8u * j + g, k0 + 32u * s + 8u * t);
}

// The tile times X's words.
template <int NT>
__device__ __forceinline__ void mma_tile(const unsigned short* tile, unsigned lane,
                                         const uint4 (&b)[MACKO_MMA_K / 32][NT],
                                         float (&acc)[NT][4]) {
    const unsigned g = lane >> 2, t = lane & 3u;
    const unsigned sw = mma_swizzle(g);  // rows g and g + 8 share it
    const unsigned short* rg = tile + g * MMA_TILE_STRIDE;
    const unsigned short* rh = rg + 8u * MMA_TILE_STRIDE;
#pragma unroll
    for (int s = 0; s < MACKO_MMA_K / 32; ++s) {
        const unsigned c = (32u * s + 8u * t) ^ sw;
        const uint4 lo = *reinterpret_cast<const uint4*>(rg + c);
        const uint4 hi = *reinterpret_cast<const uint4*>(rh + c);
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_32cols(acc[j], lo, hi, b[s][j]);
    }
}

// The exact path of the tile product on CUDA cores: lane (g, t) adds, for its fragment's rows g,
// g + 8 and vectors 8j + 2t, 8j + 2t + 1, the products of the tile's non-zero entries only.
template <int NT>
__device__ __forceinline__ void mma_exact_tile(const unsigned short* tile,
                                               const unsigned short* __restrict__ x,
                                               unsigned cols, unsigned first, unsigned count,
                                               unsigned k0, unsigned lane, float (&acc)[NT][4]) {
    const unsigned g = lane >> 2, t = lane & 3u;
    for (unsigned k = 0; k < MACKO_MMA_K && k0 + k < cols; ++k) {
        const unsigned short hg = tile[g * MMA_TILE_STRIDE + (k ^ mma_swizzle(g))];
        const unsigned short hh = tile[(g + 8u) * MMA_TILE_STRIDE + (k ^ mma_swizzle(g))];
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

// The band's product again, exactly (see the header): every warp its windows, decoded from
// global memory.
template <typename Out, int NT>
__device__ __forceinline__ void macko_mma_exact_band(
    const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,
    const unsigned* __restrict__ codes, const unsigned* __restrict__ cursors,
    const unsigned short* __restrict__ x, Out* __restrict__ y, float* red, unsigned short* tile,
    unsigned* table, unsigned rows, unsigned cols, unsigned nwin, unsigned band,
    unsigned first, unsigned count) {
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32u;
    float acc[1][NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[0][j][q] = 0.0f;
    for (unsigned win = warp; win < nwin; win += MACKO_MMA_WARPS) {
        const unsigned k0 = win * MACKO_MMA_K;
        const MmaRaw r = mma_raw(row_ptr, cursors, rows, nwin, band, win, lane);
        const MmaDesc d = mma_describe(r, k0);
        __syncwarp();
        if (lane < 16u) {
            unsigned* t = table + lane * MMA_DESC;
            t[0] = d.g0;
            t[1] = d.n;
            t[2] = 0u;
            t[3] = d.next;
            t[4] = d.start;
            t[5] = d.end;
        }
        mma_zero_tile(tile, lane);
        __syncwarp();
        mma_decode<false>(table, values, codes, tile, k0, lane);
        __syncwarp();
        mma_exact_tile<NT>(tile, x, cols, first, count, k0, lane, acc[0]);
    }
    (void)mma_reduce_store<Out, NT, 1, MACKO_MMA_WARPS>(red, acc, y, rows, band * 16u, first,
                                                        count);
}

template <typename Out, int NT>
__device__ __forceinline__ void macko_mma_impl(
    const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,
    const unsigned* __restrict__ codes, const unsigned* __restrict__ cursors,
    const unsigned short* __restrict__ x, Out* __restrict__ y, unsigned rows, unsigned cols,
    unsigned nwin, unsigned stage_groups, unsigned first, unsigned count) {
    extern __shared__ uint4 mma_smem[];
    unsigned char* smem = reinterpret_cast<unsigned char*>(mma_smem);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32u;
    float* red = reinterpret_cast<float*>(smem);
    unsigned char* mine = smem + mma_red_bytes(NT) + warp * mma_warp_bytes(stage_groups);
    unsigned short* tile = reinterpret_cast<unsigned short*>(mine);
    unsigned* exact_table = reinterpret_cast<unsigned*>(mine + 16u * MMA_TILE_STRIDE * 2u);
    unsigned char* ring = mine + 16u * MMA_TILE_STRIDE * 2u + 16u * MMA_DESC * 4u;
    const unsigned sbytes = mma_stage_bytes(stage_groups);
    // Stage s: its table (16 × MMA_DESC words), values (16-byte words), codes.
#define MMA_TABLE(S) reinterpret_cast<unsigned*>(ring + (S) * sbytes)
#define MMA_SV(S) reinterpret_cast<uint4*>(ring + (S) * sbytes + 16u * MMA_DESC * 4u)
#define MMA_SC(S) \
    reinterpret_cast<unsigned*>(ring + (S) * sbytes + 16u * MMA_DESC * 4u + stage_groups * 16u)

    const unsigned bands = (rows + 15u) / 16u;
    const unsigned per_band = (nwin + MACKO_MMA_WARPS - 1u) / MACKO_MMA_WARPS;
    const unsigned my_bands = bands > blockIdx.x ? (bands - 1u - blockIdx.x) / gridDim.x + 1u : 0u;
    const unsigned items = my_bands * per_band;

    // Prologue: items 0 .. S − 2 issued; the raw descriptions of items S − 1 and S loaded
    // (S = MMA_STAGES).
    MmaRaw ra = mma_fetch(row_ptr, cursors, rows, nwin, 0u, items, per_band, warp, lane);
    MmaRaw rb = mma_fetch(row_ptr, cursors, rows, nwin, 1u, items, per_band, warp, lane);
    for (unsigned s = 0; s + 1u < MMA_STAGES; ++s) {
        unsigned band, win;
        mma_item(s, per_band, warp, band, win);
        const MmaDesc d = mma_describe(ra, win * MACKO_MMA_K);
        ra = rb;
        rb = mma_fetch(row_ptr, cursors, rows, nwin, s + 2u, items, per_band, warp, lane);
        mma_issue(MMA_TABLE(s), MMA_SV(s), MMA_SC(s), values, codes, d, stage_groups, lane);
        mma_commit();
    }

    float acc[1][NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[0][j][q] = 0.0f;
    for (unsigned i = 0; i < items; ++i) {
        // Issue item i + S − 1 into the stage item i − 1 left.
        {
            const unsigned ahead = i + MMA_STAGES - 1u, slot = ahead % MMA_STAGES;
            unsigned band, win;
            mma_item(ahead, per_band, warp, band, win);
            const MmaDesc d = mma_describe(ra, win * MACKO_MMA_K);
            ra = rb;
            rb = mma_fetch(row_ptr, cursors, rows, nwin, ahead + 2u, items, per_band, warp, lane);
            mma_issue(MMA_TABLE(slot), MMA_SV(slot), MMA_SC(slot), values, codes, d,
                      stage_groups, lane);
            mma_commit();
        }
        unsigned band, win;
        mma_item(i, per_band, warp, band, win);
        if (win < nwin) {
            const unsigned k0 = win * MACKO_MMA_K, slot = i % MMA_STAGES;
            uint4 b[MACKO_MMA_K / 32][NT];
            mma_load_xs<NT>(x, cols, first, count, k0, lane, b);
            mma_zero_tile(tile, lane);
            mma_wait_stages();
            __syncwarp();
            mma_decode<true>(MMA_TABLE(slot), MMA_SV(slot), MMA_SC(slot), tile, k0, lane);
            __syncwarp();
            mma_tile<NT>(tile, lane, b, acc[0]);
            __syncwarp();
        }
        if (i % per_band == per_band - 1u) {
            const bool nan = mma_reduce_store<Out, NT, 1, MACKO_MMA_WARPS>(
                red, acc, y, rows, band * 16u, first, count);
            if (nan) {
                macko_mma_exact_band<Out, NT>(row_ptr, values, codes, cursors, x, y, red, tile,
                                              exact_table, rows, cols, nwin, band, first, count);
            }
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[0][j][q] = 0.0f;
        }
    }
    mma_wait_all();
#undef MMA_TABLE
#undef MMA_SV
#undef MMA_SC
}

#define MACKO_MMA_ENTRY(NAME, OUT, NT)                                                          \
    extern "C" __global__ void __launch_bounds__(MACKO_MMA_BLOCK, 2)                           \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const unsigned* __restrict__ cursors,          \
             const unsigned short* __restrict__ x, OUT* __restrict__ y, unsigned rows,          \
             unsigned cols, unsigned nwin, unsigned stage_groups, unsigned first,               \
             unsigned count) {                                                                  \
        macko_mma_impl<OUT, NT>(row_ptr, values, codes, cursors, x, y, rows, cols, nwin,        \
                                stage_groups, first, count);                                    \
    }

MACKO_MMA_ENTRY(macko_batch_mma_w2_f16, unsigned short, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w2_f32, float, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w4_f16, unsigned short, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w4_f32, float, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w8_f16, unsigned short, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w8_f32, float, 1)
MACKO_MMA_ENTRY(macko_batch_mma_w16_f16, unsigned short, 2)
MACKO_MMA_ENTRY(macko_batch_mma_w16_f32, float, 2)
