/* ncclCommSuspend, ncclCommResume and ncclCommMemStats. Suspend releases the comm's buffers
 * (collectives/coll.h) and keeps the comm valid; Resume builds them again. Both are collective,
 * as NCCL's are (its implementation waits in a bootstrap barrier; the header does not say so),
 * and like NCCL's they join the caller's group when one is open, so one thread can suspend the
 * comms of several ranks. While suspended, operations fail with ncclInvalidUsage (NCCL says the
 * comm "cannot be used while suspended" and resumes nothing by itself); a second suspend, or a
 * resume of an active comm, is ncclInvalidUsage as in NCCL. */
#include "core/suspend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "collectives/memstat.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/group.h"
#include "util/check.h"
#include "util/log.h"

ncclResult_t weft_comm_check_active(const struct ncclComm* comm, const char* caller) {
  WEFT_CHECK(weft_comm_check(comm, caller));
  if (!comm->suspend_requested && !__atomic_load_n(&comm->ctx.suspend_released, __ATOMIC_ACQUIRE))
    return ncclSuccess;
  WEFT_WARN("%s: comm %p rank %d is suspended (ncclCommSuspend); call ncclCommResume on every rank first",
            caller, (const void*)comm, comm->ctx.rank);
  return ncclInvalidUsage;
}

/* ---- the account, as ncclCommMemStats and the log see it ---- */

/* While suspended: what was released (NCCL keeps counting suspended memory as the comm's), with
 * the registrations as they are now. Otherwise the live account. Returns whether suspended. */
static int current_usage(const struct ncclComm* comm, struct weft_mem_usage* u) {
  int released = __atomic_load_n(&comm->ctx.suspend_released, __ATOMIC_ACQUIRE);
  weft_coll_mem_usage(&comm->ctx, u); /* suspended, only the persistent part and registrations are live */
  if (released && comm->suspended_usage != NULL)
    memcpy(u->suspendable, comm->suspended_usage->suspendable, sizeof(u->suspendable));
  return released;
}

static void format_kinds(const uint64_t* bytes, char* out, size_t size) {
  size_t n = 0;
  out[0] = 0;
  for (int k = 0; k < WEFT_MEM_KINDS && n < size; k++)
    n += (size_t)snprintf(out + n, size - n, "%s%s %llu", k ? ", " : "", weft_mem_kind_name(k),
                          (unsigned long long)bytes[k]);
}

/* NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=ALLOC: the breakdown behind the numbers. */
static void log_usage(const struct ncclComm* comm, const char* when, const struct weft_mem_usage* u) {
  if (!WEFT_LOG_ON(WEFT_LOG_INFO, WEFT_ALLOC)) return;
  char sus[256], per[256];
  format_kinds(u->suspendable, sus, sizeof(sus));
  format_kinds(u->persist, per, sizeof(per));
  WEFT_INFO(WEFT_ALLOC,
            "comm %p rank %d memory %s (%s): suspendable %llu bytes [%s], persist %llu bytes [%s]; %llu "
            "registration(s) of %llu bytes of user memory (not counted)",
            (const void*)comm, comm->ctx.rank, when,
            comm->ctx.backend == WEFT_BACKEND_CUDA ? "GPU" : "host and shared",
            (unsigned long long)weft_mem_usage_suspendable(u), sus,
            (unsigned long long)weft_mem_usage_persist(u), per, (unsigned long long)u->nregs,
            (unsigned long long)u->reg_bytes);
}

/* ---- suspend and resume ---- */

static ncclResult_t do_suspend(struct ncclComm* comm) {
  struct weft_mem_usage* u = malloc(sizeof(*u));
  if (u == NULL) {
    WEFT_WARN("ncclCommSuspend: comm %p rank %d: out of memory", (void*)comm, comm->ctx.rank);
    return ncclSystemError;
  }
  weft_coll_mem_usage(&comm->ctx, u);
  log_usage(comm, "before suspend", u);
  ncclResult_t res = weft_coll_comm_suspend(&comm->ctx);
  if (res != ncclSuccess) {
    free(u);
    return res;
  }
  free(comm->suspended_usage);
  comm->suspended_usage = u;
  __atomic_store_n(&comm->ctx.suspend_released, 1, __ATOMIC_RELEASE);
  WEFT_INFO(WEFT_INIT | WEFT_ALLOC, "comm %p rank %d suspended: %llu bytes released, %llu kept", (void*)comm,
            comm->ctx.rank, (unsigned long long)weft_mem_usage_suspendable(u),
            (unsigned long long)weft_mem_usage_persist(u));
  return ncclSuccess;
}

static ncclResult_t do_resume(struct ncclComm* comm) {
  WEFT_CHECK(weft_coll_comm_resume(&comm->ctx));
  free(comm->suspended_usage);
  comm->suspended_usage = NULL;
  __atomic_store_n(&comm->ctx.suspend_released, 0, __ATOMIC_RELEASE);
  struct weft_mem_usage u;
  weft_coll_mem_usage(&comm->ctx, &u);
  WEFT_INFO(WEFT_INIT | WEFT_ALLOC, "comm %p rank %d resumed: %llu bytes restored", (void*)comm,
            comm->ctx.rank, (unsigned long long)weft_mem_usage_suspendable(&u));
  log_usage(comm, "after resume", &u);
  return ncclSuccess;
}

