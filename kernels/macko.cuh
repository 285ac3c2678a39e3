// The MACKO row kernel y = A·x (see ../docs/FORMAT.md and README.md), generic over the values'
// layout: binary16 (MACKO-16-4, entry points in macko.cu) or int8 / int4 codes with binary16
// scales (macko_quant.cu). Only the load, masking and unpacking of a group's value word and the
// scaling differ (the value layouts MackoF16, MackoI8 and MackoI4 of common.cuh); the decoding
// of the gap codes is one code.
//
// One team per work item — a warp, or a half-warp (two items side by side) for short rows or
// where that spreads the rows more evenly; the host chooses per matrix — items handed out
// grid-stride over a persistent grid. An item is a row, or, where whole rows would spread
// unevenly over the warps, a segment of one (the host cuts rows at upload; each segment's sum
// goes to a partial, and a second launch, macko_combine, adds each row's partials into y).
// Long items' two-chunk batches are software-pipelined (the next batch's loads issued before the
// current one is used). A row's entries are walked in batches of CH "chunks" (MACKO_CHUNKS or
// MACKO_CHUNKS_SHORT, chosen per matrix too); in a chunk, lane l owns the 8 entries of one
// aligned group: their values as one 16-byte load and their 8 gap codes as one 32-bit load, at
// the same group index. A row may begin and end inside a group: the entries of the neighbouring
// rows are masked (codes and values zeroed). The column of each entry is the running column of
// the row (shared by the warp, broadcast with __shfl_sync) plus an exclusive prefix sum, across
// lanes, of each lane's column advance (gaps + 1 per entry), taken with log2(team) shuffle steps;
// two chunks are scanned at once, packed as two 16-bit halves of one word. Inside a lane, the
// byte-wise prefix sums of the 8 gaps come from one multiplication. Entries whose value is zero
// (padding) contribute nothing even where x is NaN or ±∞: x is *selected* to 0 for them, never
// multiplied by 0. Accumulation in f32; y is f32 or rounded once to f16.
//
// Four ways to read x: staged once per block in shared memory as f32, in the padded layout (one
// unused word after every 32: conflict-free gathers for nearly dense rows) or the plain one
// (fewer instructions per entry; chosen at upload for matrices that are not nearly dense), or
// as binary16 in the plain layout (half the shared memory, so more blocks per SM for wide x, at
// one conversion more per entry), as long as x fits; or gathered from global memory through the
// read-only cache. When the staged x
// holds no ±∞ or NaN (checked while staging, OR-ed over the block), a zero-valued entry adds
// 0·x = ±0 anyway, so the per-entry select that guards padding entries is skipped.
#ifndef MACKO_ROW_CUH
#define MACKO_ROW_CUH
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

// Chunks per batch: loads of this many 16-byte value words and 4-byte code words in flight per
// lane before the first is used; even (chunks are scanned in pairs). MACKO_CHUNKS where nearly
// dense, else MACKO_CHUNKS_SHORT (the host's flags bit 1; README.md, "Batches of 2 or 4 chunks").
#define MACKO_CHUNKS 4
#define MACKO_CHUNKS_SHORT 2
// Settled: the per-entry zero select is skipped when the staged x is finite (see above; README.md,
// "Zero values and non-finite x"); batches wholly inside their row (every batch of a long row but
// its first and last) skip the per-chunk computation of the row's bounds in the group and the
// masking test ("Decoding a group"). Refuted ("Measured and removed"): prefetching the next batch
// into L2 while one is in flight (lost up to 10 points of the ceiling at d = 1).
// Where x is read: global memory, shared memory padded, shared memory plain, shared memory plain
// as binary16.
#define MACKO_XG 0
#define MACKO_XP 1
#define MACKO_XU 2
#define MACKO_XH 3
// Threads per block the host launches; the register cap follows from it and MACKO_MINB, the
// blocks per SM asked of the compiler (2: 64 registers; 1: 128; the lean entries below ask for
// MACKO_LEAN_MINB instead).
#define MACKO_BLOCK 512
#define MACKO_MINB 2
// Threads per block of the `_big` entries: one block per SM with the same 64 registers per thread,
// for x staged wider than half the shared memory of an SM.
#define MACKO_BIG_BLOCK 1024
// Two-chunk batches of a warp per item may load the next batch (or the next item's first) before
// computing the current one (see macko_row), where the host asks for it (flags bit 3: long items,
// more than one round of them).
//
// Warps are numbered across the blocks first (warp k of block b is warp k·gridDim.x + b), so that
// the warps holding a partial last round of items are spread over every SM instead of filling the
// first SMs' blocks while the others idle. Measured on an H100 against block by block
// (kernels/README.md, "Warps numbered across blocks"): 5120² at d = 0.1 74 → 83 % of the ceiling,
// 13824×5120 at d = 0.1 +5.6 points, 7168² and 9216² +2 to +3; the losses 20480×3584 −1.0 / −1.6
// at d = 0.1 / 0.3 and 4096² −0.8 at d = 0.1.

