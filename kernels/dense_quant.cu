// Dense int8 / int4 GEMV y = A·x (docs/FORMAT.md, "Quantized values"): row-major codes with
// binary16 scales, per row or per G values in storage order; f32 accumulation, IEEE semantics as
// the binary16 dense GEMV (a zero value times ∞ is NaN). Compiled only when a quantized matrix is
// first uploaded, with MACKO_QBITS = 8 or 4 (one program per width).
//
// Aligned entries (`_a16`): rows start on 16-byte boundaries (cols a multiple of 16 codes for
// int8, 32 for int4) and, with scales per group, every group lies in one row (G divides cols), so
// the 8 codes a 32-bit word (int4) or half of a 64-bit pair (int8) holds share one scale, found at
// row · (cols / G) + (column / 8) / (G / 8), the last quotient as (c8 · mul) >> shift (exact for
// every c8 < 2^29). One warp per row, rows grid-stride over a persistent grid; each lane reads 16
// bytes of codes per step, DQ_CHUNKS steps in flight, and x's matching binary16 through the
// read-only cache, or (`_xs`, where x fits) x staged once per block in shared memory as f32, which
// saves the conversion of each x element per row (about one instruction per code: int4 codes
// need a third of the instructions of binary16 per byte, and the issue rate binds first).
// Any other shape takes the `_any` entries: one code at a time, its scale index divided out in
// 64 bits — correct for every shape, not fast.
#ifndef MACKO_ROW_CUH
#include "macko.cuh"
#endif

#define DQ_CHUNKS (MACKO_QBITS == 8 ? 4 : 2)
#define DQ_BLOCK 512

// Codes per 16-byte word, and the value layout of macko.cuh that unpacks 8 of them.
#if MACKO_QBITS == 8
#define DQ_PER_WORD 16u
typedef MackoI8 DqV;
#else
#define DQ_PER_WORD 32u
typedef MackoI4 DqV;
#endif
#define DQ_OCTETS (DQ_PER_WORD / 8u)

// The 8 codes number k (k < DQ_OCTETS) of a 16-byte word, as f32.
__device__ __forceinline__ void dq_unpack(const uint4 w, unsigned k, float (&a)[8]) {
#if MACKO_QBITS == 8
    const uint2 p = k == 0u ? make_uint2(w.x, w.y) : make_uint2(w.z, w.w);
    DqV::unpack(p, a);
#else
    const unsigned p = k == 0u ? w.x : (k == 1u ? w.y : (k == 2u ? w.z : w.w));
    DqV::unpack(p, a);
#endif
}

// x staged as f32 in 16-byte units of 4 columns, unit u stored at u ^ ((u >> 3) & 7): the lanes
// of a quarter-warp read the 8-column blocks of columns 32 (int4) or 16 (int8) codes apart,
// which without the swizzle fall in the same banks (an 8-way or 4-way conflict per 16-byte
// load, measured: the staged int4 GEMV at 22 % of the ceiling on an H100); with it, the 8
// lanes' units differ in their low 3 bits, so every quarter-warp reads 8 distinct bank quads.
__device__ __forceinline__ unsigned dq_unit(unsigned u) { return u ^ ((u >> 3) & 7u); }

// Stages x (binary16, cols a multiple of 16) as f32 in the swizzled units of dq_unit.
__device__ __forceinline__ void dq_stage_x(float4* xs, const uint4* __restrict__ x,
                                           unsigned cols) {
    for (unsigned j = threadIdx.x; j < cols / 8u; j += blockDim.x) {
        const uint4 w = __ldg(x + j);
        float a, b, c, d;
        macko_unpack2(w.x, a, b);
        macko_unpack2(w.y, c, d);
        xs[dq_unit(2u * j)] = make_float4(a, b, c, d);
        macko_unpack2(w.z, a, b);
        macko_unpack2(w.w, c, d);
        xs[dq_unit(2u * j + 1u)] = make_float4(a, b, c, d);
    }
}

