/* Waits of the host executor: spin briefly, then sleep on a futex doorbell, while polling the
 * abort flag, a deadline (WEFT_TIMEOUT), and whether peer processes of this host still live. */
#ifndef WEFT_COLLECTIVES_HOST_WAIT_H
#define WEFT_COLLECTIVES_HOST_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/fingerprint.h"
#include "nccl.h"
#include "util/time.h"

struct weft_peer_info;
struct weft_cause;
struct weft_trace;
struct weft_prof;

/* What a rank's counter waits remember from one operation to the next (kept in the direct
 * paths' state: the waiter itself is a copy made per launch). */
struct weft_wait_memory {
  int peers_active;          /* the last wait ended without sleeping: spin busy_spin_ns */
  uint64_t moved_ns;         /* when this rank last moved off a CPU its peer shared */
  uint64_t move_interval_ns; /* the least time between two moves now (wait.c) */
};

/* What a rank's waits need to know; filled once per launch. */
struct weft_waiter {
  volatile uint32_t* abort_flag;
  volatile ncclResult_t* async_result; /* may be NULL */
  const struct weft_peer_info* peers;  /* NULL: no liveness checks (in-process tests) */
  const uint8_t* watch;                /* [nranks] peers whose process to watch */
  int nranks, rank;
  uint64_t spin_ns, timeout_ns, warn_ns;
  uint64_t busy_spin_ns; /* counter waits' budget while the peers are answering (WEFT_SPIN_BUSY_USEC) */
  struct weft_wait_memory* memory; /* NULL: no memory (always spin_ns, never move) */
  const char* opname;              /* operation being run, for logs */
  uint64_t seq;                    /* its sequence number */
  int warned;                      /* the one slow-wait WARN of this operation was logged */
  uint64_t next_live_check_ns;
  int live_scan_next;   /* the next rank the long-stall scan of weft_host_check_peers looks at */
  uint64_t live_probes; /* processes looked up so far (tests: the scan's cost is bounded) */
  int oversub;          /* more ranks than CPUs on this host: waits yield instead of spinning */
  int32_t* cpu_slot;    /* where this rank's waits note its CPU for peers' waits (its board); NULL: none */
  uint64_t sleeps;      /* futex sleeps of counter waits so far: a wait that could not spin it out */
  /* Longest futex sleep of weft_host_wait between checks. Shorter where a post to another
   * counter may be what the thread needs (interleaved channels: a futex sees one counter). */
  uint64_t sleep_slice_ns;
  struct weft_cause* cause;             /* the communicator's: filled when a dead peer had one */
  struct weft_cause* const* peer_cause; /* [nranks] or NULL: where a peer publishes why it gave up */
  int left_seen;     /* 1 + the awaited peer last seen to have left (wait.c: peer_left); 0: none */
  uint64_t step_tag; /* the running collective's connector step tag (step_tag.h); 0: not checked */
  uint64_t call_seq; /* that collective's number (the tag keeps its low bits) */
  /* [WEFT_RECENT_CALLS] this rank's last collectives' fingerprints by number, to tell a mismatched
   * peer's call from its tag; NULL: none */
  const struct weft_call_fp* recent_fp;
  /* Set where the ranks share boards (direct.c). poll runs with every sleeping wait's checks and
   * fails the wait when another rank found the call mismatched; bad_step reports a step whose
   * tag is not this call's. Both return ncclInvalidUsage after their WARN. */
  ncclResult_t (*poll)(void* arg, struct weft_waiter* w);
  ncclResult_t (*bad_step)(void* arg, struct weft_waiter* w, int peer, uint64_t theirs);
  void* hook_arg;
  /* Set where ranks are on several hosts (call_note.h): runs with a stalled wait's liveness checks
   * (peer: the rank waited for) and fails it (ncclInvalidUsage after its WARN) when a peer's note
   * shows another call of this number. */
  ncclResult_t (*ask)(void* arg, struct weft_waiter* w, int peer);
  void* ask_arg;
  int mismatch;                          /* a wait failed on a mismatched call: the launch tells the peers */
  int mismatch_finder;                   /* the rank that found it, when another one did; -1: this rank */
  struct weft_trace* trace;              /* the flight recorder (its channel progress); NULL: not recorded */
  struct weft_prof* prof;                /* the profiler's events (collectives/profiler.h); NULL: none */
  char mismatch_what[WEFT_CALL_FP_TEXT]; /* how the calls differ, when known; else "" */
};