// The scales of int8 / int4 values (unused for binary16). Per row (grouped false): the row's sum
// of codes times x is multiplied by scales[row] once, where it is stored. Per group of G values
// in storage order (grouped): aligned group w of 8 entries uses scales[w / (G / 8)], the quotient
// taken as (w · mul) >> shift (mul and shift computed on the host, exact for every w < 2^29) and
// capped at `last` (the groups past the matrix's end that a batch runs over hold no entries), and
// each lane's 8-entry sum is multiplied by its group's scale. A zero scale makes its values zero
// (padding): their sum is *selected* to 0, so NaN or ±∞ in x never reaches y through it.
struct MackoScales {
    const unsigned short* __restrict__ s;
    unsigned mul, shift, last;
    bool grouped;
};

// scale · sum, or 0 where the scale is 0 (its values are zero: padding).
__device__ __forceinline__ float macko_scaled(float scale, float sum) {
    return scale != 0.0f ? scale * sum : 0.0f;
}

// The scale of aligned group w (grouped scales).
__device__ __forceinline__ float macko_group_scale(const MackoScales& sc, unsigned w) {
    const unsigned i = (unsigned)(((unsigned long long)w * sc.mul) >> sc.shift);
    return macko_h2f(__ldg(sc.s + min(i, sc.last)));
}

// x at staged slot `slot` of shared memory staged as XM says (f32 padded or plain, binary16).
template <int XM>
__device__ __forceinline__ float macko_xs_at(const float* xs, unsigned slot) {
    if (XM == MACKO_XH) return macko_h2f(reinterpret_cast<const unsigned short*>(xs)[slot]);
    return xs[macko_x_slot_in<XM == MACKO_XP>(slot)];
}

// x at staged slot `slot` (column slot - MACKO_X_SLACK).
template <int XM>
__device__ __forceinline__ float macko_x_at(const float* xs, const unsigned short* __restrict__ x,
                                            unsigned slot, unsigned cols_m1) {
    if (XM != MACKO_XG) return macko_xs_at<XM>(xs, slot);
    // Masked entries may point up to 8 columns before 0 (wrapping to a huge unsigned value) or
    // up to 15 after cols - 1: one min() keeps the gather inside x; their value is 0 anyway.
    return macko_h2f(__ldg(x + min(slot - MACKO_X_SLACK, cols_m1)));
}

