/* The flight recorder's ring: allocated once per communicator, then written on the per-call path
 * with plain stores into the slot of each task (no locks, no allocation). */
#include "collectives/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sysfs.h"

void weft_trace_signals_add(struct weft_trace* tr);    /* trace_signal.c */
void weft_trace_signals_remove(struct weft_trace* tr); /* trace_signal.c */

#define MAX_RECORDS (1 << 20)
#define CALIBRATION_NS 20000000ull /* TSC rate measured over at least this */

int weft_trace_use_tsc;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static uint64_t calib_tick, calib_ns; /* a (TSC, CLOCK_MONOTONIC) pair from the first comm */

static void clock_setup(void) {
#if defined(__x86_64__)
  char src[32];
  weft_read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", src, sizeof(src));
  if (strcmp(src, "tsc") == 0) {
    calib_tick = __builtin_ia32_rdtsc();
    calib_ns = weft_time_ns();
    weft_trace_use_tsc = 1;
  }
#endif
}

void weft_trace_clock_now(struct weft_trace_clock* c) {
  struct timespec rt;
  c->ns_per_tick = 1.0;
#if defined(__x86_64__)
  if (weft_trace_use_tsc) {
    while (weft_time_ns() - calib_ns < CALIBRATION_NS) { /* a dump right after init: wait for a rate */
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    uint64_t tick = __builtin_ia32_rdtsc(), ns = weft_time_ns();
    c->ns_per_tick = (double)(ns - calib_ns) / (double)(tick - calib_tick);
  }
#endif
  c->tick_now = weft_trace_now();
  clock_gettime(CLOCK_REALTIME, &rt);
  c->wall_now = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
}

uint64_t weft_trace_wall(const struct weft_trace_clock* c, uint64_t ticks) {
  if (ticks == 0) return 0;
  double ago = (double)(int64_t)(c->tick_now - ticks) * c->ns_per_tick;
  return (uint64_t)((double)c->wall_now - ago);
}

void weft_trace_create(struct weft_comm_ctx* comm) {
  int64_t n = weft_param_int("WEFT_TRACE_BUFFER");
  comm->trace = NULL;
  if (n <= 0) return;
  pthread_once(&clock_once, clock_setup);
  if (n > MAX_RECORDS) {
    WEFT_WARN("WEFT_TRACE_BUFFER %lld is more than %d records; using %d", (long long)n, MAX_RECORDS,
              MAX_RECORDS);
    n = MAX_RECORDS;
  }
  int64_t pow2 = 1;
  while (pow2 < n) pow2 *= 2; /* a record's slot is its number masked (MAX_RECORDS is one too) */
  n = pow2;
  struct weft_trace* tr = calloc(1, sizeof(*tr) + (size_t)n * sizeof(tr->ring[0]));
  if (tr == NULL) {
    WEFT_WARN("comm %p rank %d: no memory for a flight recorder of %lld records; recording is off",
              (void*)comm, comm->rank, (long long)n);
    return;
  }
  tr->comm = comm;
  tr->size = (uint32_t)n;
  comm->trace = tr;
  if (weft_param_str("WEFT_TRACE_DIR") != NULL) weft_trace_signals_add(tr);
}

void weft_trace_destroy(struct weft_comm_ctx* comm) {
  if (comm == NULL || comm->trace == NULL) return;
  weft_trace_signals_remove(comm->trace); /* waits for a dump of it in progress */
  free(comm->trace);
  comm->trace = NULL;
}

static struct weft_trace_rec* slot_of(struct weft_trace* tr, uint64_t seq) {
  struct weft_trace_rec* r = weft_trace_slot(tr, seq);
  return r->seq == seq && r->state != 0 ? r : NULL;
}

static int reduces(enum weft_coll coll) {
  return coll == WEFT_COLL_REDUCE || coll == WEFT_COLL_ALLREDUCE || coll == WEFT_COLL_REDUCESCATTER;
}

void weft_trace_enqueue(struct weft_trace* tr, const struct weft_task* t) {
  struct weft_trace_rec* r = weft_trace_slot(tr, t->seq);
  int p2p = t->coll == WEFT_COLL_SEND || t->coll == WEFT_COLL_RECV;
  r->seq = t->seq;
  r->coll_no = p2p ? 0 : ++tr->colls;
  r->count = t->count;
  r->stream = (uint64_t)(uintptr_t)t->stream;
  r->t_enqueued = weft_trace_now();
  r->t_started = r->t_finished = 0;
  r->root = p2p || t->coll == WEFT_COLL_BROADCAST || t->coll == WEFT_COLL_REDUCE ? t->root : -1;
  r->result = 0;
  r->coll = (uint8_t)t->coll;
  r->dtype = (uint8_t)t->dtype;
  r->redop = reduces(t->coll) ? (uint8_t)t->op.user_op : 0xff;
  r->algo = WEFT_TRACE_ALGO_UNKNOWN;
  r->proto = 0xff;
  r->channels = 0;
  __atomic_store_n(&r->state, WEFT_TRACE_QUEUED, __ATOMIC_RELEASE);
}

void weft_trace_start(struct weft_trace* tr, const struct weft_task* t) {
  struct weft_trace_rec* r = slot_of(tr, t->seq);
  if (r == NULL) return; /* overwritten: more tasks queued in one group than the ring holds */
  if (tr->chan_used) {   /* what an earlier operation's waits left */
    memset(tr->chan, 0, sizeof(tr->chan));
    tr->chan_used = 0;
  }
  /* A call outside any group starts where it was queued: one clock read less on its path. */
  r->t_started = t->alone ? r->t_enqueued : weft_trace_now();
  __atomic_store_n(&r->state, WEFT_TRACE_RUNNING, __ATOMIC_RELEASE);
  __atomic_store_n(&tr->inflight, t->seq + 1, __ATOMIC_RELEASE);
}

void weft_trace_plan(struct weft_trace* tr, const struct weft_task* t, int algo, int proto, int channels) {
  struct weft_trace_rec* r = slot_of(tr, t->seq);
  if (r == NULL) return;
  r->algo = (uint8_t)algo;
  r->proto = (uint8_t)proto;
  r->channels = (uint8_t)channels;
}

void weft_trace_finish(struct weft_trace* tr, const struct weft_task* t, ncclResult_t res) {
  struct weft_trace_rec* r = slot_of(tr, t->seq);
  if (r == NULL) return;
  r->t_finished = weft_trace_now();
  r->result = (int32_t)res;
  __atomic_store_n(&r->state, res == ncclSuccess ? WEFT_TRACE_DONE : WEFT_TRACE_FAILED, __ATOMIC_RELEASE);
  /* A failed operation stays the one in flight: its channels show where it stopped. */
  if (res == ncclSuccess) __atomic_store_n(&tr->inflight, 0, __ATOMIC_RELEASE);
}

/* A LAUNCHED record of a kernel that ended (DONE) or gave up (FAILED); any thread may settle it,
 * once. */
static void settle(struct weft_trace_rec* r, int state, ncclResult_t res, uint64_t now) {
  uint8_t launched = WEFT_TRACE_LAUNCHED;
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != launched) return;
  __atomic_store_n(&r->t_finished, now, __ATOMIC_RELAXED);
  __atomic_store_n(&r->result, (int32_t)res, __ATOMIC_RELAXED);
  __atomic_compare_exchange_n(&r->state, &launched, (uint8_t)state, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void weft_trace_launched(struct weft_trace* tr, const struct weft_task* t, ncclResult_t res) {
  struct weft_trace_rec* r = slot_of(tr, t->seq);
  if (r == NULL) return;
  if (res != ncclSuccess || t->count == 0) { /* an empty task is not in the kernel: done */
    weft_trace_finish(tr, t, res);
    return;
  }
  __atomic_store_n(&r->state, WEFT_TRACE_LAUNCHED, __ATOMIC_SEQ_CST);
  __atomic_store_n(&tr->inflight, 0, __ATOMIC_RELEASE);
  /* The kernel may have ended before this: an observer that moved dev_done past it then found
   * it RUNNING and left it; one that comes later finds it LAUNCHED (both seq_cst). */
  if (t->seq < __atomic_load_n(&tr->dev_done, __ATOMIC_SEQ_CST))
    settle(r, WEFT_TRACE_DONE, ncclSuccess, weft_trace_now());
}

uint32_t weft_trace_dev_launch(struct weft_trace* tr, const struct weft_progress* dev, uint64_t last_seq) {
  if (tr->dev == NULL) __atomic_store_n(&tr->dev, dev, __ATOMIC_RELEASE);
  uint32_t n = ++tr->dev_launches;
  if (n == 0) n = ++tr->dev_launches; /* 0: no launch */
  uint64_t* e = &tr->dev_launch[n % WEFT_TRACE_LAUNCHES].launch;
  __atomic_store_n(e, 0, __ATOMIC_RELAXED); /* an observer skips the entry while it changes */
  __atomic_store_n(&tr->dev_launch[n % WEFT_TRACE_LAUNCHES].last_seq, last_seq, __ATOMIC_RELEASE);
  __atomic_store_n(e, n, __ATOMIC_RELEASE);
  return n;
}

/* Records up to (not including) upto are done; the observer that moves dev_done settles them. */
static void dev_done_upto(struct weft_trace* tr, uint64_t upto, uint64_t now) {
  uint64_t old = __atomic_load_n(&tr->dev_done, __ATOMIC_SEQ_CST);
  do {
    if (upto <= old) return;
  } while (!__atomic_compare_exchange_n(&tr->dev_done, &old, upto, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  for (uint64_t seq = upto - old > tr->size ? upto - tr->size : old; seq < upto; seq++) {
    struct weft_trace_rec* r = slot_of(tr, seq);
    if (r != NULL) settle(r, WEFT_TRACE_DONE, ncclSuccess, now);
  }
}

void weft_trace_dev_observe(struct weft_trace* tr) {
  const struct weft_progress* d = __atomic_load_n(&tr->dev, __ATOMIC_ACQUIRE);
  if (d == NULL) return;
  uint64_t now = weft_trace_now();
  for (int c = 0; c < WEFT_PROGRESS_SLOTS; c++) {
    uint64_t beat = __atomic_load_n(&d->chan[c].beat, __ATOMIC_RELAXED);
    if (beat == __atomic_load_n(&tr->dev_seen[c].beat, __ATOMIC_RELAXED)) continue;
    __atomic_store_n(&tr->dev_seen[c].seen, now, __ATOMIC_RELAXED);
    __atomic_store_n(&tr->dev_seen[c].beat, beat, __ATOMIC_RELAXED);
  }
  uint64_t launch = __atomic_load_n(&d->launch_done, __ATOMIC_RELAXED);
  const uint64_t* e = &tr->dev_launch[launch % WEFT_TRACE_LAUNCHES].launch;
  if (launch == 0 || __atomic_load_n(e, __ATOMIC_ACQUIRE) != launch) return; /* unknown, or too old */
  uint64_t last = __atomic_load_n(&tr->dev_launch[launch % WEFT_TRACE_LAUNCHES].last_seq, __ATOMIC_ACQUIRE);
  if (__atomic_load_n(e, __ATOMIC_ACQUIRE) == launch) dev_done_upto(tr, last + 1, now);
}

void weft_trace_dev_failed(struct weft_trace* tr, ncclResult_t res) {
  if (__atomic_load_n(&tr->dev, __ATOMIC_ACQUIRE) == NULL) return;
  uint64_t now = weft_trace_now(), from = __atomic_load_n(&tr->dev_done, __ATOMIC_SEQ_CST);
  for (uint64_t seq = from; seq < from + tr->size; seq++) {
    struct weft_trace_rec* r = slot_of(tr, seq);
    if (r == NULL) break; /* not queued yet */
    settle(r, WEFT_TRACE_FAILED, res, now);
  }
}
