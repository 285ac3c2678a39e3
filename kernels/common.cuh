// Helpers shared by every macko CUDA kernel.
//
// The kernels are compiled at run time by NVRTC (src/backend/cuda/nvrtc.rs prepends this file to
// each kernel source) and must also compile with `nvcc -arch=sm_90 -c kernels/<file>.cu`, where
// each kernel file includes this one. So: no #include of any CUDA header (NVRTC may not find the
// toolkit's include folder), f16 handled as raw 16-bit patterns converted with inline PTX, and
// only built-in types (uint4, unsigned, float) and intrinsics both compilers know.
#ifndef MACKO_COMMON_CUH
#define MACKO_COMMON_CUH

#define MACKO_FULL_MASK 0xffffffffu

// Slots of x staged in shared memory in front of column 0 and after column cols-1. Masked MACKO
// entries compute columns up to 8 before the row's first entry and up to 15 after the last
// column (see macko.cu; with row-aligned uploads, up to 15 after the last column too: README.md,
// "Correctness: every read in bounds"); the slack keeps those indices inside the staged array, so
// the inner loop needs no clamp.
#define MACKO_X_SLACK 8
#define MACKO_X_TAIL 16
static_assert(MACKO_X_TAIL >= 15, "masked and row-aligned padding gathers reach 15 past x");

// binary16 bits -> f32 (exact).
__device__ __forceinline__ float macko_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// f32 -> binary16 bits, rounded to nearest even (the one rounding of an f16 output).
__device__ __forceinline__ unsigned short macko_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// The two binary16 values packed in a 32-bit word (low half first) -> two f32.
__device__ __forceinline__ void macko_unpack2(unsigned w, float& lo, float& hi) {
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
        : "=f"(lo), "=f"(hi)
        : "r"(w));
}

// Stores an f32 accumulator as the output type: f32 as is, f16 rounded once.
__device__ __forceinline__ void macko_store(float* y, unsigned i, float v) { y[i] = v; }
__device__ __forceinline__ void macko_store(unsigned short* y, unsigned i, float v) {
    y[i] = macko_f2h(v);
}

// Sum over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float macko_warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(MACKO_FULL_MASK, v, offset);
    }
    return v;
}

// D += A·B for one m16n8k16 step (f16 inputs, f32 accumulation; fragments: PTX ISA, "Matrix
// Fragments for mma.m16n8k16"). On GPUs before sm_80 the kernels that use it are never planned
// (CudaCaps::tensor_cores); they still compile there, trapping.
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

// Sums the NW warps' C fragments of a band of R = 16·MT rows through shared memory (red: NW × R ×
// 8·NT floats, vector-major) and stores the chunk's vectors of rows r0 .. r0 + R - 1 in
// y ([batch][rows]). Every thread of the block calls it; it synchronises the block before and
// after. Returns, in every thread, whether any stored sum is NaN.
template <typename Out, int NT, int MT, unsigned NW>
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
        for (unsigned w = 0; w < NW; ++w) s += red[w * R * N + i];
        const unsigned vec = i / R, row = r0 + i % R;
        if (vec < count && row < rows) {
            nan |= s != s;
            macko_store(y + (unsigned long long)(first + vec) * rows, row, s);
        }
    }
    return __syncthreads_or(nan ? 1 : 0) != 0;
}

// Streaming loads for the matrix, which every product reads exactly once: evict-first in L1 and
// L2 (ld.global.cs), so the matrix does not push x or row pointers out of the caches.
__device__ __forceinline__ uint4 macko_load_stream(const uint4* p) { return __ldcs(p); }
__device__ __forceinline__ unsigned macko_load_stream(const unsigned* p) { return __ldcs(p); }
__device__ __forceinline__ uint2 macko_load_stream(const uint2* p) { return __ldcs(p); }
__device__ __forceinline__ unsigned short macko_load_stream(const unsigned short* p) {
    return __ldcs(p);
}

// Asks L2 to fetch the line holding `p` without waiting for it (no register is written).
__device__ __forceinline__ void macko_prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Shared-memory slot of staged column slot `i` (column i - MACKO_X_SLACK): one unused word after
// every 32, so that lanes reading columns 8 apart (a dense MACKO row) or 16 apart (density 1/2)
// fall in different banks instead of 4 or 8 of them.
__device__ __forceinline__ unsigned macko_x_slot(unsigned i) { return i + (i >> 5); }

