/* ncclGroupStart/End: per-thread nesting; at the outermost end, deferred jobs (grouped comm
 * inits) run concurrently, then each communicator with queued tasks is launched, several
 * communicators each on its own thread so that ranks driven by one thread make progress. */
#include "core/group.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/api.h"
#include "core/comm.h"
#include "util/check.h"

struct group_state {
  int depth;
  ncclResult_t error;
  struct weft_async_job* jobs;
  struct ncclComm** comms;
  int ncomms;
  int comms_capacity;
};

static __thread struct group_state group;

int weft_group_depth(void) { return group.depth; }

void weft_group_enter(void) { group.depth++; }

void weft_group_set_error(ncclResult_t res) {
  if (group.error == ncclSuccess && WEFT_FAILED(res)) group.error = res;
}

void weft_group_add_job(struct weft_async_job* job) {
  job->next = group.jobs;
  group.jobs = job;
}

void weft_group_add_comm(struct ncclComm* comm) {
  if (comm->in_group) return;
  if (group.ncomms == group.comms_capacity) {
    int cap = group.comms_capacity ? 2 * group.comms_capacity : 8;
    struct ncclComm** grown = realloc(group.comms, cap * sizeof(*grown));
    if (grown == NULL) {
      WEFT_WARN("Out of memory growing the group's communicator list");
      weft_group_set_error(ncclSystemError);
      return;
    }
    group.comms = grown;
    group.comms_capacity = cap;
  }
  comm->in_group = 1;
  group.comms[group.ncomms++] = comm;
}

/* Runs fn(arg[i]) for every i, concurrently when there are several, and returns the first
 * failure. */
struct parallel_call {
  pthread_t thread;
  int started;
  void* arg;
  ncclResult_t (*fn)(void*);
  ncclResult_t res;
};

static void* parallel_main(void* p) {
  struct parallel_call* call = p;
  call->res = call->fn(call->arg);
  return NULL;
}

static ncclResult_t run_parallel(struct parallel_call* calls, int n) {
  if (n == 1) {
    calls[0].res = calls[0].fn(calls[0].arg);
    return calls[0].res;
  }
  for (int i = 0; i < n; i++) {
    calls[i].started = pthread_create(&calls[i].thread, NULL, parallel_main, &calls[i]) == 0;
    if (!calls[i].started) calls[i].res = calls[i].fn(calls[i].arg); /* no thread left: run inline */
  }
  ncclResult_t first = ncclSuccess;
  for (int i = 0; i < n; i++) {
    if (calls[i].started) pthread_join(calls[i].thread, NULL);
    if (first == ncclSuccess && WEFT_FAILED(calls[i].res)) first = calls[i].res;
  }
  return first;
}

static ncclResult_t job_trampoline(void* arg) {
  struct weft_async_job* job = arg;
  return job->run(job);
}

static ncclResult_t run_jobs(struct weft_async_job* jobs) {
  int n = 0;
  for (struct weft_async_job* j = jobs; j; j = j->next) n++;
  if (n == 0) return ncclSuccess;
  struct parallel_call* calls = calloc(n, sizeof(*calls));
  if (calls == NULL) return ncclSystemError;
  int i = n;
  /* The list is in reverse call order; run it in call order for readable logs. */
  for (struct weft_async_job* j = jobs; j; j = j->next)
    calls[--i] = (struct parallel_call){.arg = j, .fn = job_trampoline};
  ncclResult_t res = run_parallel(calls, n);
  for (i = 0; i < n; i++) {
    struct weft_async_job* job = calls[i].arg;
    if (job->done) job->done(job, calls[i].res);
  }
  free(calls);
  return res;
}

static ncclResult_t launch_trampoline(void* arg) {
  struct ncclComm* comm = arg;
  __atomic_add_fetch(&comm->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  ncclResult_t res = weft_enqueue_launch(comm);
  if (WEFT_FAILED(res)) weft_comm_set_async_error(comm, res);
  __atomic_sub_fetch(&comm->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  return res;
}

static ncclResult_t launch_comms(struct ncclComm** comms, int n, ncclResult_t error) {
  if (n == 0) return ncclSuccess;
  if (WEFT_FAILED(error)) {
    for (int i = 0; i < n; i++) weft_enqueue_discard(comms[i]);
    return error;
  }
  struct parallel_call* calls = calloc(n, sizeof(*calls));
  if (calls == NULL) {
    for (int i = 0; i < n; i++) weft_enqueue_discard(comms[i]);
    return ncclSystemError;
  }
  for (int i = 0; i < n; i++) calls[i] = (struct parallel_call){.arg = comms[i], .fn = launch_trampoline};
  ncclResult_t res = run_parallel(calls, n);
  free(calls);
  return res;
}

ncclResult_t weft_group_leave(void) {
  if (group.depth == 0) {
    WEFT_WARN("ncclGroupEnd called without a matching ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--group.depth > 0) return ncclSuccess;
  /* Take the state first: jobs and launches may themselves use groups on this thread. */
  struct group_state done = group;
  group.jobs = NULL;
  group.comms = NULL;
  group.ncomms = group.comms_capacity = 0;
  group.error = ncclSuccess;
  for (int i = 0; i < done.ncomms; i++) done.comms[i]->in_group = 0;
  ncclResult_t res = run_jobs(done.jobs);
  ncclResult_t error = WEFT_FAILED(done.error) ? done.error : res;
  ncclResult_t launched = launch_comms(done.comms, done.ncomms, error);
  free(done.comms);
  if (WEFT_FAILED(error)) return error;
  return launched;
}

WEFT_API(ncclResult_t, ncclGroupStart, void) {
  weft_group_enter();
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclGroupEnd, void) { return weft_group_leave(); }
