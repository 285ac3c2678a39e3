// Products with a sparse input for CSR, homogeneous CSR and MACKO with binary16 values
// (README.md, "Products with a sparse input"): the transposed product y = Aᵀ·x with x sparse or
// dense, the product y = A·x with x sparse, and the ordinary product of a homogeneous CSR
// matrix. Binary16 values (homogeneous: one weight for every entry, widened to f32 on the
// host), u32 row pointers and columns (the layout of csr.cu; MACKO's: docs/FORMAT.md); a
// sparse x as its non-zero entries, indices u32 and values widened to f32 once at upload (±0
// dropped there).
//
// y = Aᵀ·x, two launches in order on one stream, over a scratch of `replicas` copies of the
// `cols` f32 sums that is all zeros between products (zeroed at allocation, re-zeroed by 2.):
//   1. csr[_h]_transposed_{sparse,dense}_x: a team of 2^shift threads (32 to 256, from the
//      matrix's mean row length) per selected row of A, grid-stride; the team's threads stride
//      over the row's entries (coalesced, as csr.cu reads a row) and atomicAdd x_i·A[i, c] into
//      sum c of their block's replica (block b adds into replica b % replicas). Teams wider
//      than a warp put every entry's load in flight at once, where a warp per row waited for
//      ~16 loads in turn; the replicas spread the atomics on y's few hot L2 lines over
//      `replicas` times as many. A sparse x gives a team per stored entry; a dense x a team per
//      row of A, which reads x[i] (one half) and skips the row where it is ±0, so only the
//      selected rows of A are read (x itself, 2 bytes a row, is read whole). A row's columns are
//      distinct, so the threads of one team never collide; teams of rows sharing a column do,
//      in the L2's atomic units. The order of those adds is the hardware's, so y may differ
//      from run to run in its last bits (the wgpu kernel, which has no float atomics, sums in
//      x's order instead);
//   2. transposed_finish_{f16,f32}: each column's replicas summed in replica order, rounded once
//      to y's type, and set back to 0.
//
// y = A·x with x sparse, three launches: transposed_zero clears a scratch of `cols` floats,
// sparse_x_scatter writes x's entries into it (indices are distinct: no races), and
// csr[_h]_sparse_x_* runs the CSR product (a warp per row) over it, skipping the entries whose
// column holds a zero of x. Every row of A is read: the formats are row-major.
//
// MACKO (binary16 values): the same launches and scratches, with teams of whole warps decoding a
// row's gap codes (macko_walk_row) where CSR's team strides over its columns: 32 to 256 threads
// for Aᵀ·x (from the mean row, as CSR's), a warp per row for A·x.
//
// Zero-valued entries of A (a zero weight, MACKO's padding) add nothing even where x is NaN or
// ±∞ (skipped, never multiplied by 0); zeros of x add nothing even where A is NaN or ±∞.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define TRANSPOSED_BLOCK 256

// Entry j's value: the stored binary16, or the homogeneous matrix's one weight (H).
template <bool H>
__device__ __forceinline__ float sx_value(const unsigned short* __restrict__ values, float weight,
                                          unsigned j) {
    return H ? weight : macko_h2f(macko_load_stream(values + j));
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    transposed_zero(float* __restrict__ sums, unsigned cols) {
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        sums[c] = 0.0f;
    }
}

// A team of 2^shift threads (shift 5 to 8, dividing the block) per item of work.
struct SxTeam {
    unsigned lane;    // the thread's place in its team
    unsigned size;    // threads per team
    unsigned first;   // the team's first item
    unsigned stride;  // teams in the grid
};

__device__ __forceinline__ SxTeam sx_team(unsigned shift) {
    const unsigned per_block = blockDim.x >> shift;
    return {threadIdx.x & ((1u << shift) - 1u), 1u << shift,
            blockIdx.x * per_block + (threadIdx.x >> shift), gridDim.x * per_block};
}

// The block's replica of the sums.
__device__ __forceinline__ float* sx_replica(float* sums, unsigned cols, unsigned replicas) {
    return sums + (unsigned long long)(blockIdx.x % replicas) * cols;
}