// Slot of staged column slot `i` in either layout: padded (above) or plain (slot i at word i,
// for matrices whose lanes' columns are spread far enough apart that banks collide only at
// random; see macko.cu).
template <bool PAD>
__device__ __forceinline__ unsigned macko_x_slot_in(unsigned i) {
    return PAD ? macko_x_slot(i) : i;
}

// Whether a binary16 in either half of `w` is ±∞ or NaN (exponent bits all ones).
__device__ __forceinline__ bool macko_h2_nonfinite(unsigned w) {
    return (w & 0x7c00u) == 0x7c00u || (w & 0x7c000000u) == 0x7c000000u;
}

// Whether any of the 8 binary16 in a 16-byte word of x is ±∞ or NaN.
__device__ __forceinline__ bool macko_h8_nonfinite(uint4 w) {
    return macko_h2_nonfinite(w.x) || macko_h2_nonfinite(w.y) || macko_h2_nonfinite(w.z) ||
           macko_h2_nonfinite(w.w);
}

// x's 16-byte words base + u·step (u < 4) into w, zeros from word nvec on: the four loads of a
// staging thread in flight before the first is used.
__device__ __forceinline__ void macko_load_x_words(const uint4* __restrict__ xv, unsigned base,
                                                   unsigned step, unsigned nvec, uint4 (&w)[4]) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const unsigned j = base + u * step;
        w[u] = j < nvec ? __ldg(xv + j) : make_uint4(0u, 0u, 0u, 0u);
    }
}

// Dynamic shared memory for staged x: macko_x_slot(cols + MACKO_X_SLACK + MACKO_X_TAIL) floats,
// computed on the host (src/backend/cuda/caps.rs, `x_smem_bytes`).

// Copies x (binary16, `cols` elements, 16-byte aligned) into shared memory as f32, in the padded
// layout of macko_x_slot (PAD) or the plain one, zeros in the slack slots. Returns whether any of
// the elements this thread staged is ±∞ or NaN (the caller ORs that over the block). Called by
// every thread of the block; the caller synchronises the block afterwards. Loads 8 halves per
// 16-byte load and issues up to four loads per thread before the first store, so a block stages
// 24 KiB of x in about one L2 round trip instead of one round trip per element.
template <bool PAD = true>
__device__ __forceinline__ bool macko_stage_x(float* xs, const unsigned short* __restrict__ x,
                                              unsigned cols) {
    bool nonfinite = false;
    const unsigned slots = cols + MACKO_X_SLACK + MACKO_X_TAIL;
    const unsigned tid = threadIdx.x, nthreads = blockDim.x;
    // Zero the slack in front and everything from column cols on.
    for (unsigned i = tid; i < MACKO_X_SLACK; i += nthreads) xs[macko_x_slot_in<PAD>(i)] = 0.0f;
    for (unsigned i = cols + MACKO_X_SLACK + tid; i < slots; i += nthreads) {
        xs[macko_x_slot_in<PAD>(i)] = 0.0f;
    }
    const unsigned nvec = cols >> 3;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    for (unsigned base = tid; base < nvec; base += 4 * nthreads) {
        uint4 w[4];
        macko_load_x_words(xv, base, nthreads, nvec, w);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const unsigned j = base + u * nthreads;
            if (j < nvec) {
                nonfinite |= macko_h8_nonfinite(w[u]);
                const unsigned s = MACKO_X_SLACK + 8 * j;
                float a, b;
                if (!PAD) {
                    // Plain layout: slot s is word s, 32-byte aligned (MACKO_X_SLACK = 8), so
                    // two 16-byte stores (2-way conflicted at most, not 8-way as 8 scalar ones).
                    float c, d;
                    macko_unpack2(w[u].x, a, b);
                    macko_unpack2(w[u].y, c, d);
                    reinterpret_cast<float4*>(xs + s)[0] = make_float4(a, b, c, d);
                    macko_unpack2(w[u].z, a, b);
                    macko_unpack2(w[u].w, c, d);
                    reinterpret_cast<float4*>(xs + s)[1] = make_float4(a, b, c, d);
                    continue;
                }
                macko_unpack2(w[u].x, a, b);
                xs[macko_x_slot_in<PAD>(s + 0)] = a;
                xs[macko_x_slot_in<PAD>(s + 1)] = b;
                macko_unpack2(w[u].y, a, b);
                xs[macko_x_slot_in<PAD>(s + 2)] = a;
                xs[macko_x_slot_in<PAD>(s + 3)] = b;
                macko_unpack2(w[u].z, a, b);
                xs[macko_x_slot_in<PAD>(s + 4)] = a;
                xs[macko_x_slot_in<PAD>(s + 5)] = b;
                macko_unpack2(w[u].w, a, b);
                xs[macko_x_slot_in<PAD>(s + 6)] = a;
                xs[macko_x_slot_in<PAD>(s + 7)] = b;
            }
        }
    }
    for (unsigned c = 8 * nvec + tid; c < cols; c += nthreads) {
        const unsigned short h = __ldg(x + c);
        nonfinite |= macko_h2_nonfinite(h);
        xs[macko_x_slot_in<PAD>(MACKO_X_SLACK + c)] = macko_h2f(h);
    }
    return nonfinite;
}

