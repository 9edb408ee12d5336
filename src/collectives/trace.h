/* The flight recorder: per communicator, a fixed ring of the latest operations (what was called,
 * how it was planned, when it was queued, started and finished) and, for the one running, how
 * far each channel got and which peer it waits for. Dumped as JSON (trace_dump.c) on failure,
 * abort, signal or request, for tools/weft-trace to name the rank that stopped the job. */
#ifndef WEFT_COLLECTIVES_TRACE_H
#define WEFT_COLLECTIVES_TRACE_H

#include <stdint.h>
#include <time.h>

#include "collectives/progress.h"
#include "collectives/task.h"
#include "nccl.h"
#include "util/time.h"

struct weft_comm_ctx;

#define WEFT_TRACE_CHANNELS 4  /* host channels (WEFT_PLAN_MAX_CHANNELS; p2p and boards use slot 0) */
#define WEFT_TRACE_LAUNCHES 64 /* CUDA launches whose end the recorder can still place */

_Static_assert(WEFT_TRACE_CHANNELS <= WEFT_PROGRESS_SLOTS, "the dump lists the first channels always");

/* LAUNCHED: handed to the CUDA stream, not seen ended yet; the kernel's progress area moves it
 * to DONE (or FAILED when a kernel of the comm gave up). */
enum weft_trace_state {
  WEFT_TRACE_QUEUED = 1,
  WEFT_TRACE_RUNNING,
  WEFT_TRACE_DONE,
  WEFT_TRACE_FAILED,
  WEFT_TRACE_LAUNCHED
};
/* How the operation ran; UNKNOWN where the backend does not say (CUDA send/recv). */
enum weft_trace_algo { WEFT_TRACE_ALGO_UNKNOWN, WEFT_TRACE_RING, WEFT_TRACE_TREE, WEFT_TRACE_DIRECT };

/* One operation. Written only by the thread that queues and runs the comm's work. */
struct weft_trace_rec {
  uint64_t seq;     /* the task's sequence number (every call of the comm) */
  uint64_t coll_no; /* collectives only: 1, 2, ... numbered alike on every rank; 0 for send/recv */
  uint64_t count;
  uint64_t stream;
  uint64_t t_enqueued, t_started, t_finished; /* weft_trace_now(); 0: not yet */
  int32_t root;                               /* root, peer, or -1 */
  int32_t result;                             /* ncclResult_t once finished */
  uint8_t coll, dtype, redop, state;
  uint8_t algo, proto, channels, pad;
};

/* The running operation's progress on one channel. */
struct weft_trace_chan {
  uint64_t steps;      /* waits passed on this channel in this operation */
  uint64_t since;      /* when the current wait began (weft_trace_now()) */
  const char* what;    /* what it waits for (a static string) */
  int32_t peer;        /* the rank it waits for */
  int32_t waiting;     /* 1 while blocked past the spin */
  uint64_t peer_steps; /* the peer's counter when this wait began (steps it produced/consumed) */
};

struct weft_trace {
  struct weft_comm_ctx* comm;
  uint32_t size;      /* records in ring, a power of two (weft_trace_slot masks, no division) */
  uint64_t colls;     /* collectives queued so far */
  uint64_t inflight;  /* seq of the running operation + 1; 0: none */
  int failure_dumped; /* a dump on failure was written: an async error found later adds none */
  int chan_used;      /* chan was written since the running operation's start cleared it */
  struct weft_trace_chan chan[WEFT_TRACE_CHANNELS];
  /* CUDA: the kernel's progress area (collectives/progress.h), from the first launch on; NULL on
   * the host backend. Read by whoever observes it (weft_trace_dev_observe). */
  const struct weft_progress* dev;
  uint32_t dev_launches; /* launches numbered so far (the launching thread's) */
  uint64_t dev_done;     /* every record below this seq that was LAUNCHED is DONE */
  struct {
    uint64_t launch, last_seq;
  } dev_launch[WEFT_TRACE_LAUNCHES]; /* launch number -> the newest seq it carries */
  struct {
    uint64_t beat, seen; /* a channel's GPU clock as the host saw it first, and when (ticks) */
  } dev_seen[WEFT_PROGRESS_SLOTS];
  struct weft_trace* next; /* the signal dumper's list (trace_dump.c) */
  struct weft_trace_rec ring[];
};

/* Where seq's record goes in the ring. */
static inline struct weft_trace_rec* weft_trace_slot(const struct weft_trace* tr, uint64_t seq) {
  return (struct weft_trace_rec*)&tr->ring[seq & (tr->size - 1)];
}

/* The recorder's clock, in ticks: the TSC where the kernel itself trusts it (its clocksource is
 * tsc), which costs a third of a clock_gettime; else CLOCK_MONOTONIC ns. Three readings per call
 * are most of the recorder's cost. A dump converts ticks to wall-clock ns (weft_trace_wall). */