struct suspend_job {
  struct weft_async_job base;
  int suspend; /* 1 suspend, 0 resume */
};

static ncclResult_t job_run(struct weft_async_job* base) {
  struct suspend_job* job = (struct suspend_job*)base;
  return job->suspend ? do_suspend(base->comm) : do_resume(base->comm);
}

/* A suspend or resume that failed half-way leaves buffers in an unknown state on some ranks:
 * the comm fails from then on (only destroy or abort), as after any asynchronous error. */
static void job_done(struct weft_async_job* base, ncclResult_t res) {
  struct ncclComm* comm = base->comm;
  comm->suspend_queued = 0;
  if (res != ncclSuccess) {
    comm->suspend_requested = __atomic_load_n(&comm->ctx.suspend_released, __ATOMIC_ACQUIRE);
    weft_comm_set_async_error(&comm->ctx, res);
  }
  free(base);
}

/* Inline, or at the end of the caller's group (with every other comm's suspend or resume of that
 * group, each on a thread of its own, so ranks driven by one thread meet in the barrier). */
static ncclResult_t start(struct ncclComm* comm, int suspend) {
  struct suspend_job* job = calloc(1, sizeof(*job));
  if (job == NULL) {
    WEFT_WARN("%s: comm %p rank %d: out of memory", suspend ? "ncclCommSuspend" : "ncclCommResume",
              (void*)comm, comm->ctx.rank);
    return ncclSystemError;
  }
  job->base.run = job_run;
  job->base.done = job_done;
  job->base.comm = comm;
  job->suspend = suspend;
  comm->suspend_requested = suspend;
  if (weft_group_depth() > 0) {
    comm->suspend_queued = 1;
    weft_group_add_job(&job->base);
    return ncclSuccess;
  }
  /* An abort from another thread waits for this, as for a launch; the barrier polls its flag. */
  __atomic_add_fetch(&comm->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  ncclResult_t res = job_run(&job->base);
  job_done(&job->base, res);
  __atomic_sub_fetch(&comm->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  return res;
}

/* Whether comm may go to the state asked for: refused on this rank alone, before any barrier. */
static ncclResult_t check_transition(const struct ncclComm* comm, const char* caller, int suspend) {
  if (comm->suspend_queued) {
    WEFT_WARN("%s: comm %p rank %d already has a suspend or resume waiting for the end of this group", caller,
              (const void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  if (suspend && comm->suspend_requested) {
    WEFT_WARN("%s: comm %p rank %d is already suspended", caller, (const void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  if (!suspend && !comm->suspend_requested) {
    WEFT_WARN("%s: comm %p rank %d is not suspended", caller, (const void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  if (suspend && comm->ctx.tasks.head != NULL) {
    WEFT_WARN("%s: comm %p rank %d has operations queued in the current group; end the group first", caller,
              (const void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommSuspend"));
  /* NCCL_SUSPEND_MEM is the only flag; 0 would suspend nothing, so it is refused too. */
  WEFT_ARG_CHECK(flags == NCCL_SUSPEND_MEM,
                 "ncclCommSuspend: flags 0x%x (comm %p rank %d): the only flag is NCCL_SUSPEND_MEM (0x%x)",
                 (unsigned)flags, (void*)comm, comm->ctx.rank, (unsigned)NCCL_SUSPEND_MEM);
  WEFT_CHECK(check_transition(comm, "ncclCommSuspend", 1));
  return start(comm, 1);
}

WEFT_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommResume"));
  WEFT_CHECK(check_transition(comm, "ncclCommResume", 0));
  return start(comm, 0);
}

/* On the host backend there is no GPU memory: the "GPU memory" stats count the comm's buffers in
 * host and shared memory (connectors, shared segments, staging, bookkeeping) instead. */
WEFT_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommMemStats"));
  WEFT_ARG_CHECK(value != NULL, "ncclCommMemStats: value is NULL (stat %d, comm %p rank %d)", (int)stat,
                 (void*)comm, comm->ctx.rank);
  WEFT_ARG_CHECK((int)stat >= (int)ncclStatGpuMemSuspend && (int)stat <= (int)ncclStatGpuMemTotal,
                 "ncclCommMemStats: stat %d is not a ncclCommMemStat_t (%d..%d) (comm %p rank %d)", (int)stat,
                 (int)ncclStatGpuMemSuspend, (int)ncclStatGpuMemTotal, (void*)comm, comm->ctx.rank);
  struct weft_mem_usage u;
  int suspended = current_usage(comm, &u);
  log_usage(comm, suspended ? "suspended" : "active", &u);
  uint64_t sus = weft_mem_usage_suspendable(&u), per = weft_mem_usage_persist(&u);
  switch (stat) {
    case ncclStatGpuMemSuspend:
      *value = sus;
      break;
    case ncclStatGpuMemSuspended:
      *value = (uint64_t)suspended;
      break;
    case ncclStatGpuMemPersist:
      *value = per;
      break;
    default:
      *value = sus + per;
      break;
  }
  return ncclSuccess;
}
