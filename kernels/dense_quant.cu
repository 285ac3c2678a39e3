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
