/* Planning of collectives for both backends: the tuning model's pick among what the executor
 * runs (both run Ring, and Tree for all-reduce), or without a model ring, LL for small and Simple for large
 * operations; NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS override, and a nccl*Config call's
 * selection narrows that further for the one call; a tuner plugin (NCCL_TUNER_PLUGIN) may reprice
 * the model's cost table first. The host backend's work items are split here too. */
#include "collectives/plan.h"

#include <float.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "collectives/tune_log.h"
#include "collectives/tuned.h"
#include "collectives/tuner.h"
#include "transport/connector.h"
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
#define BYTES_PER_CHANNEL (1u << 20) /* add a channel per MiB by default (the host executor's) */
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
        "NCCL_ALGO=%s excludes Ring, the only algorithm for collectives other than all-reduce; those use "
        "Ring",
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
/* What the executor runs, with the host executor's values for 0. */
static unsigned impl_of(const struct weft_plan_params* pp) {
  return WEFT_TUNED_ALGO_RING | (pp->impl_algos ? pp->impl_algos : WEFT_TUNED_ALGO_TREE);
}
/* Channels algo has connectors on: every ring channel, or the tree channels. */
static int connected_for(const struct weft_plan_params* pp, int algo) {
  int trees = pp->tree_channels;
  return algo == WEFT_PLAN_TREE && trees > 0 && trees < pp->nchannels ? trees : pp->nchannels;
}
static size_t per_channel_of(const struct weft_plan_params* pp) {
  return pp->bytes_per_channel ? pp->bytes_per_channel : BYTES_PER_CHANNEL;
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

int weft_plan_can_meet(const struct weft_plan_params* pp, int coll, unsigned algos, unsigned protos) {
  if (coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV) return 0;
  unsigned impl = impl_of(pp);
  int tree_impl = (impl & WEFT_TUNED_ALGO_TREE) != 0;
  if (pp->comm != NULL) {
    int tuned = weft_comm_tuned_allows(pp->comm, coll, algos & impl, protos);
    if (tuned >= 0) return tuned;
  }
  unsigned p = (pp->ll_ok ? WEFT_TUNED_PROTO_LL : 0) | (pp->simple_ok ? WEFT_TUNED_PROTO_SIMPLE : 0);
  return (default_algos(pp, coll, tree_impl) & algos) != 0 && (p & protos) != 0;
}

/* The communicator's tuning model (graph/tuning.c via core/), the same code for CPU and GPU, asked
 * only about the algorithms the executor runs. */
static int choose_tuned(const struct weft_plan_params* pp, int coll, size_t bytes,
                        const struct weft_call_opts* o, int* algo, int* proto, int* nchannels, float* time_us,
                        int* model_channels) {
  struct weft_tuned tuned;
  unsigned algos = algos_of(o) & impl_of(pp);
  /* Nothing the model enables for coll that this executor runs (NCCL_ALGO=Tree on the CUDA
   * backend, Tree-only for a broadcast): the defaults decide, without the model's WARN per call. */
  if (pp->comm == NULL || weft_comm_tuned_allows(pp->comm, coll, algos, protos_of(o)) != 1 ||
      !weft_comm_tuned_choice(pp->comm, coll, bytes, algos, protos_of(o), &tuned))
    return 0;
  int tree = tuned.tree && coll == WEFT_COLL_ALLREDUCE && pp->nranks > 1;
  int n = tuned.nchannels;
  if (tree && n < 2) n = 2; /* both trees: channel c uses tree c % 2 */
  if (n > pp->nchannels) n = pp->nchannels;
  *algo = tree ? WEFT_PLAN_TREE : WEFT_PLAN_RING;
  *proto = tuned.ll ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE;
  *nchannels = n < 1 ? 1 : n;
  *time_us = tuned.time_us;
  if (model_channels) *model_channels = tuned.nchannels;
  return 1;
}

/* Without a tuning model: Tree (where the executor runs it) for all-reduce when Ring is excluded,
 * or for small sizes across 3+ hosts where its log-depth latency beats the ring's 2(k-1) network
 * hops; LL for small sizes; a channel more per bytes_per_channel. */
static void choose_default(const struct weft_plan_params* env, int coll, size_t bytes,
                           const struct weft_call_opts* o, int* algo, int* proto, int* nchannels) {
  struct weft_plan_params narrowed = *env;
  weft_plan_narrow(&narrowed, o);
  narrowed.tree_ok &= (impl_of(env) & WEFT_TUNED_ALGO_TREE) != 0;
  const struct weft_plan_params* pp = &narrowed;
  *algo = WEFT_PLAN_RING;
  if (coll == WEFT_COLL_ALLREDUCE && pp->nranks > 1 && pp->tree_ok &&
      (!pp->ring_ok || (pp->nnodes > 2 && bytes <= TREE_MAX_BYTES)))
    *algo = WEFT_PLAN_TREE;
  *proto = (pp->ll_ok && (bytes <= LL_MAX_BYTES || !pp->simple_ok)) ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE;
  int n = (int)(bytes / per_channel_of(pp)) + 1;
  if (pp->min_channels > 0 && n < pp->min_channels) n = pp->min_channels;
  if (pp->max_channels > 0 && n > pp->max_channels) n = pp->max_channels;
  if (*algo == WEFT_PLAN_TREE && n < 2) n = 2; /* both trees: channel c uses tree c % 2 */
  if (n > pp->nchannels) n = pp->nchannels;
  *nchannels = n < 1 ? 1 : n;
}

/* Why the channel count is not the model's (the tuning log's explanation); NULL when it is. */
static const char* channels_note(const struct weft_plan_params* pp, int algo, int model_n, int n, char* buf,
                                 size_t size) {
  if (n == model_n) return NULL;
  snprintf(buf, size, "the model's %d, then %s", model_n,
           algo == WEFT_PLAN_TREE && model_n < 2 ? "at least 2 for the two trees"
           : n == pp->nchannels && model_n > n   ? "the connected channels"
                                                 : "the call's minCTAs/maxCTAs");
  return buf;
}

/* What the tuner plugin did to a decision, for the log. */
struct tuner_outcome {
  int changed;   /* it picked another algorithm or protocol than the model */
  int nchannels; /* it set a channel count (0: it did not) */
};

/* The tuning log's view of a decision (only when NCCL_DEBUG_SUBSYS=TUNING asks for it). */
static void log_choice(const struct weft_plan_params* pp, int coll, size_t bytes,
                       const struct weft_call_opts* o, int tuned, int model_n, int algo, int proto, int n,
                       const struct tuner_outcome* tu) {
  char note[96], rule[200];
  const char* why = NULL;
  if (!tuned) {
    size_t per = per_channel_of(pp);
    char per_text[32];
    if (per == (1u << 20))
      snprintf(per_text, sizeof(per_text), "MiB");
    else
      snprintf(per_text, sizeof(per_text), "%zu KiB", per >> 10);
    snprintf(rule, sizeof(rule), "planner defaults, no tuning model (%sLL up to %d KiB, a channel per %s)",
             impl_of(pp) & WEFT_TUNED_ALGO_TREE ? "" : "Ring; ", LL_MAX_BYTES / 1024, per_text);
    why = rule;
  }
  if (tu->changed) {
    snprintf(rule, sizeof(rule), "the tuner plugin %s (NCCL_TUNER_PLUGIN)", weft_tuner_label(pp->tuner));
    why = rule;
  }
  const char* chn = tuned ? channels_note(pp, algo, model_n, n, note, sizeof(note)) : NULL;
  if (tu->nchannels > 0) {
    snprintf(note, sizeof(note), "the tuner plugin's %d%s", tu->nchannels,
             n != tu->nchannels ? ", then the connected channels, the trees' 2 or the call's bounds" : "");
    chn = note;
  }
  struct weft_tune_choice c = {
      .coll = coll,
      .bytes = bytes,
      .algo = algo,
      .proto = proto,
      .nchannels = n,
      .time_us = tuned ? weft_comm_tuned_time(pp->comm, coll, bytes, algo == WEFT_PLAN_TREE,
                                              proto == WEFT_PROTO_LL, n)
                       : -1,
      .call_algos = algos_of(o),
      .call_protos = protos_of(o),
      .impl_algos = impl_of(pp),
      .rule = why,
      .channels_note = chn};
  weft_tune_log_choice(pp->tune_log, &c);
}

/* ---- The tuner plugin: our predictions go into NCCL's cost table, the plugin may rewrite it ---- */

static int plan_algo_of(int a) { return a == WEFT_TUNER_ALGO_TREE ? WEFT_PLAN_TREE : WEFT_PLAN_RING; }
static int plan_proto_of(int p) { return p == WEFT_TUNER_PROTO_LL ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE; }

/* Our choice narrowed to one pair of NCCL's numbering: 1 when the planner can run exactly it, with
 * its channels (bounded, and the model's own) and predicted µs (<0: no model). */
static int choose_pair(const struct weft_plan_params* pp, int coll, size_t bytes,
                       const struct weft_call_opts* o, int a, int p, int* n, int* model_n, float* us) {
  unsigned abit = 1u << a, pbit = 1u << p;
  if (!(algos_of(o) & abit) || !(protos_of(o) & pbit) || !weft_plan_can_meet(pp, coll, abit, pbit)) return 0;
  struct weft_call_opts one = o ? *o : (struct weft_call_opts){0};
  one.algos = abit;
  one.protos = pbit;
  int algo, proto;
  *model_n = 0;
  if (!choose_tuned(pp, coll, bytes, &one, &algo, &proto, n, us, model_n)) {
    choose_default(pp, coll, bytes, &one, &algo, &proto, n);
    *us = -1;
  }
  return algo == plan_algo_of(a) && proto == plan_proto_of(p);
}

struct tuner_table {
  float cost[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS];
  int n[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS], model_n[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS];
  unsigned offered; /* bit a * NPROTOS + p: pairs we run and may use for this call */
};

/* Without a model the table can only rank: 1 for the planner's pick, 2 for the other pairs. */
static void fill_table(const struct weft_plan_params* pp, int coll, size_t bytes,
                       const struct weft_call_opts* o, int algo, int proto, struct tuner_table* t) {
  static const int algos[2] = {WEFT_TUNER_ALGO_TREE, WEFT_TUNER_ALGO_RING};
  static const int protos[2] = {WEFT_TUNER_PROTO_LL, WEFT_TUNER_PROTO_SIMPLE};
  for (int a = 0; a < WEFT_TUNER_NALGOS; a++)
    for (int p = 0; p < WEFT_TUNER_NPROTOS; p++) t->cost[a][p] = WEFT_TUNER_IGNORE;
  t->offered = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      int a = algos[i], p = protos[j];
      float us;
      if (!choose_pair(pp, coll, bytes, o, a, p, &t->n[a][p], &t->model_n[a][p], &us)) continue;
      int ours = plan_algo_of(a) == algo && plan_proto_of(p) == proto;
      t->cost[a][p] = us > 0 ? us : ours ? 1.0f : 2.0f;
      t->offered |= 1u << (a * WEFT_TUNER_NPROTOS + p);
    }
}

