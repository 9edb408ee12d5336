/* Weft: the hybrid barrier of NCCL's device API (CUDA only), our own text: an LSA barrier among
 * the ranks that share memory, and a GIN barrier across LSA teams. Weft has the first only, so
 * a barrier over a world team that spans several LSA teams stops the kernel (no such kernel runs
 * today: ncclDevCommCreate refuses). */
#ifndef WEFT_NCCL_DEVICE_BARRIER_H
#define WEFT_NCCL_DEVICE_BARRIER_H

#include "nccl_device/gin.h"
#include "nccl_device/lsa_barrier.h"

#ifdef WEFT_NCCL_DEVICE_CODE

/* Uses barrier `index` of the communicator's barrierCount barriers (ncclDevComm.barrier). */
template <typename Coop>
struct ncclBarrierSession {
  ncclLsaBarrierSession<Coop> lsa;
  bool beyondLsa; /* the team reaches ranks outside this LSA team: needs GIN */

  __device__ ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin gin, uint32_t index,
                                bool multimem = false)
      : lsa(coop, gin.comm, ncclTeamLsa(gin.comm), gin.comm.barrier, index, multimem),
        beyondLsa(gin.comm.lsaSize != gin.comm.nRanks) {}
  __device__ ncclBarrierSession(Coop coop, ncclTeamTagLsa, ncclDevComm const& comm, uint32_t index,
                                bool multimem = false)
      : lsa(coop, comm, ncclTeamLsa(comm), comm.barrier, index, multimem), beyondLsa(false) {}
  ncclBarrierSession(ncclBarrierSession const&) = delete;

  __device__ ncclLsaBarrierSession<Coop>& lsaBarrier() { return lsa; }

  __device__ void sync(Coop coop, cuda::memory_order order,
                       ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
    (void)fence; /* within an LSA team, loads and stores are already visible after the barrier */
    if (beyondLsa) weft_dev_unsupported("ncclBarrierSession across LSA teams (a GIN barrier)");
    lsa.sync(coop, order);
  }
};

#endif
#endif
