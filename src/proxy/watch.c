/* The proxy's side of operation watches (watch.h). Watches are pushed in step order, so a step
 * below the oldest watch's first one belongs to no watch and is skipped for good. */
#include "proxy/watch.h"

int weft_proxy_watch_open(struct weft_proxy_watchq* q, struct weft_proxy_watch* w, uint64_t first) {
  uint64_t r = __atomic_load_n(&q->r, __ATOMIC_ACQUIRE), n = q->w;
  if (n - r >= WEFT_PROXY_WATCHES) return 0; /* the proxy lags this many operations: let this one go */
  w->first = first;
  w->started = 0;
  __atomic_store_n(&w->last, UINT64_MAX, __ATOMIC_RELAXED);
  __atomic_store_n(&w->busy, 1, __ATOMIC_RELAXED);
  q->ring[n % WEFT_PROXY_WATCHES] = w;
  __atomic_store_n(&q->w, n + 1, __ATOMIC_RELEASE);
  return 1;
}

void weft_proxy_watch_close(struct weft_proxy_watch* w, uint64_t last) {
  __atomic_store_n(&w->last, last, __ATOMIC_RELEASE);
}

static void retire(struct weft_proxy_watchq* q, struct weft_proxy_watch* x) {
  if (x->started) x->event(x, WEFT_PROXY_OP_STOP, 0); /* an operation without steps reports nothing */
  __atomic_store_n(&q->r, q->r + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&x->busy, 0, __ATOMIC_RELEASE);
}

void weft_proxy_watch_sweep(struct weft_proxy_watchq* q, uint64_t started, uint64_t stopped) {
  uint64_t n = __atomic_load_n(&q->w, __ATOMIC_ACQUIRE);
  while (q->r != n) {
    struct weft_proxy_watch* x = q->ring[q->r % WEFT_PROXY_WATCHES];
    uint64_t last = __atomic_load_n(&x->last, __ATOMIC_ACQUIRE);
    if (q->started_upto < x->first) q->started_upto = x->first;
    if (q->stopped_upto < x->first) q->stopped_upto = x->first;
    for (uint64_t end = last < started ? last : started; q->started_upto < end; q->started_upto++) {
      if (!x->started) x->event(x, WEFT_PROXY_OP_START, 0);
      x->started = 1;
      x->event(x, WEFT_PROXY_STEP_START, q->started_upto - x->first);
    }
    uint64_t end = last < stopped ? last : stopped;
    if (end > q->started_upto) end = q->started_upto;
    for (; q->stopped_upto < end; q->stopped_upto++)
      x->event(x, WEFT_PROXY_STEP_STOP, q->stopped_upto - x->first);
    if (last == UINT64_MAX || q->stopped_upto < last) return; /* still running */
    retire(q, x);
  }
}

void weft_proxy_watch_flush(struct weft_proxy_watchq* q) {
  uint64_t n = __atomic_load_n(&q->w, __ATOMIC_ACQUIRE);
  while (q->r != n) {
    struct weft_proxy_watch* x = q->ring[q->r % WEFT_PROXY_WATCHES];
    for (; x->started && q->stopped_upto < q->started_upto; q->stopped_upto++)
      x->event(x, WEFT_PROXY_STEP_STOP, q->stopped_upto - x->first);
    retire(q, x);
  }
}