/* Asks the plugin, then takes the cheapest pair on offer (NCCL's order breaks ties: Tree before
 * Ring, LL before Simple). An entry the plugin raised from IGNORE is not on offer: we do not run
 * it, or the call and NCCL_ALGO / NCCL_PROTO exclude it. A failed plugin leaves our choice. */
static void apply_tuner(const struct weft_plan_params* pp, int coll, size_t bytes,
                        const struct weft_call_opts* o, int* algo, int* proto, int* nchannels, int* model_n,
                        struct tuner_outcome* out) {
  struct tuner_table t;
  fill_table(pp, coll, bytes, o, *algo, *proto, &t);
  int plugin_n = 0, ba = -1, bp = -1;
  if (!weft_tuner_coll_info(pp->tuner, coll, bytes, 1, t.cost, &plugin_n)) return;
  float best = FLT_MAX;
  for (int a = 0; a < WEFT_TUNER_NALGOS; a++)
    for (int p = 0; p < WEFT_TUNER_NPROTOS; p++)
      if ((t.offered >> (a * WEFT_TUNER_NPROTOS + p) & 1) && t.cost[a][p] >= 0 && t.cost[a][p] < best)
        best = t.cost[a][p], ba = a, bp = p;
  if (ba < 0) return; /* it priced everything out: NCCL would fail the call, we keep ours */
  out->changed = plan_algo_of(ba) != *algo || plan_proto_of(bp) != *proto;
  *algo = plan_algo_of(ba);
  *proto = plan_proto_of(bp);
  *model_n = t.model_n[ba][bp];
  int n = plugin_n > 0 ? plugin_n : t.n[ba][bp];
  if (*algo == WEFT_PLAN_TREE && n < 2) n = 2; /* both trees: channel c uses tree c % 2 */
  if (n > pp->nchannels) n = pp->nchannels;
  *nchannels = n < 1 ? 1 : n;
  out->nchannels = plugin_n > 0 ? plugin_n : 0;
}