// Dynamic shared memory for x staged as binary16 (macko.cu, MACKO_XH): cols + MACKO_X_SLACK +
// MACKO_X_TAIL halves, rounded up to 16 bytes (caps.rs, `x_smem_half_bytes`).
static_assert(MACKO_X_SLACK % 8 == 0, "x staged as binary16 is copied in 16-byte words");

// Copies x (binary16, `cols` elements, 16-byte aligned) into shared memory as it is, binary16 at
// halfword slot MACKO_X_SLACK + column (the plain layout at half the bytes of macko_stage_x), zeros
// in the slack slots. Returns, as macko_stage_x does, whether any element this thread staged is
// ±∞ or NaN. Nothing is converted: each 16-byte load is stored as one 16-byte word (slot
// MACKO_X_SLACK + 8j is 16-byte aligned), four loads in flight per thread.
__device__ __forceinline__ bool macko_stage_x_half(unsigned short* xh,
                                                   const unsigned short* __restrict__ x,
                                                   unsigned cols) {
    bool nonfinite = false;
    const unsigned slots = cols + MACKO_X_SLACK + MACKO_X_TAIL;
    const unsigned tid = threadIdx.x, nthreads = blockDim.x;
    for (unsigned i = tid; i < MACKO_X_SLACK; i += nthreads) xh[i] = 0;
    for (unsigned i = cols + MACKO_X_SLACK + tid; i < slots; i += nthreads) xh[i] = 0;
    const unsigned nvec = cols >> 3;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    uint4* dst = reinterpret_cast<uint4*>(xh + MACKO_X_SLACK);
    for (unsigned base = tid; base < nvec; base += 4 * nthreads) {
        uint4 w[4];
        macko_load_x_words(xv, base, nthreads, nvec, w);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const unsigned j = base + u * nthreads;
            if (j < nvec) {
                nonfinite |= macko_h8_nonfinite(w[u]);
                dst[j] = w[u];
            }
        }
    }
    for (unsigned c = 8 * nvec + tid; c < cols; c += nthreads) {
        const unsigned short h = __ldg(x + c);
        nonfinite |= macko_h2_nonfinite(h);
        xh[MACKO_X_SLACK + c] = h;
    }
    return nonfinite;
}

// The values of a MACKO matrix, one word per aligned group of 8 entries (entry k of the group is
// element k of the word, as nibble k of the group's code word): binary16 (MACKO-16-4, 16 bytes),
// int8 codes (8 bytes, byte k) or int4 codes (4 bytes, nibble k), the last two with binary16
// scales (MackoScales). Each layout loads a word, zeroes the entries a nibble mask leaves out, and
// unpacks the 8 entries as f32 (the codes, not yet scaled).
struct MackoF16 {
    typedef uint4 Word;
    static constexpr bool QUANT = false;
    static __device__ __forceinline__ Word zero() { return make_uint4(0u, 0u, 0u, 0u); }
    static __device__ __forceinline__ Word load(const Word* __restrict__ p, unsigned w) {
        return macko_load_stream(p + w);
    }
    // Keeps entry k where nibble k of m is 0xf.
    static __device__ __forceinline__ void mask(Word& v, unsigned m) {
        // Byte j of ee (oo) is 0xff when entry 2j (2j + 1) is kept.
        const unsigned ee = (m & 0x0f0f0f0fu) * 0x11u;
        const unsigned oo = ((m >> 4) & 0x0f0f0f0fu) * 0x11u;
        v.x &= __byte_perm(ee, oo, 0x4400);
        v.y &= __byte_perm(ee, oo, 0x5511);
        v.z &= __byte_perm(ee, oo, 0x6622);
        v.w &= __byte_perm(ee, oo, 0x7733);
    }
    static __device__ __forceinline__ void unpack(const Word v, float (&a)[8]) {
        macko_unpack2(v.x, a[0], a[1]);
        macko_unpack2(v.y, a[2], a[3]);
        macko_unpack2(v.z, a[4], a[5]);
        macko_unpack2(v.w, a[6], a[7]);
    }
};

