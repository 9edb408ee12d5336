/* Planning of collectives on the host backend: ring, LL for small and Simple for large
 * operations, 1..4 channels; NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS override, and a
 * nccl*Config call's selection narrows that further for the one call. */
#include "collectives/plan.h"

#include <string.h>
#include <strings.h>

#include "core/tuned.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

_Static_assert((int)WEFT_DT_E5M2 == (int)ncclFloat8e5m2 && (int)WEFT_DT_BF16 == (int)ncclBfloat16 &&
                   (int)WEFT_DT_F16 == (int)ncclFloat16,
               "weft_dt mirrors ncclDataType_t");
_Static_assert((int)WEFT_RED_SUMPOSTDIV == (int)WEFT_OP_SUMPOSTDIV &&
                   (int)WEFT_RED_PREMULSUM == (int)WEFT_OP_PREMULSUM && (int)WEFT_RED_MIN == (int)WEFT_OP_MIN,
               "weft_red mirrors weft_op_kind");

#define LL_MAX_BYTES (64 * 1024)     /* LL below this size: latency matters more than bandwidth */
#define BYTES_PER_CHANNEL (1u << 20) /* add a channel per MiB by default */
#define DEFAULT_MAX_CHANNELS 2
#define TREE_MAX_BYTES (256 * 1024) /* across 3+ hosts: tree all-reduce up to this size */

/* Whether name is allowed by a NCCL_ALGO/NCCL_PROTO style list ("a,b", "^a,b"; case-insensitive). */
static int list_allows(const char* list, const char* name) {
  if (list == NULL || list[0] == 0) return 1;
  int exclude = list[0] == '^';
  const char* s = list + exclude;
  size_t len = strlen(name);
  int found = 0;
  while (*s) {
    const char* end = strchr(s, ',');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    while (n && s[0] == ' ') s++, n--;
    while (n && s[n - 1] == ' ') n--;
    if (n == len && strncasecmp(s, name, n) == 0) found = 1;
    if (end == NULL) break;
    s = end + 1;
  }
  return exclude ? !found : found;
}

void weft_plan_read_env(struct weft_plan_params* pp) {
  const char* protos = weft_param_str("NCCL_PROTO");
  pp->ll_ok = list_allows(protos, "LL");
  pp->simple_ok = list_allows(protos, "Simple");
  if (!pp->ll_ok && !pp->simple_ok) pp->simple_ok = 1; /* LL128 alone, or nothing: the host has only these */
  const char* algos = weft_param_str("NCCL_ALGO");
  pp->ring_ok = list_allows(algos, "Ring");
  pp->tree_ok = list_allows(algos, "Tree");
  if (!pp->ring_ok)
    WEFT_WARN(
        "NCCL_ALGO=%s excludes Ring, the host backend's only algorithm for collectives other than "
        "all-reduce; those use Ring",
        algos);
  pp->min_channels = weft_param_is_set("NCCL_MIN_NCHANNELS") ? (int)weft_param_int("NCCL_MIN_NCHANNELS") : 0;
  pp->max_channels = weft_param_is_set("NCCL_MAX_NCHANNELS") ? (int)weft_param_int("NCCL_MAX_NCHANNELS") : 0;
  pp->deterministic = weft_param_int("WEFT_DETERMINISTIC") != 0;
}

int weft_plan_channels_to_connect(void) {
  int n = DEFAULT_MAX_CHANNELS;
  if (weft_param_is_set("NCCL_MAX_NCHANNELS")) n = (int)weft_param_int("NCCL_MAX_NCHANNELS");
  if (weft_param_is_set("NCCL_MIN_NCHANNELS") && weft_param_int("NCCL_MIN_NCHANNELS") > n)
    n = (int)weft_param_int("NCCL_MIN_NCHANNELS");
  if (n < 1) n = 1;
  if (n > WEFT_PLAN_MAX_CHANNELS) n = WEFT_PLAN_MAX_CHANNELS;
  return n;
}

/* A call's masks, with a plain call's 0 meaning everything. */
static unsigned algos_of(const struct weft_call_opts* o) {
  return o && o->algos ? o->algos : WEFT_TUNED_ALGO_ALL;
}
static unsigned protos_of(const struct weft_call_opts* o) {
  return o && o->protos ? o->protos : WEFT_TUNED_PROTO_ALL;
}

