/* One communicator's profiler events (profiler.h): descriptors filled from the task being run,
 * handed to the plugin through profiler_load.c. */
#include "collectives/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/plan.h"
#include "util/log.h"
#include "util/time.h"

/* What needs a Group, Coll, P2p event: the type itself or an event type that hangs below it. */
#define BELOW_TASK (ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin)
#define WANT_GROUP (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | BELOW_TASK)
#define WANT_COLL (ncclProfileColl | BELOW_TASK)
#define WANT_P2P (ncclProfileP2p | BELOW_TASK)

_Static_assert(WEFT_PROF_CHANNELS == WEFT_PLAN_MAX_CHANNELS, "one KernelCh slot per planned channel");

static const char* dtype_name(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "Unknown";
  }
}

static void log_mask(const struct weft_comm_ctx* comm, int mask) {
  static const char* const names[] = {"Group",     "Coll",      "P2p",      "ProxyOp",
                                      "ProxyStep", "ProxyCtrl", "KernelCh", "NetPlugin",
                                      "GroupApi",  "CollApi",   "P2pApi",   "KernelLaunch"};
  char text[160] = "";
  size_t n = 0;
  for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])) && n < sizeof(text); i++)
    if (mask & (1 << i)) n += snprintf(text + n, sizeof(text) - n, " %s", names[i]);
  WEFT_INFO(WEFT_INIT, "comm %p rank %d: profiler %s (v%d) event mask 0x%x:%s", (void*)comm, comm->rank,
            weft_prof_plugin_name(), weft_prof_plugin_version(), mask, n ? text : " none");
}

void weft_prof_create(struct weft_comm_ctx* comm) {
  comm->prof = NULL;
  if (!weft_prof_plugin_acquire()) return;
  struct weft_prof* p = calloc(1, sizeof(*p));
  if (p == NULL) {
    WEFT_WARN("comm %p rank %d: no memory for the profiler's state; continuing without it", (void*)comm,
              comm->rank);
    weft_prof_plugin_release();
    return;
  }
  p->rank = comm->rank;
  p->id.comm_name = comm->config.commName;
  p->id.comm_hash = comm->comm_hash;
  ncclResult_t res = weft_prof_plugin_init(&p->ctx, &p->mask, comm->config.commName, comm->comm_hash,
                                           comm->nnodes, comm->nranks, comm->rank);
  if (res != ncclSuccess) {
    /* As NCCL: the job goes on without the profiler (INFO there; a WARN is more useful). */
    WEFT_WARN("comm %p rank %d: profiler %s init returned %d; continuing without it", (void*)comm, comm->rank,
              weft_prof_plugin_name(), (int)res);
    free(p);
    weft_prof_plugin_release();
    return;
  }
  log_mask(comm, p->mask);
  comm->prof = p;
}

void weft_prof_destroy(struct weft_comm_ctx* comm) {
  if (comm == NULL || comm->prof == NULL) return;
  struct weft_prof* p = comm->prof;
  comm->prof = NULL;
  if (p->ctx != NULL) weft_prof_plugin_finalize(p->ctx);
  free(p);
  weft_prof_plugin_release();
}

static void start(struct weft_prof* p, void** h, ncclProfilerEventDescr_v6_t* d) {
  d->rank = p->rank;
  weft_prof_plugin_start(p->ctx, h, d, &p->id);
}

static void stop(void** h) {
  weft_prof_plugin_stop(*h);
  *h = NULL;
}

void weft_prof_group_begin_(struct weft_prof* p) {
  p->active = __atomic_load_n(&p->mask, __ATOMIC_RELAXED);
  p->group = NULL;
  if (!(p->active & WANT_GROUP)) return;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileGroup;
  start(p, &p->group, &d);
}

void weft_prof_group_end_(struct weft_prof* p) { stop(&p->group); }

static int is_p2p(const struct weft_task* t) {
  return t->coll == WEFT_COLL_SEND || t->coll == WEFT_COLL_RECV;
}

