/* One-sided entry points: ncclPutSignal, ncclSignal and ncclWaitSignal. Each checks the comm,
 * then collectives/rma.c checks the rest and queues the operation inside the call's implicit
 * group; the group's end runs it. Host backend: the call (or the group's end) returns when the
 * operation is done, so the stream is not used. */
#include "collectives/rma.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/suspend.h"

WEFT_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream) {
  (void)stream;
  weft_group_enter();
  ncclResult_t res = weft_comm_check_active(comm, "ncclPutSignal");
  if (res != ncclSuccess) return weft_group_call_end(NULL, res);
  res =
      weft_rma_put(&comm->ctx, localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags);
  return weft_group_call_end(comm, res);
}

WEFT_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream) {
  (void)stream;
  weft_group_enter();
  ncclResult_t res = weft_comm_check_active(comm, "ncclSignal");
  if (res != ncclSuccess) return weft_group_call_end(NULL, res);
  return weft_group_call_end(comm, weft_rma_signal(&comm->ctx, peer, sigIdx, ctx, flags));
}

WEFT_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
         cudaStream_t stream) {
  (void)stream;
  weft_group_enter();
  ncclResult_t res = weft_comm_check_active(comm, "ncclWaitSignal");
  if (res != ncclSuccess) return weft_group_call_end(NULL, res);
  return weft_group_call_end(comm, weft_rma_wait(&comm->ctx, nDesc, signalDescs));
}
