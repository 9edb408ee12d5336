/* ncclCommRevoke and ncclCommShrink, NCCL's fault-tolerance pair: revoke stops a comm's operations
 * without freeing it; shrink builds a comm of the parent's ranks minus excluded ones, talking to
 * the survivors only, so an excluded rank that died or hangs is never waited for. */
#include <sched.h>
#include <stdlib.h>

#include "collectives/coll.h"
#include "core/api.h"
#include "core/init.h"
#include "core/split.h"
#include "util/check.h"

#define SHRINK_TAG (1ull << 32) /* a hash salt no split color (32 bits) can take */

struct shrink_job {
  struct weft_async_job base;
  struct ncclComm* parent;
  int* parent_ranks; /* [new rank] = parent rank: the survivors in parent order */
  int index;         /* the parent's split_count at the call */
  int nexcluded;
};

/* Stop every operation of comm and wait until none runs, freeing nothing. Its connectors are
 * left mid-operation, so the comm stays revoked: only destroy, split and shrink may follow. The
 * abort flag comes down again afterwards, as in NCCL, so that the comm's bootstrap still serves
 * a split. The revoked mark is set before the in-flight count is read; a launch raises that
 * count before it reads the mark (group.c), so every launch is either waited for here or
 * refused there. */
static void quiesce(struct ncclComm* comm) {
  __atomic_store_n(&comm->revoked, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&comm->ctx.async_result, ncclInProgress, __ATOMIC_SEQ_CST);
  __atomic_store_n(&comm->ctx.abort_flag, 1, __ATOMIC_SEQ_CST);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  while (__atomic_load_n(&comm->launches_in_flight, __ATOMIC_SEQ_CST) > 0) sched_yield();
  /* CUDA work outlives its launch call: the kernels are stopped and waited for too. */
  weft_coll_stop(&comm->ctx);
  __atomic_store_n(&comm->ctx.abort_flag, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&comm->ctx.async_result, ncclSuccess, __ATOMIC_RELEASE);
}

/* A comm that may be stopped: live and initialized. One that has failed since passes too, as
 * stopping it is the way to recover from the failure; one whose init failed has nothing to stop
 * and no bootstrap to shrink over. */
static ncclResult_t check_stoppable(const struct ncclComm* comm, const char* caller) {
  ncclResult_t state = comm != NULL && comm->magic == WEFT_COMM_MAGIC
                           ? __atomic_load_n(&comm->ctx.async_result, __ATOMIC_ACQUIRE)
                           : ncclSuccess;
  if (!WEFT_FAILED(state)) return weft_comm_check_parent(comm, caller);
  if (comm->ctx.bootstrap != NULL && comm->ctx.peers != NULL) return ncclSuccess;
  WEFT_WARN("%s: comm %p rank %d failed during its init (%s); it can only be destroyed", caller,
            (const void*)comm, comm->ctx.rank, pncclGetErrorString(state));
  return state;
}

WEFT_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  WEFT_CHECK(check_stoppable(comm, "ncclCommRevoke"));
  WEFT_ARG_CHECK(revokeFlags == NCCL_REVOKE_DEFAULT,
                 "ncclCommRevoke: revokeFlags %d must be NCCL_REVOKE_DEFAULT (0) (comm %p rank %d)",
                 revokeFlags, (void*)comm, comm->ctx.rank);
  quiesce(comm);
  WEFT_INFO(WEFT_INIT,
            "comm %p rank %d nranks %d revoked: operations stopped, only destroy, split or "
            "shrink may follow",
            (void*)comm, comm->ctx.rank, comm->ctx.nranks);
  return ncclSuccess;
}

static ncclResult_t check_excluded_rank(const struct ncclComm* comm, const int* list, int i,
                                        const char* seen) {
  int r = list[i];
  WEFT_ARG_CHECK(
      r >= 0 && r < comm->ctx.nranks,
      "ncclCommShrink: excludeRanksList[%d] = %d is not a rank of the comm (0..%d) (comm %p rank %d)", i, r,
      comm->ctx.nranks - 1, (void*)comm, comm->ctx.rank);
  WEFT_ARG_CHECK(!seen[r], "ncclCommShrink: excludeRanksList[%d] = %d is listed twice (comm %p rank %d)", i,
                 r, (void*)comm, comm->ctx.rank);
  WEFT_ARG_CHECK(r != comm->ctx.rank,
                 "ncclCommShrink: excludeRanksList[%d] = %d is the calling rank; excluded ranks must not "
                 "call ncclCommShrink (comm %p)",
                 i, r, (void*)comm);
  return ncclSuccess;
}

