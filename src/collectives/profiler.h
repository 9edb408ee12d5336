/* Profiler plugin events of one communicator (NCCL's profiler ABI, collectives/profiler_abi.h):
 * a Group event per launch, inside it a Coll event per collective and a P2p event per send or
 * receive, and on the host backend a KernelCh event per channel a collective runs on.
 * comm->prof is NULL without a plugin: every hook below is then one predictable branch. */
#ifndef WEFT_COLLECTIVES_PROFILER_H
#define WEFT_COLLECTIVES_PROFILER_H

#include <stdint.h>

#include "collectives/profiler_load.h"
#include "collectives/task.h"
#include "nccl.h"
#include "proxy/watch.h"

struct weft_comm_ctx;

#define WEFT_PROF_CHANNELS 4 /* WEFT_PLAN_MAX_CHANNELS, without plan.h (graph.h users include this) */
#define WEFT_PROF_STEPS 8    /* WEFT_NSTEPS: a connector's steps in flight at once */

struct weft_conn;

/* One ProxyOp: the proxy's work for the running collective on one network connector of one
 * channel. Written by the executor at open, then by the proxy thread through the watch. */
struct weft_prof_pop {
  struct weft_proxy_watch w; /* first: the watch's callback finds the rest from it */
  struct weft_prof* p;
  const struct weft_conn* conn; /* the executor's side, for the step count at close */
  void* parent;                 /* the Coll event */
  int channel, is_send, steps_wanted;
  void* op;
  void* steps[WEFT_PROF_STEPS];
};

/* Only the thread running the comm's launch touches it (one launch at a time per comm). */
struct weft_prof {
  void* ctx;
  int mask;   /* the plugin's activation mask: it may change it later through the pointer init got */
  int active; /* the mask this launch runs with, read once at its Group */
  int rank;
  struct weft_prof_ident id;
  void* group;                    /* this launch's Group event */
  void* coll;                     /* the running collective's event, NULL: not started */
  const struct weft_task* cur;    /* the running collective; NULL between collectives */
  uint64_t cur_seq;               /* its number among its function's calls */
  void* chan[WEFT_PROF_CHANNELS]; /* its KernelCh events */
  uint64_t seq[WEFT_COLL_COUNT];  /* collectives per function, numbered from 0 as NCCL does */
  void* launch;                   /* CUDA: the KernelLaunch event */
  /* ProxyOp records: WEFT_PROXY_WATCHES per connector of a channel, reused once the proxy is done. */
  struct weft_prof_pop pops[WEFT_PROF_CHANNELS][2][WEFT_PROXY_WATCHES];
  struct weft_prof_pop* open_pops[WEFT_PROF_CHANNELS][2]; /* the running collective's */
};

/* At init (comm hash, ranks and nodes known): loads the plugin, calls its init. Never fails:
 * without a plugin, or when its init fails, comm->prof stays NULL. */
void weft_prof_create(struct weft_comm_ctx* comm);
void weft_prof_destroy(struct weft_comm_ctx* comm); /* finalize; NULL-safe */

void weft_prof_group_begin_(struct weft_prof* p);
void weft_prof_group_end_(struct weft_prof* p);
void weft_prof_coll_queue_(struct weft_prof* p, const struct weft_task* t);
void weft_prof_coll_path_(struct weft_prof* p, const char* algo, const char* proto, int nchannels);
void weft_prof_coll_done_(struct weft_prof* p);
void weft_prof_task_start_(struct weft_prof* p, struct weft_task* t, const char* algo, const char* proto,
                           int nchannels);
void weft_prof_task_stop_(struct weft_prof* p, struct weft_task* t);
void weft_prof_chan_begin_(struct weft_prof* p, int channel);
void weft_prof_chan_end_(struct weft_prof* p, int channel);

/* API-level events (v5 on), per thread: a GroupApi event from the first call queued in a group
 * (explicit or the call's implicit one) to the end of the outermost group, and a CollApi or
 * P2pApi event around the queueing of each call, the parent of its tasks' Coll and P2p events. */
extern __thread int weft_prof_api_open; /* a GroupApi is open on this thread */
void weft_prof_api_call_begin_(struct weft_prof* p, const char* root_name, const char* func, size_t count,
                               ncclDataType_t dtype, int root, void* stream);