// The shared-memory address of a pointer into shared memory, and a 32-bit load from one.
__device__ __forceinline__ unsigned macko_smem_addr(const float* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ float macko_lds(unsigned addr) {
    float v;
    asm("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
    return v;
}
// A binary16 loaded from shared memory, as f32.
__device__ __forceinline__ float macko_lds_h(unsigned addr) {
    unsigned short h;
    asm("ld.shared.u16 %0, [%1];" : "=h"(h) : "r"(addr));
    return macko_h2f(h);
}
// x at shared-memory byte address `addr` of a plain layout: f32 (XU) or binary16 (XH).
template <int XM>
__device__ __forceinline__ float macko_lds_x(unsigned addr) {
    return XM == MACKO_XH ? macko_lds_h(addr) : macko_lds(addr);
}

// acc += a * x, except that (SAFE) a zero-valued entry adds nothing whatever x is. Without SAFE
// the caller guarantees x finite, so a zero entry adds ±0.
template <bool SAFE>
__device__ __forceinline__ float macko_term(float acc, float a, float xv) {
    return SAFE ? fmaf(a, a != 0.0f ? xv : 0.0f, acc) : fmaf(a, xv, acc);
}

// Adds one lane's 8 entries. `b0` is the slot of the row's previous column minus `lo` (so that
// slot = b0 + byte k of the prefix), see macko_spmv_impl.
template <class V, int XM, bool SAFE>
__device__ __forceinline__ void macko_chunk(const typename V::Word v, unsigned pl, unsigned ph,
                                            unsigned b0, const float* xs,
                                            const unsigned short* __restrict__ x,
                                            unsigned cols_m1, float& acc0, float& acc1) {
    const unsigned b1 = b0 + (pl >> 24);
    float a[8];
    V::unpack(v, a);
    const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5], a6 = a[6],
                a7 = a[7];
    if (XM == MACKO_XU || XM == MACKO_XH) {
        // Plain layout: one shared-memory byte address per half-group, then one multiply-add
        // per entry for its address (byte k of the prefix times the slot's size, plus that
        // address).
        constexpr unsigned S = XM == MACKO_XH ? 2u : 4u;
        const unsigned p0 = macko_smem_addr(xs) + S * b0;
        const unsigned p1 = p0 + S * (pl >> 24);
#define MACKO_LX(A) macko_lds_x<XM>(A)
        acc0 = macko_term<SAFE>(acc0, a0, MACKO_LX(p0 + S * __byte_perm(pl, 0u, 0x4440)));
        acc1 = macko_term<SAFE>(acc1, a1, MACKO_LX(p0 + S * __byte_perm(pl, 0u, 0x4441)));
        acc0 = macko_term<SAFE>(acc0, a2, MACKO_LX(p0 + S * __byte_perm(pl, 0u, 0x4442)));
        acc1 = macko_term<SAFE>(acc1, a3, MACKO_LX(p1));
        acc0 = macko_term<SAFE>(acc0, a4, MACKO_LX(p1 + S * __byte_perm(ph, 0u, 0x4440)));
        acc1 = macko_term<SAFE>(acc1, a5, MACKO_LX(p1 + S * __byte_perm(ph, 0u, 0x4441)));
        acc0 = macko_term<SAFE>(acc0, a6, MACKO_LX(p1 + S * __byte_perm(ph, 0u, 0x4442)));
        acc1 = macko_term<SAFE>(acc1, a7, MACKO_LX(p1 + S * (ph >> 24)));
#undef MACKO_LX
        return;
    }
#define MACKO_X(S) macko_x_at<XM>(xs, x, (S), cols_m1)
    // Byte k of a prefix word, zero-extended, in one PRMT.
    acc0 = macko_term<SAFE>(acc0, a0, MACKO_X(b0 + __byte_perm(pl, 0u, 0x4440)));
    acc1 = macko_term<SAFE>(acc1, a1, MACKO_X(b0 + __byte_perm(pl, 0u, 0x4441)));
    acc0 = macko_term<SAFE>(acc0, a2, MACKO_X(b0 + __byte_perm(pl, 0u, 0x4442)));
    acc1 = macko_term<SAFE>(acc1, a3, MACKO_X(b1));
    acc0 = macko_term<SAFE>(acc0, a4, MACKO_X(b1 + __byte_perm(ph, 0u, 0x4440)));
    acc1 = macko_term<SAFE>(acc1, a5, MACKO_X(b1 + __byte_perm(ph, 0u, 0x4441)));
    acc0 = macko_term<SAFE>(acc0, a6, MACKO_X(b1 + __byte_perm(ph, 0u, 0x4442)));
    acc1 = macko_term<SAFE>(acc1, a7, MACKO_X(b1 + (ph >> 24)));
#undef MACKO_X
}

// Stages x in shared memory as XM says (see macko_stage_x, macko_stage_x_half in common.cuh).
template <int XM>
__device__ __forceinline__ bool macko_stage_x_as(float* xs, const unsigned short* __restrict__ x,
                                                 unsigned cols) {
    if (XM == MACKO_XH) {
        return macko_stage_x_half(reinterpret_cast<unsigned short*>(xs), x, cols);
    }
    return macko_stage_x<XM == MACKO_XP>(xs, x, cols);
}

// Asks L2 for the groups {w + L·k + sub : k < CH} below w_end (values and codes).
template <class V, unsigned L, int CH>
__device__ __forceinline__ void macko_prefetch_batch(const typename V::Word* __restrict__ values,
                                                     const unsigned* __restrict__ codes,
                                                     unsigned w, unsigned w_end, unsigned sub) {
#pragma unroll
    for (int u = 0; u < CH; ++u) {
        const unsigned g = w + L * u + sub;
        if (g < w_end) {
            macko_prefetch_l2(values + g);
            macko_prefetch_l2(codes + g);
        }
    }
}

// Whether any lane of the warp has `p` (L = 32: p is warp-uniform already).
template <unsigned L>
__device__ __forceinline__ bool macko_any(bool p) {
    return L == 32u ? p : __any_sync(MACKO_FULL_MASK, p) != 0;
}

// One work item per team of L lanes (32: a warp; 16: a half-warp, two items side by side): a whole
// row, or (split matrices) a segment of one; entries [start, end), groups start/8 .. ceil(end/8);
// `col0` is the column right after the row's entry before `start` (0 at a row's start). `sub` is
// the lane's index in its team. Returns this lane's partial sum. Every lane of the warp must call
// it (the shuffles span the warp); a team whose item is shorter than its neighbour's, or empty,
// runs the extra batches with every entry masked (zero values, zero column advance), adding +0.
// [next_start, next_end) is the team's next item (empty if none).
//
// PIPE (software pipelining, two-chunk batches): on entry v/c hold the item's first batch; every
// iteration issues the loads of the following batch — or, at the item's last batch, of the next
// item's first — before it computes the current one, so each team keeps one batch in flight while
// it scans and multiplies; on return v/c hold the next item's first batch. Without PIPE, v/c are
// scratch and each batch is loaded and then used.
template <class V, int XM, bool SAFE, unsigned L, int CH, bool PIPE>
__device__ __forceinline__ float macko_row(const typename V::Word* __restrict__ values,
                                           const unsigned* __restrict__ codes, const float* xs,
                                           const unsigned short* __restrict__ x, unsigned cols_m1,
                                           unsigned start, unsigned end, unsigned col0,
                                           unsigned next_start, unsigned next_end, unsigned sub,
                                           bool aligned, const MackoScales& sc,
                                           typename V::Word (&v)[CH], unsigned (&c)[CH]) {
    float acc0 = 0.0f, acc1 = 0.0f;
    const unsigned w_end = (end + 7u) >> 3;
    const unsigned next_w_end = (next_end + 7u) >> 3;
    unsigned next = col0;  // the column after the item's previous entry (team-uniform)
    // Groups wholly inside the item: [w_in, w_out). start + 7 cannot wrap (start <= P <= 2^32 - 8).
    const unsigned w_in = (start + 7u) >> 3, w_out = end >> 3;
    // PIPE: the batch after the current one (this item's, or the next item's first).
    typename V::Word vn[CH];
    unsigned cn[CH];
    bool loaded_next = false;  // team-uniform: vn/cn hold the next item's first batch
    for (unsigned wb = start >> 3; macko_any<L>(wb < w_end); wb += L * CH) {
        // Team-uniform: every group of the batch lies wholly inside the item (no masking).
        const bool interior = wb >= w_in && wb + L * CH <= w_out;
        const bool more = wb + L * CH < w_end;
        if (PIPE) {
            if (more) {
                macko_load_batch<L, CH, V>(values, codes, wb + L * CH, w_end, sub, vn, cn);
            } else if (!loaded_next) {
                macko_load_batch<L, CH, V>(values, codes, next_start >> 3, next_w_end, sub, vn, cn);
                loaded_next = true;
            }
        } else {
            macko_load_batch<L, CH, V>(values, codes, wb, w_end, sub, v, c);
        }
#pragma unroll
        for (int p = 0; p < CH; p += 2) {
            // Warp-uniform: every item of the warp ended in an earlier chunk.
            if (p > 0 && !macko_any<L>(wb + L * p < w_end)) break;
            const unsigned wa = wb + L * p + sub;
            unsigned lo_a = 0u, hi_a = 8u, lo_b = 0u, hi_b = 8u;
            if (!interior) {
                if (aligned) {
                    // Row-aligned matrix (rows start at whole groups and end in zero padding):
                    // no group holds another row's entries. Groups past the end loaded as
                    // zeros, and, as the mask would make them, they move no column.
                    hi_a = wa < w_end ? 8u : 0u;
                    hi_b = wa + L < w_end ? 8u : 0u;
                } else {
                    macko_mask<V>(wa, start, end, v[p], c[p], lo_a, hi_a);
                    macko_mask<V>(wa + L, start, end, v[p + 1], c[p + 1], lo_b, hi_b);
                }
            }
            unsigned pl_a, ph_a, pl_b, ph_b;
            macko_prefix(c[p], pl_a, ph_a);
            macko_prefix(c[p + 1], pl_b, ph_b);
            unsigned excl, total;
            macko_scan_pair<L>(pl_a, ph_a, lo_a, hi_a, pl_b, ph_b, lo_b, hi_b, sub, excl, total);
            const unsigned base_a = next + (excl & 0xffffu);
            const unsigned next_a = next + (total & 0xffffu);
            const unsigned base_b = next_a + (excl >> 16);
            next = next_a + (total >> 16);
            // Slot of entry k = base + MACKO_X_SLACK - 1 - lo + byte k of the prefix (>= 0, as
            // lo <= 7 whenever base is 0).
            const unsigned slot_a = base_a + (MACKO_X_SLACK - 1u) - lo_a;
            const unsigned slot_b = base_b + (MACKO_X_SLACK - 1u) - lo_b;
            if (V::QUANT && sc.grouped) {
                // Each group's sum times its scale.
                float ta0 = 0.0f, ta1 = 0.0f, tb0 = 0.0f, tb1 = 0.0f;
                macko_chunk<V, XM, SAFE>(v[p], pl_a, ph_a, slot_a, xs, x, cols_m1, ta0, ta1);
                macko_chunk<V, XM, SAFE>(v[p + 1], pl_b, ph_b, slot_b, xs, x, cols_m1, tb0, tb1);
                acc0 += macko_scaled(macko_group_scale(sc, wa), ta0 + ta1);
                acc1 += macko_scaled(macko_group_scale(sc, wa + L), tb0 + tb1);
            } else {
                macko_chunk<V, XM, SAFE>(v[p], pl_a, ph_a, slot_a, xs, x, cols_m1, acc0, acc1);
                macko_chunk<V, XM, SAFE>(v[p + 1], pl_b, ph_b, slot_b, xs, x, cols_m1, acc0,
                                         acc1);
            }
        }
        if (PIPE) {
            // The next iteration computes the batch just loaded, or (past this item's end, while
            // the other team of the warp finishes) an empty one; the next item's stays in vn.
#pragma unroll
            for (int u = 0; u < CH; ++u) {
                v[u] = more ? vn[u] : V::zero();
                c[u] = more ? cn[u] : 0u;
            }
        }
    }
    if (PIPE) {
        // An item without a batch (empty, group-aligned) never reached its last batch.
        if (!loaded_next) {
            macko_load_batch<L, CH, V>(values, codes, next_start >> 3, next_w_end, sub, vn, cn);
        }
#pragma unroll
        for (int u = 0; u < CH; ++u) {
            v[u] = vn[u];
            c[u] = cn[u];
        }
    }
    return acc0 + acc1;
}

// Sum over the L lanes of a team; every lane of the team gets the result.
template <unsigned L>
__device__ __forceinline__ float macko_team_sum(float v) {
#pragma unroll
    for (unsigned offset = L / 2u; offset > 0u; offset >>= 1) {
        v += __shfl_xor_sync(MACKO_FULL_MASK, v, offset);
    }
    return v;
}

// Where a split matrix's work items are described (host side: src/backend/cuda/split.rs and
// memory.rs). Item i: desc[i] = (first entry, col0: the column after the row's entry before it);
// desc[items].x = P closes the last one. Each item's sum goes to partials[i]; macko_combine (a
// second launch on the same stream) adds each row's partials in item order into y. Combining in
// a second kernel keeps the product free of fences: a per-item "last arriver" combine (a
// __threadfence and an atomic per item) cost about two loaded memory round trips per item on an
// H200 and lost up to 21 points of the ceiling (kernels/README.md, "Measured and removed").
struct MackoSplit {
    const uint2* __restrict__ desc;
    float* __restrict__ partials;
};

// The bounds of a work item: row `i` from row_ptr, or item `i` of a split matrix.
struct MackoItem {
    unsigned start, end, col0;
};

template <bool SPLIT>
__device__ __forceinline__ MackoItem macko_item(const unsigned* __restrict__ row_ptr,
                                                const MackoSplit& split, unsigned i,
                                                unsigned items) {
    MackoItem it = {0u, 0u, 0u};
    if (i < items) {
        if (SPLIT) {
            const uint2 d = __ldg(split.desc + i);
            it.start = d.x;
            it.col0 = d.y;
            it.end = __ldg(&split.desc[i + 1u].x);
        } else {
            it.start = __ldg(row_ptr + i);
            it.end = __ldg(row_ptr + i + 1u);
        }
    }
    return it;
}

// A finished item's sum: into its partial (split matrices; the combine scales per-row values), or
// into y, times the row's scale for per-row int8 / int4 values.
template <class V, bool SPLIT, typename Out>
__device__ __forceinline__ void macko_finish(Out* __restrict__ y, const MackoSplit& split,
                                             const MackoScales& sc, unsigned i, float acc) {
    if (SPLIT) {
        split.partials[i] = acc;
    } else if (V::QUANT && !sc.grouped) {
        macko_store(y, i, macko_scaled(macko_h2f(__ldg(sc.s + i)), acc));
    } else {
        macko_store(y, i, acc);
    }
}

template <class V, typename Out, int XM, unsigned L, int CH, bool SPLIT, bool PIPE>
__device__ __forceinline__ void macko_spmv_impl(const unsigned* __restrict__ row_ptr,
                                                const typename V::Word* __restrict__ values,
                                                const unsigned* __restrict__ codes,
                                                const unsigned short* __restrict__ x,
                                                Out* __restrict__ y, unsigned cols,
                                                unsigned items, bool aligned,
                                                const MackoSplit& split, const MackoScales& sc) {
    extern __shared__ float macko_xs[];
    const unsigned sub = threadIdx.x & (L - 1u);
    const unsigned teams_per_block = blockDim.x / L;
    // This team's first item (the two half-warps of a warp, L = 16, take neighbouring ones).
    const unsigned warp = (threadIdx.x / 32u) * gridDim.x + blockIdx.x;
    const unsigned first_item = warp * (32u / L) + (threadIdx.x & 31u) / L;
    const unsigned stride = gridDim.x * teams_per_block;
    // Used only for items with entries, which exist only when cols >= 1 (the host runs L = 16,
    // where empty items go through macko_row too, only when cols >= 1).
    const unsigned cols_m1 = cols - 1u;

    MackoItem it = macko_item<SPLIT>(row_ptr, split, first_item, items);
    typename V::Word v[CH];
    unsigned c[CH];
    if (PIPE) {
        // The first batch is on its way while the block stages x.
        macko_load_batch<L, CH, V>(values, codes, it.start >> 3, (it.end + 7u) >> 3, sub, v, c);
    }
    bool finite_x = false;
    if (XM != MACKO_XG) {
        // Start the first batch of this team's first item on its way to L2 while the block
        // stages x, so DRAM is busy during the staging.
        if (!PIPE && it.start < it.end) {
            macko_prefetch_batch<V, L, CH>(values, codes, it.start >> 3, (it.end + 7u) >> 3, sub);
        }
        const bool nonfinite = macko_stage_x_as<XM>(macko_xs, x, cols);
        finite_x = __syncthreads_or(nonfinite ? 1 : 0) == 0;
    }
    // Warp-uniform loop: with L = 16 the two teams of a warp run side by side (items i and i + 1,
    // then i + stride and i + stride + 1, ...); a team past the last item works on an empty one.
    for (unsigned i = first_item; macko_any<L>(i < items); i += stride) {
        // Fetch the next item's bounds before working on this one.
        const MackoItem nx = macko_item<SPLIT>(row_ptr, split, i + stride, items);
        float acc = 0.0f;
        // Warp-uniform (L = 32: an empty row is +0.0 — but the pipelined loop must still load
        // the next item's first batch; L = 16: always taken, see macko_row).
        if (PIPE || L < 32u || it.start < it.end) {
            if (XM != MACKO_XG && finite_x) {
                acc = macko_row<V, XM, false, L, CH, PIPE>(values, codes, macko_xs, x, cols_m1,
                                                           it.start, it.end, it.col0, nx.start,
                                                           nx.end, sub, aligned, sc, v, c);
            } else {
                acc = macko_row<V, XM, true, L, CH, PIPE>(values, codes, macko_xs, x, cols_m1,
                                                          it.start, it.end, it.col0, nx.start,
                                                          nx.end, sub, aligned, sc, v, c);
            }
        }
        acc = macko_team_sum<L>(acc);
        if (sub == 0u && i < items) macko_finish<V, SPLIT>(y, split, sc, i, acc);
        it = nx;
    }
}

// flags bit 0: items of 16 lanes (a half-warp per item), else a warp per item; bit 1: batches of
// MACKO_CHUNKS_SHORT chunks, else MACKO_CHUNKS; bit 2: a split matrix (work items from `desc`,
// `items` of them), else one item per row (`items` = rows); bit 3: pipelined batches (with bit 1
// and a warp per item only; the pipelined registers of a second batch fit the cap only at two
// chunks); bit 4: a row-aligned matrix (format/src/aligned.rs: rows start at whole groups, so
// no batch masks). The host chooses per matrix
// (plan.rs). `_big` entries run 1024-thread blocks (one per SM: for x too wide for two
// 512-thread blocks' shared memory), the others 512-thread blocks; both get 64 registers (the
// lean entries, defined after these, 40).
#define MACKO_SPMV_DISPATCH(V, OUT, XM, SPLIT)                                                  \
    if ((flags & 2u) != 0u) {                                                                   \
        if (half) {                                                                             \
            macko_spmv_impl<V, OUT, XM, 16u, MACKO_CHUNKS_SHORT, SPLIT, false>(                 \
                row_ptr, values, codes, x, y, cols, items, aligned, split, sc);                 \
        } else if (MACKO_CHUNKS_SHORT <= 2 && (flags & 8u) != 0u) {                             \
            macko_spmv_impl<V, OUT, XM, 32u, MACKO_CHUNKS_SHORT, SPLIT, true>(                  \
                row_ptr, values, codes, x, y, cols, items, aligned, split, sc);                 \
        } else {                                                                                \
            macko_spmv_impl<V, OUT, XM, 32u, MACKO_CHUNKS_SHORT, SPLIT, false>(                 \
                row_ptr, values, codes, x, y, cols, items, aligned, split, sc);                 \
        }                                                                                       \
    } else if (half) {                                                                          \
        macko_spmv_impl<V, OUT, XM, 16u, MACKO_CHUNKS, SPLIT, false>(                           \
            row_ptr, values, codes, x, y, cols, items, aligned, split, sc);                     \
    } else {                                                                                    \
        macko_spmv_impl<V, OUT, XM, 32u, MACKO_CHUNKS, SPLIT, false>(                           \
            row_ptr, values, codes, x, y, cols, items, aligned, split, sc);                     \
    }

// The body of a row-kernel entry: the parameters of MACKO_SPMV_PARAMS and `sc`.
#define MACKO_SPMV_BODY(V, OUT, XM)                                                             \
    const bool half = (flags & 1u) != 0u && cols > 0u;                                         \
    const bool aligned = (flags & 16u) != 0u;                                                   \
    const MackoSplit split = {desc, partials};                                                  \
    if ((flags & 4u) != 0u) {                                                                   \
        MACKO_SPMV_DISPATCH(V, OUT, XM, true)                                                   \
    } else {                                                                                    \
        items = rows;                                                                           \
        MACKO_SPMV_DISPATCH(V, OUT, XM, false)                                                  \
    }

// The parameters every row-kernel entry starts with (values of layout V).
#define MACKO_SPMV_PARAMS(V, OUT)                                                               \
    const unsigned *__restrict__ row_ptr, const typename V::Word *__restrict__ values,         \
        const unsigned *__restrict__ codes, const unsigned short *__restrict__ x,               \
        OUT *__restrict__ y, unsigned rows, unsigned cols, unsigned flags,                      \
        const uint2 *__restrict__ desc, float *__restrict__ partials, unsigned items

// Blocks per SM asked of the compiler for the lean entries: 3 blocks of 512 threads cap them at 40
// registers, so 48 warps fit an SM instead of 32.
#define MACKO_LEAN_MINB 3

// The lean entries: whole rows, a warp per row, batches of MACKO_CHUNKS_SHORT chunks, not
// pipelined, x staged in the plain layout (f32, or binary16 for `_xh`); only flags bit 4
// (row-aligned) is read, and the split arguments not at all (the parameters are those of the
// regular entries). The one path alone fits 40 registers (one 4-byte spill, before the row
// loop; all paths together spill over 100 bytes at 40), so half again as many warps are
// resident. The host picks them where that many warps spread the rows more evenly, or as
// evenly in few rounds where the regular plan cuts no rows (rules.rs, `lean_rows`):
// 5120 rows take 0.81 of a round of 6336 warps, against 1.21 rounds of 4224 warps with the
// regular entries.
#define MACKO_LEAN_BODY(V, OUT, XM)                                                             \
    const MackoSplit none = {nullptr, nullptr};                                                 \
    (void)desc;                                                                                 \
    (void)partials;                                                                             \
    (void)items;                                                                                \
    macko_spmv_impl<V, OUT, XM, 32u, MACKO_CHUNKS_SHORT, false, false>(                         \
        row_ptr, values, codes, x, y, cols, rows, (flags & 16u) != 0u, none, sc);

#endif  // MACKO_ROW_CUH
