/* Per-communicator record of the (collective, size class) pairs seen: each is explained once, and
 * measured over its first WEFT_TUNE_LOG_SAMPLES calls against the model's prediction. */
#include "collectives/tune_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/dev_types.h"
#include "collectives/plan.h"
#include "collectives/task.h"
#include "collectives/tuned.h"
#include "util/log.h"
#include "util/time.h"

#define NCLASSES 64           /* size classes: 2^0 .. 2^63 bytes */
#define NCOLLS WEFT_COLL_SEND /* the collectives the planner chooses for */
#define OFF_BY 2.0f           /* measured vs predicted beyond this factor: WARN */

struct slot {
  uint8_t explained, nsamples, reported;
  int8_t algo, proto, nchannels; /* the explained choice: only calls that repeat it are measured */
  float predicted_us[WEFT_TUNE_LOG_SAMPLES], measured_us[WEFT_TUNE_LOG_SAMPLES];
};

struct weft_tune_log {
  const struct weft_comm_ctx* comm;
  struct slot slots[NCOLLS][NCLASSES];
  struct slot* pending; /* the call weft_tune_log_choice saw last, until it is measured */
  int pending_coll, pending_class;
  float pending_us;
};

struct weft_tune_log* weft_tune_log_create(const struct weft_comm_ctx* comm) {
  if (comm->rank != 0 || !WEFT_LOG_ON(WEFT_LOG_INFO, WEFT_TUNING)) return NULL;
  struct weft_tune_log* log = calloc(1, sizeof(*log));
  if (log != NULL) log->comm = comm;
  return log; /* out of memory: no explanations, nothing else lost */
}

void weft_tune_log_destroy(struct weft_tune_log* log) { free(log); }

static int size_class(size_t bytes) { return bytes ? 63 - __builtin_clzll((unsigned long long)bytes) : 0; }

/* "1 MiB" for 2^20: the lower bound of class k. */
static void class_text(int k, char* buf, size_t size) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  snprintf(buf, size, "%llu %s", 1ull << (k % 10), units[k / 10]);
}

struct emit_ctx {
  const struct weft_comm_ctx* comm;
  char cls[16];
};

static void emit_line(void* arg, const char* line) {
  const struct emit_ctx* e = arg;
  WEFT_INFO(WEFT_TUNING, "comm %p rank %d size class %s: %s", (void*)e->comm, e->comm->rank, e->cls, line);
}

static const char* algo_text(int algo) { return algo == WEFT_PLAN_TREE ? "Tree" : "Ring"; }
static const char* proto_text(int proto) { return proto == WEFT_PROTO_LL ? "LL" : "Simple"; }

static void explain(const struct weft_tune_log* log, const struct weft_tune_choice* c, int k) {
  struct emit_ctx e = {log->comm, ""};
  class_text(k, e.cls, sizeof(e.cls));
  struct weft_tuned_explain x = {.coll = c->coll,
                                 .nbytes = c->bytes,
                                 .call_algos = c->call_algos,
                                 .call_protos = c->call_protos,
                                 .impl_algos = c->impl_algos,
                                 .pick = {.tree = c->algo == WEFT_PLAN_TREE,
                                          .ll = c->proto == WEFT_PROTO_LL,
                                          .nchannels = c->nchannels,
                                          .time_us = c->time_us},
                                 .rule = c->rule,
                                 .channels_note = c->channels_note};
  if (weft_comm_tuned_explain(log->comm, &x, emit_line, &e)) return;
  char line[512];
  snprintf(line, sizeof(line), "%s %zu B: chose %s/%s on %d channel(s), no prediction; reason: %s%s%s",
           weft_coll_name(c->coll), c->bytes, algo_text(c->algo), proto_text(c->proto), c->nchannels,
           c->rule ? c->rule : "planner defaults", c->channels_note ? "; channels: " : "",
           c->channels_note ? c->channels_note : "");
  emit_line(&e, line);
}

