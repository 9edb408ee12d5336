/* The communicator: the context collectives/ sees (collectives/context.h), then what only core/
 * reads: lifecycle, group and suspend bookkeeping, splits. */
#ifndef WEFT_CORE_COMM_H
#define WEFT_CORE_COMM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "collectives/context.h"
#include "nccl.h"

#define WEFT_COMM_MAGIC 0x5745465443304d4dull /* "WEFTC0MM": catches stale or foreign pointers */

struct weft_group_worker;
struct weft_mem_usage; /* collectives/memstat.h */

struct ncclComm {
  struct weft_comm_ctx ctx; /* first: what collectives/ sees, at the communicator's address */
  uint64_t magic;
  pthread_t init_thread;
  int init_thread_running;
  int finalized;
  int launches_in_flight; /* blocking inits and group launches running; abort waits for them */
  int claimed_for_free;   /* set once by whoever frees the comm (destroy/abort vs. failed init) */
  struct weft_group_worker* group_worker; /* core/group.c: launches this comm beside others */
  int in_group;                           /* already listed in this thread's group */

  /* Split bookkeeping: children made from this comm, so splits get distinct hashes. */
  int split_count;

  /* ncclCommSuspend / ncclCommResume (core/suspend.c). suspend_requested: suspended as far as
   * later calls are concerned (set by the call, even when a group defers the work to its end);
   * suspend_queued: that work still waits for the end of the caller's group; ctx.suspend_released:
   * the buffers are released now, and suspended_usage says what they were. */
  int suspend_requested, suspend_queued;
  struct weft_mem_usage* suspended_usage;

  /* ncclCommRevoke (or a shrink with NCCL_SHRINK_ABORT) stopped this comm's operations: its
   * connectors may be mid-operation, so only destroy, split and shrink may follow. */
  volatile int revoked;
  /* ncclCommGetUniqueId: the id a later ncclCommGrow of this comm consumes. */
  int grow_id_pending;
  ncclUniqueId grow_id;
};

_Static_assert(offsetof(struct ncclComm, ctx) == 0, "the context's address is the communicator's");

/* Checks that comm is a live, initialized, healthy and not revoked communicator; WARNs naming
 * the caller on failure. */
ncclResult_t weft_comm_check(const struct ncclComm* comm, const char* caller);
/* The same, but a revoked comm passes: what split and shrink require of their parent. */
ncclResult_t weft_comm_check_parent(const struct ncclComm* comm, const char* caller);
/* Whether comm is a live communicator whose work failed (an asynchronous error is recorded). */
int weft_comm_has_failed(const struct ncclComm* comm);

#endif
