/* Prints the layout facts of the device API's host-side structs (nccl_device/host.h) for
 * whichever headers it is compiled with; test_device_abi.sh builds it with Weft's headers and
 * with NVIDIA's 2.32.3 ones and compares. C++, as NVIDIA's device headers are. */
#include <nccl.h>
#include <nccl_device/host.h>

#include <cstddef>
#include <cstdio>

#define SIZE(t) std::printf("sizeof(%s) %zu align %zu\n", #t, sizeof(t), alignof(t))
#define FIELD(t, f) std::printf("%s.%s at %zu size %zu\n", #t, #f, offsetof(t, f), sizeof(((t*)0)->f))
#define VALUE(e) std::printf("%s = %lld\n", #e, (long long)(e))

static void properties() {
  SIZE(ncclCommProperties_t);
  FIELD(ncclCommProperties_t, size);
  FIELD(ncclCommProperties_t, magic);
  FIELD(ncclCommProperties_t, version);
  FIELD(ncclCommProperties_t, rank);
  FIELD(ncclCommProperties_t, nRanks);
  FIELD(ncclCommProperties_t, cudaDev);
  FIELD(ncclCommProperties_t, nvmlDev);
  FIELD(ncclCommProperties_t, deviceApiSupport);
  FIELD(ncclCommProperties_t, multimemSupport);
  FIELD(ncclCommProperties_t, ginType);
  FIELD(ncclCommProperties_t, nLsaTeams);
  FIELD(ncclCommProperties_t, hostRmaSupport);
  FIELD(ncclCommProperties_t, railedGinType);
  FIELD(ncclCommProperties_t, commHash);
  FIELD(ncclCommProperties_t, ginMinStride);
  FIELD(ncclCommProperties_t, ginConnectionType);
  FIELD(ncclCommProperties_t, ginSupport);
  FIELD(ncclCommProperties_t, devCommRuntimeVersionSize);
  FIELD(ncclCommProperties_t, cftSupport);
  FIELD(ncclCommProperties_t, cftMulticastSupport);
  FIELD(ncclCommProperties_t, cftCountedSupport);
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  VALUE(p.size);
  VALUE(p.magic);
  VALUE(p.version);
}

static void requirements() {
  SIZE(ncclDevResourceRequirements_t);
  FIELD(ncclDevResourceRequirements_t, next);
  FIELD(ncclDevResourceRequirements_t, bufferSize);
  FIELD(ncclDevResourceRequirements_t, bufferAlign);
  FIELD(ncclDevResourceRequirements_t, outBufferHandle);
  FIELD(ncclDevResourceRequirements_t, ginSignalCount);
  FIELD(ncclDevResourceRequirements_t, ginCounterCount);
  FIELD(ncclDevResourceRequirements_t, outGinSignalStart);
  FIELD(ncclDevResourceRequirements_t, outGinCounterStart);
  SIZE(ncclTeamRequirements_t);
  FIELD(ncclTeamRequirements_t, next);
  FIELD(ncclTeamRequirements_t, team);
  FIELD(ncclTeamRequirements_t, multimem);
  FIELD(ncclTeamRequirements_t, outMultimemHandle);
  SIZE(ncclTeam_t);
  FIELD(ncclTeam_t, nRanks);
  FIELD(ncclTeam_t, rank);
  FIELD(ncclTeam_t, stride);
  SIZE(ncclMultimemHandle_t);
  SIZE(ncclDevCommRequirements_t);
  FIELD(ncclDevCommRequirements_t, size);
  FIELD(ncclDevCommRequirements_t, magic);
  FIELD(ncclDevCommRequirements_t, version);
  FIELD(ncclDevCommRequirements_t, resourceRequirementsList);
  FIELD(ncclDevCommRequirements_t, teamRequirementsList);
  FIELD(ncclDevCommRequirements_t, lsaMultimem);
  FIELD(ncclDevCommRequirements_t, barrierCount);
  FIELD(ncclDevCommRequirements_t, lsaBarrierCount);
  FIELD(ncclDevCommRequirements_t, railGinBarrierCount);
  FIELD(ncclDevCommRequirements_t, lsaLLA2ABlockCount);
  FIELD(ncclDevCommRequirements_t, lsaLLA2ASlotCount);
  FIELD(ncclDevCommRequirements_t, ginForceEnable);
  FIELD(ncclDevCommRequirements_t, ginContextCount);
  FIELD(ncclDevCommRequirements_t, ginSignalCount);
  FIELD(ncclDevCommRequirements_t, ginCounterCount);
  FIELD(ncclDevCommRequirements_t, ginConnectionType);
  FIELD(ncclDevCommRequirements_t, ginExclusiveContexts);
  FIELD(ncclDevCommRequirements_t, ginQueueDepth);
  FIELD(ncclDevCommRequirements_t, ginTrafficClass);
  FIELD(ncclDevCommRequirements_t, worldGinBarrierCount);
  FIELD(ncclDevCommRequirements_t, ginStrongSignalsRequired);
  FIELD(ncclDevCommRequirements_t, ginVaSignalsRequired);
  FIELD(ncclDevCommRequirements_t, ginCustomStride);
  FIELD(ncclDevCommRequirements_t, ginType);
  FIELD(ncclDevCommRequirements_t, useRuntimeVersion);
  FIELD(ncclDevCommRequirements_t, cftCaps);
  FIELD(ncclDevCommRequirements_t, cftBarrierCount);
  ncclDevCommRequirements_t r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  VALUE(r.size);
  VALUE(r.magic);
  VALUE(r.version);
  VALUE(r.resourceRequirementsList == NULL);
  VALUE(r.teamRequirementsList == NULL);
  VALUE(r.lsaMultimem);
  VALUE(r.barrierCount);
  VALUE(r.lsaBarrierCount);
  VALUE(r.railGinBarrierCount);
  VALUE(r.lsaLLA2ABlockCount);
  VALUE(r.lsaLLA2ASlotCount);
  VALUE(r.ginForceEnable);
  VALUE(r.ginContextCount);
  VALUE(r.ginSignalCount);
  VALUE(r.ginCounterCount);
  VALUE(r.ginConnectionType);
  VALUE(r.ginExclusiveContexts);
  VALUE(r.ginQueueDepth);
  VALUE(r.ginTrafficClass);
  VALUE(r.worldGinBarrierCount);
  VALUE(r.ginStrongSignalsRequired);
  VALUE(r.ginVaSignalsRequired);
  VALUE(r.ginCustomStride);
  VALUE(r.ginType);
  VALUE(r.useRuntimeVersion);
  VALUE(r.cftCaps);
  VALUE(r.cftBarrierCount);
}

