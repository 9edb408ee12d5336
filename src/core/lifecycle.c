/* Communicator queries and teardown: Count, UserRank, CuDevice, GetAsyncError, Finalize,
 * Destroy, Abort. */
#include <sched.h>
#include <stdlib.h>

#include "bootstrap/bootstrap.h"
#include "collectives/coll.h"
#include "collectives/enqueue.h"
#include "collectives/profiler.h"
#include "collectives/trace.h"
#include "collectives/tuner.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/init.h"
#include "core/topology.h"
#include "util/check.h"
#include "util/cuda.h"

int weft_current_device(void) { return weft_cuda_current_device(); }

ncclResult_t weft_comm_check_parent(const struct ncclComm* comm, const char* caller) {
  if (comm == NULL) {
    WEFT_WARN("%s: comm is NULL", caller);
    return ncclInvalidArgument;
  }
  if (comm->magic != WEFT_COMM_MAGIC) {
    WEFT_WARN("%s: comm %p is not a live communicator (destroyed, or not from ncclCommInit*)", caller,
              (const void*)comm);
    return ncclInvalidArgument;
  }
  ncclResult_t state = __atomic_load_n(&comm->ctx.async_result, __ATOMIC_ACQUIRE);
  if (state == ncclInProgress) {
    WEFT_WARN(
        "%s: comm %p rank %d is still initializing (or being revoked); wait until ncclCommGetAsyncError "
        "reports ncclSuccess",
        caller, (const void*)comm, comm->ctx.rank);
    return ncclInvalidArgument;
  }
  if (state != ncclSuccess) {
    /* The refusal repeats why, as it becomes the last error in place of the failure's own WARN
     * (which a proxy thread may have logged before this call began). */
    char why[400];
    int known = weft_cause_describe(&comm->ctx.cause, why, sizeof(why));
    WEFT_WARN(
        "%s: comm %p rank %d has failed earlier (%s%s%s); only ncclCommAbort/ncclCommDestroy may follow",
        caller, (const void*)comm, comm->ctx.rank, pncclGetErrorString(state), known ? ": " : "", why);
    return state;
  }
  return ncclSuccess;
}

int weft_comm_has_failed(const struct ncclComm* comm) {
  if (comm == NULL || comm->magic != WEFT_COMM_MAGIC) return 0;
  ncclResult_t state = __atomic_load_n(&comm->ctx.async_result, __ATOMIC_ACQUIRE);
  return state != ncclSuccess && state != ncclInProgress;
}