static void coll_descr(struct weft_prof* p, const struct weft_task* t, uint64_t seq, const char* algo,
                       const char* proto, int nchannels, ncclProfilerEventDescr_v6_t* d) {
  memset(d, 0, sizeof(*d));
  d->type = ncclProfileColl;
  d->coll.seqNumber = seq;
  d->coll.func = weft_coll_name(t->coll);
  d->coll.sendBuff = t->sendbuff;
  d->coll.recvBuff = t->recvbuff;
  d->coll.count = t->count;
  d->coll.root = t->root;
  d->coll.datatype = dtype_name(t->dtype);
  d->coll.nChannels = (uint8_t)nchannels;
  d->coll.algo = algo;
  d->coll.proto = proto;
  d->coll.parentGroup = p->group;
  d->parentObj = t->prof_api;
}

static void p2p_descr(struct weft_prof* p, const struct weft_task* t, ncclProfilerEventDescr_v6_t* d) {
  memset(d, 0, sizeof(*d));
  d->type = ncclProfileP2p;
  d->p2p.func = weft_coll_name(t->coll);
  d->p2p.buff = t->coll == WEFT_COLL_SEND ? (void*)t->sendbuff : t->recvbuff;
  d->p2p.datatype = dtype_name(t->dtype);
  d->p2p.count = t->count;
  d->p2p.peer = t->root;
  d->p2p.nChannels = 1;
  d->p2p.parentGroup = p->group;
  d->parentObj = t->prof_api;
}

void weft_prof_coll_queue_(struct weft_prof* p, const struct weft_task* t) {
  p->cur = t;
  p->coll = NULL;
  p->cur_seq = p->seq[t->coll]++; /* counted whether or not the event is wanted, as NCCL does */
}

void weft_prof_coll_path_(struct weft_prof* p, const char* algo, const char* proto, int nchannels) {
  if (p->cur == NULL || p->coll != NULL || !(p->active & WANT_COLL)) return;
  ncclProfilerEventDescr_v6_t d;
  coll_descr(p, p->cur, p->cur_seq, algo, proto, nchannels, &d);
  start(p, &p->coll, &d);
}

void weft_prof_coll_done_(struct weft_prof* p) {
  /* A collective that failed before choosing a path still gets its (empty) event: a plugin
   * counting calls should see every one. */
  if (p->cur != NULL && p->coll == NULL) weft_prof_coll_path_(p, "Unknown", "Unknown", 0);
  for (int c = 0; c < WEFT_PROF_CHANNELS; c++) weft_prof_chan_end_(p, c);
  weft_prof_proxy_close(p);
  stop(&p->coll);
  p->cur = NULL;
}

void weft_prof_task_start_(struct weft_prof* p, struct weft_task* t, const char* algo, const char* proto,
                           int nchannels) {
  ncclProfilerEventDescr_v6_t d;
  t->prof_ev = NULL;
  if (is_p2p(t)) {
    if (!(p->active & WANT_P2P)) return;
    p2p_descr(p, t, &d);
  } else {
    uint64_t seq = p->seq[t->coll]++;
    if (!(p->active & WANT_COLL)) return;
    coll_descr(p, t, seq, algo, proto, nchannels, &d);
  }
  start(p, &t->prof_ev, &d);
}

void weft_prof_task_stop_(struct weft_prof* p, struct weft_task* t) {
  (void)p;
  stop(&t->prof_ev);
}

/* The host has no GPU timer: the channel's start and stop times are CLOCK_MONOTONIC ns. */
void weft_prof_chan_begin_(struct weft_prof* p, int channel) {
  if (p->coll == NULL || !(p->active & ncclProfileKernelCh) || channel < 0 || channel >= WEFT_PROF_CHANNELS)
    return;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileKernelCh;
  d.parentObj = p->coll;
  d.kernelCh.channelId = (uint8_t)channel;
  d.kernelCh.pTimer = weft_time_ns();
  start(p, &p->chan[channel], &d);
}

