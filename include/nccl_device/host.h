/* Weft: the host side of NCCL's device API (2.32.3 names, values and layouts), our own text.
 * Weft's CUDA backend has no device API yet: ncclDevCommCreate and the requirement builders
 * return ncclInvalidUsage with "not supported by Weft yet"; ncclCommQueryProperties says so
 * (deviceApiSupport false). */
#ifndef WEFT_NCCL_DEVICE_HOST_H
#define WEFT_NCCL_DEVICE_HOST_H

#include "nccl_device/comm.h"

typedef struct ncclDevResourceRequirements {
  struct ncclDevResourceRequirements* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
} ncclDevResourceRequirements_t;

typedef struct ncclTeamRequirements {
  struct ncclTeamRequirements* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
} ncclTeamRequirements_t;

typedef struct ncclDevCommRequirements {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
  int ginCustomStride;
  ncclGinType_t ginType;
  bool useRuntimeVersion;
  int cftCaps;
  int cftBarrierCount;
} ncclDevCommRequirements_t;

#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                                              \
  {                                                                                                         \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NULL, false, 0, 0, 0, 0, 0, \
        false, 4, 0, 0, NCCL_GIN_CONNECTION_NONE, false, 0, NCCL_CONFIG_UNDEF_INT, 0, true, true, 1,        \
        NCCL_GIN_TYPE_NONE, false, NCCL_CFT_NONE, 0                                                         \
  }

/* What a communicator offers (ncclCommQueryProperties). */
typedef struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  ncclGinType_t railedGinType;
  uint64_t commHash;
  int ginMinStride;
  ncclGinConnectionType_t ginConnectionType;
  bool ginSupport[64];
  size_t devCommRuntimeVersionSize;
  bool cftSupport;
  bool cftMulticastSupport;
  bool cftCountedSupport;
} ncclCommProperties_t;

#define NCCL_COMM_PROPERTIES_INITIALIZER \
  { sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE }

NCCL_EXTERN_C ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
NCCL_EXTERN_C ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                             ncclDevComm_t* outDevComm);
NCCL_EXTERN_C ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
NCCL_EXTERN_C ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                        ncclMultimemHandle_t multimem, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                                   void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                                    void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset, ncclCftLeId* leId,
                                                       size_t* leOffset);
NCCL_EXTERN_C ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                                  ncclTeam_t cftTeam, ncclCftLeId* leId, size_t* leOffset);
NCCL_EXTERN_C ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                                   ncclCftLeId* leId, size_t* leOffset);
NCCL_EXTERN_C ncclTeam_t ncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C ncclTeam_t ncclTeamLsa(ncclComm_t comm);
#ifdef __cplusplus
NCCL_EXTERN_C ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode = NCCL_CFT_TEAM_FLAT);
#else
NCCL_EXTERN_C ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode);
#endif
NCCL_EXTERN_C ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm);
NCCL_EXTERN_C int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C ncclTeam_t ncclTeamRail(ncclComm_t comm);
NCCL_EXTERN_C ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                           ncclLsaBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                           ncclGinBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq);

#endif