extern int weft_trace_use_tsc;
static inline uint64_t weft_trace_now(void) {
#if defined(__x86_64__)
  if (weft_trace_use_tsc) return __builtin_ia32_rdtsc();
#endif
  return weft_time_ns();
}
/* How to turn ticks into wall-clock ns now: wall = wall_now - (tick_now - ticks) * ns_per_tick. */
struct weft_trace_clock {
  uint64_t tick_now, wall_now;
  double ns_per_tick;
};
void weft_trace_clock_now(struct weft_trace_clock* c);
uint64_t weft_trace_wall(const struct weft_trace_clock* c, uint64_t ticks); /* 0 stays 0 */

/* Allocates comm->trace (WEFT_TRACE_BUFFER records; 0: off) and, when WEFT_TRACE_DIR is set,
 * lists it for the signal dumper. Never fails the init: without memory the recorder is off. */
void weft_trace_create(struct weft_comm_ctx* comm);
void weft_trace_destroy(struct weft_comm_ctx* comm); /* NULL-safe */

/* The per-call path: a few stores into the ring slot of the task. */
void weft_trace_enqueue(struct weft_trace* tr, const struct weft_task* t);
void weft_trace_start(struct weft_trace* tr, const struct weft_task* t);
void weft_trace_plan(struct weft_trace* tr, const struct weft_task* t, int algo, int proto, int channels);
void weft_trace_finish(struct weft_trace* tr, const struct weft_task* t, ncclResult_t res);
/* CUDA: the launch of t returned res (success: LAUNCHED, else FAILED). */
void weft_trace_launched(struct weft_trace* tr, const struct weft_task* t, ncclResult_t res);

/* CUDA, before a launch whose newest task is last_seq: the number the kernel reports it done by
 * (weft_cuda_kargs.launch); dev is the comm's progress area. Never 0. */
uint32_t weft_trace_dev_launch(struct weft_trace* tr, const struct weft_progress* dev, uint64_t last_seq);
/* Reads the progress area (no-op without one): records of launches the kernel finished become
 * DONE, and each channel's clock is stamped with the host's time when it changed. Any thread,
 * at any time (a launch, an async-error query, a dump). */
void weft_trace_dev_observe(struct weft_trace* tr);
/* A kernel of the comm gave up (res): the launched records it did not finish become FAILED. */
void weft_trace_dev_failed(struct weft_trace* tr, ncclResult_t res);
/* The seq (64 bits) a progress slot's 32-bit one stands for: the nearest to ref. */
static inline uint64_t weft_trace_dev_seq(uint64_t ref, uint32_t low) {
  return ref + (uint64_t)(int64_t)(int32_t)(low - (uint32_t)ref);
}

/* Progress of the running operation, called by the host waits (w->trace: NULL when off). Notes
 * that the channels are in use, so that the next operation's start clears them (and only then:
 * most small operations never wait past the spin). */
static inline struct weft_trace_chan* weft_trace_chan_of(struct weft_trace* tr, int channel) {
  tr->chan_used = 1;
  return &tr->chan[channel > 0 && channel < WEFT_TRACE_CHANNELS ? channel : 0];
}
static inline void weft_trace_wait_begin(struct weft_trace* tr, int channel, int peer, const char* what,
                                         const uint64_t* peer_counter) {
  struct weft_trace_chan* c = weft_trace_chan_of(tr, channel);
  c->peer = peer;
  c->what = what;
  c->since = weft_trace_now();
  c->peer_steps = peer_counter ? __atomic_load_n(peer_counter, __ATOMIC_RELAXED) : 0;
  __atomic_store_n(&c->waiting, 1, __ATOMIC_RELEASE);
}
static inline void weft_trace_wait_end(struct weft_trace* tr, int channel) {
  __atomic_store_n(&weft_trace_chan_of(tr, channel)->waiting, 0, __ATOMIC_RELAXED);
}

/* Why a dump was written, as the file says. */
enum weft_trace_reason {
  WEFT_TRACE_ON_FAILURE,
  WEFT_TRACE_ON_ABORT,
  WEFT_TRACE_ON_SIGNAL,
  WEFT_TRACE_ON_FATAL,
  WEFT_TRACE_ON_REQUEST
};
/* Writes the comm's dump into dir (NULL: WEFT_TRACE_DIR; nothing written, ncclSuccess, when that
 * is unset too and !required). The file is weft-trace-<commHash>-r<rank>-<host>-<pid>.json. */
ncclResult_t weft_trace_dump(struct weft_comm_ctx* comm, const char* dir, enum weft_trace_reason why,
                             int required);

#endif