void weft_plan_narrow(struct weft_plan_params* pp, const struct weft_call_opts* o) {
  unsigned a = algos_of(o), p = protos_of(o);
  pp->ring_ok &= (a & WEFT_TUNED_ALGO_RING) != 0;
  pp->tree_ok &= (a & WEFT_TUNED_ALGO_TREE) != 0;
  pp->ll_ok &= (p & WEFT_TUNED_PROTO_LL) != 0;
  pp->simple_ok &= (p & WEFT_TUNED_PROTO_SIMPLE) != 0;
}

/* The call's own bounds come last: they are what the caller asked of this very call. */
int weft_plan_bound_channels(const struct weft_call_opts* o, int n, int connected) {
  if (o != NULL && o->min_channels > 0 && n < o->min_channels) n = o->min_channels;
  if (o != NULL && o->max_channels > 0 && n > o->max_channels) n = o->max_channels;
  if (n > connected) n = connected;
  return n < 1 ? 1 : n;
}

/* The defaults' algorithms for coll: Tree is all-reduce only, and Ring serves every other
 * collective even when NCCL_ALGO excludes it (weft_plan_read_env WARNs). */
static unsigned default_algos(const struct weft_plan_params* pp, int coll, int tree_impl) {
  int tree = tree_impl && coll == WEFT_COLL_ALLREDUCE && pp->nranks > 1 && pp->tree_ok;
  unsigned m = tree ? WEFT_TUNED_ALGO_TREE : 0;
  if (pp->ring_ok || !tree) m |= WEFT_TUNED_ALGO_RING;
  return m;
}

int weft_plan_can_meet(const struct weft_plan_params* pp, int coll, int tree_impl, unsigned algos,
                       unsigned protos) {
  if (coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV) return 0;
  if (tree_impl && pp->comm != NULL) {
    int tuned = weft_comm_tuned_allows(pp->comm, coll, algos, protos);
    if (tuned >= 0) return tuned;
  }
  unsigned p = (pp->ll_ok ? WEFT_TUNED_PROTO_LL : 0) | (pp->simple_ok ? WEFT_TUNED_PROTO_SIMPLE : 0);
  return (default_algos(pp, coll, tree_impl) & algos) != 0 && (p & protos) != 0;
}

/* The communicator's tuning model (graph/tuning.c via core/), the same code for CPU and GPU. */
static int choose_tuned(const struct weft_plan_params* pp, int coll, size_t bytes,
                        const struct weft_call_opts* o, int* algo, int* proto, int* nchannels,
                        float* time_us) {
  struct weft_tuned tuned;
  if (pp->comm == NULL || !weft_comm_tuned_choice(pp->comm, coll, bytes, algos_of(o), protos_of(o), &tuned))
    return 0;
  int tree = tuned.tree && coll == WEFT_COLL_ALLREDUCE && pp->nranks > 1;
  int n = tuned.nchannels;
  if (tree && n < 2) n = 2; /* both trees: channel c uses tree c % 2 */
  if (n > pp->nchannels) n = pp->nchannels;
  *algo = tree ? WEFT_PLAN_TREE : WEFT_PLAN_RING;
  *proto = tuned.ll ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE;
  *nchannels = n < 1 ? 1 : n;
  *time_us = tuned.time_us;
  return 1;
}

/* Without a tuning model: Tree for all-reduce when Ring is excluded, or for small sizes across
 * 3+ hosts where its log-depth latency beats the ring's 2(k-1) network hops; LL for small sizes. */
