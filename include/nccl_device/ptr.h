/* Weft: teams and window pointers of NCCL's device API (CUDA only), our own text. A window's
 * LSA pointers come from its peer table (struct ncclWindow_vidmem in nccl_device/comm.h). */
#ifndef WEFT_NCCL_DEVICE_PTR_H
#define WEFT_NCCL_DEVICE_PTR_H

#include "nccl_device/comm.h"

#ifdef WEFT_NCCL_DEVICE_CODE

/* Teams. The world team has stride 1; the LSA team is a run of consecutive world ranks. */
__device__ __forceinline__ ncclTeam ncclTeamWorld(ncclDevComm const& comm) {
  return ncclTeam{comm.nRanks, comm.rank, 1};
}
__device__ __forceinline__ ncclTeam ncclTeamLsa(ncclDevComm const& comm) {
  return ncclTeam{comm.lsaSize, comm.lsaRank, 1};
}
/* The ranks of the other LSA teams at this rank's place in its own. */
__device__ __forceinline__ ncclTeam ncclTeamRail(ncclDevComm const& comm) {
  return ncclTeam{comm.nRanks / comm.lsaSize, comm.rank / comm.lsaSize, comm.lsaSize};
}
__device__ __forceinline__ int ncclTeamRankToWorld(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.rank + (rank - team.rank) * team.stride;
}
__device__ __forceinline__ int ncclTeamRankToLsa(ncclDevComm const& comm, ncclTeam team, int rank) {
  return ncclTeamRankToWorld(comm, team, rank) - (comm.rank - comm.lsaRank);
}

/* Window pointers: offset bytes into the buffer of this rank, of LSA peer `peer`, of world rank
 * `peer` (which must be in the LSA team). */
__device__ __forceinline__ void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer) {
  return w->lsaBase[peer] + offset;
}
__device__ __forceinline__ void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) {
  return ncclGetLsaPointer(w, offset, w->lsaRank);
}
__device__ __forceinline__ void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  return ncclGetLsaPointer(w, offset, peer - (w->worldRank - w->lsaRank));
}
__device__ __forceinline__ void* ncclGetMultimemPointer(ncclWindow_t w, size_t offset,
                                                        ncclMultimemHandle mm) {
  (void)mm;
  if (!w->multimemBase) weft_dev_unsupported("ncclGetMultimemPointer (multicast memory)");
  return w->multimemBase + offset;
}
__device__ __forceinline__ void* ncclGetLsaMultimemPointer(ncclWindow_t w, size_t offset,
                                                           ncclDevComm const& comm) {
  return ncclGetMultimemPointer(w, offset, comm.lsaMultimem);
}

/* Resource buffers (requested with ncclDevResourceRequirements) live in the communicator's
 * resource window. */
__host__ __device__ __forceinline__ size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h) {
  return (size_t)h * 128;
}
__device__ __forceinline__ void* ncclGetResourceBufferLsaPointer(ncclDevComm const& comm,
                                                                 ncclDevResourceHandle h, int peer) {
  return ncclGetLsaPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), peer);
}
__device__ __forceinline__ void* ncclGetResourceBufferLocalPointer(ncclDevComm const& comm,
                                                                   ncclDevResourceHandle h) {
  return ncclGetResourceBufferLsaPointer(comm, h, comm.lsaRank);
}

#endif
#endif
