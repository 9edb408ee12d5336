/* Spin-then-futex waits. The doorbell is the low 32 bits of a 64-bit step counter; futexes are
 * the shared (non-private) kind so they work across processes on MAP_SHARED memory. */
#include "collectives/host/wait.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collectives/context.h"
#include "collectives/trace.h"
#include "transport/connector.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
#include "util/tsan.h"

#define SLEEP_SLICE_NS 20000000ull /* futex sleeps this long at most between checks */

void weft_waiter_init(struct weft_waiter* w, volatile uint32_t* abort_flag, int rank, int nranks) {
  memset(w, 0, sizeof(*w));
  w->abort_flag = abort_flag;
  w->rank = rank;
  w->nranks = nranks;
  int64_t spin = weft_param_int("WEFT_SPIN_USEC"), tmo = weft_param_int("WEFT_TIMEOUT");
  int64_t warn = weft_param_int("WEFT_WARN_AFTER");
  w->spin_ns = spin > 0 ? (uint64_t)spin * 1000 : 0;
  int64_t busy = weft_param_int("WEFT_SPIN_BUSY_USEC");
  w->busy_spin_ns = busy > spin ? (uint64_t)busy * 1000 : w->spin_ns;
  w->timeout_ns = tmo > 0 ? (uint64_t)tmo * 1000000000ull : UINT64_MAX / 2;
  w->warn_ns = warn > 0 ? (uint64_t)warn * 1000000000ull : UINT64_MAX / 2;
  w->opname = "operation";
  w->sleep_slice_ns = SLEEP_SLICE_NS;
  w->mismatch_finder = -1;
  w->mismatch_what[0] = 0;
}