// Scatters row i of A, times xv, into the sums: the team's threads over the row's entries.
template <bool H>
__device__ __forceinline__ void scatter_row(const unsigned* __restrict__ row_ptr,
                                            const unsigned* __restrict__ col_idx,
                                            const unsigned short* __restrict__ values,
                                            float weight, unsigned i, float xv, const SxTeam& t,
                                            float* __restrict__ sums) {
    const unsigned start = __ldg(row_ptr + i), end = __ldg(row_ptr + i + 1u);
#pragma unroll 4
    for (unsigned j = start + t.lane; j < end; j += t.size) {
        const float a = sx_value<H>(values, weight, j);
        const unsigned c = macko_load_stream(col_idx + j);
        if (a != 0.0f) {
            atomicAdd(sums + c, a * xv);
        }
    }
}

// The rows of A a transposed product reads, as items for the teams: item n of a sparse x is
// its stored entry n (row x_index[n], every one selected); item i of a dense x is row i of A,
// selected where x[i] is not ±0 (one half read: team-uniform, every thread reads the same).
struct SparseXRows {
    const unsigned* __restrict__ index;
    const float* __restrict__ value;
    unsigned nnz;
    __device__ __forceinline__ unsigned items() const { return nnz; }
    __device__ __forceinline__ bool select(unsigned n, unsigned& row, float& xv) const {
        row = __ldg(index + n);
        xv = __ldg(value + n);
        return true;
    }
};

struct DenseXRows {
    const unsigned short* __restrict__ x;
    unsigned rows;
    __device__ __forceinline__ unsigned items() const { return rows; }
    __device__ __forceinline__ bool select(unsigned i, unsigned& row, float& xv) const {
        const unsigned short h = __ldg(x + i);
        row = i;
        xv = macko_h2f(h);
        return (h & 0x7fffu) != 0u;
    }
};

