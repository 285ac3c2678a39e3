// MACKO with int8 or int4 values and binary16 scales (docs/FORMAT.md, "Quantized values"): the
// entry points of the row kernel (macko.cuh) for those layouts, and the combine of split rows
// with per-row scales. Compiled only when a quantized matrix of its width is first uploaded,
// once per width (-DMACKO_QBITS=8 or 4).
//
// Same parameters and flags as macko.cu's row entries (values: 8 bytes of int8 codes or 4 bytes
// of int4 codes per aligned group of 8 entries), then the scales: binary16, per row, or (flags
// bit 5) per group of G values in storage order, found as scales[min((w · mul) >> shift, last)]
// for aligned group w (see MackoScales). The flat kernel has no quantized entries: the host
// plans quantized matrices without it.
#ifndef MACKO_ROW_CUH
#include "macko.cuh"
#endif

#define MACKO_Q_SCALES                                                                          \
    const MackoScales sc = {scales, mul, shift, last, (flags & 32u) != 0u};
#define MACKO_Q_PARAMS(V, OUT)                                                                  \
    MACKO_SPMV_PARAMS(V, OUT), const unsigned short *__restrict__ scales, unsigned mul,         \
        unsigned shift, unsigned last

#define MACKO_Q_SPMV_ENTRY(NAME, V, OUT, XM, BLOCK, MINB)                                      \
    extern "C" __global__ void __launch_bounds__(BLOCK, MINB) NAME(MACKO_Q_PARAMS(V, OUT)) {    \
        MACKO_Q_SCALES                                                                          \
        MACKO_SPMV_BODY(V, OUT, XM)                                                             \
    }
#define MACKO_Q_LEAN_ENTRY(NAME, V, OUT, XM)                                                    \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK, MACKO_LEAN_MINB)                  \
        NAME(MACKO_Q_PARAMS(V, OUT)) {                                                          \
        MACKO_Q_SCALES                                                                          \
        MACKO_LEAN_BODY(V, OUT, XM)                                                             \
    }

// The width this program is compiled for (the host passes -DMACKO_QBITS=8 or 4).
#if MACKO_QBITS == 8
typedef MackoI8 MackoQ;
#elif MACKO_QBITS == 4
typedef MackoI4 MackoQ;
#else
#error "compile macko_quant.cu with -DMACKO_QBITS=8 or -DMACKO_QBITS=4"
#endif

// Every row entry of macko.cu, for values of that width.
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xs_f16, MackoQ, unsigned short, MACKO_XP, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xs_f32, MackoQ, float, MACKO_XP, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xg_f16, MackoQ, unsigned short, MACKO_XG, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xg_f32, MackoQ, float, MACKO_XG, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xu_f16, MackoQ, unsigned short, MACKO_XU, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xu_f32, MackoQ, float, MACKO_XU, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xs_f16_big, MackoQ, unsigned short, MACKO_XP, MACKO_BIG_BLOCK, 1)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xs_f32_big, MackoQ, float, MACKO_XP, MACKO_BIG_BLOCK, 1)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xu_f16_big, MackoQ, unsigned short, MACKO_XU, MACKO_BIG_BLOCK, 1)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xu_f32_big, MackoQ, float, MACKO_XU, MACKO_BIG_BLOCK, 1)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xh_f16, MackoQ, unsigned short, MACKO_XH, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_SPMV_ENTRY(macko_q_spmv_xh_f32, MackoQ, float, MACKO_XH, MACKO_BLOCK, MACKO_MINB)
MACKO_Q_LEAN_ENTRY(macko_q_lean_f16, MackoQ, unsigned short, MACKO_XU)
MACKO_Q_LEAN_ENTRY(macko_q_lean_f32, MackoQ, float, MACKO_XU)
MACKO_Q_LEAN_ENTRY(macko_q_lean_xh_f16, MackoQ, unsigned short, MACKO_XH)
MACKO_Q_LEAN_ENTRY(macko_q_lean_xh_f32, MackoQ, float, MACKO_XH)

// macko.cu's macko_combine with scales: y[r] = the sum of row r's partials, times scales[r] for
// per-row scales (flags bit 5 clear; per-group sums were scaled in the row kernel).
#define MACKO_Q_COMBINE_ENTRY(NAME, OUT)                                                        \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK)                                  \
        NAME(const unsigned* __restrict__ row_item, const float* __restrict__ partials,         \
             OUT* __restrict__ y, unsigned rows, const unsigned short* __restrict__ scales,     \
             unsigned flags) {                                                                  \
        const bool grouped = (flags & 32u) != 0u;                                               \
        for (unsigned r = blockIdx.x * blockDim.x + threadIdx.x; r < rows;                      \
             r += gridDim.x * blockDim.x) {                                                     \
            const unsigned first = __ldg(row_item + r), last = __ldg(row_item + r + 1u);        \
            float sum = 0.0f;                                                                   \
            for (unsigned j = first; j < last; ++j) sum += __ldg(partials + j);                 \
            if (!grouped) sum = macko_scaled(macko_h2f(__ldg(scales + r)), sum);                \
            macko_store(y, r, sum);                                                             \
        }                                                                                       \
    }

MACKO_Q_COMBINE_ENTRY(macko_q_combine_f16, unsigned short)
MACKO_Q_COMBINE_ENTRY(macko_q_combine_f32, float)
