// Streaming read: the ceiling every product is compared against (Backend::stream_read); and
// spin_wait, which holds the stream while the host queues the products a measurement times.
//
// Reads n 16-byte words once, grid-stride over a persistent grid with STREAM_CHUNKS loads in
// flight per thread, the same streaming (evict-first) loads as the matrix kernels, and folds them
// into one 32-bit word per block so the loads cannot be optimised away. Writes gridDim.x words.
#ifndef MACKO_COMMON_CUH
#include "common.cuh"
#endif

#define STREAM_CHUNKS 4
#define STREAM_BLOCK 512

__device__ __forceinline__ unsigned stream_fold(const uint4 w) { return (w.x ^ w.y) + (w.z ^ w.w); }

extern "C" __global__ void __launch_bounds__(STREAM_BLOCK)
    stream_read(const uint4* __restrict__ p, unsigned long long n, unsigned* __restrict__ out) {
    __shared__ unsigned partial[STREAM_BLOCK / 32];
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0u;
    for (; i + (STREAM_CHUNKS - 1) * stride < n; i += STREAM_CHUNKS * stride) {
        uint4 w[STREAM_CHUNKS];
#pragma unroll
        for (int u = 0; u < STREAM_CHUNKS; ++u) w[u] = macko_load_stream(p + i + u * stride);
#pragma unroll
        for (int u = 0; u < STREAM_CHUNKS; ++u) acc += stream_fold(w[u]);
    }
    for (; i < n; i += stride) acc += stream_fold(macko_load_stream(p + i));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        acc += __shfl_xor_sync(MACKO_FULL_MASK, acc, offset);
    }
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0u) partial[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0u) {
        unsigned total = 0u;
        for (unsigned k = 0; k < (blockDim.x >> 5); ++k) total += partial[k];
        out[blockIdx.x] = total;
    }
}

// Holds the stream for `ns` nanoseconds of the GPU's global timer (one thread). Queued before a
// timed sequence, it lets the host queue every product and event of the sequence before the GPU
// reaches the first, so small products run back to back and their events measure GPU time, not
// the host's launch rate.
extern "C" __global__ void __launch_bounds__(32) spin_wait(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