// A team per item of `rows` (SparseXRows or DenseXRows), scattering each selected row.
template <bool H, typename Rows>
__device__ __forceinline__ void csr_transposed_impl(const unsigned* __restrict__ row_ptr,
                                                    const unsigned* __restrict__ col_idx,
                                                    const unsigned short* __restrict__ values,
                                                    float weight, Rows rows,
                                                    float* __restrict__ sums, unsigned cols,
                                                    unsigned replicas, unsigned shift) {
    const SxTeam t = sx_team(shift);
    float* mine = sx_replica(sums, cols, replicas);
    for (unsigned n = t.first; n < rows.items(); n += t.stride) {
        unsigned i;
        float xv;
        if (rows.select(n, i, xv)) {
            scatter_row<H>(row_ptr, col_idx, values, weight, i, xv, t, mine);
        }
    }
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    csr_transposed_sparse_x(const unsigned* __restrict__ row_ptr,
                            const unsigned* __restrict__ col_idx,
                            const unsigned short* __restrict__ values,
                            const unsigned* __restrict__ x_index,
                            const float* __restrict__ x_value, unsigned nnz,
                            float* __restrict__ sums, unsigned cols, unsigned replicas,
                            unsigned shift) {
    csr_transposed_impl<false>(row_ptr, col_idx, values, 0.0f, SparseXRows{x_index, x_value, nnz},
                               sums, cols, replicas, shift);
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    csr_h_transposed_sparse_x(const unsigned* __restrict__ row_ptr,
                              const unsigned* __restrict__ col_idx, float weight,
                              const unsigned* __restrict__ x_index,
                              const float* __restrict__ x_value, unsigned nnz,
                              float* __restrict__ sums, unsigned cols, unsigned replicas,
                              unsigned shift) {
    csr_transposed_impl<true>(row_ptr, col_idx, nullptr, weight, SparseXRows{x_index, x_value, nnz},
                              sums, cols, replicas, shift);
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    csr_transposed_dense_x(const unsigned* __restrict__ row_ptr,
                           const unsigned* __restrict__ col_idx,
                           const unsigned short* __restrict__ values,
                           const unsigned short* __restrict__ x, unsigned rows,
                           float* __restrict__ sums, unsigned cols, unsigned replicas,
                           unsigned shift) {
    csr_transposed_impl<false>(row_ptr, col_idx, values, 0.0f, DenseXRows{x, rows}, sums, cols,
                               replicas, shift);
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    csr_h_transposed_dense_x(const unsigned* __restrict__ row_ptr,
                             const unsigned* __restrict__ col_idx, float weight,
                             const unsigned short* __restrict__ x, unsigned rows,
                             float* __restrict__ sums, unsigned cols, unsigned replicas,
                             unsigned shift) {
    csr_transposed_impl<true>(row_ptr, col_idx, nullptr, weight, DenseXRows{x, rows}, sums, cols,
                              replicas, shift);
}

// y from the sums: each column's replicas added in replica order, rounded once to y's type, and
// set back to 0 for the next product. __ldcg/__stcg: the sums live in L2, where the atomics were.
template <typename Out>
__device__ __forceinline__ void finish_impl(float* __restrict__ sums, Out* __restrict__ y,
                                            unsigned cols, unsigned replicas) {
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += stride) {
        float acc = 0.0f;
        for (unsigned r = 0; r < replicas; ++r) {
            float* p = sums + (unsigned long long)r * cols + c;
            acc += __ldcg(p);
            __stcg(p, 0.0f);
        }
        macko_store(y, c, acc);
    }
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    transposed_finish_f16(float* __restrict__ sums, unsigned short* __restrict__ y, unsigned cols,
                          unsigned replicas) {
    finish_impl(sums, y, cols, replicas);
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    transposed_finish_f32(float* __restrict__ sums, float* __restrict__ y, unsigned cols,
                          unsigned replicas) {
    finish_impl(sums, y, cols, replicas);
}

// The staging of a warp's 256 entries (column, value bits), 9 slots a lane (fewer bank
// conflicts than 8); MACKO_SX_NONE marks an entry outside the row.
#define MACKO_SX_STRIDE 9u
#define MACKO_SX_NONE 0xffffffffu
#define MACKO_SX_STAGE (32u * MACKO_SX_STRIDE)

// Synchronises the `threads` threads of a team (whole warps) on named barrier `id` (1 to 15; 0 is
// __syncthreads'), so that the teams of a block loop independently.
__device__ __forceinline__ void sx_team_sync(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// MACKO rows (binary16 values; docs/FORMAT.md): a team of `warps` warps (1 to 8) walks row i in
// steps of 32·warps aligned groups of 8 entries, thread t of the team owning group w0 + t: its 8
// values as one 16-byte load and its 8 gap codes as one 32-bit load, entries of the neighbouring
// rows masked. An entry's column is the row's running advance (Σ (code + 1) over the entries
// before it, plus its own) minus 1: each thread's advance in its group, an inclusive scan of the
// threads' totals (across the warp by shuffles, across the team's warps through `totals`, one
// slot per warp, between two named barriers), and the carry of the steps before.
// f(column, value bits) is called for every entry of the row, padding (value 0) included (the
// callers skip zero values before touching their column, which for the row-aligned layout's
// padding may lie up to 7 past the last), by the lane that owns it or, with STAGE, the lane
// that `stage` hands it to. Team-uniform: every thread runs every step.
template <bool STAGE, typename F>
__device__ __forceinline__ void macko_walk_row(const unsigned* __restrict__ row_ptr,
                                               const uint4* __restrict__ values,
                                               const unsigned* __restrict__ codes, unsigned i,
                                               unsigned t, unsigned warps, unsigned barrier,
                                               unsigned* totals, uint2* stage, F&& f) {
    const unsigned start = __ldg(row_ptr + i), end = __ldg(row_ptr + i + 1u);
    if (start >= end) return;
    const unsigned last = (end - 1u) >> 3, lane = t & 31u, warp = t >> 5;
    unsigned carry = 0u;
    for (unsigned w0 = start >> 3; w0 <= last; w0 += 32u * warps) {
        const unsigned w = w0 + t;
        const bool live = w <= last;
        const uint4 v = live ? macko_load_stream(values + w) : make_uint4(0u, 0u, 0u, 0u);
        const unsigned g = live ? macko_load_stream(codes + w) : 0u;
        unsigned adv[8];
        unsigned total = 0u;
#pragma unroll
        for (unsigned k = 0; k < 8u; ++k) {
            const unsigned e = 8u * w + k;  // w ≤ last < 2^29 where live
            const bool in = live && e >= start && e < end;
            adv[k] = in ? ((g >> (4u * k)) & 15u) + 1u : 0u;
            total += adv[k];
        }
        unsigned incl = total;
#pragma unroll
        for (unsigned d = 1u; d < 32u; d <<= 1) {
            const unsigned u = __shfl_up_sync(0xffffffffu, incl, d);
            if (lane >= d) incl += u;
        }
        unsigned col = carry + incl - total;
        if (warps == 1u) {
            carry += __shfl_sync(0xffffffffu, incl, 31);
        } else {
            if (lane == 31u) totals[warp] = incl;
            sx_team_sync(barrier, 32u * warps);
            unsigned step = 0u;
            for (unsigned q = 0; q < warps; ++q) {
                const unsigned u = totals[q];
                col += q < warp ? u : 0u;
                step += u;
            }
            sx_team_sync(barrier, 32u * warps);  // every slot read before the next step's
            carry += step;
        }
        // STAGE: each lane's 8 entries staged, then handed out entry e to lane e % 32:
        // consecutive lanes take consecutive entries, whose columns share sectors (lane-owned
        // groups put each lane of an atomic on its own sector: 2.5× slower scatters at d = 0.5).
        // Not for A·x's gathers from x, which lost 0–27 % with it.
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
        if (!STAGE) {
#pragma unroll
            for (unsigned k = 0; k < 8u; ++k) {
                col += adv[k];
                const unsigned short h = (unsigned short)(words[k >> 1] >> (16u * (k & 1u)));
                if (adv[k] != 0u) f(col - 1u, h);
            }
        } else {
#pragma unroll
            for (unsigned k = 0; k < 8u; ++k) {
                col += adv[k];
                const unsigned c = adv[k] != 0u ? col - 1u : MACKO_SX_NONE;
                stage[lane * MACKO_SX_STRIDE + k] =
                    make_uint2(c, (words[k >> 1] >> (16u * (k & 1u))) & 0xffffu);
            }
            __syncwarp();
#pragma unroll
            for (unsigned q = 0; q < 8u; ++q) {
                const unsigned e = q * 32u + lane;
                const uint2 entry = stage[(e >> 3) * MACKO_SX_STRIDE + (e & 7u)];
                if (entry.x != MACKO_SX_NONE) f(entry.x, (unsigned short)entry.y);
            }
            __syncwarp();
        }
    }
}

// y = Aᵀ·x for MACKO: a team of 2^shift threads (32 to 256) per selected row (stored entry n of
// a sparse x, or row i of A where the dense x is not ±0), its non-zero values times x_i added
// into the block's replica of the sums.
struct MackoScatter {
    float* sums;
    float xv;
    __device__ __forceinline__ void operator()(unsigned c, unsigned short h) const {
        const float a = macko_h2f(h);
        if (a != 0.0f) atomicAdd(sums + c, a * xv);
    }
};

// The team's share of the walk: its barrier (1 + its index in the block) and warp slots.
struct MackoTeam {
    SxTeam t;
    unsigned warps, barrier;
    unsigned* totals;
};

__device__ __forceinline__ MackoTeam macko_team(unsigned shift, unsigned* block_totals) {
    const SxTeam t = sx_team(shift);
    const unsigned warps = 1u << (shift - 5u), in_block = threadIdx.x >> shift;
    return {t, warps, 1u + in_block, block_totals + in_block * warps};
}

// A team of whole warps per item of `rows` (SparseXRows or DenseXRows), walking each selected
// row (macko_walk_row, entries staged) into the block's replica of the sums.
template <typename Rows>
__device__ __forceinline__ void macko_transposed_impl(const unsigned* __restrict__ row_ptr,
                                                      const uint4* __restrict__ values,
                                                      const unsigned* __restrict__ codes,
                                                      Rows rows, float* __restrict__ sums,
                                                      unsigned cols, unsigned replicas,
                                                      unsigned shift) {
    __shared__ unsigned totals[TRANSPOSED_BLOCK / 32];
    __shared__ uint2 stage[TRANSPOSED_BLOCK / 32 * MACKO_SX_STAGE];
    const MackoTeam m = macko_team(shift, totals);
    uint2* my_stage = stage + (threadIdx.x >> 5) * MACKO_SX_STAGE;
    float* mine = sx_replica(sums, cols, replicas);
    for (unsigned n = m.t.first; n < rows.items(); n += m.t.stride) {
        unsigned i;
        float xv;
        if (rows.select(n, i, xv)) {  // team-uniform
            macko_walk_row<true>(row_ptr, values, codes, i, m.t.lane, m.warps, m.barrier,
                                 m.totals, my_stage, MackoScatter{mine, xv});
        }
    }
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    macko_transposed_sparse_x(const unsigned* __restrict__ row_ptr,
                              const uint4* __restrict__ values,
                              const unsigned* __restrict__ codes,
                              const unsigned* __restrict__ x_index,
                              const float* __restrict__ x_value, unsigned nnz,
                              float* __restrict__ sums, unsigned cols, unsigned replicas,
                              unsigned shift) {
    macko_transposed_impl(row_ptr, values, codes, SparseXRows{x_index, x_value, nnz}, sums, cols,
                          replicas, shift);
}

extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    macko_transposed_dense_x(const unsigned* __restrict__ row_ptr,
                             const uint4* __restrict__ values,
                             const unsigned* __restrict__ codes,
                             const unsigned short* __restrict__ x, unsigned rows,
                             float* __restrict__ sums, unsigned cols, unsigned replicas,
                             unsigned shift) {
    macko_transposed_impl(row_ptr, values, codes, DenseXRows{x, rows}, sums, cols, replicas,
                          shift);
}

// y = A·x for MACKO with x sparse, over x scattered into a dense f32 copy: a warp per row; an
// entry adds only where its value and x's element are both non-zero (a select, never a product
// with 0). A zero value's x is not even read: the row-aligned layout the backend uploads pads
// rows with zero entries that may name columns up to 7 past the last (format's aligned.rs).
struct MackoSparseXTerm {
    const float* xs;
    float* acc;
    __device__ __forceinline__ void operator()(unsigned c, unsigned short h) const {
        const float a = macko_h2f(h);
        const float xv = a != 0.0f ? __ldg(xs + c) : 0.0f;
        *acc += (a != 0.0f && xv != 0.0f) ? a * xv : 0.0f;
    }
};

template <typename Out>
__device__ __forceinline__ void macko_sparse_x_impl(const unsigned* __restrict__ row_ptr,
                                                    const uint4* __restrict__ values,
                                                    const unsigned* __restrict__ codes,
                                                    const float* __restrict__ xs,
                                                    Out* __restrict__ y, unsigned rows) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned stride = gridDim.x * warps_per_block;
    for (unsigned row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < rows;
         row += stride) {
        float acc = 0.0f;
        macko_walk_row<false>(row_ptr, values, codes, row, lane, 1u, 0u, nullptr, nullptr,
                              MackoSparseXTerm{xs, &acc});
        acc = macko_warp_sum(acc);
        if (lane == 0u) macko_store(y, row, acc);
    }
}

#define MACKO_SPARSE_X_ENTRY(NAME, OUT)                                                         \
    extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)                             \
        NAME(const unsigned* __restrict__ row_ptr, const uint4* __restrict__ values,           \
             const unsigned* __restrict__ codes, const float* __restrict__ xs,                 \
             OUT* __restrict__ y, unsigned rows) {                                             \
        macko_sparse_x_impl<OUT>(row_ptr, values, codes, xs, y, rows);                         \
    }

MACKO_SPARSE_X_ENTRY(macko_sparse_x_f16, unsigned short)
MACKO_SPARSE_X_ENTRY(macko_sparse_x_f32, float)

// x's stored entries into a dense f32 copy (cleared before by transposed_zero).
extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    sparse_x_scatter(const unsigned* __restrict__ x_index, const float* __restrict__ x_value,
                     unsigned nnz, float* __restrict__ dense) {
    for (unsigned n = blockIdx.x * blockDim.x + threadIdx.x; n < nnz; n += gridDim.x * blockDim.x) {
        dense[__ldg(x_index + n)] = __ldg(x_value + n);
    }
}

// x's stored entries into a dense binary16 copy (zeroed before; exact: the values were binary16
// before their widening at upload), the x of a MACKO matrix's own kernels.
extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)
    sparse_x_scatter_f16(const unsigned* __restrict__ x_index, const float* __restrict__ x_value,
                         unsigned nnz, unsigned short* __restrict__ dense) {
    for (unsigned n = blockIdx.x * blockDim.x + threadIdx.x; n < nnz; n += gridDim.x * blockDim.x) {
        macko_store(dense, __ldg(x_index + n), __ldg(x_value + n));
    }
}

// One lane's share of row sum start..end: x dense f32 with zeros skipped (SCATTERED, a sparse x
// scattered), or the f16 x of an ordinary product (every column kept, as csr.cu). A zero of A
// is skipped in both. A select, never a product with 0: NaN/∞ under a skipped entry add nothing.
template <bool H, bool SCATTERED>
__device__ __forceinline__ float sx_row(const unsigned* __restrict__ col_idx,
                                        const unsigned short* __restrict__ values, float weight,
                                        const float* __restrict__ xs,
                                        const unsigned short* __restrict__ xh, unsigned start,
                                        unsigned end, unsigned lane) {
    float acc = 0.0f;
    for (unsigned j = start + lane; j < end; j += 32u) {
        const float a = sx_value<H>(values, weight, j);
        const unsigned c = macko_load_stream(col_idx + j);
        const float xv = SCATTERED ? __ldg(xs + c) : macko_h2f(__ldg(xh + c));
        const bool keep = (a != 0.0f) && (!SCATTERED || xv != 0.0f);
        acc += keep ? a * xv : 0.0f;
    }
    return acc;
}

// y = A·x over the scattered x: a warp per row, one store per row.
template <typename Out, bool H>
__device__ __forceinline__ void sparse_x_impl(const unsigned* __restrict__ row_ptr,
                                              const unsigned* __restrict__ col_idx,
                                              const unsigned short* __restrict__ values,
                                              float weight, const float* __restrict__ xs,
                                              Out* __restrict__ y, unsigned rows) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warps_per_block = blockDim.x >> 5;
    const unsigned stride = gridDim.x * warps_per_block;
    for (unsigned row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < rows;
         row += stride) {
        const unsigned start = __ldg(row_ptr + row), end = __ldg(row_ptr + row + 1u);
        float acc = sx_row<H, true>(col_idx, values, weight, xs, nullptr, start, end, lane);
        acc = macko_warp_sum(acc);
        if (lane == 0u) macko_store(y, row, acc);
    }
}

#define SPARSE_X_ENTRY(NAME, OUT)                                                               \
    extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)                             \
        NAME(const unsigned* __restrict__ row_ptr, const unsigned* __restrict__ col_idx,       \
             const unsigned short* __restrict__ values, const float* __restrict__ xs,          \
             OUT* __restrict__ y, unsigned rows) {                                             \
        sparse_x_impl<OUT, false>(row_ptr, col_idx, values, 0.0f, xs, y, rows);                \
    }

#define SPARSE_X_H_ENTRY(NAME, OUT)                                                             \
    extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)                             \
        NAME(const unsigned* __restrict__ row_ptr, const unsigned* __restrict__ col_idx,       \
             float weight, const float* __restrict__ xs, OUT* __restrict__ y, unsigned rows) { \
        sparse_x_impl<OUT, true>(row_ptr, col_idx, nullptr, weight, xs, y, rows);              \
    }

SPARSE_X_ENTRY(csr_sparse_x_f16, unsigned short)
SPARSE_X_ENTRY(csr_sparse_x_f32, float)
SPARSE_X_H_ENTRY(csr_h_sparse_x_f16, unsigned short)
SPARSE_X_H_ENTRY(csr_h_sparse_x_f32, float)

// Y = A·X for a homogeneous CSR matrix and `batch` vectors (X [batch][cols], Y [batch][rows]):
// a warp per (vector, row) pair, in 64 bits (rows · batch may pass 2³²), one store per pair.
template <typename Out>
__device__ __forceinline__ void h_spmv_impl(const unsigned* __restrict__ row_ptr,
                                            const unsigned* __restrict__ col_idx, float weight,
                                            const unsigned short* __restrict__ x,
                                            Out* __restrict__ y, unsigned rows, unsigned cols,
                                            unsigned batch) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned long long warps_per_block = blockDim.x >> 5;
    const unsigned long long stride = gridDim.x * warps_per_block;
    const unsigned long long items = (unsigned long long)rows * batch;
    for (unsigned long long item = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
         item < items; item += stride) {
        const unsigned long long b = item / rows;
        const unsigned row = (unsigned)(item - b * rows);
        const unsigned start = __ldg(row_ptr + row), end = __ldg(row_ptr + row + 1u);
        float acc = sx_row<true, false>(col_idx, nullptr, weight, nullptr, x + b * cols, start,
                                        end, lane);
        acc = macko_warp_sum(acc);
        if (lane == 0u) macko_store(y + b * rows, row, acc);
    }
}

#define H_SPMV_ENTRY(NAME, OUT)                                                                 \
    extern "C" __global__ void __launch_bounds__(TRANSPOSED_BLOCK)                             \
        NAME(const unsigned* __restrict__ row_ptr, const unsigned* __restrict__ col_idx,       \
             float weight, const unsigned short* __restrict__ x, OUT* __restrict__ y,          \
             unsigned rows, unsigned cols, unsigned batch) {                                   \
        h_spmv_impl<OUT>(row_ptr, col_idx, weight, x, y, rows, cols, batch);                   \
    }

H_SPMV_ENTRY(csr_h_spmv_f16, unsigned short)
H_SPMV_ENTRY(csr_h_spmv_f32, float)
