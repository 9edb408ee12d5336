/* Explaining a tuning choice: every (algorithm, protocol) with its predicted time or the rule that
 * excluded it, then what runs and why. The log (collectives/tune_log.c through core/) and
 * weft-topo --explain print these same lines. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "util/param.h"

#define LINE_MAX_CHARS 960 /* under the logger's 1024-byte message */

struct line {
  char text[LINE_MAX_CHARS];
  size_t len;
};

static void add(struct line* l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct line* l, const char* fmt, ...) {
  if (l->len >= sizeof(l->text) - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(l->text + l->len, sizeof(l->text) - l->len, fmt, ap);
  va_end(ap);
  if (n > 0) l->len += (size_t)n;
  if (l->len >= sizeof(l->text)) l->len = sizeof(l->text) - 1;
}

/* The model's reason, narrowed by the query: the backend and the call come after the model's own. */
static int why_of(const struct weft_tuning* t, const struct weft_tuning_query* q, int a, int p) {
  int why = t->why[q->func][a][p];
  if (why != WEFT_WHY_CANDIDATE) return why;
  if (!(q->impl_algos >> a & 1) || !(q->impl_protos >> p & 1)) return WEFT_WHY_NOT_IMPL;
  if (!(q->call_algos >> a & 1) || !(q->call_protos >> p & 1)) return WEFT_WHY_CALL;
  return WEFT_WHY_CANDIDATE;
}

/* Excluded by a choice someone made (not by what the machine or backend can do): such pairs show
 * their predicted time, and may be the reason the pick is not the model's fastest. */
static int chosen_away(int why) {
  return why == WEFT_WHY_NCCL_ALGO || why == WEFT_WHY_NCCL_PROTO || why == WEFT_WHY_CALL;
}

static const char* env_value(const struct weft_tuning* t, int algo_env) {
  const char* v = t->in.env_given ? (algo_env ? t->in.algo_env : t->in.proto_env)
                                  : weft_param_str(algo_env ? "NCCL_ALGO" : "NCCL_PROTO");
  return v ? v : "";
}

static void add_why(struct line* l, const struct weft_tuning* t, int why) {
  switch (why) {
    case WEFT_WHY_UNMODELLED:
      add(l, "not in the model");
      break;
    case WEFT_WHY_NOT_IMPL:
      add(l, "not implemented on this backend");
      break;
    case WEFT_WHY_NO_TREE:
      add(l, "no tree searched");
      break;
    case WEFT_WHY_NCCL_ALGO:
      add(l, "NCCL_ALGO=%s", env_value(t, 1));
      break;
    case WEFT_WHY_NCCL_PROTO:
      add(l, "NCCL_PROTO=%s", env_value(t, 0));
      break;
    case WEFT_WHY_LL128_RULE:
      add(l, "LL128 off on these links");
      break;
    case WEFT_WHY_CALL:
      add(l, "the call's selection");
      break;
  }
}

static float time_of(const struct weft_tuning* t, const struct weft_tuning_query* q, int a, int p) {
  return weft_tuning_model_time(t, q->func, a, p, q->nbytes, t->in.nchannels);
}

/* "Ring/LL 12.3 us, Ring/Simple 8.1 us"; returns how many. */
static int add_candidates(struct line* l, const struct weft_tuning* t, const struct weft_tuning_query* q) {
  int n = 0;
  for (int a = 0; a < WEFT_ALGO_COUNT; a++)
    for (int p = 0; p < WEFT_PROTO_COUNT; p++)
      if (why_of(t, q, a, p) == WEFT_WHY_CANDIDATE)
        add(l, "%s%s/%s %.1f us", n++ ? ", " : "", weft_algo_name(a), weft_proto_name(p),
            time_of(t, q, a, p));
  if (n == 0) add(l, "none");
  return n;
}

/* Exclusions grouped by reason; an algorithm whose protocols all share the reason is named once. */
static void add_exclusions(struct line* l, const struct weft_tuning* t, const struct weft_tuning_query* q) {
  int groups = 0;
  for (int why = WEFT_WHY_CANDIDATE + 1; why < WEFT_WHY_COUNT; why++) {
    int n = 0;
    for (int a = 0; a < WEFT_ALGO_COUNT; a++) {
      int all = 1, any = 0;
      for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
        int mine = why_of(t, q, a, p) == why;
        all &= mine;
        any |= mine;
      }
      if (!any) continue;
      add(l, "%s", n++ ? ", " : groups++ ? "; " : "");
      if (all && !chosen_away(why)) {
        add(l, "%s", weft_algo_name(a));
        continue;
      }
      for (int p = 0, k = 0; p < WEFT_PROTO_COUNT; p++) {
        if (why_of(t, q, a, p) != why) continue;
        add(l, "%s%s/%s", k++ ? ", " : "", weft_algo_name(a), weft_proto_name(p));
        float us = chosen_away(why) ? time_of(t, q, a, p) : -1;
        if (us > 0) add(l, " %.1f us", us);
      }
    }
    if (n) {
      add(l, " (");
      add_why(l, t, why);
      add(l, ")");
    }
  }
  if (groups == 0) add(l, "none");
}