ncclResult_t weft_plan_choose(const struct weft_plan_params* pp, int coll, size_t bytes,
                              const struct weft_call_opts* opts, int* algo, int* proto, int* nchannels) {
  float time_us; /* weft_plan_predict's concern */
  int model_n = 0;
  int tuned = choose_tuned(pp, coll, bytes, opts, algo, proto, nchannels, &time_us, &model_n);
  if (!tuned) choose_default(pp, coll, bytes, opts, algo, proto, nchannels);
  struct tuner_outcome tu = {0, 0};
  if (pp->tuner != NULL) apply_tuner(pp, coll, bytes, opts, algo, proto, nchannels, &model_n, &tu);
  *nchannels = weft_plan_bound_channels(opts, *nchannels, connected_for(pp, *algo));
  if (pp->tune_log) log_choice(pp, coll, bytes, opts, tuned, model_n, *algo, *proto, *nchannels, &tu);
  return ncclSuccess;
}

/* The prediction is the one weft_plan_choose acts on: the model's time for the algorithm and
 * protocol it picks, after the tuner plugin when there is one (which it asks, as NCCL does), so a
 * simulated group and a launched one agree. */
int weft_plan_predict(const struct weft_plan_params* pp, const struct weft_task* task, float* time_us) {
  int algo, proto, nchannels, model_n;
  size_t bytes = weft_plan_task_bytes(task, pp->nranks);
  if (!choose_tuned(pp, task->coll, bytes, &task->opts, &algo, &proto, &nchannels, time_us, &model_n))
    return 0;
  struct tuner_outcome tu = {0, 0};
  if (pp->tuner == NULL) return 1;
  apply_tuner(pp, task->coll, bytes, &task->opts, &algo, &proto, &nchannels, &model_n, &tu);
  nchannels = weft_plan_bound_channels(&task->opts, nchannels, connected_for(pp, algo));
  *time_us = weft_comm_tuned_time(pp->comm, task->coll, bytes, algo == WEFT_PLAN_TREE, proto == WEFT_PROTO_LL,
                                  nchannels);
  return 1;
}