// Σ a_k · x_k over 8 codes and 8 f32 of x staged (columns 8·c8 ..): two 16-byte loads.
__device__ __forceinline__ float dq_dot8(const float (&a)[8], const float4* xs, unsigned c8) {
    const float4 lo = xs[dq_unit(2u * c8)];
    const float4 hi = xs[dq_unit(2u * c8 + 1u)];
    float s0 = a[0] * lo.x, s1 = a[1] * lo.y;
    s0 = fmaf(a[2], lo.z, s0);
    s1 = fmaf(a[3], lo.w, s1);
    s0 = fmaf(a[4], hi.x, s0);
    s1 = fmaf(a[5], hi.y, s1);
    s0 = fmaf(a[6], hi.z, s0);
    s1 = fmaf(a[7], hi.w, s1);
    return s0 + s1;
}

// Σ a_k · x_k over 8 codes and the 8 binary16 of x in one 16-byte word.
__device__ __forceinline__ float dq_dot8(const float (&a)[8], const uint4 xw) {
    float x0, x1, s0 = 0.0f, s1 = 0.0f;
    macko_unpack2(xw.x, x0, x1);
    s0 = fmaf(a[0], x0, s0);
    s1 = fmaf(a[1], x1, s1);
    macko_unpack2(xw.y, x0, x1);
    s0 = fmaf(a[2], x0, s0);
    s1 = fmaf(a[3], x1, s1);
    macko_unpack2(xw.z, x0, x1);
    s0 = fmaf(a[4], x0, s0);
    s1 = fmaf(a[5], x1, s1);
    macko_unpack2(xw.w, x0, x1);
    s0 = fmaf(a[6], x0, s0);
    s1 = fmaf(a[7], x1, s1);
    return s0 + s1;
}

// One aligned row: `a` its codes, nvec 16-byte words; `sbase` the index of its first scale
// (grouped) — per-row scales are applied by the caller. x from `xs` (XS: staged as f32 in
// shared memory by dq_stage_x) or from global memory.
template <bool XS>
__device__ __forceinline__ float dq_row_aligned(const uint4* __restrict__ a,
                                                const uint4* __restrict__ x, const float4* xs,
                                                unsigned nvec, unsigned lane,
                                                const MackoScales& sc, unsigned long long sbase) {
    float acc = 0.0f;
    for (unsigned base = lane; base < nvec; base += 32u * DQ_CHUNKS) {
        uint4 va[DQ_CHUNKS];
#pragma unroll
        for (int u = 0; u < DQ_CHUNKS; ++u) {
            const unsigned j = base + 32u * u;
            va[u] = j < nvec ? macko_load_stream(a + j) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < DQ_CHUNKS; ++u) {
            const unsigned j = base + 32u * u;
            if (j >= nvec) break;
#pragma unroll
            for (unsigned k = 0; k < DQ_OCTETS; ++k) {
                float q[8];
                dq_unpack(va[u], k, q);
                const unsigned c8 = j * DQ_OCTETS + k;  // the 8-column block in the row
                const float t = XS ? dq_dot8(q, xs, c8)
                                   : dq_dot8(q, __ldg(x + c8));
                if (sc.grouped) {
                    const unsigned i = (unsigned)(((unsigned long long)c8 * sc.mul) >> sc.shift);
                    acc = fmaf(macko_h2f(__ldg(sc.s + sbase + i)), t, acc);
                } else {
                    acc += t;
                }
            }
        }
    }
    return acc;
}

// Code i of the packed codes, sign-extended.
__device__ __forceinline__ int dq_code(const unsigned char* __restrict__ q, unsigned long long i) {
#if MACKO_QBITS == 8
    return (int)(signed char)q[i];
#else
    const unsigned b = q[i >> 1];
    return ((int)(((i & 1ull) != 0ull ? b >> 4 : b) << 28)) >> 28;
#endif
}

// One row of any shape, a code at a time; per-group scales divided out in 64 bits (G = `group`).
__device__ __forceinline__ float dq_row_any(const unsigned char* __restrict__ q,
                                            const unsigned short* __restrict__ x,
                                            unsigned long long first, unsigned cols, unsigned lane,
                                            const MackoScales& sc, unsigned long long group) {
    float acc = 0.0f;
    for (unsigned c = lane; c < cols; c += 32u) {
        const unsigned long long i = first + c;
        float a = (float)dq_code(q, i);
        if (sc.grouped) a *= macko_h2f(__ldg(sc.s + i / group));
        acc = fmaf(a, macko_h2f(__ldg(x + c)), acc);
    }
    return acc;
}

