/* Step-by-step interleaving of a collective's ring channels in one thread (ucontext coroutines):
 * the scheduler resumes a channel only when the step it waits for is ready; when none can move it
 * polls them all for the spin time, then sleeps in weft_host_wait (abort, deadline and peer
 * checks included) on the doorbell of the channel that has waited longest, until any channel can
 * move. A peer may feed the channels in another order (its own scheduler, or a peer that runs
 * them one after another): sleeping until that one channel moved could wait for a step the peer
 * sends only after this thread drained another channel, a deadlock across ranks. A futex hears one
 * doorbell, so the sleep is cut into short slices that look at every channel. */
#include "collectives/host/interleave.h"

#include <sched.h>
#include <stdlib.h>
#include <ucontext.h>

#include "collectives/host/exec.h"
#include "collectives/plan.h"
#include "util/log.h"

struct chan_co {
  ucontext_t ctx;
  void* stack;
  const struct weft_dev_work* work;
  struct weft_conn *send, *recv;
  int channel, done;
  ncclResult_t res;
  weft_ready_fn ready; /* what the channel waits for; NULL: runnable */
  void* arg;
  uint64_t* doorbell; /* and its sleep flag: where the thread sleeps when no channel can move */
  uint32_t* waiting;
  uint64_t since; /* order in which channels started waiting */
  int peer;
  const char* what;
};

struct weft_host_sched {
  ucontext_t main;
  struct chan_co co[WEFT_PLAN_MAX_CHANNELS];
  int n, cur;
  uint64_t nwaits;
  struct weft_waiter* waiter;
  const void* in;
  void* out;
  ncclResult_t err; /* set by the scheduler: every waiting channel returns it */
};

ncclResult_t weft_host_sched_wait(struct weft_host_sched* s, weft_ready_fn ready, void* arg,
                                  uint64_t* doorbell, uint32_t* waiting, int peer, const char* what) {
  struct chan_co* co = &s->co[s->cur];
  if (s->err == ncclSuccess && !ready(arg)) co->since = ++s->nwaits;
  while (s->err == ncclSuccess && !ready(arg)) {
    co->ready = ready;
    co->arg = arg;
    co->doorbell = doorbell;
    co->waiting = waiting;
    co->peer = peer;
    co->what = what;
    swapcontext(&co->ctx, &s->main);
  }
  co->ready = NULL;
  return s->err;
}

#define ANY_CHANNEL_SLICE_NS 1000000ull /* 1 ms: the longest a post to another channel goes unseen */

static int any_channel_ready(void* arg) {
  const struct weft_host_sched* s = arg;
  for (int c = 0; c < s->n; c++) {
    const struct chan_co* co = &s->co[c];
    if (!co->done && co->ready && co->ready(co->arg)) return 1;
  }
  return 0;
}

/* Nothing can move: sleep on the doorbell of the channel that has waited longest (the likeliest
 * to be posted next) until any channel can move. */
static ncclResult_t sleep_until_any(struct weft_host_sched* s) {
  int c = -1;
  for (int i = 0; i < s->n; i++)
    if (!s->co[i].done && (c < 0 || s->co[i].since < s->co[c].since)) c = i;
  struct chan_co* co = &s->co[c];
  struct weft_waiter* w = s->waiter;
  uint64_t slice = w->sleep_slice_ns;
  w->sleep_slice_ns = ANY_CHANNEL_SLICE_NS;
  ncclResult_t res =
      weft_host_wait(w, any_channel_ready, s, co->doorbell, co->waiting, co->peer, c, co->what);
  w->sleep_slice_ns = slice;
  return res;
}

/* makecontext passes only ints: a channel's first resume finds its scheduler here. */
static __thread struct weft_host_sched* current;

static void co_main(void) {
  struct weft_host_sched* s = current;
  struct chan_co* co = &s->co[s->cur];
  co->res = weft_host_run_work_sched(co->work, co->send, co->recv, s->waiter, co->channel, s->in, s->out, s);
  co->done = 1;
  /* uc_link returns to the scheduler */
}

static ncclResult_t co_init(struct weft_host_sched* s, int c, void** stack) {
  struct chan_co* co = &s->co[c];
  if (*stack == NULL) *stack = malloc(WEFT_HOST_STACK_BYTES);
  co->stack = *stack;
  if (co->stack == NULL || getcontext(&co->ctx) != 0) {
    WEFT_WARN("Rank %d: cannot set up channel %d for interleaved execution", s->waiter->rank, c);
    return ncclSystemError;
  }
  co->ctx.uc_stack.ss_sp = co->stack;
  co->ctx.uc_stack.ss_size = WEFT_HOST_STACK_BYTES;
  co->ctx.uc_link = &s->main;
  makecontext(&co->ctx, co_main, 0);
  return ncclSuccess;
}

/* One pass over the channels: resume every runnable one; returns how many ran. */
static int run_round(struct weft_host_sched* s, int* left) {
  int ran = 0;
  for (int c = 0; c < s->n; c++) {
    struct chan_co* co = &s->co[c];
    if (co->done || (s->err == ncclSuccess && co->ready && !co->ready(co->arg))) continue;
    s->cur = c;
    current = s;
    swapcontext(&s->main, &co->ctx);
    ran++;
    if (co->done) (*left)--;
  }
  return ran;
}

/* Poll every channel for the waiter's spin time before sleeping on one of them. */
static int spin_all(struct weft_host_sched* s, int* left) {
  uint64_t start = weft_time_ns();
  for (unsigned i = 1;; i++) {
    __builtin_ia32_pause();
    if (run_round(s, left) > 0) return 1;
    if ((i & 63) == 0) {
      if (weft_time_ns() - start >= s->waiter->spin_ns) return 0;
      sched_yield(); /* ranks may outnumber cores: let the peer we wait for run */
    }
  }
}

ncclResult_t weft_host_run_interleaved(const struct weft_dev_work* works, int n, struct weft_conn* send,
                                       struct weft_conn* recv, struct weft_waiter* waiter, const void* in,
                                       void* out, void** stacks) {
  struct weft_host_sched* s = calloc(1, sizeof(*s));
  if (s == NULL) return ncclSystemError;
  s->n = n;
  s->waiter = waiter;
  s->in = in;
  s->out = out;
  ncclResult_t res = ncclSuccess;
  for (int c = 0; c < n && res == ncclSuccess; c++) {
    s->co[c] = (struct chan_co){.work = &works[c], .send = &send[c], .recv = &recv[c], .channel = c};
    res = co_init(s, c, &stacks[c]);
  }
  int left = n;
  while (res == ncclSuccess && left > 0) {
    if (run_round(s, &left) > 0 || spin_all(s, &left)) continue;
    s->err = sleep_until_any(s);
    if (s->err != ncclSuccess)
      while (left > 0) run_round(s, &left); /* every channel returns the error and unwinds */
  }
  for (int c = 0; c < n; c++) {
    if (res == ncclSuccess && s->co[c].res != ncclSuccess) res = s->co[c].res;
  }
  if (res == ncclSuccess) res = s->err;
  free(s);
  return res;
}

void weft_host_interleave_free(void** stacks, int n) {
  for (int c = 0; c < n; c++) {
    free(stacks[c]);
    stacks[c] = NULL;
  }
}