/* Check the exclusion list and derive the survivors in parent order (NCCL renumbers them so):
 * table[new rank] = parent rank. Survivors each compute the same table from the same list, so
 * no exchange with the parent's ranks is needed. */
static ncclResult_t survivors(const struct ncclComm* comm, const int* list, int count, int** table,
                              int* new_rank) {
  WEFT_ARG_CHECK(count >= 0, "ncclCommShrink: excludeRanksCount %d is negative (comm %p rank %d)", count,
                 (void*)comm, comm->ctx.rank);
  WEFT_ARG_CHECK(
      count < comm->ctx.nranks,
      "ncclCommShrink: excludeRanksCount %d excludes every rank of the comm's %d (comm %p rank %d)", count,
      comm->ctx.nranks, (void*)comm, comm->ctx.rank);
  WEFT_ARG_CHECK(list != NULL || count == 0,
                 "ncclCommShrink: excludeRanksList is NULL with excludeRanksCount %d (comm %p rank %d)",
                 count, (void*)comm, comm->ctx.rank);
  char* excluded = calloc(comm->ctx.nranks, 1);
  int* t = malloc(sizeof(int) * (comm->ctx.nranks - count));
  ncclResult_t res = excluded && t ? ncclSuccess : ncclSystemError;
  for (int i = 0; i < count && res == ncclSuccess; i++) {
    res = check_excluded_rank(comm, list, i, excluded);
    if (res == ncclSuccess) excluded[list[i]] = 1;
  }
  for (int r = 0, n = 0; r < comm->ctx.nranks && res == ncclSuccess; r++) {
    if (excluded[r]) continue;
    if (r == comm->ctx.rank) *new_rank = n;
    t[n++] = r;
  }
  free(excluded);
  if (res != ncclSuccess) {
    free(t);
    return res;
  }
  *table = t;
  return ncclSuccess;
}

static ncclResult_t shrink_run(struct weft_async_job* base) {
  struct shrink_job* job = (struct shrink_job*)base;
  struct ncclComm* comm = base->comm;
  WEFT_INFO(WEFT_INIT, "comm %p shrunk from comm %p rank %d (%d rank%s excluded) -> rank %d of %d",
            (void*)comm, (void*)job->parent, job->parent->ctx.rank, job->nexcluded,
            job->nexcluded == 1 ? "" : "s", comm->ctx.rank, comm->ctx.nranks);
  return weft_child_setup(comm, job->parent, job->parent_ranks, job->index, SHRINK_TAG);
}

static void shrink_done(struct weft_async_job* base, ncclResult_t res) {
  free(((struct shrink_job*)base)->parent_ranks);
  weft_child_done(base, res);
}

/* The parent as the flags require it: healthy and idle by default; with NCCL_SHRINK_ABORT it
 * may have failed or have operations hung on the excluded ranks, which are stopped here. */
static ncclResult_t prepare_parent(struct ncclComm* comm, int flags) {
  if (flags == NCCL_SHRINK_DEFAULT) return weft_comm_check_parent(comm, "ncclCommShrink");
  return check_stoppable(comm, "ncclCommShrink");
}

WEFT_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  WEFT_ARG_CHECK(shrinkFlags == NCCL_SHRINK_DEFAULT || shrinkFlags == NCCL_SHRINK_ABORT,
                 "ncclCommShrink: shrinkFlags %d must be NCCL_SHRINK_DEFAULT (0) or NCCL_SHRINK_ABORT (1)",
                 shrinkFlags);
  WEFT_ARG_CHECK(newcomm != NULL, "ncclCommShrink: newcomm is NULL (comm %p)", (void*)comm);
  *newcomm = NULL;
  WEFT_CHECK(prepare_parent(comm, shrinkFlags));
  int* table = NULL;
  int new_rank = -1;
  WEFT_CHECK(survivors(comm, excludeRanksList, excludeRanksCount, &table, &new_rank));
  struct ncclComm* child = NULL;
  struct shrink_job* job = NULL;
  ncclResult_t res = weft_child_alloc(comm, new_rank, comm->ctx.nranks - excludeRanksCount, config, &child);
  if (res == ncclSuccess && (job = calloc(1, sizeof(*job))) == NULL) res = ncclSystemError;
  if (res != ncclSuccess) {
    weft_comm_free(child);
    free(table);
    return res;
  }
  /* Only once the arguments are known good: a bad call must not revoke the parent. */
  if (shrinkFlags == NCCL_SHRINK_ABORT) quiesce(comm);
  *job = (struct shrink_job){.base = {.run = shrink_run, .done = shrink_done, .comm = child},
                             .parent = comm,
                             .parent_ranks = table,
                             .index = comm->split_count++,
                             .nexcluded = excludeRanksCount};
  return weft_child_start(&job->base, newcomm);
}
