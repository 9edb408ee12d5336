/* Kernel times for the tuning log (collectives/tune_log.h), on rank 0 with
 * NCCL_DEBUG_SUBSYS=TUNING only. A launch of one collective whose choice the log wants measured
 * gets a pair of timing events around its kernel; finished pairs are read at later launches and
 * at teardown, never waited for, so the log costs the stream nothing but two event records. */
#if WEFT_CUDA
#include "collectives/cuda/state.h"
#include "collectives/dev_types.h"
#include "collectives/task.h"

/* Timing is best effort: a CUDA call that fails leaves the call untimed, and no error behind. */
static int cuda_ok(cudaError_t err) {
  if (err == cudaSuccess) return 1;
  (void)cudaGetLastError();
  return 0;
}

/* The kernel's time is the call's only when the launch holds that one collective. */
static int one_collective(const struct weft_task* tasks) {
  int n = 0;
  for (const struct weft_task* t = tasks; t; t = t->next) {
    if (t->count == 0) continue;
    if (t->coll == WEFT_COLL_SEND || t->coll == WEFT_COLL_RECV) return 0;
    n++;
  }
  return n == 1;
}

static struct weft_cuda_timer* free_timer(struct weft_cuda_state* s) {
  for (int i = 0; i < WEFT_CUDA_TIMERS; i++) {
    struct weft_cuda_timer* t = &s->timers[i];
    if (t->busy) continue;
    if (t->start == NULL && !cuda_ok(cudaEventCreate(&t->start))) return NULL;
    if (t->end == NULL && !cuda_ok(cudaEventCreate(&t->end))) return NULL;
    return t;
  }
  return NULL; /* all in flight: this call goes untimed */
}

struct weft_cuda_timer* weft_cuda_timer_begin(struct weft_cuda_state* s, const struct weft_task* tasks,
                                              cudaStream_t stream, int capturing) {
  struct weft_tune_pending p;
  if (!weft_tune_log_take(s->env.tune_log, &p) || capturing || !one_collective(tasks)) return NULL;
  struct weft_cuda_timer* t = free_timer(s);
  if (t == NULL || !cuda_ok(cudaEventRecord(t->start, stream))) return NULL;
  t->pending = p;
  t->busy = 1;
  return t;
}

void weft_cuda_timer_end(struct weft_cuda_timer* t, cudaStream_t stream, int launched) {
  if (t != NULL && !(launched && cuda_ok(cudaEventRecord(t->end, stream)))) t->busy = 0;
}

void weft_cuda_timers_collect(struct weft_cuda_state* s) {
  if (s->env.tune_log == NULL) return; /* every launch calls this: nothing to look at unless logged */
  for (int i = 0; i < WEFT_CUDA_TIMERS; i++) {
    struct weft_cuda_timer* t = &s->timers[i];
    if (!t->busy) continue;
    cudaError_t q = cudaEventQuery(t->end);
    if (q == cudaErrorNotReady) continue;
    float ms = 0;
    if (cuda_ok(q) && cuda_ok(cudaEventElapsedTime(&ms, t->start, t->end)))
      weft_tune_log_sample(s->env.tune_log, &t->pending, ms * 1000.0f);
    t->busy = 0;
  }
}

void weft_cuda_timers_free(struct weft_cuda_state* s) {
  for (int i = 0; i < WEFT_CUDA_TIMERS; i++) {
    if (s->timers[i].start) cudaEventDestroy(s->timers[i].start);
    if (s->timers[i].end) cudaEventDestroy(s->timers[i].end);
    s->timers[i] = (struct weft_cuda_timer){0};
  }
}
#endif
