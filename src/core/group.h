/* Groups: ncclGroupStart/End nesting per thread. Collective and p2p calls are tasks appended
 * to their communicator inside an implicit group of depth one; deferred work (grouped comm
 * inits) runs when the outermost group ends. */
#ifndef WEFT_CORE_GROUP_H
#define WEFT_CORE_GROUP_H

#include "nccl.h"

struct ncclComm;

/* A job deferred to the end of the outermost group (e.g. ncclCommInitRank inside a group).
 * Jobs of one group run concurrently, each on its own thread, and are joined before tasks
 * are launched. */
struct weft_async_job {
  ncclResult_t (*run)(struct weft_async_job* job);
  void (*done)(struct weft_async_job* job, ncclResult_t res); /* frees the job; may be NULL */
  struct ncclComm* comm;
  struct weft_async_job* next;
};

int weft_group_depth(void);
void weft_group_enter(void);
/* Leave one level; at depth 0 runs jobs, then launches every comm that has tasks. */
ncclResult_t weft_group_leave(void);
/* ncclGroupSimulateEnd: as weft_group_leave, but the outermost level predicts the queued
 * collectives' time into info->estimatedTime and drops them instead of launching. */
ncclResult_t weft_group_simulate_end(ncclSimInfo_t* info);
void weft_group_add_job(struct weft_async_job* job);
/* Mark comm as having tasks to launch at group end (idempotent within a group). */
void weft_group_add_comm(struct ncclComm* comm);
/* Ends the implicit group of a call that queues work (entered with weft_group_enter): lists comm
 * when it has queued work, or when the call failed after its checks of comm (what it queued
 * first is dropped at the group's end); latches a failure. comm is NULL when the call failed
 * before comm passed its checks. Returns the call's result, else the group's. */
ncclResult_t weft_group_call_end(struct ncclComm* comm, ncclResult_t res);
/* Latch an error seen inside a group: ncclGroupEnd reports it and drops the group's tasks. */
void weft_group_set_error(ncclResult_t res);

/* Stops the comm's launch worker, if it has one (comm teardown). */
void weft_group_worker_destroy(struct ncclComm* comm);

#endif
