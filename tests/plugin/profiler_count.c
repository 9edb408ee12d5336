/* A profiler plugin for the tests, built as its own .so (mk/profiler.mk) and loaded through
 * NCCL_PROFILER_PLUGIN as a user's would be. It counts starts and stops per event type, checks
 * that every stop and state names a live event it handed out and that each Coll, P2p and
 * KernelCh hangs below a live event of the right type, and at finalize writes what it saw to
 * $PROF_COUNT_DIR/prof-r<rank>-<pid>-<n>.txt. PROF_VERSION (6, 5, 4, 3 or 2) picks the ABI it
 * exports; 0 exports no table at all. NCCL_PROFILE_EVENT_MASK is its activation mask, as in
 * NCCL's example plugin. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/profiler_abi.h"

#ifndef PROF_VERSION
#define PROF_VERSION 6
#endif
#if PROF_VERSION >= 5
typedef ncclProfilerEventDescr_v6_t descr_t;
typedef ncclProfilerEventStateArgs_v6_t args_t;
#elif PROF_VERSION == 4
typedef ncclProfilerEventDescr_v4_t descr_t;
typedef ncclProfilerEventStateArgs_v4_t args_t;
#elif PROF_VERSION == 3
typedef ncclProfilerEventDescr_v3_t descr_t;
typedef ncclProfilerEventStateArgs_v3_t args_t;
#else
typedef ncclProfilerEventDescr_v2_t descr_t;
typedef ncclProfilerEventStateArgs_v2_t args_t;
#endif

#define NTYPES 16
#define MAGIC 0x70726f66u
#define DEFAULT_MASK                                                                                 \
  (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileKernelCh | ncclProfileGroupApi | \
   ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch | ncclProfileProxyOp |           \
   ncclProfileProxyStep)
static const char* const type_names[NTYPES] = {
    "Group",    "Coll",    "P2p",    "ProxyOp",      "ProxyStep", "ProxyCtrl", "KernelCh", "NetPlugin",
    "GroupApi", "CollApi", "P2pApi", "KernelLaunch", "CeColl",    "CeSync",    "CeBatch",  "?"};

struct event {
  unsigned magic;
  int type; /* bit index */
  int stopped;
  struct ctx* ctx;
  struct event* next;
};

struct ctx {
  pthread_mutex_t lock;
  int rank, nranks, nnodes, mask;
  unsigned long long hash;
  char name[64];
  long start[NTYPES], stop[NTYPES], states[32];
  long errors;
  char first_error[200];
  struct event* events;
  char* log; /* one line per Coll and P2p, in start order */
  size_t log_len, log_cap;
};

static int seq_files;

static int bit_index(uint64_t type) {
  for (int i = 0; i < NTYPES - 1; i++)
    if (type == (1ull << i)) return i;
  return NTYPES - 1;
}

static void error(struct ctx* c, const char* what) {
  if (c->errors++ == 0) snprintf(c->first_error, sizeof(c->first_error), "%s", what);
}

static void note(struct ctx* c, const char* line) {
  size_t n = strlen(line);
  if (c->log_len + n + 2 > c->log_cap) {
    c->log_cap = (c->log_cap + n + 2) * 2;
    c->log = realloc(c->log, c->log_cap);
  }
  memcpy(c->log + c->log_len, line, n);
  c->log_len += n;
  c->log[c->log_len++] = '\n';
  c->log[c->log_len] = 0;
}

/* Whether h is an event of c of type bit, open or not. */
static int known(struct ctx* c, void* h, int bit) {
  for (struct event* e = c->events; e; e = e->next)
    if ((void*)e == h) return e->type == bit;
  return 0;
}

/* Whether h is an event of c of type bit that is still open. */
static int live(struct ctx* c, void* h, int bit) {
  for (struct event* e = c->events; e; e = e->next)
    if ((void*)e == h) return e->type == bit && !e->stopped;
  return 0;
}

static struct ctx* make_ctx(int* mask) {
  struct ctx* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  pthread_mutex_init(&c->lock, NULL);
  const char* m = getenv("NCCL_PROFILE_EVENT_MASK");
  c->mask = m ? (int)strtol(m, NULL, 0) : DEFAULT_MASK;
  *mask = c->mask;
  c->rank = -1;
  return c;
}