static void enums() {
  VALUE(NCCL_GIN_CONNECTION_NONE);
  VALUE(NCCL_GIN_CONNECTION_FULL);
  VALUE(NCCL_GIN_CONNECTION_RAIL);
  VALUE(NCCL_GIN_CONNECTION_CUSTOM_STRIDE);
  VALUE(NCCL_GIN_TYPE_NONE);
  VALUE(NCCL_GIN_TYPE_PROXY);
  VALUE(NCCL_GIN_TYPE_GDAKI);
  VALUE(NCCL_GIN_TYPE_GPI);
  VALUE(NCCL_GIN_TYPE_EFA_GDA);
  VALUE(NCCL_GIN_MAX_TYPES);
  VALUE(NCCL_CFT_TEAM_FLAT);
  VALUE(NCCL_CFT_TEAM_HIER_MULTIMEM);
  VALUE(NCCL_CFT_TEAM_HIER_LSA);
  VALUE(NCCL_CFT_NONE);
  VALUE(NCCL_CFT);
  VALUE(NCCL_CFT_MULTIMEM);
  VALUE(sizeof(ncclDevResourceHandle_t));
  VALUE(sizeof(ncclGinSignal_t));
  VALUE(sizeof(ncclGinCounter_t));
  VALUE(sizeof(ncclCftLeId_t));
}

/* Handles that ncclLsaBarrierCreateRequirement / ncclGinBarrierCreateRequirement write, and the
 * device communicator's size and the fields NCCL documents as stable (the rest is Weft's own). */
static void devComm() {
  SIZE(ncclLsaBarrierHandle_t);
  FIELD(ncclLsaBarrierHandle_t, bufHandle);
  FIELD(ncclLsaBarrierHandle_t, nBarriers);
  SIZE(ncclGinBarrierHandle_t);
  FIELD(ncclGinBarrierHandle_t, signal0);
  SIZE(ncclDevComm_t);
  FIELD(ncclDevComm_t, magic);
  FIELD(ncclDevComm_t, version);
  FIELD(ncclDevComm_t, rank);
  FIELD(ncclDevComm_t, nRanks);
  FIELD(ncclDevComm_t, lsaRank);
  FIELD(ncclDevComm_t, lsaSize);
  FIELD(ncclDevComm_t, ginContextCount);
}

int main() {
  properties();
  requirements();
  enums();
  devComm();
  return 0;
}
