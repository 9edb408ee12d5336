/* Loading the profiler plugin and speaking each ABI version to it (profiler_load.h). */
#include "collectives/profiler_load.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"
#include "util/param.h"
#include "util/plugin_lib.h"

enum { LOAD_READY, LOAD_DONE, LOAD_FAILED };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int status = LOAD_READY, refs;
static void* handle;   /* the plugin's library, NULL when none is loaded */
static char path[512]; /* the file it opened from */
static int version;
static union {
  const ncclProfiler_v6_t* v6; /* v5 as well: the same table */
  const ncclProfiler_v4_t* v4;
  const ncclProfiler_v3_t* v3; /* v2 as well, but for startEvent's descriptor */
  const ncclProfiler_v2_t* v2;
} api;

/* Newest first, as NCCL negotiates. */
static const struct {
  const char* symbol;
  int version;
} symbols[] = {{"ncclProfiler_v6", 6},
               {"ncclProfiler_v5", 5},
               {"ncclProfiler_v4", 4},
               {"ncclProfiler_v3", 3},
               {"ncclProfiler_v2", 2}};

static int find_table(const char* value) {
  for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
    const void* t = weft_plugin_lib_sym(handle, symbols[i].symbol);
    if (t == NULL) continue;
    api.v6 = t;
    version = symbols[i].version;
    return 1;
  }
  if (value != NULL)
    WEFT_WARN(
        "PROFILER/Plugin: %s exports none of ncclProfiler_v6, _v5, _v4, _v3, _v2; continuing without a "
        "profiler",
        path);
  else
    WEFT_INFO(WEFT_INIT, "PROFILER/Plugin: %s exports no ncclProfiler_v2.._v6; no profiler", path);
  return 0;
}

/* Under lock. A named plugin that is missing WARNs (NCCL only logs it at INFO); the default
 * libnccl-profiler.so being absent is the normal case and stays quiet. */
static int load(void) {
  const char* value = weft_param_str("NCCL_PROFILER_PLUGIN");
  if (value != NULL && value[0] == 0) value = NULL;
  if (value != NULL) WEFT_INFO(WEFT_ENV, "NCCL_PROFILER_PLUGIN set by environment to %s", value);
  if (value != NULL && strcasecmp(value, "none") == 0) return 0;
  handle = weft_plugin_lib_open("PROFILER", WEFT_INIT, "libnccl-profiler", value, path, sizeof(path));
  if (handle == NULL) {
    if (value != NULL)
      WEFT_WARN(
          "PROFILER/Plugin: could not load %s (the names tried are logged at INFO); continuing without a "
          "profiler",
          value);
    return 0;
  }
  if (!find_table(value)) {
    weft_plugin_lib_close(handle);
    handle = NULL;
    return 0;
  }
  WEFT_INFO(WEFT_INIT, "PROFILER/Plugin: Loaded %s (v%d) from %s", api.v6->name ? api.v6->name : "?", version,
            path);
  return 1;
}

int weft_prof_plugin_acquire(void) {
  pthread_mutex_lock(&lock);
  if (status == LOAD_READY) status = load() ? LOAD_DONE : LOAD_FAILED;
  int ok = status == LOAD_DONE;
  if (ok) refs++;
  pthread_mutex_unlock(&lock);
  return ok;
}

void weft_prof_plugin_release(void) {
  pthread_mutex_lock(&lock);
  if (status == LOAD_DONE && --refs == 0) {
    WEFT_INFO(WEFT_INIT, "PROFILER/Plugin: closing %s", api.v6->name ? api.v6->name : path);
    weft_plugin_lib_close(handle);
    handle = NULL;
    api.v6 = NULL;
    status = LOAD_READY; /* a later communicator loads it again, as NCCL does */
  }
  pthread_mutex_unlock(&lock);
}

int weft_prof_plugin_version(void) { return version; }
const char* weft_prof_plugin_name(void) { return api.v6 && api.v6->name ? api.v6->name : "?"; }