#if PROF_VERSION >= 5
static ncclResult_t init(void** context, uint64_t commId, int* mask, const char* commName, int nNodes,
                         int nranks, int rank, weft_prof_logfn_t logfn) {
#elif PROF_VERSION == 4
static ncclResult_t init(void** context, int* mask, const char* commName, uint64_t commId, int nNodes,
                         int nranks, int rank, weft_prof_logfn_t logfn) {
#else
static ncclResult_t init(void** context, int* mask) {
  const char* commName = NULL;
  uint64_t commId = 0;
  int nNodes = 0, nranks = 0, rank = -1;
  weft_prof_logfn_t logfn = NULL;
#endif
  if (getenv("PROF_COUNT_FAIL_INIT")) return ncclInternalError;
  struct ctx* c = make_ctx(mask);
  if (c == NULL) return ncclSystemError;
  c->rank = rank;
  c->nranks = nranks;
  c->nnodes = nNodes;
  c->hash = (unsigned long long)commId;
  snprintf(c->name, sizeof(c->name), "%s", commName ? commName : "-");
  if (logfn) logfn(3, 1u << 14, __FILE__, __LINE__, "profiler_count: init rank %d of %d", rank, nranks);
  *context = c;
  return ncclSuccess;
}

/* What a Coll, P2p or KernelCh must hang below, by version: from v5 on a Coll's parent is the
 * CollApi event of its call (stopped by then) and its Group is in parentGroup. */
static void check_parent(struct ctx* c, const descr_t* d, int bit) {
  void* group = d->parentObj;
#if PROF_VERSION >= 5
  if (bit == 1) group = d->coll.parentGroup;
  if (bit == 2) group = d->p2p.parentGroup;
  if (bit == 1 && !known(c, d->parentObj, 9)) error(c, "Coll whose parent is no CollApi event");
  if (bit == 2 && !known(c, d->parentObj, 10)) error(c, "P2p whose parent is no P2pApi event");
  if ((bit == 9 || bit == 10) && !live(c, d->parentObj, 8))
    error(c, "CollApi or P2pApi outside an open GroupApi");
  if (bit == 11 && !live(c, d->parentObj, 8)) error(c, "KernelLaunch outside an open GroupApi");
#endif
  if ((bit == 1 || bit == 2) && !live(c, group, 0)) error(c, "Coll or P2p whose parent is no open Group");
  if (bit == 6 && !live(c, d->parentObj, 1)) error(c, "KernelCh whose parent is no open Coll");
  /* The proxy may still work for a collective the executor has finished: its Coll may be stopped. */
  if (bit == 3 && !known(c, d->parentObj, 1)) error(c, "ProxyOp whose parent is no Coll");
  if (bit == 4 && !live(c, d->parentObj, 3)) error(c, "ProxyStep whose parent is no open ProxyOp");
}

static void describe(struct ctx* c, const descr_t* d, int bit) {
  char line[256];
  if (bit == 1)
    snprintf(line, sizeof(line), "coll %s seq=%llu count=%zu dtype=%s root=%d algo=%s proto=%s", d->coll.func,
             (unsigned long long)d->coll.seqNumber, d->coll.count, d->coll.datatype, d->coll.root,
             d->coll.algo ? d->coll.algo : "(null)", d->coll.proto ? d->coll.proto : "(null)");
  else if (bit == 2)
    snprintf(line, sizeof(line), "p2p %s peer=%d count=%zu dtype=%s", d->p2p.func, d->p2p.peer, d->p2p.count,
             d->p2p.datatype);
  else if (bit == 3)
    snprintf(line, sizeof(line), "proxyop peer=%d send=%d channel=%d", d->proxyOp.peer, d->proxyOp.isSend,
             d->proxyOp.channelId);
  else
    return;
  note(c, line);
#if PROF_VERSION <= 3 && PROF_VERSION > 0
  /* v3's and v2's init is told nothing: the communicator's name and hash come with each Coll and P2p. */
  const char* name = bit == 1 ? d->coll.name : d->p2p.name;
  uint64_t hash = bit == 1 ? d->coll.commHash : d->p2p.commHash;
  if (c->name[0] == '-' && c->hash == 0) {
    snprintf(c->name, sizeof(c->name), "%s", name ? name : "(null)");
    c->hash = (unsigned long long)hash;
  } else if (strcmp(c->name, name ? name : "(null)") != 0 || c->hash != hash) {
    error(c, "v3 events name different communicators");
  }
#endif
}

static ncclResult_t start_event(void* context, void** handle, descr_t* d) {
  struct ctx* c = context;
  int bit = bit_index(d->type);
  *handle = NULL;
  pthread_mutex_lock(&c->lock);
  if (c->rank < 0) c->rank = d->rank; /* v3's init did not say */
  if (d->rank != c->rank) error(c, "event of another rank");
  /* Groups, collectives and their API events also come as the parents of what the mask asks for. */
  if (!(c->mask & (int)d->type) && bit > 2 && bit != 8 && bit != 9 && bit != 10)
    error(c, "event type outside the mask");
  check_parent(c, d, bit);
  describe(c, d, bit);
  struct event* e = calloc(1, sizeof(*e));
  e->magic = MAGIC;
  e->type = bit;
  e->ctx = c;
  e->next = c->events;
  c->events = e;
  c->start[bit]++;
  pthread_mutex_unlock(&c->lock);
  *handle = e;
  return ncclSuccess;
}

static ncclResult_t stop_event(void* handle) {
  struct event* e = handle;
  if (e == NULL || e->magic != MAGIC) return ncclInvalidArgument; /* nothing to count it against */
  struct ctx* c = e->ctx;
  pthread_mutex_lock(&c->lock);
  if (e->stopped) error(c, "event stopped twice");
  e->stopped = 1;
  c->stop[e->type]++;
  pthread_mutex_unlock(&c->lock);
  return ncclSuccess;
}

static ncclResult_t record_state(void* handle, ncclProfilerEventState_t state, args_t* args) {
  struct event* e = handle;
  (void)args;
  if (e == NULL || e->magic != MAGIC) return ncclInvalidArgument;
  struct ctx* c = e->ctx;
  pthread_mutex_lock(&c->lock);
  if (e->stopped) error(c, "state recorded on a stopped event");
  if ((int)state >= 0 && (int)state < 32) c->states[state]++;
  pthread_mutex_unlock(&c->lock);
  return ncclSuccess;
}

static void write_counts(struct ctx* c, FILE* f) {
  long open = 0;
  for (struct event* e = c->events; e; e = e->next) open += !e->stopped;
  fprintf(f, "version %d\nrank %d\nnranks %d\nnnodes %d\nname %s\nhash %llx\nmask %d\n", PROF_VERSION,
          c->rank, c->nranks, c->nnodes, c->name, c->hash, c->mask);
  for (int i = 0; i < NTYPES; i++)
    if (c->start[i] || c->stop[i])
      fprintf(f, "start %s %ld\nstop %s %ld\n", type_names[i], c->start[i], type_names[i], c->stop[i]);
  fprintf(f, "state KernelChStop %ld\n", c->states[ncclProfilerKernelChStop]);
  fprintf(f, "state GroupStartApiStop %ld\n", c->states[ncclProfilerGroupStartApiStop]);
  fprintf(f, "state GroupEndApiStart %ld\n", c->states[ncclProfilerGroupEndApiStart]);
  fprintf(f, "open %ld\nerrors %ld\n", open, c->errors);
  if (c->errors) fprintf(f, "first_error %s\n", c->first_error);
  fprintf(f, "%s", c->log ? c->log : "");
  fprintf(f, "finalized\n");
}

static ncclResult_t finalize(void* context) {
  struct ctx* c = context;
  const char* dir = getenv("PROF_COUNT_DIR");
  if (dir != NULL) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/prof-r%d-%d-%d.txt", dir, c->rank, (int)getpid(),
             __atomic_fetch_add(&seq_files, 1, __ATOMIC_RELAXED));
    FILE* f = fopen(path, "w");
    if (f) {
      write_counts(c, f);
      fclose(f);
    }
  }
  for (struct event* e = c->events; e;) {
    struct event* next = e->next;
    free(e);
    e = next;
  }
  free(c->log);
  pthread_mutex_destroy(&c->lock);
  free(c);
  return ncclSuccess;
}

#define TABLE \
  { "profiler_count", init, start_event, stop_event, record_state, finalize }
#if PROF_VERSION == 6
__attribute__((visibility("default"))) const ncclProfiler_v6_t ncclProfiler_v6 = TABLE;
#elif PROF_VERSION == 5
__attribute__((visibility("default"))) const ncclProfiler_v5_t ncclProfiler_v5 = TABLE;
#elif PROF_VERSION == 4
__attribute__((visibility("default"))) const ncclProfiler_v4_t ncclProfiler_v4 = TABLE;
#elif PROF_VERSION == 3
__attribute__((visibility("default"))) const ncclProfiler_v3_t ncclProfiler_v3 = TABLE;
#elif PROF_VERSION == 2
__attribute__((visibility("default"))) const ncclProfiler_v2_t ncclProfiler_v2 = TABLE;
#else
/* A library with the right file name and no table: the loader must refuse it. */
__attribute__((visibility("default"))) int ncclProfiler_v99 = 0;
#endif