static void futex_wait(uint64_t* addr, uint32_t val, uint64_t ns) {
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
  syscall(SYS_futex, (uint32_t*)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

void weft_host_post(uint64_t* counter, uint32_t* waiting, uint64_t value) {
  __atomic_store_n(counter, value, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (__atomic_load_n(waiting, __ATOMIC_RELAXED))
    syscall(SYS_futex, (uint32_t*)counter, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* A process is gone when kill() no longer finds it or it is a zombie awaiting its parent. */
static int process_dead(int pid) {
  if (kill(pid, 0) < 0 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* What the dead peer p published before it gave up: the rank it had lost (or that had found a
 * mismatched call). That, or else p itself as lost, becomes this communicator's cause, so this
 * rank passes the same name on. */
static void peer_cause_text(struct weft_waiter* w, int p, char* text, size_t size) {
  struct weft_cause c;
  text[0] = 0;
  if (w->peer_cause != NULL && weft_cause_get(w->peer_cause[p], &c)) {
    const char* how = c.kind == WEFT_CAUSE_MISMATCH ? "; rank %d (host %s) had found a mismatched call"
                      : c.kind == WEFT_CAUSE_LEFT   ? "; rank %d (host %s) had destroyed its communicator"
                                                    : "; it had lost rank %d (host %s)";
    snprintf(text, size, how, c.rank, c.host);
    if (w->cause != NULL) weft_cause_set_kind(w->cause, (int)c.kind, c.rank, c.host, c.what);
  } else if (w->cause != NULL) {
    weft_cause_set(w->cause, p, w->peers[p].host_name);
  }
}

/* Name every watched rank whose process is gone: when a death makes its neighbours fail and
 * exit, the rank that died first is then still in the list. */
static ncclResult_t report_dead(struct weft_waiter* w, int p, const char* why) {
  char list[512] = "";
  size_t len = 0;
  for (int q = 0; q < w->nranks && len < sizeof(list) - 40; q++)
    if (w->watch[q] && (q == p || process_dead(w->peers[q].pid)))
      len += (size_t)snprintf(list + len, sizeof(list) - len, "%srank %d (pid %d)", len ? ", " : "", q,
                              w->peers[q].pid);
  char cause[200];
  peer_cause_text(w, p, cause, sizeof(cause));
  WEFT_WARN(
      "Rank %d: peer rank %d (pid %d on %s) has exited during %s (seq %llu)%s%s; "
      "processes gone: %s; giving up",
      w->rank, p, w->peers[p].pid, w->peers[p].host_name, w->opname, (unsigned long long)w->seq, why, cause,
      list);
  return ncclRemoteError;
}

static int watched_dead(struct weft_waiter* w, int p) {
  if (!w->watch[p]) return 0;
  w->live_probes++;
  return process_dead(w->peers[p].pid);
}

ncclResult_t weft_host_check_peers(struct weft_waiter* w, int peer, int all) {
  if (w->peers == NULL || w->watch == NULL) return ncclSuccess;
  if (peer >= 0 && peer < w->nranks && watched_dead(w, peer)) return report_dead(w, peer, "");
  /* A peer that finished its part may exit while we still wait for another one, so the death
   * of a rank we do not wait for counts only after a long stall. */
  int n = all ? (w->nranks < WEFT_LIVE_SCAN_PER_CHECK ? w->nranks : WEFT_LIVE_SCAN_PER_CHECK) : 0;
  for (int k = 0; k < n; k++) {
    int p = w->live_scan_next;
    w->live_scan_next = (p + 1) % w->nranks;
    if (watched_dead(w, p))
      return report_dead(w, p, peer >= 0 ? " while this rank waited for another peer" : "");
  }
  return ncclSuccess;
}

/* What a wait cut short by the abort flag returns. A failure that raised the flag (a peer lost
 * over the network: ncclRemoteError) left its code in the async error; otherwise the user's own
 * ncclCommAbort, Revoke or Shrink ended the operation, which is a use of the communicator that
 * ends its work, so ncclInvalidUsage as for any later use of it, not an internal error. */
static ncclResult_t aborted_result(const struct weft_waiter* w) {
  ncclResult_t r = w->async_result ? *w->async_result : ncclSuccess;
  return (r != ncclSuccess && r != ncclInProgress) ? r : ncclInvalidUsage;
}

/* The peer waited for destroyed its communicator (c, kind LEFT, its own). It wrote that after its
 * last step, so the step awaited may have come just before: only a second sighting, after the
 * caller looked for the step again, ends the wait. */
static ncclResult_t peer_left(struct weft_waiter* w, int peer, const struct weft_cause* c) {
  if (w->left_seen != peer + 1) {
    w->left_seen = peer + 1;
    return ncclSuccess;
  }
  WEFT_WARN(
      "Rank %d: peer rank %d (host %s) destroyed its communicator while this rank still waits for it in %s "
      "(seq %llu): the ranks did not call the same collectives and send/receives; giving up",
      w->rank, peer, c->host, w->opname, (unsigned long long)w->seq);
  if (w->cause != NULL) weft_cause_set_kind(w->cause, WEFT_CAUSE_LEFT, peer, c->host, NULL);
  return ncclRemoteError;
}

/* The peer waited for is on this host and gave up, alive (it wrote why in the connector pages the
 * two share, or on its board), or left: this rank gives up too, naming the same cause, instead of
 * waiting for it until WEFT_TIMEOUT; its own launch passes the cause on. */
static ncclResult_t neighbour_gave_up(struct weft_waiter* w, int peer) {
  struct weft_cause c;
  if (w->peer_cause == NULL || peer < 0 || peer >= w->nranks || !weft_cause_get(w->peer_cause[peer], &c))
    return ncclSuccess;
  if (c.kind == WEFT_CAUSE_LEFT && c.rank == peer) return peer_left(w, peer, &c);
  if (c.kind == WEFT_CAUSE_MISMATCH) {
    WEFT_WARN(
        "Rank %d: mismatched collective%s%s%s, found by rank %d (host %s) and reported by peer rank %d: "
        "every rank must call the same collectives with the same count, datatype, op and root; the "
        "communicator is unusable",
        w->rank, c.what[0] ? " (" : "", c.what, c.what[0] ? ")" : "", c.rank, c.host, peer);
    w->mismatch = 1;
    w->mismatch_finder = c.rank;
    snprintf(w->mismatch_what, sizeof(w->mismatch_what), "%s", c.what);
    return ncclInvalidUsage;
  }
  WEFT_WARN("Rank %d: peer rank %d gave up during %s (seq %llu): rank %d (host %s) %s; giving up", w->rank,
            peer, w->opname, (unsigned long long)w->seq, c.rank, c.host,
            c.kind == WEFT_CAUSE_LEFT ? "had destroyed its communicator" : "was lost to it");
  if (w->cause != NULL) weft_cause_set_kind(w->cause, (int)c.kind, c.rank, c.host, NULL);
  return ncclRemoteError;
}

/* Abort, deadline, slow-wait WARN, peers that gave up and peer liveness: everything a sleeping
 * wait re-checks. */
static ncclResult_t check_state(struct weft_waiter* w, uint64_t start, uint64_t now, int peer, int channel,
                                const char* what) {
  if (__atomic_load_n(w->abort_flag, __ATOMIC_ACQUIRE)) return aborted_result(w);
  if (now - start >= w->timeout_ns) {
    WEFT_WARN(
        "Rank %d: %s (seq %llu) timed out after %llu s waiting for peer rank %d on channel %d (%s); "
        "WEFT_TIMEOUT sets the limit",
        w->rank, w->opname, (unsigned long long)w->seq, (unsigned long long)(w->timeout_ns / 1000000000ull),
        peer, channel, what);
    return ncclTimeout;
  }
  if (!w->warned && now - start >= w->warn_ns) {
    w->warned = 1;
    WEFT_WARN("Rank %d: %s (seq %llu) has waited %llu s for peer rank %d on channel %d (%s)", w->rank,
              w->opname, (unsigned long long)w->seq, (unsigned long long)((now - start) / 1000000000ull),
              peer, channel, what);
  }
  if (w->poll != NULL) {
    ncclResult_t res = w->poll(w->hook_arg, w);
    w->mismatch |= res == ncclInvalidUsage;
    if (res != ncclSuccess) return res;
  }
  ncclResult_t gave_up = neighbour_gave_up(w, peer);
  if (gave_up != ncclSuccess) return gave_up;
  if (now >= w->next_live_check_ns) {
    w->next_live_check_ns = now + 500000000ull;
    if (w->ask != NULL) {
      ncclResult_t res = w->ask(w->ask_arg, w, peer);
      if (res != ncclSuccess) return res;
    }
    uint64_t grace = w->timeout_ns / 2 < 10000000000ull ? w->timeout_ns / 2 : 10000000000ull;
    return weft_host_check_peers(w, peer, now - start >= grace);
  }
  return ncclSuccess;
}

ncclResult_t weft_host_wait(struct weft_waiter* w, weft_ready_fn ready, void* arg, uint64_t* doorbell,
                            uint32_t* waiting, int peer, int channel, const char* what) {
  if (w->trace) weft_trace_chan_of(w->trace, channel)->steps++;
  if (ready(arg)) return ncclSuccess;
  uint64_t start = weft_time_ns(), now = start;
  for (unsigned i = 1; now - start < w->spin_ns; i++) {
    __builtin_ia32_pause();
    if (ready(arg)) return ncclSuccess;
    if ((i & 63) == 0) {
      now = weft_time_ns();
      sched_yield(); /* ranks may outnumber cores: let the peer we wait for run */
    }
  }
  if (__atomic_load_n(w->abort_flag, __ATOMIC_ACQUIRE))
    return check_state(w, start, now, peer, channel, what);
  w->next_live_check_ns = start + 1000000000ull;
  /* Past the spin: the recorder notes the wait (left set if it fails, for the dump). */
  if (w->trace) weft_trace_wait_begin(w->trace, channel, peer, what, doorbell);
  for (;;) {
    uint32_t seen = (uint32_t)__atomic_load_n(doorbell, __ATOMIC_ACQUIRE);
    __atomic_store_n(waiting, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (ready(arg)) break;
    now = weft_time_ns();
    ncclResult_t res = check_state(w, start, now, peer, channel, what);
    if (res != ncclSuccess) {
      __atomic_store_n(waiting, 0, __ATOMIC_RELAXED);
      return res;
    }
    futex_wait(doorbell, seen, w->sleep_slice_ns);
  }
  __atomic_store_n(waiting, 0, __ATOMIC_RELAXED);
  if (w->trace) weft_trace_wait_end(w->trace, channel);
  return ncclSuccess;
}

void weft_host_post_counter(uint64_t* counter, uint32_t* sleepers, uint64_t value) {
  weft_tsan_release(counter); /* counters may sit in memory peers map at other addresses */
  __atomic_store_n(counter, value, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (__atomic_load_n(sleepers, __ATOMIC_RELAXED))
    syscall(SYS_futex, (uint32_t*)counter, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int counter_ready(const uint64_t* counter, uint64_t value, const uint32_t* failed) {
  return __atomic_load_n(counter, __ATOMIC_ACQUIRE) >= value || __atomic_load_n(failed, __ATOMIC_RELAXED);
}

/* The sleeping half of weft_host_wait_counter. */
static ncclResult_t sleep_counter(struct weft_waiter* w, uint64_t* counter, uint64_t value,
                                  uint32_t* sleepers, const uint32_t* failed, uint64_t start, int peer,
                                  const char* what) {
  w->next_live_check_ns = start + 1000000000ull;
  ncclResult_t res = ncclSuccess;
  if (w->trace) weft_trace_wait_begin(w->trace, 0, peer, what, counter);
  __atomic_fetch_add(sleepers, 1, __ATOMIC_RELAXED);
  for (;;) {
    uint32_t seen = (uint32_t)__atomic_load_n(counter, __ATOMIC_ACQUIRE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (counter_ready(counter, value, failed)) break;
    res = check_state(w, start, weft_time_ns(), peer, 0, what);
    if (res != ncclSuccess) break;
    w->sleeps++;
    futex_wait(counter, seen, SLEEP_SLICE_NS);
  }
  __atomic_fetch_sub(sleepers, 1, __ATOMIC_RELAXED);
  if (w->trace && res == ncclSuccess) weft_trace_wait_end(w->trace, 0);
  return res;
}

/* The CPU this rank runs on when the rank this wait is for last said it ran there too, which it
 * then cannot be doing: it waits in that CPU's queue behind this spinning rank (-1: not so). Also
 * notes this rank's own CPU for the peer's waits. */
static int shared_cpu(const struct weft_waiter* w, const int32_t* peer_cpu) {
  int me = sched_getcpu();
  if (w->cpu_slot != NULL) __atomic_store_n(w->cpu_slot, me, __ATOMIC_RELAXED);
  return peer_cpu != NULL && me >= 0 && __atomic_load_n(peer_cpu, __ATOMIC_RELAXED) == me ? me : -1;
}

int weft_host_move_off_cpu(int cpu) {
  cpu_set_t allowed, others;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || !CPU_ISSET(cpu, &allowed) ||
      CPU_COUNT(&allowed) < 2)
    return 0;
  others = allowed;
  CPU_CLR(cpu, &others);
  /* Narrowing the mask migrates the thread at once; widening it back leaves it where it is. */
  if (sched_setaffinity(0, sizeof(others), &others) != 0) return 0;
  if (sched_setaffinity(0, sizeof(allowed), &allowed) != 0)
    WEFT_WARN("could not restore this thread's CPU affinity after moving it off CPU %d", cpu);
  return 1;
}

/* How often a rank may move itself: from 1 ms, doubling (up to 100 ms) while moves follow each
 * other closely. A peer's CPU is the one of its last wait: when the kernel moved it since, a move
 * can land on it; and a move to a CPU where another process runs waits for that one's time slice.
 * Measured under load: with a fixed 1 ms, 2 of 12 20-call runs made 25-30 moves and took
 * 0.2-1.6 ms per call; with a fixed 100 ms, most launches stayed in the yielding mode (3-4 us
 * per call) where 1 ms gave 0.6 us. */
#define MOVE_MIN_INTERVAL_NS 1000000ull
#define MOVE_MAX_INTERVAL_NS 100000000ull

static void note_move(struct weft_wait_memory* m, uint64_t now) {
  if (m->move_interval_ns == 0 || now - m->moved_ns > 10 * m->move_interval_ns)
    m->move_interval_ns = MOVE_MIN_INTERVAL_NS;
  else if (m->move_interval_ns < MOVE_MAX_INTERVAL_NS)
    m->move_interval_ns *= 2;
  m->moved_ns = now;
}

/* What a waiter does when the peer it waits for shares its CPU; returns whether to yield.
 * This is the cause of the bimodal small-message latency: when the scheduler put both ranks of a
 * pair on one CPU (at start, or next to a busy process on the other CPU), a waiter that only
 * paused held that CPU for its whole spin budget (WEFT_SPIN_USEC) and then slept, so every call
 * took the budget plus a futex wake (57-63 us at the default 50 us; the slow mode moved with the
 * budget: 21 us at 10, 206 us at 200). Yielding lets the peer run, but hands the CPU to any other
 * runnable process as well, and the kernel's balancer rarely parts two ranks that take turns.
 * So when the ranks fit the CPUs the waiter moves itself to another CPU it may use (as MPI
 * launchers bind ranks to separate cores), and yields when it cannot or moved not long ago. */
static int make_room(struct weft_waiter* w, const int32_t* peer_cpu) {
  if (w->oversub) return 1;
  int cpu = shared_cpu(w, peer_cpu);
  if (cpu < 0) return 0;
  uint64_t now = weft_time_ns();
  struct weft_wait_memory* m = w->memory;
  if (m == NULL || now - m->moved_ns < m->move_interval_ns || !weft_host_move_off_cpu(cpu)) return 1;
  note_move(m, now);
  shared_cpu(w, peer_cpu); /* the new CPU, for the peer */
  return 0;
}

/* How long a counter wait spins before it sleeps. A rank that sleeps gives its CPU away; when a
 * busy process shares that CPU, the wake-up then waits for that process's time slice (about
 * 1 ms per call was measured with a busy loop on one of 2 CPUs). So while the peers keep
 * answering (the last wait ended without sleeping) the budget outlasts a scheduler slice or two
 * (WEFT_SPIN_BUSY_USEC), as MPI's waits never sleep; once a peer stayed away that long, waits
 * are back to the short WEFT_SPIN_USEC until one is answered while spinning. Oversubscribed
 * ranks keep the short budget: there sleeping is what lets the other ranks run. */
static uint64_t spin_budget(const struct weft_waiter* w) {
  return w->memory != NULL && w->memory->peers_active && !w->oversub ? w->busy_spin_ns : w->spin_ns;
}

static void note_active(struct weft_waiter* w, int active) {
  if (w->memory != NULL) w->memory->peers_active = active;
}

/* Spin until ready, yielding the CPU when the peer needs it, then sleep (spin_budget). */
static ncclResult_t spin_counter(struct weft_waiter* w, uint64_t* counter, uint64_t value, uint32_t* sleepers,
                                 const uint32_t* failed, const int32_t* peer_cpu, int peer,
                                 const char* what) {
  uint64_t start = weft_time_ns(), budget = spin_budget(w);
  /* Act at once when the peer shares this CPU: pausing would only delay it. */
  int yield = make_room(w, peer_cpu);
  for (unsigned i = 1;; i++) {
    if (yield)
      sched_yield(); /* the rank we wait for may need this CPU */
    else
      __builtin_ia32_pause();
    if (counter_ready(counter, value, failed)) {
      note_active(w, 1);
      return ncclSuccess;
    }
    if ((i & (yield ? 7 : 63)) == 0) {
      uint64_t now = weft_time_ns();
      if (now - start >= budget || __atomic_load_n(w->abort_flag, __ATOMIC_RELAXED)) {
        note_active(w, 0);
        return sleep_counter(w, counter, value, sleepers, failed, start, peer, what);
      }
      yield = make_room(w, peer_cpu); /* either rank may have moved */
    }
  }
}

ncclResult_t weft_host_wait_counter(struct weft_waiter* w, uint64_t* counter, uint64_t value,
                                    uint32_t* sleepers, const uint32_t* failed, const int32_t* peer_cpu,
                                    int peer, const char* what) {
  /* A short burst of plain polls first: the peer is usually a fraction of a microsecond away. */
  for (int i = 0; i < 512 && !w->oversub && !counter_ready(counter, value, failed); i++) continue;
  if (!counter_ready(counter, value, failed))
    WEFT_CHECK(spin_counter(w, counter, value, sleepers, failed, peer_cpu, peer, what));
  else
    note_active(w, 1);
  if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= value) {
    weft_tsan_acquire(counter);
    return ncclSuccess;
  }
  WEFT_WARN("Rank %d: %s (seq %llu): peer rank %d failed while this rank waited for %s", w->rank, w->opname,
            (unsigned long long)w->seq, peer, what);
  return ncclRemoteError;
}

ncclResult_t weft_host_call_differs(struct weft_waiter* w, int peer, const struct weft_call_fp* theirs,
                                    const struct weft_call_fp* mine, uint64_t seq, const char* how) {
  char note[96];
  snprintf(note, sizeof(note), " (rank %d's call told from %s)", peer, how);
  weft_call_fp_describe(peer, theirs, w->rank, mine, w->mismatch_what, sizeof(w->mismatch_what));
  weft_call_fp_warn_ranks(w->rank, peer, theirs, w->rank, mine, seq, note);
  w->mismatch = 1;
  return ncclInvalidUsage;
}

ncclResult_t weft_host_bad_step(struct weft_waiter* w, int peer, uint64_t theirs) {
  w->mismatch = 1;
  if (w->bad_step != NULL) return w->bad_step(w->hook_arg, w, peer, theirs);
  /* No boards (ranks on several hosts): the peer's call is told from its tag (weft_call_fp_guess)
   * against this rank's call of that number (this one, or a recent one: a rank that returned early
   * from the mismatched call meets the next one's steps). */
  struct weft_call_fp guess;
  uint64_t seq = w->call_seq, their_seq = weft_step_tag_seq(theirs, seq);
  const struct weft_call_fp* mine =
      w->recent_fp != NULL && their_seq > 0 && their_seq <= seq && seq - their_seq < WEFT_RECENT_CALLS
          ? &w->recent_fp[their_seq % WEFT_RECENT_CALLS]
          : NULL;
  if (mine != NULL && weft_call_fp_guess(mine, theirs, w->nranks, &guess))
    return weft_host_call_differs(w, peer, &guess, mine, their_seq, "the fingerprint on its steps");
  WEFT_WARN(
      "Rank %d: mismatched collective (seq %llu): a step from rank %d belongs to its collective #%llu "
      "(fingerprint %08x), this rank's %s is collective #%llu (%08x); every rank must call the same "
      "collectives with the same arguments; the communicator is unusable",
      w->rank, (unsigned long long)w->seq, peer, (unsigned long long)their_seq, (unsigned)theirs, w->opname,
      (unsigned long long)seq, (unsigned)w->step_tag);
  return ncclInvalidUsage;
}

ncclResult_t weft_host_idle(struct weft_waiter* w, uint64_t start_ns, int peer, int channel,
                            const char* what) {
  uint64_t now = weft_time_ns(), idle = now - start_ns;
  if (idle < w->spin_ns) {
    __builtin_ia32_pause();
    sched_yield();
    return ncclSuccess;
  }
  if (w->trace) {
    struct weft_trace_chan* c = weft_trace_chan_of(w->trace, channel);
    if (!c->waiting || c->peer != peer) weft_trace_wait_begin(w->trace, channel, peer, what, NULL);
  }
  ncclResult_t res = check_state(w, start_ns, now, peer, channel, what);
  if (res != ncclSuccess) return res;
  /* Sleep longer the longer nothing moved: 20 us up to 1 ms. */
  uint64_t ns = idle / 16;
  if (ns < 20000) ns = 20000;
  if (ns > 1000000) ns = 1000000;
  struct timespec ts = {0, (long)ns};
  nanosleep(&ts, NULL);
  return ncclSuccess;
}
