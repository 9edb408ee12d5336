/* Placeholder until window lands: each returns ncclInvalidUsage, "not supported by Weft yet". */
#include "core/api.h"
#include "nccl_device/host.h"

WEFT_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  (void)comm;
  (void)win;
  (void)outUserPtr;
  return weft_unsupported("ncclWinGetUserPtr");
}

WEFT_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  (void)localbuff;
  (void)count;
  (void)datatype;
  (void)peer;
  (void)peerWin;
  (void)peerWinOffset;
  (void)sigIdx;
  (void)ctx;
  (void)flags;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclPutSignal");
}

WEFT_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  (void)peer;
  (void)sigIdx;
  (void)ctx;
  (void)flags;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclSignal");
}

WEFT_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream) {
  (void)nDesc;
  (void)signalDescs;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclWaitSignal");
}

WEFT_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  (void)window;
  (void)offset;
  (void)peer;
  (void)outPtr;
  return weft_unsupported("ncclGetPeerDevicePointer");
}

WEFT_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  (void)window;
  (void)offset;
  (void)lsaRank;
  (void)outPtr;
  return weft_unsupported("ncclGetLsaDevicePointer");
}