// An f32 from the unsigned byte in the low 8 bits of `b` offset by 2^23: the word 0x4B0000bb is
// the float 2^23 + b exactly, so one PRMT builds it and one FADD removes the offset (cheaper than
// an integer-to-float conversion, which runs at a quarter of the FADD rate).
#define MACKO_MAGIC 0x4B000000u

// int8 codes: byte k of the word is entry k, two's complement.
struct MackoI8 {
    typedef uint2 Word;
    static constexpr bool QUANT = true;
    static __device__ __forceinline__ Word zero() { return make_uint2(0u, 0u); }
    static __device__ __forceinline__ Word load(const Word* __restrict__ p, unsigned w) {
        return macko_load_stream(p + w);
    }
    static __device__ __forceinline__ void mask(Word& v, unsigned m) {
        const unsigned ee = (m & 0x0f0f0f0fu) * 0x11u;
        const unsigned oo = ((m >> 4) & 0x0f0f0f0fu) * 0x11u;
        v.x &= __byte_perm(ee, oo, 0x5140);
        v.y &= __byte_perm(ee, oo, 0x7362);
    }
    static __device__ __forceinline__ void unpack(const Word v, float (&a)[8]) {
        // Flipping the sign bits turns code q into the unsigned q + 128.
        const unsigned lo = v.x ^ 0x80808080u, hi = v.y ^ 0x80808080u;
        constexpr float OFFSET = 8388608.0f + 128.0f;
#pragma unroll
        for (unsigned k = 0; k < 4u; ++k) {
            a[k] = __uint_as_float(__byte_perm(lo, MACKO_MAGIC, 0x7440u | k)) - OFFSET;
            a[4u + k] = __uint_as_float(__byte_perm(hi, MACKO_MAGIC, 0x7440u | k)) - OFFSET;
        }
    }
};

// int4 codes: nibble k of the word is entry k, two's complement (the layout of the gap codes).
struct MackoI4 {
    typedef unsigned Word;
    static constexpr bool QUANT = true;
    static __device__ __forceinline__ Word zero() { return 0u; }
    static __device__ __forceinline__ Word load(const Word* __restrict__ p, unsigned w) {
        return macko_load_stream(p + w);
    }
    static __device__ __forceinline__ void mask(Word& v, unsigned m) { v &= m; }
    static __device__ __forceinline__ void unpack(const Word v, float (&a)[8]) {
        // Flipping the sign bits turns code q into the unsigned q + 8; the even entries' nibbles
        // in bytes 0..3 of one word, the odd entries' in another.
        const unsigned u = v ^ 0x88888888u;
        const unsigned even = u & 0x0f0f0f0fu, odd = (u >> 4) & 0x0f0f0f0fu;
        constexpr float OFFSET = 8388608.0f + 8.0f;
#pragma unroll
        for (unsigned k = 0; k < 4u; ++k) {
            a[2u * k] = __uint_as_float(__byte_perm(even, MACKO_MAGIC, 0x7440u | k)) - OFFSET;
            a[2u * k + 1u] = __uint_as_float(__byte_perm(odd, MACKO_MAGIC, 0x7440u | k)) - OFFSET;
        }
    }
};

// MACKO-16-4 decoding, shared by the single-vector kernels (macko.cu) and the few-token ones
// (batch.cu).

