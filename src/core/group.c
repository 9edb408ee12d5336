/* ncclGroupStart/End: per-thread nesting; at the outermost end, deferred jobs (grouped comm
 * inits) run concurrently, then each communicator with queued tasks is launched, several
 * communicators each on its own thread so that ranks driven by one thread make progress. */
#include "core/group.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "collectives/profiler.h"
#include "core/api.h"
#include "core/comm.h"
#include "util/check.h"

struct group_state {
  int depth;
  ncclResult_t error;
  struct weft_async_job* jobs;
  struct ncclComm** comms; /* few, or an allocation once a group holds more comms */
  int ncomms;
  int comms_capacity;
  struct ncclComm* few[4]; /* a group's comms without an allocation (every ungrouped call has one) */
};

/* Each entry point looks this up once (a call into the dynamic linker from a shared library)
 * and hands it to the helpers below: an ungrouped collective enters and leaves a group. */
static __thread struct group_state group;

int weft_group_depth(void) { return group.depth; }

void weft_group_enter(void) { group.depth++; }

static void set_error(struct group_state* g, ncclResult_t res) {
  if (g->error == ncclSuccess && WEFT_FAILED(res)) g->error = res;
}

void weft_group_set_error(ncclResult_t res) { set_error(&group, res); }

void weft_group_add_job(struct weft_async_job* job) {
  job->next = group.jobs;
  group.jobs = job;
}

static void add_comm(struct group_state* g, struct ncclComm* comm) {
  if (comm->in_group) return;
  if (g->comms == NULL) {
    g->comms = g->few;
    g->comms_capacity = (int)(sizeof(g->few) / sizeof(g->few[0]));
  }
  if (g->ncomms == g->comms_capacity) {
    int cap = 2 * g->comms_capacity;
    struct ncclComm** grown = realloc(g->comms == g->few ? NULL : g->comms, cap * sizeof(*grown));
    if (grown == NULL) {
      WEFT_WARN("Out of memory growing the group's communicator list");
      set_error(g, ncclSystemError);
      return;
    }
    if (g->comms == g->few) memcpy(grown, g->few, sizeof(g->few));
    g->comms = grown;
    g->comms_capacity = cap;
  }
  comm->in_group = 1;
  g->comms[g->ncomms++] = comm;
}

void weft_group_add_comm(struct ncclComm* comm) { add_comm(&group, comm); }

static ncclResult_t leave(struct group_state* g);

static ncclResult_t launch_comms(struct ncclComm** comms, int n, ncclResult_t error);

/* A call outside any group: nothing else is queued, so its own tasks launch at once, without the
 * group's lists. */
static ncclResult_t end_alone(struct group_state* g, struct ncclComm* comm, ncclResult_t res) {
  g->depth = 0;
  weft_prof_api_group_end(0);
  if (comm != NULL && WEFT_FAILED(res))
    weft_enqueue_discard(&comm->ctx);
  else if (comm != NULL && weft_comm_has_queued(&comm->ctx))
    res = launch_comms(&comm, 1, ncclSuccess);
  weft_prof_api_group_end(1);
  return res;
}

ncclResult_t weft_group_call_end(struct ncclComm* comm, ncclResult_t res) {
  struct group_state* g = &group;
  if (g->depth == 1 && g->ncomms == 0 && g->jobs == NULL && g->error == ncclSuccess)
    return end_alone(g, comm, res);
  if (comm != NULL && (WEFT_FAILED(res) || weft_comm_has_queued(&comm->ctx))) add_comm(g, comm);
  if (WEFT_FAILED(res)) set_error(g, res);
  ncclResult_t end = leave(g);
  return WEFT_FAILED(res) ? res : end;
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

static ncclResult_t launch_one(struct ncclComm* comm) {
  /* Read after launches_in_flight was raised: a concurrent ncclCommRevoke either waits for this
   * launch (and its abort flag stops it) or has already marked the comm, which is seen here. */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (__atomic_load_n(&comm->revoked, __ATOMIC_SEQ_CST)) {
    WEFT_WARN("comm %p rank %d was revoked while this group was queued; its operations are dropped",
              (void*)comm, comm->ctx.rank);
    weft_enqueue_discard(&comm->ctx);
    return ncclInvalidUsage;
  }
  ncclResult_t res = weft_enqueue_launch(&comm->ctx);
  if (WEFT_FAILED(res)) weft_comm_set_async_error(&comm->ctx, res);
  return res;
}

/* A comm launched beside others in one group gets a worker thread that stays for the comm's
 * life: one thread driving several comms (ncclCommInitAll style) would otherwise pay a thread
 * creation per comm on every ncclGroupEnd. */
struct weft_group_worker {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct ncclComm* comm;
  int pending, done, stop;
  ncclResult_t res;
};

static void* worker_main(void* arg) {
  struct weft_group_worker* w = arg;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->pending && !w->stop) pthread_cond_wait(&w->cond, &w->lock);
    if (w->stop) break;
    w->pending = 0;
    pthread_mutex_unlock(&w->lock);
    ncclResult_t res = launch_one(w->comm);
    pthread_mutex_lock(&w->lock);
    w->res = res;
    w->done = 1;
    pthread_cond_broadcast(&w->cond);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

static struct weft_group_worker* worker_get(struct ncclComm* comm) {
  if (comm->group_worker != NULL) return comm->group_worker;
  struct weft_group_worker* w = calloc(1, sizeof(*w));
  if (w == NULL) return NULL;
  w->comm = comm;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w);
    return NULL;
  }
  comm->group_worker = w;
  return w;
}