// flags bit 5: scales per group of G = `group` values (mul/shift: the quotient by G / 8 of an
// 8-column block, see above), else per row.
// Kinds of entry: rows aligned with x from global memory or staged in shared memory, or any.
#define DQ_A16 0
#define DQ_XS 1
#define DQ_ANY 2

template <typename Out, int KIND>
__device__ __forceinline__ void dq_gemv_impl(const unsigned char* __restrict__ q,
                                             const unsigned short* __restrict__ x,
                                             Out* __restrict__ y, unsigned rows, unsigned cols,
                                             const unsigned short* __restrict__ scales,
                                             unsigned flags, unsigned group, unsigned mul,
                                             unsigned shift) {
    const MackoScales sc = {scales, mul, shift, 0u, (flags & 32u) != 0u};
    extern __shared__ float4 dq_xs[];
    if (KIND == DQ_XS) {
        dq_stage_x(dq_xs, reinterpret_cast<const uint4*>(x), cols);
        __syncthreads();
    }
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned row_stride = gridDim.x * warps_per_block;
    for (unsigned row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < rows;
         row += row_stride) {
        const unsigned long long first = (unsigned long long)row * cols;
        float acc;
        if (KIND != DQ_ANY) {
            const unsigned long long byte0 = first * MACKO_QBITS / 8u;
            acc = dq_row_aligned<KIND == DQ_XS>(
                reinterpret_cast<const uint4*>(q + byte0), reinterpret_cast<const uint4*>(x),
                dq_xs, cols / DQ_PER_WORD, lane, sc,
                sc.grouped ? (unsigned long long)row * (cols / group) : 0ull);
        } else {
            acc = dq_row_any(q, x, first, cols, lane, sc, group);
        }
        acc = macko_warp_sum(acc);
        if (lane == 0u) {
            // IEEE: a zero per-row scale times a non-finite sum is NaN, as 0 · ∞ in the f16 GEMV.
            if (!sc.grouped) acc *= macko_h2f(__ldg(scales + row));
            macko_store(y, row, acc);
        }
    }
}

#define DQ_GEMV_ENTRY(NAME, OUT, KIND)                                                          \
    extern "C" __global__ void __launch_bounds__(DQ_BLOCK, 2)                                   \
        NAME(const unsigned char* __restrict__ q, const unsigned short* __restrict__ x,         \
             OUT* __restrict__ y, unsigned rows, unsigned cols,                                 \
             const unsigned short* __restrict__ scales, unsigned flags, unsigned group,         \
             unsigned mul, unsigned shift) {                                                    \
        dq_gemv_impl<OUT, KIND>(q, x, y, rows, cols, scales, flags, group, mul, shift);         \
    }

DQ_GEMV_ENTRY(dense_q_a16_f16, unsigned short, DQ_A16)
DQ_GEMV_ENTRY(dense_q_a16_f32, float, DQ_A16)
DQ_GEMV_ENTRY(dense_q_xs_f16, unsigned short, DQ_XS)
DQ_GEMV_ENTRY(dense_q_xs_f32, float, DQ_XS)
DQ_GEMV_ENTRY(dense_q_any_f16, unsigned short, DQ_ANY)
DQ_GEMV_ENTRY(dense_q_any_f32, float, DQ_ANY)