static void choose_default(const struct weft_plan_params* env, int coll, size_t bytes,
                           const struct weft_call_opts* o, int* algo, int* proto, int* nchannels) {
  struct weft_plan_params narrowed = *env;
  weft_plan_narrow(&narrowed, o);
  const struct weft_plan_params* pp = &narrowed;
  *algo = WEFT_PLAN_RING;
  if (coll == WEFT_COLL_ALLREDUCE && pp->nranks > 1 && pp->tree_ok &&
      (!pp->ring_ok || (pp->nnodes > 2 && bytes <= TREE_MAX_BYTES)))
    *algo = WEFT_PLAN_TREE;
  *proto = (pp->ll_ok && (bytes <= LL_MAX_BYTES || !pp->simple_ok)) ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE;
  int n = (int)(bytes / BYTES_PER_CHANNEL) + 1;
  if (pp->min_channels > 0 && n < pp->min_channels) n = pp->min_channels;
  if (pp->max_channels > 0 && n > pp->max_channels) n = pp->max_channels;
  if (*algo == WEFT_PLAN_TREE && n < 2) n = 2; /* both trees: channel c uses tree c % 2 */
  if (n > pp->nchannels) n = pp->nchannels;
  *nchannels = n < 1 ? 1 : n;
}

ncclResult_t weft_plan_choose(const struct weft_plan_params* pp, int coll, size_t bytes,
                              const struct weft_call_opts* opts, int* algo, int* proto, int* nchannels) {
  float time_us; /* weft_plan_predict's concern */
  if (!choose_tuned(pp, coll, bytes, opts, algo, proto, nchannels, &time_us))
    choose_default(pp, coll, bytes, opts, algo, proto, nchannels);
  *nchannels = weft_plan_bound_channels(opts, *nchannels, pp->nchannels);
  return ncclSuccess;
}

/* The prediction is the one weft_plan_choose acts on: the model's time for the algorithm and
 * protocol it picks first, so a simulated group and a launched one agree. */
int weft_plan_predict(const struct weft_plan_params* pp, const struct weft_task* task, float* time_us) {
  int algo, proto, nchannels;
  size_t bytes = weft_plan_task_bytes(task, pp->nranks);
  return choose_tuned(pp, task->coll, bytes, &task->opts, &algo, &proto, &nchannels, time_us);
}

ncclResult_t weft_plan_coll(const struct weft_plan_params* pp, const struct weft_task* task,
                            struct weft_plan* plan) {
  size_t es = weft_dt_size(task->dtype);
  int k = pp->nranks;
  size_t total = task->count; /* elements each channel split applies to */
  size_t bytes = weft_plan_task_bytes(task, k);
  memset(plan, 0, sizeof(*plan));
  WEFT_CHECK(
      weft_plan_choose(pp, task->coll, bytes, &task->opts, &plan->algo, &plan->proto, &plan->nchannels));
  /* One step carries a Simple slot, or the data half of an LL slot's 16-byte lines. */
  size_t chunk = (plan->proto == WEFT_PROTO_LL ? pp->ll_slot / 16 * 8 : pp->simple_slot) / es;
  /* Channels take contiguous ranges, a multiple of 64 elements except the last. */
  size_t per = (total + plan->nchannels - 1) / plan->nchannels;
  per = (per + 63) / 64 * 64;
  for (int c = 0; c < plan->nchannels; c++) {
    struct weft_dev_work* w = &plan->work[c];
    w->coll = task->coll;
    w->dtype = task->dtype;
    w->proto = plan->proto;
    w->rank = pp->rank;
    w->nranks = k;
    w->root = task->root;
    w->op.kind = task->op.kind;
    w->op.scalar = task->op.scalar_ptr ? 0 : task->op.scalar;
    if (task->op.scalar_ptr) memcpy(&w->op.scalar, task->op.scalar_ptr, es);
    w->op.divisor = task->op.divisor;
    w->count = task->count;
    size_t off = weft_min_sz(total, (size_t)c * per);
    w->ch_offset = off;
    w->ch_count = weft_min_sz(per, total - off);
    w->chunk = chunk;
  }
  WEFT_INFO(WEFT_TUNING, "%s seq %llu: %zu bytes, algo %s proto %s, %d channel(s), chunk %zu elements%s",
            weft_coll_name(task->coll), (unsigned long long)task->seq, bytes,
            plan->algo == WEFT_PLAN_TREE ? "Tree" : "Ring", plan->proto == WEFT_PROTO_LL ? "LL" : "Simple",
            plan->nchannels, chunk, task->opts.sig ? " (per-call config)" : "");
  return ncclSuccess;
}
