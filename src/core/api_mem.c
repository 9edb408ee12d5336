/* Memory, registration, window and reduction-operator entry points. Each checks its comm and
 * hands the rest to collectives/ (mem.c, window.c, redop.c); window registrations inside a
 * group run at the group's end, as a job of the group. */
#include <stdlib.h>

#include "collectives/mem.h"
#include "collectives/redop.h"
#include "collectives/window.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/group.h"
#include "util/check.h"
#include "util/log.h"

WEFT_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) { return weft_mem_alloc(ptr, size); }

WEFT_API(ncclResult_t, ncclMemFree, void* ptr) { return weft_mem_free(ptr); }

WEFT_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommRegister"));
  return weft_mem_register(&comm->ctx, buff, size, handle);
}

WEFT_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommDeregister"));
  return weft_mem_deregister(&comm->ctx, handle);
}

WEFT_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  WEFT_CHECK(weft_comm_check(comm, "ncclRedOpCreatePreMulSum"));
  return weft_redop_create(&comm->ctx, op, scalar, datatype, residence);
}

WEFT_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  WEFT_CHECK(weft_comm_check(comm, "ncclRedOpDestroy"));
  return weft_redop_destroy(&comm->ctx, op);
}

/* ---- windows ---- */

static ncclResult_t run_deferred(struct weft_async_job* job) {
  return weft_window_run_deferred(&job->comm->ctx);
}

static void deferred_done(struct weft_async_job* job, ncclResult_t res) {
  (void)res;
  free(job);
}

/* A comm's registrations of one group run as one job at its end, in call order. */
static ncclResult_t defer_register(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags) {
  struct weft_async_job* job = calloc(1, sizeof(*job));
  if (job == NULL) {
    WEFT_WARN("Out of memory queueing a window registration on comm %p rank %d", (void*)comm, comm->ctx.rank);
    return ncclSystemError;
  }
  int first = 0;
  ncclResult_t res = weft_window_defer(&comm->ctx, buff, size, flags, win, &first);
  if (res != ncclSuccess || !first) {
    free(job);
    return res;
  }
  job->run = run_deferred;
  job->done = deferred_done;
  job->comm = comm;
  weft_group_add_job(job);
  return ncclSuccess;
}

static ncclResult_t window_register(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommWindowRegister"));
  WEFT_ARG_CHECK(win != NULL, "ncclCommWindowRegister: win is NULL (buff %p size %zu comm %p rank %d)", buff,
                 size, (void*)comm, comm->ctx.rank);
  *win = NULL;
  WEFT_CHECK(weft_window_check_register(&comm->ctx, flags));
  if (weft_group_depth() > 0) return defer_register(comm, buff, size, win, flags);
  return weft_window_register(&comm->ctx, buff, size, flags, win);
}

WEFT_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  ncclResult_t res = window_register(comm, buff, size, win, winFlags);
  if (WEFT_FAILED(res) && weft_group_depth() > 0) weft_group_set_error(res);
  return res;
}

/* Allowed on a comm that failed: cleanup paths deregister before they abort. */
WEFT_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  WEFT_ARG_CHECK(comm != NULL && comm->magic == WEFT_COMM_MAGIC,
                 "ncclCommWindowDeregister: comm %p is not a live communicator (win %p)", (void*)comm,
                 (void*)win);
  return weft_window_deregister(&comm->ctx, win);
}

WEFT_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  WEFT_CHECK(weft_comm_check(comm, "ncclWinGetUserPtr"));
  WEFT_ARG_CHECK(outUserPtr != NULL, "ncclWinGetUserPtr: outUserPtr is NULL (win %p comm %p rank %d)",
                 (void*)win, (void*)comm, comm->ctx.rank);
  struct weft_window* w = weft_window_find(&comm->ctx, win, "ncclWinGetUserPtr", "win");
  if (w == NULL) return ncclInvalidArgument;
  *outUserPtr = w->buff;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer,
         void** outPtr) {
  return weft_window_peer_pointer(window, offset, peer, outPtr);
}

WEFT_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank,
         void** outPtr) {
  return weft_window_lsa_pointer(window, offset, lsaRank, outPtr);
}
