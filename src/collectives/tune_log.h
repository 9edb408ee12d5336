/* Tuning that explains itself (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, rank 0): the first call
 * of each (collective, size class) logs the candidates, the choice and its reason; after
 * WEFT_TUNE_LOG_SAMPLES calls the measured time beside the prediction, with a WARN when they
 * differ by more than 2x (host backend: the call's time; CUDA: the kernel's, from events). Size class: the
 * power of two at or below the call's bytes. */
#ifndef WEFT_COLLECTIVES_TUNE_LOG_H
#define WEFT_COLLECTIVES_TUNE_LOG_H

#include <stddef.h>
#include <stdint.h>

#define WEFT_TUNE_LOG_SAMPLES 5

struct weft_comm_ctx;
struct weft_tune_log;

/* One call's decision as the planner made it. */
struct weft_tune_choice {
  int coll; /* enum weft_coll */
  size_t bytes;
  int algo, proto, nchannels; /* enum weft_plan_algo, collectives' enum weft_proto */
  float time_us;              /* the model's prediction for exactly this (<0: none) */
  unsigned call_algos,
      call_protos;           /* the call's selection, collectives/tuned.h masks (the _ALL ones: none) */
  unsigned impl_algos;       /* algorithms the backend runs (tuned.h masks) */
  const char* rule;          /* NULL: the model chose; else the rule that did */
  const char* channels_note; /* NULL, or why the channel count is not the model's */
};

/* Fixed-size per-communicator record; NULL (and every call below a no-op) unless this is rank 0
 * and TUNING is logged at INFO. */
struct weft_tune_log* weft_tune_log_create(const struct weft_comm_ctx* comm);
void weft_tune_log_destroy(struct weft_tune_log* log);
/* The planner's decision for the call about to run: explained the first time its class is seen. */
void weft_tune_log_choice(struct weft_tune_log* log, const struct weft_tune_choice* c);
/* Executor: a timestamp (ns) before planning and running a collective, then its successful end. A
 * call the planner did not choose for (the direct paths) is not measured. */
uint64_t weft_tune_log_start(struct weft_tune_log* log);
void weft_tune_log_measured(struct weft_tune_log* log, uint64_t start_ns);

/* For an executor that learns a call's time later (the CUDA kernel's events): the choice
 * weft_tune_log_choice saw last, taken for one weft_tune_log_sample (1), or 0 when it is not to
 * be measured. */
struct weft_tune_pending {
  void* slot;
  int coll, size_class;
  float predicted_us;
};
int weft_tune_log_take(struct weft_tune_log* log, struct weft_tune_pending* p);
void weft_tune_log_sample(struct weft_tune_log* log, const struct weft_tune_pending* p, float measured_us);

#endif
