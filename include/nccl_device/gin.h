/* Weft: GPU-initiated networking (GIN) of NCCL's device API (CUDA only), our own text. Weft has
 * no network device offload: every operation stops the kernel with a message
 * (weft_dev_unsupported). No such kernel runs today, as ncclDevCommCreate refuses; the
 * declarations let programs written for NCCL's device API build. */
#ifndef WEFT_NCCL_DEVICE_GIN_H
#define WEFT_NCCL_DEVICE_GIN_H

#include "nccl_device/comm.h"
#include "nccl_device/coop.h"

#ifdef WEFT_NCCL_DEVICE_CODE
#include <cuda/atomic>

/* What a GIN barrier makes visible besides synchronizing: puts that landed here (Put), gets this
 * rank issued (Get). Relaxed is an older name of None. */
enum class ncclGinFenceLevel : uint32_t { None = 0, Put = 1u << 0, Get = 1u << 1, Relaxed = None };
__host__ __device__ constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return ncclGinFenceLevel((uint32_t)a | (uint32_t)b);
}
__host__ __device__ constexpr ncclGinFenceLevel operator&(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return ncclGinFenceLevel((uint32_t)a & (uint32_t)b);
}

/* Actions a put carries out when it completes: remotely (signal) or locally (counter). */
struct ncclGin_None {};
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};

/* One GIN context of a device communicator. */
struct ncclGin {
  ncclDevComm const& comm;
  int contextIndex;

  __device__ ncclGin(ncclDevComm const& comm, int contextIndex) : comm(comm), contextIndex(contextIndex) {}

  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread>
  __device__ void put(ncclTeam, int, ncclWindow_t, size_t, ncclWindow_t, size_t, size_t,
                      RemoteAction = RemoteAction{}, LocalAction = LocalAction{}, Coop = Coop{}) const {
    weft_dev_unsupported("ncclGin::put");
  }
  template <typename RemoteAction, typename Coop = ncclCoopThread>
  __device__ void signal(ncclTeam, int, RemoteAction, Coop = Coop{}) const {
    weft_dev_unsupported("ncclGin::signal");
  }
  template <typename Coop>
  __device__ void flush(Coop, cuda::memory_order = cuda::memory_order_acquire) const {
    weft_dev_unsupported("ncclGin::flush");
  }
  __device__ uint64_t readSignal(ncclGinSignal_t, int = 64,
                                 cuda::memory_order = cuda::memory_order_acquire) const {
    weft_dev_unsupported("ncclGin::readSignal");
    return 0;
  }
  template <typename Coop>
  __device__ void waitSignal(Coop, ncclGinSignal_t, uint64_t, int = 64,
                             cuda::memory_order = cuda::memory_order_acquire) const {
    weft_dev_unsupported("ncclGin::waitSignal");
  }
  __device__ uint64_t readCounter(ncclGinCounter_t, int = 56,
                                  cuda::memory_order = cuda::memory_order_acquire) const {
    weft_dev_unsupported("ncclGin::readCounter");
    return 0;
  }
  template <typename Coop>
  __device__ void waitCounter(Coop, ncclGinCounter_t, uint64_t, int = 56,
                              cuda::memory_order = cuda::memory_order_acquire) const {
    weft_dev_unsupported("ncclGin::waitCounter");
  }
};

#endif
#endif
