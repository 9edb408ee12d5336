/* Weft: cooperative thread groups of NCCL's device API (CUDA only), our own text. A coop names
 * the threads that call a device API function together: thread_rank(), size() (= num_threads())
 * and sync(), as CUDA's cooperative groups spell them. */
#ifndef WEFT_NCCL_DEVICE_COOP_H
#define WEFT_NCCL_DEVICE_COOP_H

#include "nccl_device/types.h"

#ifdef WEFT_NCCL_DEVICE_CODE

/* The whole thread block (a 1-D block, as the device API assumes). */
struct ncclCoopCta {
  __device__ __forceinline__ int thread_rank() const { return threadIdx.x; }
  __device__ __forceinline__ int size() const { return blockDim.x; }
  __device__ __forceinline__ int num_threads() const { return blockDim.x; }
  __device__ __forceinline__ void sync() { __syncthreads(); }
};

/* N consecutive lanes of a warp, N a power of two up to 32, aligned to N. */
template <int N>
struct ncclCoopTile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "a tile is a power of two of at most 32 lanes");
  __device__ __forceinline__ int thread_rank() const { return (threadIdx.x % 32) % N; }
  __device__ __forceinline__ constexpr int size() const { return N; }
  __device__ __forceinline__ constexpr int num_threads() const { return N; }
  __device__ __forceinline__ unsigned laneMask() const {
    return (N == 32 ? ~0u : ((1u << N) - 1)) << ((threadIdx.x % 32) & ~(N - 1));
  }
  __device__ __forceinline__ void sync() {
    if (N > 1) __syncwarp(laneMask());
  }
};

typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

#endif
#endif