void weft_waiter_init(struct weft_waiter* w, volatile uint32_t* abort_flag, int rank, int nranks);

typedef int (*weft_ready_fn)(void* arg);
/* Wait until ready(arg). doorbell/waiting are the counter a writer bumps (and its sleep flag)
 * after making the condition true. peer/channel/what name the wait in WARNs. */
ncclResult_t weft_host_wait(struct weft_waiter* w, weft_ready_fn ready, void* arg, uint64_t* doorbell,
                            uint32_t* waiting, int peer, int channel, const char* what);
/* Move the calling thread off cpu to another CPU of its affinity mask, which it keeps; returns
 * whether it moved (not when cpu is the only CPU it may use). */
int weft_host_move_off_cpu(int cpu);
/* Publish value in counter (release) and wake a sleeper. */
void weft_host_post(uint64_t* counter, uint32_t* waiting, uint64_t value);
/* Counters that several ranks may wait on at once (the direct paths' board): sleepers count
 * themselves in *sleepers. Wait until *counter >= value (acquire) or *failed is set (then
 * ncclRemoteError, naming peer). Pure spinning first when ranks fit the CPUs, yielding when
 * they do not or when *peer_cpu (the CPU the awaited rank last noted in its cpu_slot; NULL:
 * unknown) is this rank's CPU, then futex sleep on the counter's low 32 bits. */
ncclResult_t weft_host_wait_counter(struct weft_waiter* w, uint64_t* counter, uint64_t value,
                                    uint32_t* sleepers, const uint32_t* failed, const int32_t* peer_cpu,
                                    int peer, const char* what);
void weft_host_post_counter(uint64_t* counter, uint32_t* sleepers, uint64_t value);
/* For progress loops over many conditions (p2p): one idle round: spin/yield/sleep escalating
 * with idle_ns; checks abort, deadline and peers. */
ncclResult_t weft_host_idle(struct weft_waiter* w, uint64_t start_ns, int peer, int channel,
                            const char* what);
/* Peer's call number seq was theirs, this rank's mine (they differ; how: what told it, e.g. "the
 * fingerprint on its steps"): WARN naming the fields, note it for the launch to pass on, and
 * return ncclInvalidUsage. */
ncclResult_t weft_host_call_differs(struct weft_waiter* w, int peer, const struct weft_call_fp* theirs,
                                    const struct weft_call_fp* mine, uint64_t seq, const char* how);
/* A step from peer carried tag theirs, not w->step_tag: WARN (through bad_step when set) and
 * return ncclInvalidUsage. */
ncclResult_t weft_host_bad_step(struct weft_waiter* w, int peer, uint64_t theirs);
/* Ranks the long-stall scan looks at per check: its cost stays flat with the ranks on a host
 * (every rank of a stalled job scans), and each rank is still seen within
 * nranks / WEFT_LIVE_SCAN_PER_CHECK checks (16 s at 1,024 ranks, checks being 0.5 s apart). */
#define WEFT_LIVE_SCAN_PER_CHECK 32
/* Whether the process of peer (or, with all, of the next WEFT_LIVE_SCAN_PER_CHECK ranks in turn)
 * died; WARNs naming it and returns ncclRemoteError. */
ncclResult_t weft_host_check_peers(struct weft_waiter* w, int peer, int all);

#endif