// ---------------------------------------------------------------------------------------------
// Tensor-core entries (`dense_q_tc_*`, int4 only, sm_80+): codes lifted to binary16 exactly,
// multiplied by x on `mma.sync.m16n8k16` with f32 accumulation. About 3.8 instructions per code
// (SASS, a fifth of them address arithmetic ptxas recomputes under the 64-register bound)
// against ~7 for the f32 entries above, whose issue rate, not DRAM, binds int4; int8 has issue
// to spare and stays on the f32 entries, faster there (kernels/README.md, "Quantized values").
//
// A block of blockDim / 32 warps owns a band of 16 rows; its warps split the row into windows
// of 64 bytes per row (128 columns) and sum across warps once, at the end. In a window lane
// (g, t) (g = lane / 4, t = lane % 4) reads 16 bytes of codes of rows g and g + 8 (a "chunk":
// 32 columns starting at column 32t of the window). The mma's k order is a permutation of
// columns (any permutation gives the same dot product when A and B follow it): k-slots 2t,
// 2t + 1 and 2t + 8, 2t + 9 of an mma are two pairs of lane t's own codes, (c, c + 4) within a
// 32-bit word, the pairs one LOP3 makes, and B's matching x pairs come from one PRMT each.
//
// B's 8 columns n carry x only where n is the slot of the lane's chunk and zero elsewhere: a
// window holding S = WCOLS / G scale groups (S = 1, 2 or 4; S = 1 for per-row scales and G a
// multiple of the window) gets the sum of each group in its own column of C (window u of a
// batch of DQT_DEPTH: columns u·S .. u·S + S - 1), so a lane (g, t) holds the sums of columns
// 2t and 2t + 1 for rows g and g + 8 (C fragment) and scales them once per batch.
#define DQT_WCOLS (4u * DQ_PER_WORD)  // columns of a window
#define DQT_DEPTH 2u                  // windows of codes loaded per batch
static_assert(DQT_DEPTH * 4u <= 8u, "a batch's scale slots must fit C's 8 columns");
#define DQT_MAX_WARPS 16

#if MACKO_QBITS == 4
// binary16 pairs of codes with the offset removed, exactly: lop3 keeps the pair's nibbles and
// flips their sign bits under 1024's exponent (1024 + u, u = q + 8).
__device__ __forceinline__ unsigned dqt_lop(unsigned w, unsigned keep, unsigned magic) {
    unsigned r;
    // keep ? w ^ magic : magic, with a = w, b = keep, c = magic: table 0x6A.
    asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(r) : "r"(w), "r"(keep), "r"(magic));
    return r;
}

