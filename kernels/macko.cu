// MACKO-16-4 sparse matrix-vector product y = A·x (see ../docs/FORMAT.md and README.md).
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
template <int XM, bool SAFE>
__device__ __forceinline__ void macko_chunk(const uint4 v, unsigned pl, unsigned ph, unsigned b0,
                                            const float* xs, const unsigned short* __restrict__ x,
                                            unsigned cols_m1, float& acc0, float& acc1) {
    const unsigned b1 = b0 + (pl >> 24);
    float a0, a1, a2, a3, a4, a5, a6, a7;
    macko_unpack2(v.x, a0, a1);
    macko_unpack2(v.y, a2, a3);
    macko_unpack2(v.z, a4, a5);
    macko_unpack2(v.w, a6, a7);
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
template <unsigned L, int CH>
__device__ __forceinline__ void macko_prefetch_batch(const uint4* __restrict__ values,
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
template <int XM, bool SAFE, unsigned L, int CH, bool PIPE>
__device__ __forceinline__ float macko_row(const uint4* __restrict__ values,
                                           const unsigned* __restrict__ codes, const float* xs,
                                           const unsigned short* __restrict__ x, unsigned cols_m1,
                                           unsigned start, unsigned end, unsigned col0,
                                           unsigned next_start, unsigned next_end, unsigned sub,
                                           bool aligned, uint4 (&v)[CH], unsigned (&c)[CH]) {
    float acc0 = 0.0f, acc1 = 0.0f;
    const unsigned w_end = (end + 7u) >> 3;
    const unsigned next_w_end = (next_end + 7u) >> 3;
    unsigned next = col0;  // the column after the item's previous entry (team-uniform)
    // Groups wholly inside the item: [w_in, w_out). start + 7 cannot wrap (start <= P <= 2^32 - 8).
    const unsigned w_in = (start + 7u) >> 3, w_out = end >> 3;
    // PIPE: the batch after the current one (this item's, or the next item's first).
    uint4 vn[CH];
    unsigned cn[CH];
    bool loaded_next = false;  // team-uniform: vn/cn hold the next item's first batch
    for (unsigned wb = start >> 3; macko_any<L>(wb < w_end); wb += L * CH) {
        // Team-uniform: every group of the batch lies wholly inside the item (no masking).
        const bool interior = wb >= w_in && wb + L * CH <= w_out;
        const bool more = wb + L * CH < w_end;
        if (PIPE) {
            if (more) {
                macko_load_batch<L, CH>(values, codes, wb + L * CH, w_end, sub, vn, cn);
            } else if (!loaded_next) {
                macko_load_batch<L, CH>(values, codes, next_start >> 3, next_w_end, sub, vn, cn);
                loaded_next = true;
            }
        } else {
            macko_load_batch<L, CH>(values, codes, wb, w_end, sub, v, c);
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
                    macko_mask(wa, start, end, v[p], c[p], lo_a, hi_a);
                    macko_mask(wa + L, start, end, v[p + 1], c[p + 1], lo_b, hi_b);
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
            macko_chunk<XM, SAFE>(v[p], pl_a, ph_a, base_a + (MACKO_X_SLACK - 1u) - lo_a, xs, x,
                                  cols_m1, acc0, acc1);
            macko_chunk<XM, SAFE>(v[p + 1], pl_b, ph_b, base_b + (MACKO_X_SLACK - 1u) - lo_b, xs,
                                  x, cols_m1, acc0, acc1);
        }
        if (PIPE) {
            // The next iteration computes the batch just loaded, or (past this item's end, while
            // the other team of the warp finishes) an empty one; the next item's stays in vn.
#pragma unroll
            for (int u = 0; u < CH; ++u) {
                v[u] = more ? vn[u] : make_uint4(0u, 0u, 0u, 0u);
                c[u] = more ? cn[u] : 0u;
            }
        }
    }
    if (PIPE) {
        // An item without a batch (empty, group-aligned) never reached its last batch.
        if (!loaded_next) {
            macko_load_batch<L, CH>(values, codes, next_start >> 3, next_w_end, sub, vn, cn);
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

template <typename Out, int XM, unsigned L, int CH, bool SPLIT, bool PIPE>
__device__ __forceinline__ void macko_spmv_impl(const unsigned* __restrict__ row_ptr,
                                                const uint4* __restrict__ values,
                                                const unsigned* __restrict__ codes,
                                                const unsigned short* __restrict__ x,
                                                Out* __restrict__ y, unsigned cols,
                                                unsigned items, bool aligned,
                                                const MackoSplit& split) {
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
    uint4 v[CH];
    unsigned c[CH];
    if (PIPE) {
        // The first batch is on its way while the block stages x.
        macko_load_batch<L, CH>(values, codes, it.start >> 3, (it.end + 7u) >> 3, sub, v, c);
    }
    bool finite_x = false;
    if (XM != MACKO_XG) {
        // Start the first batch of this team's first item on its way to L2 while the block
        // stages x, so DRAM is busy during the staging.
        if (!PIPE && it.start < it.end) {
            macko_prefetch_batch<L, CH>(values, codes, it.start >> 3, (it.end + 7u) >> 3, sub);
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
                acc = macko_row<XM, false, L, CH, PIPE>(values, codes, macko_xs, x, cols_m1,
                                                        it.start, it.end, it.col0, nx.start,
                                                        nx.end, sub, aligned, v, c);
            } else {
                acc = macko_row<XM, true, L, CH, PIPE>(values, codes, macko_xs, x, cols_m1,
                                                       it.start, it.end, it.col0, nx.start,
                                                       nx.end, sub, aligned, v, c);
            }
        }
        acc = macko_team_sum<L>(acc);
        if (sub == 0u && i < items) {
            if (SPLIT) {
                split.partials[i] = acc;
            } else {
                macko_store(y, i, acc);
            }
        }
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
#define MACKO_SPMV_DISPATCH(OUT, XM, SPLIT)                                                     \
    if ((flags & 2u) != 0u) {                                                                   \
        if (half) {                                                                             \
            macko_spmv_impl<OUT, XM, 16u, MACKO_CHUNKS_SHORT, SPLIT, false>(                    \
                row_ptr, values, codes, x, y, cols, items, aligned, split);                     \
        } else if (MACKO_CHUNKS_SHORT <= 2 && (flags & 8u) != 0u) {                             \
            macko_spmv_impl<OUT, XM, 32u, MACKO_CHUNKS_SHORT, SPLIT, true>(                     \
                row_ptr, values, codes, x, y, cols, items, aligned, split);                     \
        } else {                                                                                \
            macko_spmv_impl<OUT, XM, 32u, MACKO_CHUNKS_SHORT, SPLIT, false>(                    \
                row_ptr, values, codes, x, y, cols, items, aligned, split);                     \
        }                                                                                       \
    } else if (half) {                                                                          \
        macko_spmv_impl<OUT, XM, 16u, MACKO_CHUNKS, SPLIT, false>(row_ptr, values, codes, x, y, \
                                                                  cols, items, aligned, split); \
    } else {                                                                                    \
        macko_spmv_impl<OUT, XM, 32u, MACKO_CHUNKS, SPLIT, false>(row_ptr, values, codes, x, y, \
                                                                  cols, items, aligned, split); \
    }

#define MACKO_SPMV_ENTRY(NAME, OUT, XM, BLOCK, MINB)                                           \
    extern "C" __global__ void __launch_bounds__(BLOCK, MINB)                                   \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const unsigned short* __restrict__ x,          \
             OUT* __restrict__ y, unsigned rows, unsigned cols, unsigned flags,                 \
             const uint2* __restrict__ desc, float* __restrict__ partials, unsigned items) {    \
        const bool half = (flags & 1u) != 0u && cols > 0u;                                     \
        const bool aligned = (flags & 16u) != 0u;                                               \
        const MackoSplit split = {desc, partials};                                              \
        if ((flags & 4u) != 0u) {                                                               \
            MACKO_SPMV_DISPATCH(OUT, XM, true)                                                  \
        } else {                                                                                \
            items = rows;                                                                       \
            MACKO_SPMV_DISPATCH(OUT, XM, false)                                                 \
        }                                                                                       \
    }

MACKO_SPMV_ENTRY(macko_spmv_xs_f16, unsigned short, MACKO_XP, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xs_f32, float, MACKO_XP, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xg_f16, unsigned short, MACKO_XG, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xg_f32, float, MACKO_XG, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xu_f16, unsigned short, MACKO_XU, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xu_f32, float, MACKO_XU, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xs_f16_big, unsigned short, MACKO_XP, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xs_f32_big, float, MACKO_XP, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xu_f16_big, unsigned short, MACKO_XU, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xu_f32_big, float, MACKO_XU, MACKO_BIG_BLOCK, 1)
MACKO_SPMV_ENTRY(macko_spmv_xh_f16, unsigned short, MACKO_XH, MACKO_BLOCK, MACKO_MINB)
MACKO_SPMV_ENTRY(macko_spmv_xh_f32, float, MACKO_XH, MACKO_BLOCK, MACKO_MINB)

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
#define MACKO_LEAN_ENTRY(NAME, OUT, XM)                                                         \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK, MACKO_LEAN_MINB)                  \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const unsigned short* __restrict__ x,          \
             OUT* __restrict__ y, unsigned rows, unsigned cols, unsigned flags,                 \
             const uint2* __restrict__, float* __restrict__, unsigned) {                        \
        const MackoSplit none = {nullptr, nullptr};                                             \
        macko_spmv_impl<OUT, XM, 32u, MACKO_CHUNKS_SHORT, false, false>(                        \
            row_ptr, values, codes, x, y, cols, rows, (flags & 16u) != 0u, none);               \
    }

MACKO_LEAN_ENTRY(macko_lean_f16, unsigned short, MACKO_XU)
MACKO_LEAN_ENTRY(macko_lean_f32, float, MACKO_XU)
MACKO_LEAN_ENTRY(macko_lean_xh_f16, unsigned short, MACKO_XH)
MACKO_LEAN_ENTRY(macko_lean_xh_f32, float, MACKO_XH)

// y[r] = the sum of row r's partials (items row_item[r] .. row_item[r + 1]) in item order: the
// second launch of a split matrix's product (see MackoSplit). One thread per row, grid-stride.
#define MACKO_COMBINE_ENTRY(NAME, OUT)                                                          \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK)                                  \
        NAME(const unsigned* __restrict__ row_item, const float* __restrict__ partials,         \
             OUT* __restrict__ y, unsigned rows) {                                              \
        for (unsigned r = blockIdx.x * blockDim.x + threadIdx.x; r < rows;                      \
             r += gridDim.x * blockDim.x) {                                                     \
            const unsigned first = __ldg(row_item + r), last = __ldg(row_item + r + 1u);        \
            float sum = 0.0f;                                                                   \
            for (unsigned j = first; j < last; ++j) sum += __ldg(partials + j);                 \
            macko_store(y, r, sum);                                                             \
        }                                                                                       \
    }

MACKO_COMBINE_ENTRY(macko_combine_f16, unsigned short)
MACKO_COMBINE_ENTRY(macko_combine_f32, float)

// ---------------------------------------------------------------------------------------------
// Flat ranges (`macko_flat_*`): each warp walks one contiguous range of stored entries, whatever
// the rows look like, as one stream of two-chunk batches (the next batch's loads issued before the
// current one is used), so every warp moves the same number of bytes and no warp waits on a row's
// bounds before its loads. The range is cut at upload (src/backend/cuda/flat.rs): at a row's
// start where one lies near the even cut, else on a multiple of 8 entries inside a row. Rows end
// where the warp meets their successor's start in row_ptr: a window of the next 64 row starts is
// kept in two registers per lane, and a chunk that holds row starts ("boundaries") splits its
// entries between rows: entries before the boundary in its lane add to one row, those after to
// the next, with each row's column base rebuilt from the prefix sum at the boundary. Rows wholly
// inside the range go to y; the part of a row cut by the range's start goes to partials[2w] (the
// head), the part cut by its end to partials[2w + 1] (the tail), and macko_combine_rows (a second
// launch, only where some row is cut) adds them up in range order. The host uses this kernel only
// for matrices whose rows all hold at least 9 entries (so a lane's 8 entries meet at most one
// boundary and a chunk of 256 entries at most 29), with x staged in shared memory.

// A range (desc[w], a uint4): its first stored entry, the row holding it, that row's column after
// its last entry before the range (0 when the row starts there), and the row's first entry;
// desc[ranges].x closes the last range.

// Row start i (row_ptr[i]), or "never" past the last row.
__device__ __forceinline__ unsigned macko_row_start(const unsigned* __restrict__ row_ptr,
                                                    unsigned rows, unsigned i) {
    return i <= rows ? __ldg(row_ptr + i) : 0xffffffffu;
}

// The inclusive prefix (gap + 1 summed) of a lane's entries 0..=k, from the words of
// macko_prefix (k warp-uniform but known only at run time).
__device__ __forceinline__ unsigned macko_prefix_at(unsigned pl, unsigned ph, unsigned k) {
    return k < 4u ? __byte_perm(pl, 0u, 0x4440u | k) : (pl >> 24) + __byte_perm(ph, 0u, 0x4440u | (k - 4u));
}

// Adds one lane's 8 entries split at entry kb (8: not split): entries k < kb at slot b0h + byte k
// of the prefix into acch, the others at b0t + byte k into acct.
template <int XM, bool SAFE>
__device__ __forceinline__ void macko_chunk_split(const uint4 v, unsigned pl, unsigned ph,
                                                  unsigned b0h, unsigned b0t, unsigned kb,
                                                  const float* xs, float& acch, float& acct) {
    float a[8];
    macko_unpack2(v.x, a[0], a[1]);
    macko_unpack2(v.y, a[2], a[3]);
    macko_unpack2(v.z, a[4], a[5]);
    macko_unpack2(v.w, a[6], a[7]);
#pragma unroll
    for (unsigned k = 0; k < 8u; ++k) {
        const bool head = k < kb;
        const unsigned slot = (head ? b0h : b0t) + macko_prefix_at(pl, ph, k);
        const float xv = macko_xs_at<XM>(xs, slot);
        const float t = SAFE ? (a[k] != 0.0f ? xv : 0.0f) : xv;
        if (head) {
            acch = fmaf(a[k], t, acch);
        } else {
            acct = fmaf(a[k], t, acct);
        }
    }
}

// The state a warp carries from chunk to chunk of its range (all of it warp-uniform but the
// accumulators and the window).
struct MackoFlatState {
    unsigned row;         // the open row (the one the next entry belongs to)
    unsigned ncol;        // its column after its last entry so far
    unsigned open_start;  // its first entry
    unsigned wbase;       // window: lane l holds row starts wbase + l (wl) and wbase + 32 + l (wh)
    unsigned wl, wh;
    unsigned nextb;       // the next row start (row + 1's first entry): warp-uniform
    float acc0, acc1;     // this lane's part of the open row
};

// Stores a finished row's sum: to y, or to the range's head partial when it is the row the
// range's start cut.
template <typename Out>
__device__ __forceinline__ void macko_flat_store(Out* __restrict__ y, float* __restrict__ partials,
                                                 unsigned w, bool head_cut, unsigned head_row,
                                                 unsigned r, float s) {
    if (head_cut && r == head_row) {
        partials[2u * w] = s;
    } else {
        macko_store(y, r, s);
    }
}

// One chunk of a range: lane `lane` holds group `g` (entries [8g, 8g + 8)) with its values `v`,
// masked range bounds [lo, hi) in the group, prefix words pl/ph, and `excl`/`total` (the chunk's
// exclusive scan of column advances at this lane, and its total). `lim` = min(chunk end, range
// end): row starts up to it end rows in this chunk.
template <typename Out, int XM, bool SAFE>
__device__ __forceinline__ void macko_flat_chunk(
    const unsigned* __restrict__ row_ptr, Out* __restrict__ y, float* __restrict__ partials,
    const float* xs, unsigned rows, unsigned w, bool head_cut, unsigned head_row, unsigned lane,
    unsigned e0, unsigned lim, const uint4 v, unsigned pl, unsigned ph, unsigned lo, unsigned excl,
    unsigned total, MackoFlatState& st) {
    const unsigned lane_base = excl + (MACKO_X_SLACK - 1u) - lo;
    if (st.nextb > lim) {
        // No row ends here: the whole chunk belongs to the open row.
        macko_chunk<XM, SAFE>(v, pl, ph, st.ncol + lane_base, xs, nullptr, 0u, st.acc0, st.acc1);
        st.ncol += total;
        return;
    }
    // The window of row starts from the open row's successor on: c of them are behind it.
    unsigned c = st.row + 1u - st.wbase;
    if (c >= 32u) {
        st.wbase += 32u;
        st.wl = st.wh;
        st.wh = macko_row_start(row_ptr, rows, st.wbase + 32u + lane);
        c -= 32u;
    }
    const unsigned src = c + lane;
    const unsigned bl = __shfl_sync(MACKO_FULL_MASK, st.wl, src & 31u);
    const unsigned bh = __shfl_sync(MACKO_FULL_MASK, st.wh, src & 31u);
    const unsigned bj = src < 32u ? bl : (src < 64u ? bh : 0xffffffffu);
    // At least one (nextb <= lim): the first nb lanes' row starts lie in this chunk.
    const unsigned nb = __popc(__ballot_sync(MACKO_FULL_MASK, bj <= lim));
    // Rows end here. For each boundary j (row start b_j in (chunk start, lim]): the prefix sum
    // before it (from the lane holding entry b_j - 1) gives the new row's column base; lanes from
    // the one starting at or after b_j belong to it; the lane holding b_j inside its group splits.
    unsigned bhead = st.ncol, btail = 0u, kb = 8u, cnt = 0u, last_s = 0u;
#pragma unroll 1
    for (unsigned j = 0; j < nb; ++j) {
        const unsigned b = __shfl_sync(MACKO_FULL_MASK, bj, j);
        const unsigned pos = b - e0;  // 1 .. 256
        const unsigned ol = (pos - 1u) >> 3, ok = (pos - 1u) & 7u;
        const unsigned mine = excl + macko_prefix_at(pl, ph, ok) - lo;
        const unsigned s = __shfl_sync(MACKO_FULL_MASK, mine, ol);
        last_s = s;
        // Column of an entry of the new row = (prefix at the entry) - s - 1.
        const unsigned base = 0u - s;
        if (lane >= ((pos + 7u) >> 3)) {
            bhead = base;
            cnt = j + 1u;
        }
        if (lane == ol && (pos & 7u) != 0u) {
            kb = pos & 7u;
            btail = base;
        }
    }
    float acch = 0.0f, acct = 0.0f;
    macko_chunk_split<XM, SAFE>(v, pl, ph, bhead + lane_base, btail + lane_base, kb, xs, acch,
                                acct);
    // Each row that ended: the sum of its lanes' parts (the open row's earlier chunks included).
    const bool split_lane = kb < 8u;
    const float open = st.acc0 + st.acc1;
#pragma unroll 1
    for (unsigned j = 0; j < nb; ++j) {
        float part = (cnt == j ? acch : 0.0f) + (split_lane && cnt + 1u == j ? acct : 0.0f);
        if (j == 0u) part += open;
        const float s = macko_warp_sum(part);
        if (lane == 0u) {
            macko_flat_store(y, partials, w, head_cut, head_row, st.row + j, s);
        }
    }
    st.acc0 = (cnt == nb ? acch : 0.0f) + (split_lane && cnt + 1u == nb ? acct : 0.0f);
    st.acc1 = 0.0f;
    st.open_start = __shfl_sync(MACKO_FULL_MASK, bj, nb - 1u);
    st.row += nb;
    st.ncol = total - last_s;
    // The next row start: window entry c + nb (< 64, as c < 32 and nb <= 29).
    const unsigned cn = c + nb;
    const unsigned nl = __shfl_sync(MACKO_FULL_MASK, st.wl, cn & 31u);
    const unsigned nh = __shfl_sync(MACKO_FULL_MASK, st.wh, cn & 31u);
    st.nextb = cn < 32u ? nl : nh;
}

template <typename Out, int XM, bool SAFE>
__device__ __forceinline__ void macko_flat_range(
    const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,
    const unsigned* __restrict__ codes, const float* xs, Out* __restrict__ y,
    float* __restrict__ partials, unsigned rows, unsigned w, const uint4 d, unsigned a_end,
    unsigned lane, unsigned wl, unsigned wh, uint4 (&v)[2], unsigned (&c)[2]) {
    const unsigned a_start = d.x, head_row = d.y;
    const bool head_cut = d.w < a_start;
    MackoFlatState st;
    st.row = head_row;
    st.ncol = d.z;
    st.open_start = d.w;
    st.wbase = head_row + 1u;
    st.wl = wl;
    st.wh = wh;
    st.nextb = __shfl_sync(MACKO_FULL_MASK, wl, 0);
    st.acc0 = 0.0f;
    st.acc1 = 0.0f;
    const unsigned g_end = (a_end + 7u) >> 3;
    // Groups wholly inside the range: [g_in, g_out).
    const unsigned g_in = (a_start + 7u) >> 3, g_out = a_end >> 3;
    for (unsigned gb = a_start >> 3; gb < g_end; gb += 64u) {
        uint4 vn[2];
        unsigned cn[2];
        const bool more = gb + 64u < g_end;
        if (more) macko_load_batch<32u, 2>(values, codes, gb + 64u, g_end, lane, vn, cn);
        const bool interior = gb >= g_in && gb + 64u <= g_out;
        unsigned lo_a = 0u, hi_a = 8u, lo_b = 0u, hi_b = 8u;
        if (!interior) {
            macko_mask(gb + lane, a_start, a_end, v[0], c[0], lo_a, hi_a);
            macko_mask(gb + 32u + lane, a_start, a_end, v[1], c[1], lo_b, hi_b);
        }
        unsigned pl_a, ph_a, pl_b, ph_b;
        macko_prefix(c[0], pl_a, ph_a);
        macko_prefix(c[1], pl_b, ph_b);
        unsigned excl, total;
        macko_scan_pair<32u>(pl_a, ph_a, lo_a, hi_a, pl_b, ph_b, lo_b, hi_b, lane, excl, total);
        const unsigned e0 = gb * 8u;
        macko_flat_chunk<Out, XM, SAFE>(row_ptr, y, partials, xs, rows, w, head_cut, head_row,
                                        lane, e0, min(e0 + 256u, a_end), v[0], pl_a, ph_a, lo_a,
                                        excl & 0xffffu, total & 0xffffu, st);
        if (gb + 32u < g_end) {
            macko_flat_chunk<Out, XM, SAFE>(row_ptr, y, partials, xs, rows, w, head_cut, head_row,
                                            lane, e0 + 256u, min(e0 + 512u, a_end), v[1], pl_b,
                                            ph_b, lo_b, excl >> 16, total >> 16, st);
        }
        if (more) {
            v[0] = vn[0];
            v[1] = vn[1];
            c[0] = cn[0];
            c[1] = cn[1];
        }
    }
    // The open row, if the range's end cuts it: its part goes to the tail partial (or, when the
    // range's start cut it too, to the head partial, the tail partial then being 0).
    if (st.row < rows && st.open_start < a_end) {
        const float s = macko_warp_sum(st.acc0 + st.acc1);
        if (lane == 0u) {
            if (head_cut && st.row == head_row) {
                partials[2u * w] = s;
                partials[2u * w + 1u] = 0.0f;
            } else {
                partials[2u * w + 1u] = s;
            }
        }
    }
}

template <typename Out, int XM>
__device__ __forceinline__ void macko_flat_impl(const unsigned* __restrict__ row_ptr,
                                                const uint4* __restrict__ values,
                                                const unsigned* __restrict__ codes,
                                                const unsigned short* __restrict__ x,
                                                Out* __restrict__ y, unsigned rows, unsigned cols,
                                                const uint4* __restrict__ desc,
                                                float* __restrict__ partials, unsigned ranges) {
    extern __shared__ float macko_xs[];
    const unsigned lane = threadIdx.x & 31u;
    const unsigned w = blockIdx.x * (blockDim.x / 32u) + threadIdx.x / 32u;
    uint4 d = make_uint4(0u, 0u, 0u, 0u);
    unsigned a_end = 0u;
    uint4 v[2];
    unsigned c[2];
    unsigned wl = 0u, wh = 0u;
    if (w < ranges) {
        d = __ldg(desc + w);
        a_end = __ldg(&desc[w + 1u].x);
        // The first batch and the window of row starts are on their way while the block stages x.
        macko_load_batch<32u, 2>(values, codes, d.x >> 3, (a_end + 7u) >> 3, lane, v, c);
        wl = macko_row_start(row_ptr, rows, d.y + 1u + lane);
        wh = macko_row_start(row_ptr, rows, d.y + 33u + lane);
    }
    const bool nonfinite = macko_stage_x_as<XM>(macko_xs, x, cols);
    const bool finite_x = __syncthreads_or(nonfinite ? 1 : 0) == 0;
    if (w >= ranges) return;
    if (finite_x) {
        macko_flat_range<Out, XM, false>(row_ptr, values, codes, macko_xs, y, partials, rows, w, d,
                                         a_end, lane, wl, wh, v, c);
    } else {
        macko_flat_range<Out, XM, true>(row_ptr, values, codes, macko_xs, y, partials, rows, w, d,
                                        a_end, lane, wl, wh, v, c);
    }
}

#define MACKO_FLAT_ENTRY(NAME, OUT, XM)                                                         \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK, MACKO_MINB)                       \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,            \
             const unsigned* __restrict__ codes, const unsigned short* __restrict__ x,          \
             OUT* __restrict__ y, unsigned rows, unsigned cols, const uint4* __restrict__ desc, \
             float* __restrict__ partials, unsigned ranges) {                                   \
        macko_flat_impl<OUT, XM>(row_ptr, values, codes, x, y, rows, cols, desc, partials,      \
                                 ranges);                                                       \
    }

MACKO_FLAT_ENTRY(macko_flat_xs_f16, unsigned short, MACKO_XP)
MACKO_FLAT_ENTRY(macko_flat_xs_f32, float, MACKO_XP)
MACKO_FLAT_ENTRY(macko_flat_xu_f16, unsigned short, MACKO_XU)
MACKO_FLAT_ENTRY(macko_flat_xu_f32, float, MACKO_XU)
MACKO_FLAT_ENTRY(macko_flat_xh_f16, unsigned short, MACKO_XH)
MACKO_FLAT_ENTRY(macko_flat_xh_f32, float, MACKO_XH)

// The rows that flat ranges cut: y[row] = partials[first] + ... + partials[end - 1], in order
// (entry i of `cut`: (row, first, end, 0)). One thread per cut row, grid-stride.
#define MACKO_COMBINE_ROWS_ENTRY(NAME, OUT)                                                     \
    extern "C" __global__ void __launch_bounds__(MACKO_BLOCK)                                  \
        NAME(const uint4* __restrict__ cut, const float* __restrict__ partials,                 \
             OUT* __restrict__ y, unsigned count) {                                             \
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count;                     \
             i += gridDim.x * blockDim.x) {                                                     \
            const uint4 e = __ldg(cut + i);                                                     \
            float sum = 0.0f;                                                                   \
            for (unsigned j = e.y; j < e.z; ++j) sum += __ldg(partials + j);                    \
            macko_store(y, e.x, sum);                                                           \
        }                                                                                       \
    }

MACKO_COMBINE_ROWS_ENTRY(macko_combine_rows_f16, unsigned short)
MACKO_COMBINE_ROWS_ENTRY(macko_combine_rows_f32, float)