void weft_tune_log_choice(struct weft_tune_log* log, const struct weft_tune_choice* c) {
  if (log == NULL) return;
  log->pending = NULL;
  if (c->coll < 0 || c->coll >= NCOLLS) return;
  int k = size_class(c->bytes);
  struct slot* s = &log->slots[c->coll][k];
  if (!s->explained) {
    explain(log, c, k);
    *s = (struct slot){.explained = 1,
                       .algo = (int8_t)c->algo,
                       .proto = (int8_t)c->proto,
                       .nchannels = (int8_t)c->nchannels};
  }
  if (s->reported || !(c->time_us > 0) || s->algo != c->algo || s->proto != c->proto ||
      s->nchannels != c->nchannels)
    return;
  log->pending = s;
  log->pending_coll = c->coll;
  log->pending_class = k;
  log->pending_us = c->time_us;
}

/* Forgets a choice whose call never ended (it failed), so this one is not timed against it. */
uint64_t weft_tune_log_start(struct weft_tune_log* log) {
  if (log == NULL) return 0;
  log->pending = NULL;
  return weft_time_ns();
}

static int cmp_float(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return x < y ? -1 : x > y;
}

static float median(const float* v, int n) {
  float s[WEFT_TUNE_LOG_SAMPLES];
  memcpy(s, v, sizeof(float) * (size_t)n);
  qsort(s, (size_t)n, sizeof(float), cmp_float);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Medians, not means: the first call of a pair may connect trees or fault pages in. */
static void report(const struct weft_tune_log* log, const struct slot* s, int coll, int k) {
  float measured = median(s->measured_us, s->nsamples), predicted = median(s->predicted_us, s->nsamples);
  float ratio = measured / predicted;
  char cls[16];
  class_text(k, cls, sizeof(cls));
  const char* name = weft_coll_name(coll);
  WEFT_INFO(WEFT_TUNING,
            "comm %p rank %d size class %s: %s %s/%s on %d channel(s): measured %.1f us, predicted %.1f us "
            "(median of %d calls, measured/predicted %.2f)",
            (void*)log->comm, log->comm->rank, cls, name, algo_text(s->algo), proto_text(s->proto),
            s->nchannels, measured, predicted, s->nsamples, ratio);
  if (ratio > OFF_BY || ratio < 1 / OFF_BY)
    WEFT_WARN(
        "comm %p rank %d: %s of size class %s (%s/%s on %d channel(s)) took %.1f us, the tuning model "
        "predicted %.1f us (%.1fx %s): the topology (NCCL_TOPO_FILE, detection) or the model may be wrong, "
        "or the ranks' CPUs are oversubscribed; see NCCL_DEBUG_SUBSYS=GRAPH,TUNING",
        (void*)log->comm, log->comm->rank, name, cls, algo_text(s->algo), proto_text(s->proto), s->nchannels,
        measured, predicted, ratio > 1 ? ratio : 1 / ratio, ratio > 1 ? "slower" : "faster");
}

int weft_tune_log_take(struct weft_tune_log* log, struct weft_tune_pending* p) {
  if (log == NULL || log->pending == NULL) return 0;
  *p = (struct weft_tune_pending){log->pending, log->pending_coll, log->pending_class, log->pending_us};
  log->pending = NULL;
  return 1;
}

/* Samples may arrive after the slot has its share (timed calls still in flight): those are dropped. */
void weft_tune_log_sample(struct weft_tune_log* log, const struct weft_tune_pending* p, float measured_us) {
  struct slot* s = p->slot;
  if (log == NULL || s->reported || s->nsamples >= WEFT_TUNE_LOG_SAMPLES) return;
  s->predicted_us[s->nsamples] = p->predicted_us;
  s->measured_us[s->nsamples] = measured_us;
  if (++s->nsamples < WEFT_TUNE_LOG_SAMPLES) return;
  report(log, s, p->coll, p->size_class);
  s->reported = 1;
}

void weft_tune_log_measured(struct weft_tune_log* log, uint64_t start_ns) {
  struct weft_tune_pending p;
  if (weft_tune_log_take(log, &p))
    weft_tune_log_sample(log, &p, (float)((weft_time_ns() - start_ns) / 1000.0));
}