size_t weft_plan_chunk_elems(const struct weft_plan_params* pp, int proto, size_t elem_size) {
  size_t bytes = proto == WEFT_PROTO_LL ? pp->ll_slot / sizeof(struct weft_ll_line) * WEFT_LL_LINE_DATA
                                        : pp->simple_slot;
  return bytes / elem_size;
}

static int memo_usable(const struct weft_plan_params* pp, const struct weft_plan_memo* memo) {
  return memo != NULL && pp->tuner == NULL && pp->tune_log == NULL;
}

static int memo_holds(const struct weft_plan_memo* m, int coll, size_t bytes,
                      const struct weft_call_opts* o) {
  return m->valid && m->coll == coll && m->bytes == bytes && m->algos == o->algos && m->protos == o->protos &&
         m->min_channels == o->min_channels && m->max_channels == o->max_channels;
}

static ncclResult_t choose_through(const struct weft_plan_params* pp, struct weft_plan_memo* memo, int coll,
                                   size_t bytes, const struct weft_call_opts* o, struct weft_plan* plan) {
  if (!memo_usable(pp, memo))
    return weft_plan_choose(pp, coll, bytes, o, &plan->algo, &plan->proto, &plan->nchannels);
  if (!memo_holds(memo, coll, bytes, o)) {
    int algo, proto, n;
    WEFT_CHECK(weft_plan_choose(pp, coll, bytes, o, &algo, &proto, &n));
    *memo = (struct weft_plan_memo){.valid = 1,
                                    .coll = coll,
                                    .bytes = bytes,
                                    .algos = o->algos,
                                    .protos = o->protos,
                                    .min_channels = o->min_channels,
                                    .max_channels = o->max_channels,
                                    .algo = algo,
                                    .proto = proto,
                                    .nchannels = n};
  }
  plan->algo = memo->algo;
  plan->proto = memo->proto;
  plan->nchannels = memo->nchannels;
  return ncclSuccess;
}

ncclResult_t weft_plan_coll(const struct weft_plan_params* pp, struct weft_plan_memo* memo,
                            const struct weft_task* task, struct weft_plan* plan) {
  size_t es = weft_dt_size(task->dtype);
  int k = pp->nranks;
  size_t total = task->count; /* elements each channel split applies to */
  size_t bytes = weft_plan_task_bytes(task, k);
  WEFT_CHECK(choose_through(pp, memo, task->coll, bytes, &task->opts, plan));
  size_t chunk = weft_plan_chunk_elems(pp, plan->proto, es);
  /* Only the channels' work that runs is written: the plan is on every call's path. */
  for (int c = 0; c < plan->nchannels; c++) {
    struct weft_dev_work* w = &plan->work[c];
    *w = (struct weft_dev_work){0};
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
    w->ch_count = weft_channel_range(total, plan->nchannels, c, &w->ch_offset);
    w->chunk = chunk;
  }
  WEFT_INFO(WEFT_TUNING, "%s seq %llu: %zu bytes, algo %s proto %s, %d channel(s), chunk %zu elements%s",
            weft_coll_name(task->coll), (unsigned long long)task->seq, bytes,
            plan->algo == WEFT_PLAN_TREE ? "Tree" : "Ring", plan->proto == WEFT_PROTO_LL ? "LL" : "Simple",
            plan->nchannels, chunk, task->opts.sig ? " (per-call config)" : "");
  return ncclSuccess;
}