ncclResult_t weft_prof_plugin_init(void** ctx, int* mask, const char* comm_name, uint64_t comm_hash,
                                   int nnodes, int nranks, int rank) {
  if (version >= 5)
    return api.v6->init(ctx, comm_hash, mask, comm_name, nnodes, nranks, rank, weft_plugin_log);
  if (version == 4)
    return api.v4->init(ctx, mask, comm_name, comm_hash, nnodes, nranks, rank, weft_plugin_log);
  return api.v3->init(ctx, mask);
}

void weft_prof_plugin_finalize(void* ctx) {
  if (version >= 5)
    api.v6->finalize(ctx);
  else if (version == 4)
    api.v4->finalize(ctx);
  else
    api.v3->finalize(ctx);
}

/* v4: a one-byte type, and a Coll's or P2p's parent is its Group (v5 moved that to parentGroup). */
static int to_v4(const ncclProfilerEventDescr_v6_t* d, ncclProfilerEventDescr_v4_t* o) {
  memset(o, 0, sizeof(*o));
  o->type = (uint8_t)d->type;
  o->parentObj = d->parentObj;
  o->rank = d->rank;
  switch (d->type) {
    case ncclProfileGroup:
      return 1;
    case ncclProfileColl:
      memcpy(&o->coll, &d->coll, sizeof(o->coll)); /* v4's members are v5's first ones */
      o->parentObj = d->coll.parentGroup;
      return 1;
    case ncclProfileP2p:
      memcpy(&o->p2p, &d->p2p, sizeof(o->p2p));
      o->parentObj = d->p2p.parentGroup;
      return 1;
    case ncclProfileKernelCh:
      o->kernelCh.channelId = d->kernelCh.channelId;
      o->kernelCh.pTimer = d->kernelCh.pTimer;
      return 1;
    case ncclProfileProxyOp:
      o->proxyOp = d->proxyOp;
      return 1;
    case ncclProfileProxyStep:
      o->proxyStep.step = d->proxyStep.step;
      return 1;
    default:
      return 0; /* API-level events came with v5 */
  }
}

/* v3: Coll and P2p name their communicator themselves. */
static int to_v3(const ncclProfilerEventDescr_v6_t* d, ncclProfilerEventDescr_v3_t* o,
                 const struct weft_prof_ident* id) {
  memset(o, 0, sizeof(*o));
  o->type = (uint8_t)d->type;
  o->parentObj = d->parentObj;
  o->rank = d->rank;
  switch (d->type) {
    case ncclProfileGroup:
      return 1;
    case ncclProfileColl:
      o->coll.name = id->comm_name;
      o->coll.commHash = id->comm_hash;
      o->coll.seqNumber = d->coll.seqNumber;
      o->coll.func = d->coll.func;
      o->coll.sendBuff = d->coll.sendBuff;
      o->coll.recvBuff = d->coll.recvBuff;
      o->coll.count = d->coll.count;
      o->coll.root = d->coll.root;
      o->coll.datatype = d->coll.datatype;
      o->coll.nMaxChannels = d->coll.nChannels;
      o->coll.nWarps = d->coll.nWarps;
      o->coll.algo = d->coll.algo;
      o->coll.proto = d->coll.proto;
      o->parentObj = d->coll.parentGroup;
      return 1;
    case ncclProfileP2p:
      o->p2p.name = id->comm_name;
      o->p2p.commHash = id->comm_hash;
      o->p2p.func = d->p2p.func;
      o->p2p.buff = d->p2p.buff;
      o->p2p.datatype = d->p2p.datatype;
      o->p2p.count = d->p2p.count;
      o->p2p.peer = d->p2p.peer;
      o->parentObj = d->p2p.parentGroup;
      return 1;
    case ncclProfileKernelCh:
      o->kernelCh.channelId = d->kernelCh.channelId;
      return 1;
    case ncclProfileProxyOp:
      o->proxyOp = d->proxyOp;
      return 1;
    case ncclProfileProxyStep:
      o->proxyStep.step = d->proxyStep.step;
      return 1;
    default:
      return 0;
  }
}