void weft_prof_api_call_end_(void);
void weft_prof_api_tag_(struct weft_task* t);
void weft_prof_api_group_end_(int launched);

#define WEFT_PROF_ON(p) __builtin_expect((p) != NULL, 0)
/* root_name: the call's root argument's name ("peer" for send and receive; NULL: none). */
static inline void weft_prof_api_call_begin(struct weft_prof* p, const char* root_name, const char* func,
                                            size_t count, ncclDataType_t dtype, int root, void* stream) {
  if (WEFT_PROF_ON(p)) weft_prof_api_call_begin_(p, root_name, func, count, dtype, root, stream);
}
static inline void weft_prof_api_call_end(struct weft_prof* p) {
  if (WEFT_PROF_ON(p)) weft_prof_api_call_end_();
}
/* A task queued by the current call takes its API events as parents. */
static inline void weft_prof_api_tag(struct weft_prof* p, struct weft_task* t) {
  if (WEFT_PROF_ON(p)) weft_prof_api_tag_(t);
}
/* The outermost group ends: launched 0 before its launch (GroupEndApiStart), 1 after (stop). */
static inline void weft_prof_api_group_end(int launched) {
  if (__builtin_expect(weft_prof_api_open, 0)) weft_prof_api_group_end_(launched);
}
/* Host rings over the network: the running collective's ProxyOp and ProxyStep events on channel's
 * connectors (either may be NULL or not a network one), reported by the proxy thread until the
 * collective is done (weft_prof_coll_done closes them). */
void weft_prof_proxy_open_(struct weft_prof* p, int channel, const struct weft_conn* send,
                           const struct weft_conn* recv);
static inline void weft_prof_proxy_open(struct weft_prof* p, int channel, const struct weft_conn* send,
                                        const struct weft_conn* recv) {
  if (WEFT_PROF_ON(p)) weft_prof_proxy_open_(p, channel, send, recv);
}
void weft_prof_proxy_close(struct weft_prof* p); /* every open one, at the collective's end */

/* CUDA: the KernelLaunch event around the launch of tasks. */
void weft_prof_launch_begin(struct weft_prof* p, const struct weft_task* tasks);
void weft_prof_launch_end(struct weft_prof* p);
/* Launch: the Group event around all of one comm's tasks of a group. */
static inline void weft_prof_group_begin(struct weft_prof* p) {
  if (WEFT_PROF_ON(p)) weft_prof_group_begin_(p);
}
static inline void weft_prof_group_end(struct weft_prof* p) {
  if (WEFT_PROF_ON(p)) weft_prof_group_end_(p);
}
/* Host collectives: queue names the one about to run; its Coll event starts once the path is
 * known (path: ring or tree before they run, the shared-board paths once they are chosen), and
 * done stops it (and its channels' events) however it ended. */
static inline void weft_prof_coll_queue(struct weft_prof* p, const struct weft_task* t) {
  if (WEFT_PROF_ON(p)) weft_prof_coll_queue_(p, t);
}
static inline void weft_prof_coll_path(struct weft_prof* p, const char* algo, const char* proto,
                                       int nchannels) {
  if (WEFT_PROF_ON(p)) weft_prof_coll_path_(p, algo, proto, nchannels);
}
static inline void weft_prof_coll_done(struct weft_prof* p) {
  if (WEFT_PROF_ON(p)) weft_prof_coll_done_(p);
}
/* Events held in the task: point-to-point on the host; on CUDA every task's, started as the launch
 * plans it (algo, proto: a collective's, NULL for point-to-point) and stopped once it is launched. */
static inline void weft_prof_task_start(struct weft_prof* p, struct weft_task* t, const char* algo,
                                        const char* proto, int nchannels) {
  if (WEFT_PROF_ON(p)) weft_prof_task_start_(p, t, algo, proto, nchannels);
}
static inline void weft_prof_task_stop(struct weft_prof* p, struct weft_task* t) {
  if (WEFT_PROF_ON(p)) weft_prof_task_stop_(p, t);
}
/* The host executor's channels of the running collective. */
static inline void weft_prof_chan_begin(struct weft_prof* p, int channel) {
  if (WEFT_PROF_ON(p)) weft_prof_chan_begin_(p, channel);
}
static inline void weft_prof_chan_end(struct weft_prof* p, int channel) {
  if (WEFT_PROF_ON(p)) weft_prof_chan_end_(p, channel);
}

#endif