__device__ __forceinline__ unsigned dqt_hfma2(unsigned a, unsigned b, unsigned c) {
    unsigned r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// The four k-slot pairs (c0,c4) (c1,c5) (c2,c6) (c3,c7) of a word of 8 codes, as exact binary16.
__device__ __forceinline__ void dqt_pairs(unsigned w, unsigned (&p)[4]) {
    // 1024 + u for nibbles 0/4 (and 2/6 after >> 8); 1024 + 16u for nibbles 1/5 (3/7).
    const unsigned lo = 0x64086408u, hi = 0x64806480u;  // magic | the nibble's sign bit
    const unsigned w8 = w >> 8;
    p[0] = dqt_hfma2(dqt_lop(w, 0x000F000Fu, lo), 0x3C003C00u, 0xE408E408u);   // -1032
    p[1] = dqt_hfma2(dqt_lop(w, 0x00F000F0u, hi), 0x2C002C00u, 0xD480D480u);   // /16 - 72
    p[2] = dqt_hfma2(dqt_lop(w8, 0x000F000Fu, lo), 0x3C003C00u, 0xE408E408u);
    p[3] = dqt_hfma2(dqt_lop(w8, 0x00F000F0u, hi), 0x2C002C00u, 0xD480D480u);
}

// x's binary16 pairs in the k order of dqt_pairs for the 8 columns in `xw`: (x0,x4) (x1,x5)
// (x2,x6) (x3,x7).
__device__ __forceinline__ void dqt_x_pairs(const uint4 xw, unsigned (&b)[4]) {
    b[0] = __byte_perm(xw.x, xw.z, 0x5410u);
    b[1] = __byte_perm(xw.x, xw.z, 0x7632u);
    b[2] = __byte_perm(xw.y, xw.w, 0x5410u);
    b[3] = __byte_perm(xw.y, xw.w, 0x7632u);
}

// One window: the chunks `ca` (row g) and `cb` (row g + 8) against x's chunk `xc` (zero where
// this lane's B column is not its chunk's slot), added to d.
__device__ __forceinline__ void dqt_window(float (&d)[4], const uint4 ca, const uint4 cb,
                                           const uint4 (&xc)[DQ_PER_WORD / 8u]) {
    const unsigned wa[4] = {ca.x, ca.y, ca.z, ca.w};
    const unsigned wb[4] = {cb.x, cb.y, cb.z, cb.w};
#pragma unroll
    for (unsigned k = 0; k < 4u; ++k) {
        unsigned pa[4], pb[4], bx[4];
        dqt_pairs(wa[k], pa);
        dqt_pairs(wb[k], pb);
        dqt_x_pairs(xc[k], bx);
        mma_16816(d, pa[0], pb[0], pa[1], pb[1], bx[0], bx[1]);
        mma_16816(d, pa[2], pb[2], pa[3], pb[3], bx[2], bx[3]);
    }
}

// This lane's chunks of rows g and g + 8 in window w (of a warp's windows below w1; zero past
// them or past the row's `words` 16-byte words).
__device__ __forceinline__ void dqt_load(uint4& ca, uint4& cb, const uint4* qa, const uint4* qb,
                                         unsigned w, unsigned w1, unsigned words, unsigned t) {
    const unsigned j = w * 4u;  // the window's first word; this lane's is j + t
    const bool in = w < w1 && j + t < words;
    const unsigned long long jj = j;
    ca = in ? macko_load_stream(qa + jj) : make_uint4(0u, 0u, 0u, 0u);
    cb = in ? macko_load_stream(qb + jj) : make_uint4(0u, 0u, 0u, 0u);
}

template <typename Out>
__device__ __forceinline__ void dqt_gemv_impl(const unsigned char* __restrict__ q,
                                              const unsigned short* __restrict__ x,
                                              Out* __restrict__ y, unsigned rows, unsigned cols,
                                              const unsigned short* __restrict__ scales,
                                              unsigned flags, unsigned group, unsigned mul,
                                              unsigned shift) {
    __shared__ float red[DQT_MAX_WARPS][16];
    const bool grouped = (flags & 32u) != 0u;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned warps = blockDim.x >> 5;
    const unsigned g = lane >> 2, t = lane & 3u;
    const unsigned row0 = blockIdx.x * 16u;
    // Rows g and g + 8; a row past the end reads the last row's codes, summed but never stored.
    const unsigned ra = min(row0 + g, rows - 1u), rb = min(row0 + g + 8u, rows - 1u);
    // Scale slots per window; a batch's sums are scaled at once (a "flush"), window u of the
    // batch owning C columns u · slots .. u · slots + slots - 1 (at most 2 · 4 = 8).
    const unsigned slots = grouped && group < DQT_WCOLS ? DQT_WCOLS / group : 1u;
    const unsigned slot = t * slots / 4u;  // this lane's chunk's slot in its window
    // C column n = 2t + s (s = 0, 1) holds slot n % slots of window n / slots of a flush.
    const unsigned lg = slots == 4u ? 2u : (slots == 2u ? 1u : 0u);
    const unsigned win0 = (2u * t) >> lg, win1 = (2u * t + 1u) >> lg;
    const unsigned slot0 = (2u * t) & (slots - 1u), slot1 = (2u * t + 1u) & (slots - 1u);
    const unsigned words = cols / DQ_PER_WORD;  // 16-byte words of codes per row
    const unsigned nwin = (words + 3u) / 4u;
    const unsigned w0 = (unsigned)((unsigned long long)nwin * warp / warps);
    const unsigned w1 = (unsigned)((unsigned long long)nwin * (warp + 1u) / warps);
    // This lane's chunk of window 0: codes of rows g and g + 8, and x.
    const uint4* qa = reinterpret_cast<const uint4*>(q) + (unsigned long long)ra * words + t;
    const uint4* qb = reinterpret_cast<const uint4*>(q) + (unsigned long long)rb * words + t;
    const uint4* xp = reinterpret_cast<const uint4*>(x) + t * (DQ_PER_WORD / 8u);
    const unsigned groups_per_row = grouped ? cols / group : 0u;
    const unsigned short* sa = scales + (unsigned long long)ra * groups_per_row;
    const unsigned short* sb = scales + (unsigned long long)rb * groups_per_row;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float acc_a = 0.0f, acc_b = 0.0f;
    // Batches of DQT_DEPTH windows loaded, then multiplied, under 64 registers (so 32 warps fit
    // an SM). Batches of four windows (89 registers) and a ring of four refilled window by window
    // (116) measured slower on an H100: kernels/README.md, "Quantized values".
    for (unsigned wi = w0; wi < w1; wi += DQT_DEPTH) {
        uint4 ca[DQT_DEPTH], cb[DQT_DEPTH];
#pragma unroll
        for (unsigned u = 0; u < DQT_DEPTH; ++u) {
            dqt_load(ca[u], cb[u], qa, qb, wi + u, w1, words, t);
        }
#pragma unroll
        for (unsigned u = 0; u < DQT_DEPTH; ++u) {
            const unsigned w = wi + u;
            if (w >= w1) break;
            const uint4 a = ca[u], b = cb[u];
            const bool load_x = g == u * slots + slot && w * 4u + t < words;
            const uint4* xw = xp + (unsigned long long)w * (DQT_WCOLS / 8u);
            uint4 xc[DQ_PER_WORD / 8u];
#pragma unroll
            for (unsigned k = 0; k < DQ_PER_WORD / 8u; ++k) {
                xc[k] = load_x ? __ldg(xw + k) : make_uint4(0u, 0u, 0u, 0u);
            }
            dqt_window(d, a, b, xc);
            if (grouped && (u == DQT_DEPTH - 1u || w + 1u == w1)) {
                const unsigned wf = wi;  // the flush's first window
#pragma unroll
                for (unsigned s = 0; s < 2u; ++s) {
                    const unsigned wn = wf + (s == 0u ? win0 : win1);
                    if (wn <= w) {  // a window of this flush (C's later columns are zero)
                        const unsigned i =
                            (unsigned)(((unsigned long long)(wn * (DQT_WCOLS / 8u)) * mul) >>
                                       shift) + (s == 0u ? slot0 : slot1);
                        if (i < groups_per_row) {  // a slot past the row's end sums nothing
                            acc_a = fmaf(macko_h2f(__ldg(sa + i)), d[s], acc_a);
                            acc_b = fmaf(macko_h2f(__ldg(sb + i)), d[2u + s], acc_b);
                        }
                    }
                }
                d[0] = d[1] = d[2] = d[3] = 0.0f;
            }
        }
    }
    if (!grouped) {
        acc_a = d[0] + d[1];
        acc_b = d[2] + d[3];
    }
    // Every lane holds part of its rows' sums; they meet in lane t = 0.
    acc_a += __shfl_xor_sync(MACKO_FULL_MASK, acc_a, 1);
    acc_b += __shfl_xor_sync(MACKO_FULL_MASK, acc_b, 1);
    acc_a += __shfl_xor_sync(MACKO_FULL_MASK, acc_a, 2);
    acc_b += __shfl_xor_sync(MACKO_FULL_MASK, acc_b, 2);
    if (t == 0u) {
        red[warp][g] = acc_a;
        red[warp][g + 8u] = acc_b;
    }
    __syncthreads();
    if (threadIdx.x < 16u) {
        const unsigned row = row0 + threadIdx.x;  // rows past the end were clamped above
        if (row < rows) {
            float sum = 0.0f;
            for (unsigned v = 0; v < warps; ++v) sum += red[v][threadIdx.x];
            // IEEE: a zero per-row scale times a non-finite sum is NaN, as in the entries above.
            if (!grouped) sum *= macko_h2f(__ldg(scales + row));
            macko_store(y, row, sum);
        }
    }
}

#define DQT_GEMV_ENTRY(NAME, OUT)                                                               \
    extern "C" __global__ void __launch_bounds__(DQT_MAX_WARPS * 32, 2)                         \
        NAME(const unsigned char* __restrict__ q, const unsigned short* __restrict__ x,         \
             OUT* __restrict__ y, unsigned rows, unsigned cols,                                 \
             const unsigned short* __restrict__ scales, unsigned flags, unsigned group,         \
             unsigned mul, unsigned shift) {                                                    \
        dqt_gemv_impl<OUT>(q, x, y, rows, cols, scales, flags, group, mul, shift);              \
    }

DQT_GEMV_ENTRY(dense_q_tc_f16, unsigned short)
DQT_GEMV_ENTRY(dense_q_tc_f32, float)
#endif  // MACKO_QBITS == 4