/* v2: v3's layout with the traffic in bytes (0, as NCCL gives it), and no KernelCh events. */
static int to_v2(const ncclProfilerEventDescr_v6_t* d, ncclProfilerEventDescr_v2_t* o,
                 const struct weft_prof_ident* id) {
  ncclProfilerEventDescr_v3_t v3;
  if (d->type == ncclProfileKernelCh || !to_v3(d, &v3, id)) return 0;
  memset(o, 0, sizeof(*o));
  o->type = v3.type;
  o->parentObj = v3.parentObj;
  o->rank = v3.rank;
  if (d->type == ncclProfileColl) {
    o->coll.name = v3.coll.name;
    o->coll.commHash = v3.coll.commHash;
    o->coll.seqNumber = v3.coll.seqNumber;
    o->coll.func = v3.coll.func;
    o->coll.sendBuff = v3.coll.sendBuff;
    o->coll.recvBuff = v3.coll.recvBuff;
    o->coll.count = v3.coll.count;
    o->coll.root = v3.coll.root;
    o->coll.datatype = v3.coll.datatype;
    o->coll.nMaxChannels = v3.coll.nMaxChannels;
    o->coll.nWarps = v3.coll.nWarps;
    o->coll.algo = v3.coll.algo;
    o->coll.proto = v3.coll.proto;
  } else if (d->type == ncclProfileP2p) {
    memcpy(&o->p2p, &v3.p2p, sizeof(o->p2p)); /* the same members in the same order */
  } else if (d->type == ncclProfileProxyOp) {
    o->proxyOp = v3.proxyOp;
  } else if (d->type == ncclProfileProxyStep) {
    o->proxyStep.step = v3.proxyStep.step;
  }
  return 1;
}

/* Plugins' errors are theirs: an event that failed to start simply has no handle. */
void weft_prof_plugin_start(void* ctx, void** handle, ncclProfilerEventDescr_v6_t* d,
                            const struct weft_prof_ident* id) {
  *handle = NULL;
  if (version >= 5) {
    if (version == 5 && d->type >= ncclProfileCeColl) return;
    api.v6->startEvent(ctx, handle, d);
  } else if (version == 4) {
    ncclProfilerEventDescr_v4_t o;
    if (to_v4(d, &o)) api.v4->startEvent(ctx, handle, &o);
  } else if (version == 3) {
    ncclProfilerEventDescr_v3_t o;
    if (to_v3(d, &o, id)) api.v3->startEvent(ctx, handle, &o);
  } else {
    ncclProfilerEventDescr_v2_t o;
    if (to_v2(d, &o, id)) api.v2->startEvent(ctx, handle, &o);
  }
}

void weft_prof_plugin_stop(void* handle) {
  if (handle == NULL) return;
  if (version >= 5)
    api.v6->stopEvent(handle);
  else if (version == 4)
    api.v4->stopEvent(handle);
  else
    api.v3->stopEvent(handle);
}

/* v3 knows no KernelChStop (its kernel events carry no timer) nor the later states. */
void weft_prof_plugin_record(void* handle, ncclProfilerEventState_t state,
                             ncclProfilerEventStateArgs_v6_t* args) {
  if (handle == NULL) return;
  if (version >= 5) {
    api.v6->recordEventState(handle, state, args);
  } else if (version == 4) {
    if (state == ncclProfilerGroupStartApiStop || state == ncclProfilerGroupEndApiStart) return;
    api.v4->recordEventState(handle, state, args);
  } else if (state < ncclProfilerProxyOpInProgress_v4) {
    ncclProfilerEventStateArgs_v3_t o;
    memset(&o, 0, sizeof(o));
    o.proxyOp.transSize = args ? args->proxyStep.transSize : 0;
    api.v3->recordEventState(handle, state, &o);
  }
}
