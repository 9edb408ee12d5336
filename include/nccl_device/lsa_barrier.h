/* Weft: the LSA barrier of NCCL's device API (CUDA only), our own text: the ranks of a team
 * whose memory is load/store accessible wait for each other through flags in that memory.
 *
 * A barrier handle's resource buffer holds, on every rank, for its nBarriers barriers:
 *   uint32_t epoch[nBarriers];               syncs this rank completed on barrier i
 *   uint32_t inbox[nBarriers][team.nRanks];  the epoch team member p last arrived at
 * Arriving at epoch e writes e into every member's inbox slot of this rank; waiting reads this
 * rank's own inbox until every slot has reached e. Epochs compare modulo 2^32. */
#ifndef WEFT_NCCL_DEVICE_LSA_BARRIER_H
#define WEFT_NCCL_DEVICE_LSA_BARRIER_H

#include "nccl_device/ptr.h"

#ifdef WEFT_NCCL_DEVICE_CODE
#include <cuda/atomic>

__device__ __forceinline__ bool weft_dev_releases(cuda::memory_order o) {
  return o == cuda::memory_order_release || o == cuda::memory_order_acq_rel ||
         o == cuda::memory_order_seq_cst;
}
__device__ __forceinline__ bool weft_dev_acquires(cuda::memory_order o) {
  return o == cuda::memory_order_acquire || o == cuda::memory_order_consume ||
         o == cuda::memory_order_acq_rel || o == cuda::memory_order_seq_cst;
}

/* One CTA's (or other coop's) use of barrier `index` of a handle. All threads of the coop make
 * every call; sessions on one index must not overlap. */
template <typename Coop>
struct ncclLsaBarrierSession {
  ncclDevComm const& comm;
  ncclTeam team;
  ncclLsaBarrierHandle handle;
  int index;
  uint32_t epoch;

  __device__ ncclLsaBarrierSession(Coop, ncclDevComm const& comm, ncclTeam team, ncclLsaBarrierHandle handle,
                                   uint32_t index, bool multimem = false, ncclMultimemHandle mmHandle = {})
      : comm(comm), team(team), handle(handle), index((int)index) {
    (void)mmHandle;
    if (multimem) weft_dev_unsupported("ncclLsaBarrierSession over multicast memory");
    epoch = state(comm.lsaRank)[index];
  }
  __device__ ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeamTagLsa, uint32_t index,
                                   bool multimem = false)
      : ncclLsaBarrierSession(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index, multimem) {}
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;

  /* The buffer of LSA rank lsaPeer: epoch[] then inbox[][]. */
  __device__ uint32_t* state(int lsaPeer) const {
    return (uint32_t*)ncclGetResourceBufferLsaPointer(comm, handle.bufHandle, lsaPeer);
  }
  __device__ uint32_t* inbox(int lsaPeer) const {
    return state(lsaPeer) + handle.nBarriers + index * team.nRanks;
  }

  __device__ void arrive(Coop coop, cuda::memory_order order) {
    coop.sync(); /* what any thread of the coop wrote is ordered before the flags */
    epoch += 1;
    cuda::memory_order o = weft_dev_releases(order) ? cuda::memory_order_release : cuda::memory_order_relaxed;
    for (int p = coop.thread_rank(); p < team.nRanks; p += coop.size()) {
      uint32_t* slot = inbox(ncclTeamRankToLsa(comm, team, p)) + team.rank;
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*slot).store(epoch, o);
    }
  }

  __device__ void wait(Coop coop, cuda::memory_order order) {
    cuda::memory_order o = weft_dev_acquires(order) ? cuda::memory_order_acquire : cuda::memory_order_relaxed;
    uint32_t* mine = inbox(comm.lsaRank);
    for (int p = coop.thread_rank(); p < team.nRanks; p += coop.size()) {
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> flag(mine[p]);
      while ((int32_t)(flag.load(o) - epoch) < 0) {
        if (comm.abortFlag && *comm.abortFlag) break;
        weft_dev_spin_pause();
      }
    }
    if (coop.thread_rank() == 0) state(comm.lsaRank)[index] = epoch; /* the next session starts here */
    coop.sync();
  }

  __device__ void sync(Coop coop, cuda::memory_order order) {
    arrive(coop, order);
    wait(coop, order);
  }
};

#endif
#endif
