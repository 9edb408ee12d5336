/* API functions Weft does not implement yet: each returns ncclInvalidUsage (or an invalid
 * value) and leaves "<function> is not supported by Weft yet" as the last error. */
#include "core/api.h"
#include "nccl_device/host.h"

/* The network device-offload requirement builders: NCCL declares them for Windows only and
 * exports them everywhere. */
struct ncclGinOutboxHandle;
struct ncclGinInboxA2AHandle;

WEFT_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
         ncclDevComm_t* outDevComm) {
  (void)comm;
  (void)reqs;
  (void)outDevComm;
  return weft_unsupported("ncclDevCommCreate");
}

WEFT_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm_t* devComm) {
  (void)comm;
  (void)devComm;
  return weft_unsupported("ncclDevCommDestroy");
}

WEFT_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
         ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  (void)team;
  (void)nBarriers;
  (void)outHandle;
  (void)outReq;
  return weft_unsupported("ncclLsaBarrierCreateRequirement");
}

WEFT_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team, int nBarriers,
         ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  (void)comm;
  (void)team;
  (void)nBarriers;
  (void)outHandle;
  (void)outReq;
  return weft_unsupported("ncclGinBarrierCreateRequirement");
}

WEFT_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  (void)maxElts;
  (void)maxEltSize;
  weft_unsupported("ncclLLA2ACalcSlots");
  return -1;
}

WEFT_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
         ncclDevResourceRequirements_t* outReq) {
  (void)nBlocks;
  (void)nSlots;
  (void)outHandle;
  (void)outReq;
  return weft_unsupported("ncclLLA2ACreateRequirement");
}

WEFT_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset, void** outPtr) {
  (void)window;
  (void)offset;
  (void)outPtr;
  return weft_unsupported("ncclGetLsaMultimemDevicePointer");
}

WEFT_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t window, size_t offset,
         ncclMultimemHandle_t multimem, void** outPtr) {
  (void)window;
  (void)offset;
  (void)multimem;
  (void)outPtr;
  return weft_unsupported("ncclGetMultimemDevicePointer");
}

WEFT_API(ncclResult_t, ncclGetMultimemDeviceLeInfo, ncclWindow_t window, size_t offset, ncclCftLeId* leId,
         size_t* leOffset) {
  (void)window;
  (void)offset;
  (void)leId;
  (void)leOffset;
  return weft_unsupported("ncclGetMultimemDeviceLeInfo");
}

WEFT_API(ncclResult_t, ncclGetCftDeviceLeInfo, ncclWindow_t window, size_t offset, int peerCft,
         ncclTeam_t cftTeam, ncclCftLeId* leId, size_t* leOffset) {
  (void)window;
  (void)offset;
  (void)peerCft;
  (void)cftTeam;
  (void)leId;
  (void)leOffset;
  return weft_unsupported("ncclGetCftDeviceLeInfo");
}

WEFT_API(ncclResult_t, ncclGetPeerDeviceLeInfo, ncclWindow_t window, size_t offset, int peerWorld,
         ncclCftLeId* leId, size_t* leOffset) {
  (void)window;
  (void)offset;
  (void)peerWorld;
  (void)leId;
  (void)leOffset;
  return weft_unsupported("ncclGetPeerDeviceLeInfo");
}

WEFT_API(ncclTeam_t, ncclTeamCft, ncclComm_t comm, ncclCftTeamMode_t mode) {
  (void)comm;
  (void)mode;
  weft_unsupported("ncclTeamCft");
  ncclTeam_t none = {0, -1, 0};
  return none;
}

WEFT_API(ncclTeam_t, ncclTeamCftMultimem, ncclComm_t comm) {
  (void)comm;
  weft_unsupported("ncclTeamCftMultimem");
  ncclTeam_t none = {0, -1, 0};
  return none;
}

WEFT_API(ncclResult_t, ncclGinOutboxCreateRequirement, int nBlocks, int size_log2,
         struct ncclGinOutboxHandle* outHandle, ncclDevResourceRequirements_t* outReq) {
  (void)nBlocks;
  (void)size_log2;
  (void)outHandle;
  (void)outReq;
  return weft_unsupported("ncclGinOutboxCreateRequirement");
}

WEFT_API(ncclResult_t, ncclGinInboxA2ACreateRequirement, ncclTeam_t peers, int nBlocks, int size_log2,
         struct ncclGinInboxA2AHandle* outHandle, ncclDevResourceRequirements_t* outReq) {
  (void)peers;
  (void)nBlocks;
  (void)size_log2;
  (void)outHandle;
  (void)outReq;
  return weft_unsupported("ncclGinInboxA2ACreateRequirement");
}