// Masks the entries of group `w` that lie outside the row's [start, end): their codes and values
// (a word of layout V: binary16 unless the caller names another) become 0. Returns in lo/hi the
// range [lo, hi) of the group's 8 entries that belong to the row. Only a row's first and last
// groups (and groups past the row's end, already zero) are partial, so the masking runs on few
// lanes and the branch is usually skipped by the whole warp.
template <class V = MackoF16>
__device__ __forceinline__ void macko_mask(unsigned w, unsigned start, unsigned end,
                                           typename V::Word& v, unsigned& c, unsigned& lo,
                                           unsigned& hi) {
    const unsigned first = w * 8u;
    lo = start > first ? min(start - first, 8u) : 0u;
    hi = end > first ? min(end - first, 8u) : 0u;
    if (lo != 0u || hi != 8u) {
        // Nibble k of m is 0xf when entry k is in the row (hi >= lo always holds here).
        const unsigned m = (unsigned)((1ull << (4u * hi)) - (1ull << (4u * lo)));
        c &= m;
        V::mask(v, m);
    }
}

// Byte k of pl (k < 4) and of ph (entries 4 + k) is the inclusive prefix sum of (gap + 1) over
// the 4 entries of its half: each byte sum is at most 4 * 16 = 64, so the multiplication by
// 0x01010101 (which adds every byte into all the bytes above it) never carries across bytes.
__device__ __forceinline__ void macko_prefix(unsigned c, unsigned& pl, unsigned& ph) {
    const unsigned even = c & 0x0f0f0f0fu;         // gaps 0, 2, 4, 6 in bytes 0..3
    const unsigned odd = (c >> 4) & 0x0f0f0f0fu;   // gaps 1, 3, 5, 7
    pl = (__byte_perm(even, odd, 0x5140) + 0x01010101u) * 0x01010101u;  // gaps 0..3
    ph = (__byte_perm(even, odd, 0x7362) + 0x01010101u) * 0x01010101u;  // gaps 4..7
}

// The column steps of a team's two chunks scanned at once (kernels/README.md, "Decoding a
// group"): each lane's advance over its group a (b) is its masked gaps plus its entries in the
// item, at most 128, packed in the low (high) 16 bits, which never carry (32 × 128 < 2^16);
// an inclusive scan of L lanes by shuffles up. `excl` is the lane's exclusive prefix, `total`
// the team's sum (both packed).
template <unsigned L>
__device__ __forceinline__ void macko_scan_pair(unsigned pl_a, unsigned ph_a, unsigned lo_a,
                                                unsigned hi_a, unsigned pl_b, unsigned ph_b,
                                                unsigned lo_b, unsigned hi_b, unsigned sub,
                                                unsigned& excl, unsigned& total) {
    const unsigned t_a = (pl_a >> 24) + (ph_a >> 24) - 8u + (hi_a - lo_a);
    const unsigned t_b = (pl_b >> 24) + (ph_b >> 24) - 8u + (hi_b - lo_b);
    const unsigned packed = t_a | (t_b << 16);
    unsigned incl = packed;
#pragma unroll
    for (unsigned off = 1u; off < L; off <<= 1) {
        const unsigned up = __shfl_up_sync(MACKO_FULL_MASK, incl, off, L);
        if (sub >= off) incl += up;
    }
    total = __shfl_sync(MACKO_FULL_MASK, incl, L - 1u, L);
    excl = incl - packed;
}

// Loads the batch of groups {w0 + L·u + sub : u < CH} below w_end (values of layout V, binary16
// unless the caller names another, and codes); groups at or past w_end read as zero (no entries,
// no column advance).
template <unsigned L, int CH, class V = MackoF16>
__device__ __forceinline__ void macko_load_batch(const typename V::Word* __restrict__ values,
                                                 const unsigned* __restrict__ codes, unsigned w0,
                                                 unsigned w_end, unsigned sub,
                                                 typename V::Word (&v)[CH], unsigned (&c)[CH]) {
#pragma unroll
    for (int u = 0; u < CH; ++u) {
        const unsigned w = w0 + L * u + sub;
        if (w < w_end) {
            v[u] = V::load(values, w);
            c[u] = macko_load_stream(codes + w);
        } else {
            v[u] = V::zero();
            c[u] = 0u;
        }
    }
}

#endif  // MACKO_COMMON_CUH