/* The fastest pair that only a choice (NCCL_ALGO/NCCL_PROTO, the call) could have excluded. */
static void fastest_allowed(const struct weft_tuning* t, const struct weft_tuning_query* q, int* ba, int* bp,
                            float* best) {
  *ba = *bp = -1;
  for (int a = 0; a < WEFT_ALGO_COUNT; a++)
    for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
      int why = why_of(t, q, a, p);
      float us = why == WEFT_WHY_CANDIDATE || chosen_away(why) ? time_of(t, q, a, p) : -1;
      if (us > 0 && (*ba < 0 || us < *best)) *ba = a, *bp = p, *best = us;
    }
}

static void add_reason(struct line* l, const struct weft_tuning* t, const struct weft_tuning_query* q,
                       const struct weft_tuning_pick* pick, int ncand) {
  int ba, bp;
  float best = 0;
  fastest_allowed(t, q, &ba, &bp, &best);
  int is_best = ba == pick->algo && bp == pick->proto;
  if (pick->rule != NULL) {
    add(l, "%s", pick->rule);
    if (!is_best && ba >= 0)
      add(l, " (the model would pick %s/%s, %.1f us)", weft_algo_name(ba), weft_proto_name(bp), best);
    return;
  }
  int why = ba >= 0 ? why_of(t, q, ba, bp) : WEFT_WHY_CANDIDATE;
  if (!is_best && chosen_away(why)) {
    add(l, "%s by ", ncand == 1 ? "forced" : "narrowed");
    add_why(l, t, why);
    add(l, ", which excludes the faster %s/%s (%.1f us)", weft_algo_name(ba), weft_proto_name(bp), best);
  } else if (ncand == 1 && pick->algo >= 0) {
    add(l, "the only candidate left (also the model's fastest)");
  } else {
    add(l, "model, fastest of %d candidates", ncand);
  }
}

void weft_tuning_explain(const struct weft_tuning* t, const struct weft_tuning_query* query,
                         const struct weft_tuning_pick* given, void (*emit)(void* arg, const char* line),
                         void* arg) {
  struct weft_tuning_query q = *query;
  if (q.func < 0 || q.func >= WEFT_FUNC_COUNT) return;
  const char* fn = weft_func_name(q.func);
  struct weft_tuning_pick pick = *given;
  if (pick.algo < 0) {
    struct weft_tuning_choice c;
    if (weft_tuning_choose_in(t, q.func, q.nbytes, q.call_algos & q.impl_algos, q.call_protos & q.impl_protos,
                              &c) == ncclSuccess)
      pick = (struct weft_tuning_pick){c.algo, c.proto, c.nchannels, c.time_us, NULL, NULL};
  }
  struct line l = {.len = 0};
  add(&l, "%s %zu B: candidates on %d channel(s), %d rank(s), %d node(s): ", fn, q.nbytes, t->in.nchannels,
      t->in.nranks, t->in.nnodes);
  int ncand = add_candidates(&l, t, &q);
  emit(arg, l.text);
  l.len = 0;
  add(&l, "%s %zu B: excluded ", fn, q.nbytes);
  add_exclusions(&l, t, &q);
  emit(arg, l.text);
  l.len = 0;
  if (pick.algo < 0) {
    add(&l, "%s %zu B: nothing to choose", fn, q.nbytes);
  } else {
    add(&l, "%s %zu B: chose %s/%s on %d channel(s), ", fn, q.nbytes, weft_algo_name(pick.algo),
        weft_proto_name(pick.proto), pick.nchannels);
    if (pick.time_us > 0)
      add(&l, "%.1f us predicted; reason: ", pick.time_us);
    else
      add(&l, "no prediction; reason: ");
    add_reason(&l, t, &q, &pick, ncand);
    if (pick.channels_note) add(&l, "; channels: %s", pick.channels_note);
  }
  emit(arg, l.text);
}
