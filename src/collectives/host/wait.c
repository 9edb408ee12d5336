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

#include "collectives/trace.h"
#include "core/comm.h"
#include "transport/connector.h"
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
  w->timeout_ns = tmo > 0 ? (uint64_t)tmo * 1000000000ull : UINT64_MAX / 2;
  w->warn_ns = warn > 0 ? (uint64_t)warn * 1000000000ull : UINT64_MAX / 2;
  w->opname = "operation";
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

/* What the dead peer p published before it gave up: the rank it had lost. That rank, or else p
 * itself, becomes this communicator's cause, so this rank passes the same name on. */
static void peer_cause_text(struct weft_waiter* w, int p, char* text, size_t size) {
  struct weft_cause c;
  text[0] = 0;
  if (w->peer_cause != NULL && weft_cause_get(w->peer_cause[p], &c)) {
    snprintf(text, size, "; it had lost rank %d (host %s)", c.rank, c.host);
    if (w->cause != NULL) weft_cause_set(w->cause, c.rank, c.host);
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

ncclResult_t weft_host_check_peers(struct weft_waiter* w, int peer, int all) {
  if (w->peers == NULL || w->watch == NULL) return ncclSuccess;
  if (peer >= 0 && peer < w->nranks && w->watch[peer] && process_dead(w->peers[peer].pid))
    return report_dead(w, peer, "");
  /* A peer that finished its part may exit while we still wait for another one, so the death
   * of a rank we do not wait for counts only after a long stall. */
  for (int p = 0; all && p < w->nranks; p++)
    if (w->watch[p] && process_dead(w->peers[p].pid))
      return report_dead(w, p, peer >= 0 ? " while this rank waited for another peer" : "");
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

/* Abort, deadline, slow-wait WARN and peer liveness: everything a sleeping wait re-checks. */
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
    if (res != ncclSuccess) return res;
  }
  if (now >= w->next_live_check_ns) {
    w->next_live_check_ns = now + 500000000ull;
    uint64_t grace = w->timeout_ns / 2 < 10000000000ull ? w->timeout_ns / 2 : 10000000000ull;
    return weft_host_check_peers(w, peer, now - start >= grace);
  }
  return ncclSuccess;
}

ncclResult_t weft_host_wait(struct weft_waiter* w, weft_ready_fn ready, void* arg, uint64_t* doorbell,
                            uint32_t* waiting, int peer, int channel, const char* what) {
  if (w->trace_ch) weft_trace_chan_of(w->trace_ch, channel)->steps++;
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
  if (w->trace_ch) weft_trace_wait_begin(w->trace_ch, channel, peer, what, doorbell);
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
    futex_wait(doorbell, seen, SLEEP_SLICE_NS);
  }
  __atomic_store_n(waiting, 0, __ATOMIC_RELAXED);
  if (w->trace_ch) weft_trace_wait_end(w->trace_ch, channel);
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
  if (w->trace_ch) weft_trace_wait_begin(w->trace_ch, 0, peer, what, counter);
  __atomic_fetch_add(sleepers, 1, __ATOMIC_RELAXED);
  for (;;) {
    uint32_t seen = (uint32_t)__atomic_load_n(counter, __ATOMIC_ACQUIRE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (counter_ready(counter, value, failed)) break;
    res = check_state(w, start, weft_time_ns(), peer, 0, what);
    if (res != ncclSuccess) break;
    futex_wait(counter, seen, SLEEP_SLICE_NS);
  }
  __atomic_fetch_sub(sleepers, 1, __ATOMIC_RELAXED);
  if (w->trace_ch && res == ncclSuccess) weft_trace_wait_end(w->trace_ch, 0);
  return res;
}

ncclResult_t weft_host_wait_counter(struct weft_waiter* w, uint64_t* counter, uint64_t value,
                                    uint32_t* sleepers, const uint32_t* failed, int peer, const char* what) {
  /* A short burst of plain polls first: the peer is usually a fraction of a microsecond away. */
  for (int i = 0; i < 512 && !w->oversub && !counter_ready(counter, value, failed); i++) continue;
  if (!counter_ready(counter, value, failed)) {
    uint64_t start = weft_time_ns(), now = start;
    for (unsigned i = 1;; i++) {
      if (w->oversub)
        sched_yield(); /* the rank we wait for may need this CPU */
      else
        __builtin_ia32_pause();
      if (counter_ready(counter, value, failed)) break;
      if ((i & (w->oversub ? 7 : 255)) == 0) {
        now = weft_time_ns();
        if (now - start >= w->spin_ns || __atomic_load_n(w->abort_flag, __ATOMIC_RELAXED)) {
          ncclResult_t res = sleep_counter(w, counter, value, sleepers, failed, start, peer, what);
          if (res != ncclSuccess) return res;
          break;
        }
      }
    }
  }
  if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= value) {
    weft_tsan_acquire(counter);
    return ncclSuccess;
  }
  WEFT_WARN("Rank %d: %s (seq %llu): peer rank %d failed while this rank waited for %s", w->rank, w->opname,
            (unsigned long long)w->seq, peer, what);
  return ncclRemoteError;
}

ncclResult_t weft_host_bad_step(struct weft_waiter* w, int peer, uint64_t theirs) {
  if (w->bad_step != NULL) return w->bad_step(w->hook_arg, w, peer, theirs);
  WEFT_WARN(
      "Rank %d: mismatched collective (seq %llu): a step from rank %d belongs to its collective #%llu "
      "(fingerprint %08x), this rank's %s is collective #%llu (%08x); every rank must call the same "
      "collectives with the same arguments; the communicator is unusable",
      w->rank, (unsigned long long)w->seq, peer, (unsigned long long)(theirs >> 32), (unsigned)theirs,
      w->opname, (unsigned long long)(w->step_tag >> 32), (unsigned)w->step_tag);
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
  if (w->trace_ch) {
    struct weft_trace_chan* c = weft_trace_chan_of(w->trace_ch, channel);
    if (!c->waiting || c->peer != peer) weft_trace_wait_begin(w->trace_ch, channel, peer, what, NULL);
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