static void worker_post(struct weft_group_worker* w) {
  pthread_mutex_lock(&w->lock);
  w->done = 0;
  w->pending = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

static ncclResult_t worker_wait(struct weft_group_worker* w) {
  pthread_mutex_lock(&w->lock);
  while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
  ncclResult_t res = w->res;
  pthread_mutex_unlock(&w->lock);
  return res;
}

void weft_group_worker_destroy(struct ncclComm* comm) {
  struct weft_group_worker* w = comm->group_worker;
  if (w == NULL) return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_mutex_destroy(&w->lock);
  pthread_cond_destroy(&w->cond);
  free(w);
  comm->group_worker = NULL;
}

/* The first comm runs on the calling thread, the others on their workers. The in-flight count
 * covers the whole launch, so an abort from another thread waits until this thread is done
 * with the workers. */
static ncclResult_t launch_comms(struct ncclComm** comms, int n, ncclResult_t error) {
  if (n == 0) return ncclSuccess;
  if (WEFT_FAILED(error)) {
    for (int i = 0; i < n; i++) weft_enqueue_discard(&comms[i]->ctx);
    return error;
  }
  /* Workers for comms 1..n-1: none (and no allocation) for one comm, every ungrouped call. */
  struct weft_group_worker** workers = n > 1 ? calloc(n, sizeof(*workers)) : NULL;
  if (n > 1 && workers == NULL) {
    for (int i = 0; i < n; i++) weft_enqueue_discard(&comms[i]->ctx);
    return ncclSystemError;
  }
  for (int i = 0; i < n; i++) __atomic_add_fetch(&comms[i]->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  int missing = 0;
  for (int i = 1; i < n; i++) missing |= (workers[i] = worker_get(comms[i])) == NULL;
  ncclResult_t res = ncclSuccess;
  if (missing) {
    WEFT_WARN("Could not start a launch thread for a group of %d communicators", n);
    for (int i = 0; i < n; i++) weft_enqueue_discard(&comms[i]->ctx);
    res = ncclSystemError;
  } else {
    for (int i = 1; i < n; i++) worker_post(workers[i]);
    res = launch_one(comms[0]);
    for (int i = 1; i < n; i++) {
      ncclResult_t r = worker_wait(workers[i]);
      if (!WEFT_FAILED(res)) res = r;
    }
  }
  for (int i = 0; i < n; i++) __atomic_sub_fetch(&comms[i]->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  free(workers);
  return res;
}

/* Ends the outermost group: takes this thread's group state first (jobs and launches may
 * themselves use groups on this thread), runs the deferred jobs, and returns the group's error
 * (a latched one, else the jobs'). The caller launches or simulates done->comms, then frees them. */
static ncclResult_t end_outermost(struct group_state* g, struct group_state* done) {
  *done = *g;
  if (done->comms == g->few) done->comms = done->few;
  g->jobs = NULL;
  g->comms = NULL;
  g->ncomms = g->comms_capacity = 0;
  g->error = ncclSuccess;
  for (int i = 0; i < done->ncomms; i++) done->comms[i]->in_group = 0;
  ncclResult_t res = run_jobs(done->jobs);
  return WEFT_FAILED(done->error) ? done->error : res;
}

static void end_done(struct group_state* done) {
  if (done->comms != done->few) free(done->comms);
}

static ncclResult_t leave(struct group_state* g) {
  if (g->depth == 0) {
    WEFT_WARN("ncclGroupEnd called without a matching ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--g->depth > 0) return ncclSuccess;
  struct group_state done;
  weft_prof_api_group_end(0);
  ncclResult_t error = end_outermost(g, &done);
  ncclResult_t launched = launch_comms(done.comms, done.ncomms, error);
  weft_prof_api_group_end(1);
  end_done(&done);
  if (WEFT_FAILED(error)) return error;
  return launched;
}

ncclResult_t weft_group_leave(void) { return leave(&group); }

/* Each comm's queued collectives add up; comms of one group run side by side, so the group takes
 * as long as its slowest comm. Every comm's queue is dropped, whatever fails. The in-flight count
 * keeps an abort from another thread from freeing a comm's planner state under the prediction. */
static ncclResult_t simulate_comms(struct ncclComm** comms, int n, ncclResult_t error, float* time_us) {
  *time_us = 0;
  ncclResult_t res = error;
  for (int i = 0; i < n; i++) {
    if (WEFT_FAILED(res)) {
      weft_enqueue_discard(&comms[i]->ctx);
      continue;
    }
    float us = 0;
    __atomic_add_fetch(&comms[i]->launches_in_flight, 1, __ATOMIC_ACQ_REL);
    res = weft_enqueue_simulate(&comms[i]->ctx, &us);
    __atomic_sub_fetch(&comms[i]->launches_in_flight, 1, __ATOMIC_ACQ_REL);
    if (us > *time_us) *time_us = us;
  }
  return res;
}

/* Read size first: a caller's older, smaller struct must not be read past its end. */
static ncclResult_t check_sim_info(const ncclSimInfo_t* info) {
  if (info == NULL) {
    WEFT_WARN(
        "ncclGroupSimulateEnd: simInfo is NULL (initialize an ncclSimInfo_t with NCCL_SIM_INFO_INITIALIZER)");
    return ncclInvalidArgument;
  }
  if (info->size < sizeof(ncclSimInfo_t)) {
    WEFT_WARN(
        "ncclGroupSimulateEnd: simInfo->size is %zu, smaller than ncclSimInfo_t (%zu bytes); initialize it "
        "with NCCL_SIM_INFO_INITIALIZER",
        info->size, sizeof(ncclSimInfo_t));
    return ncclInvalidArgument;
  }
  const ncclSimInfo_t init = NCCL_SIM_INFO_INITIALIZER; /* the magic NCCL's header defines */
  if (info->magic != init.magic) {
    WEFT_WARN(
        "ncclGroupSimulateEnd: simInfo->magic is 0x%x, not 0x%x; initialize it with "
        "NCCL_SIM_INFO_INITIALIZER",
        info->magic, init.magic);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* As NCCL: outside a group it is a usage error; an inner level only closes that level (the
 * outer ncclGroupEnd still runs the operations); a bad simInfo fails the group like any error
 * inside it, so its operations are dropped. */
ncclResult_t weft_group_simulate_end(ncclSimInfo_t* info) {
  struct group_state* g = &group;
  if (g->depth == 0) {
    WEFT_WARN("ncclGroupSimulateEnd called without a matching ncclGroupStart");
    return ncclInvalidUsage;
  }
  ncclResult_t bad = check_sim_info(info);
  if (WEFT_FAILED(bad)) {
    set_error(g, bad);
    leave(g);
    return bad;
  }
  if (--g->depth > 0) {
    WEFT_INFO(WEFT_TUNING, "ncclGroupSimulateEnd inside a nested group closes one level; nothing simulated");
    return ncclSuccess;
  }
  struct group_state done;
  weft_prof_api_group_end(0);
  ncclResult_t error = end_outermost(g, &done);
  float us = 0;
  ncclResult_t res = simulate_comms(done.comms, done.ncomms, error, &us);
  weft_prof_api_group_end(1);
  end_done(&done);
  if (WEFT_FAILED(res)) return res;
  info->estimatedTime = us;
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclGroupStart, void) {
  weft_group_enter();
  return ncclSuccess;
}

WEFT_API(ncclResult_t, ncclGroupEnd, void) { return weft_group_leave(); }

WEFT_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return weft_group_simulate_end(simInfo);
}