ncclResult_t weft_comm_check(const struct ncclComm* comm, const char* caller) {
  if (comm != NULL && comm->magic == WEFT_COMM_MAGIC && __atomic_load_n(&comm->revoked, __ATOMIC_ACQUIRE)) {
    WEFT_WARN(
        "%s: comm %p rank %d was revoked (ncclCommRevoke or NCCL_SHRINK_ABORT); only ncclCommDestroy, "
        "ncclCommSplit or ncclCommShrink may follow",
        caller, (const void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  return weft_comm_check_parent(comm, caller);
}

static void join_init_thread(struct ncclComm* comm) {
  if (!comm->init_thread_running) return;
  pthread_join(comm->init_thread, NULL);
  comm->init_thread_running = 0;
}

int weft_comm_claim(struct ncclComm* comm) {
  int expected = 0;
  return __atomic_compare_exchange_n(&comm->claimed_for_free, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}

void weft_comm_free(struct ncclComm* comm) {
  if (comm == NULL) return;
  join_init_thread(comm);
  weft_group_worker_destroy(comm);
  weft_trace_destroy(&comm->ctx);
  weft_coll_comm_fini(&comm->ctx);
  weft_tuner_destroy(comm->ctx.tuner); /* destroy, abort and failed inits alike: finalize runs once */
  comm->ctx.tuner = NULL;
  /* No launch runs any more, and the proxy has reported the last of its events (the connectors
   * are gone): every event is closed. */
  weft_prof_destroy(&comm->ctx);
  weft_comm_topo_fini(comm);
  weft_bootstrap_destroy(comm->ctx.bootstrap);
  free(comm->ctx.peers);
  free(comm->ctx.local_ranks);
  free(comm->ctx.rank_to_node);
  free(comm->ctx.topo_p2p);
  free(comm->ctx.user_ops);
  free(comm->suspended_usage);
  weft_enqueue_free_tasks(&comm->ctx, comm->ctx.tasks.head);
  weft_enqueue_drop_spare(&comm->ctx);
  comm->magic = 0;
  free(comm);
}

/* Queries answer for any comm that exists, even one still initializing, as NCCL does. */
static ncclResult_t check_exists(const struct ncclComm* comm, const char* caller) {
  if (comm == NULL || comm->magic != WEFT_COMM_MAGIC) {
    WEFT_WARN("%s: comm %p is not a live communicator", caller, (const void*)comm);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  WEFT_CHECK(check_exists(comm, "ncclCommCount"));
  WEFT_ARG_CHECK(count != NULL, "count is NULL");
  *count = comm->ctx.nranks;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  WEFT_CHECK(check_exists(comm, "ncclCommUserRank"));
  WEFT_ARG_CHECK(rank != NULL, "rank is NULL");
  *rank = comm->ctx.rank;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  WEFT_CHECK(check_exists(comm, "ncclCommCuDevice"));
  WEFT_ARG_CHECK(device != NULL, "device is NULL");
  *device = comm->ctx.cuda_dev;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  WEFT_CHECK(check_exists(comm, "ncclCommGetAsyncError"));
  WEFT_ARG_CHECK(asyncError != NULL, "asyncError is NULL");
  *asyncError = __atomic_load_n(&comm->ctx.async_result, __ATOMIC_ACQUIRE);
  if (*asyncError != ncclInProgress) join_init_thread(comm);
  /* A CUDA kernel that gave up leaves its error in device state the host can read at any time. */
  if (*asyncError == ncclSuccess) *asyncError = weft_coll_check_error(&comm->ctx);
  /* A kernel that gave up (WEFT_TIMEOUT) is seen here first: the recorder's view goes to WEFT_TRACE_DIR. */
  if (*asyncError != ncclSuccess && *asyncError != ncclInProgress && comm->ctx.trace && comm->ctx.peers &&
      !comm->ctx.trace->failure_dumped)
    weft_trace_dump(&comm->ctx, NULL, WEFT_TRACE_ON_FAILURE, 0);
  return ncclSuccess;
}

/* Host backend work completes before each call returns, so there is nothing left to flush; CUDA
 * work is waited for and a kernel that gave up is reported. */
WEFT_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  WEFT_CHECK(check_exists(comm, "ncclCommFinalize"));
  if (comm->finalized) {
    WEFT_WARN("ncclCommFinalize: comm %p rank %d is already finalized", (void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  if (comm->revoked) {
    WEFT_WARN("ncclCommFinalize: comm %p rank %d was revoked; destroy it instead", (void*)comm,
              comm->ctx.rank);
    return ncclInvalidUsage;
  }
  comm->finalized = 1;
  return weft_coll_flush(&comm->ctx);
}

/* Destroy and abort: with stop, raise the abort flag so that operations running on other
 * threads return; wait until none runs, then free the comm unless another caller claimed it. */
static ncclResult_t release(struct ncclComm* comm, int stop, int dump) {
  if (stop) __atomic_store_n(&comm->ctx.abort_flag, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&comm->launches_in_flight, __ATOMIC_ACQUIRE) > 0) sched_yield();
  if (!weft_comm_claim(comm)) return ncclSuccess;
  /* An abort is how programs react to a hang: what this rank saw last is kept (WEFT_TRACE_DIR). */
  if (dump && comm->ctx.trace != NULL && comm->ctx.peers != NULL)
    weft_trace_dump(&comm->ctx, NULL, WEFT_TRACE_ON_ABORT, 0);
  weft_comm_free(comm);
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess; /* NCCL accepts NULL here */
  WEFT_CHECK(check_exists(comm, "ncclCommDestroy"));
  /* Destroying a comm that is still initializing in the background stops that init; a revoked
   * comm's peers may be gone or mid-operation, so it is torn down locally, as an abort does. */
  return release(
      comm, __atomic_load_n(&comm->ctx.async_result, __ATOMIC_ACQUIRE) == ncclInProgress || comm->revoked, 0);
}

WEFT_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess;
  WEFT_CHECK(check_exists(comm, "ncclCommAbort"));
  return release(comm, 1, 1);
}