void weft_prof_chan_end_(struct weft_prof* p, int channel) {
  if (channel < 0 || channel >= WEFT_PROF_CHANNELS || p->chan[channel] == NULL) return;
  ncclProfilerEventStateArgs_v6_t a;
  memset(&a, 0, sizeof(a));
  a.kernelCh.pTimer = weft_time_ns();
  weft_prof_plugin_record(p->chan[channel], ncclProfilerKernelChStop, &a);
  stop(&p->chan[channel]);
}

/* The thread's API-level state: events of one group, owned by the comm of its first call. */
__thread int weft_prof_api_open;
static __thread struct {
  struct weft_prof* owner;
  void* group; /* GroupApi */
  void* call;  /* the CollApi / P2pApi of the call being queued */
  int mask;    /* the owner's mask when the group's first call came */
} api;

#define WANT_GROUP_API                                                                                   \
  (ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch | WANT_GROUP | \
   ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch)
#define WANT_COLL_API \
  (ncclProfileCollApi | WANT_COLL | ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch)
#define WANT_P2P_API (ncclProfileP2pApi | WANT_P2P)

int weft_group_depth(void); /* core/group.c: this thread's group nesting */

static void api_group_open(struct weft_prof* p) {
  weft_prof_api_open = 1;
  api.owner = p;
  api.group = NULL;
  api.mask = __atomic_load_n(&p->mask, __ATOMIC_RELAXED);
  if (!(api.mask & WANT_GROUP_API)) return;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileGroupApi;
  d.groupApi.groupDepth = weft_group_depth();
  start(p, &api.group, &d);
  weft_prof_plugin_record(api.group, ncclProfilerGroupStartApiStop, NULL);
}

void weft_prof_api_call_begin_(struct weft_prof* p, const char* root_name, const char* func, size_t count,
                               ncclDataType_t dtype, int root, void* stream) {
  /* Worked out here, with a plugin loaded, not on every call's path. */
  int p2p = root_name != NULL && strcmp(root_name, "peer") == 0;
  if (!weft_prof_api_open) api_group_open(p);
  api.call = NULL;
  if (!(api.mask & (p2p ? WANT_P2P_API : WANT_COLL_API))) return;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.parentObj = api.group;
  if (p2p) {
    d.type = ncclProfileP2pApi;
    d.p2pApi.func = func;
    d.p2pApi.count = count;
    d.p2pApi.datatype = dtype_name(dtype);
    d.p2pApi.stream = stream;
  } else {
    d.type = ncclProfileCollApi;
    d.collApi.func = func;
    d.collApi.count = count;
    d.collApi.datatype = dtype_name(dtype);
    d.collApi.root = root;
    d.collApi.stream = stream;
  }
  start(p, &api.call, &d);
}

/* The call's event ends once its tasks are queued (as in NCCL): the Coll events below it come
 * later, at the launch, and name it as a parent that has already stopped. */
void weft_prof_api_call_end_(void) { weft_prof_plugin_stop(api.call); }

void weft_prof_api_tag_(struct weft_task* t) {
  t->prof_api = weft_prof_api_open ? api.call : NULL;
  t->prof_gapi = weft_prof_api_open ? api.group : NULL;
}

void weft_prof_api_group_end_(int launched) {
  if (!launched) {
    weft_prof_plugin_record(api.group, ncclProfilerGroupEndApiStart, NULL);
    return;
  }
  weft_prof_plugin_stop(api.group);
  memset(&api, 0, sizeof(api));
  weft_prof_api_open = 0;
}

void weft_prof_launch_begin(struct weft_prof* p, const struct weft_task* tasks) {
  p->launch = NULL;
  if (!(p->active & ncclProfileKernelLaunch) || tasks == NULL) return;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileKernelLaunch;
  d.parentObj = tasks->prof_gapi;
  d.kernelLaunch.stream = (void*)tasks->stream;
  start(p, &p->launch, &d);
}

void weft_prof_launch_end(struct weft_prof* p) { stop(&p->launch); }
