/* The proxy progress thread. It sweeps every registered network connector: posts sends for
 * published slots and receives for free ones, tests them in order, and moves head/tail with
 * the same release/futex doorbell the host executor uses. When nothing moves it yields, then
 * sleeps in growing slices; with no connector at all it waits on a condition variable. */
#include "proxy/proxy.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proxy/watch.h"
#include "transport/connector.h"
#include "transport/net.h"
#include "util/cuda.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

#define TAG_SIMPLE 0
#define TAG_LL 1
#define TAG_BYE 2    /* the sender tore down normally: EOF after it is no error */
#define TAG_NOTICE 3 /* the sender's rank lost a peer, or a call was mismatched: struct notice */

/* Relayed to the other peers when a connection fails, so every rank names the rank lost first. */
/* The same numbers as enum weft_cause_kind: a notice carries a cause. */
enum notice_kind {
  NOTICE_LOST = WEFT_CAUSE_LOST,
  NOTICE_MISMATCH = WEFT_CAUSE_MISMATCH,
  NOTICE_LEFT = WEFT_CAUSE_LEFT
};
struct notice {
  int32_t rank; /* the rank lost, or the one that found the mismatch */
  int32_t kind; /* enum notice_kind */
  char host[120];
  char what[160]; /* a mismatch: how the calls differ, when the finder could tell; else "" */
};

static struct notice notice_of(int kind, int rank, const char* host, const char* what) {
  struct notice n;
  memset(&n, 0, sizeof(n));
  n.kind = kind;
  n.rank = rank;
  snprintf(n.host, sizeof(n.host), "%s", host ? host : "?");
  snprintf(n.what, sizeof(n.what), "%s", what ? what : "");
  return n;
}

struct weft_proxy_conn {
  struct weft_proxy_conn_desc d;
  struct weft_conn view;
  uint64_t posted, done; /* steps handed to the network / completed */
  void* reqs[WEFT_NSTEPS];
  char* bounce;     /* receive: LL steps land here, then are stored word by word */
  uint64_t flushes; /* receive into GPU memory: steps whose NIC writes were flushed (INFO at the end) */
  int failed, closed;
  struct notice notice;           /* outgoing or incoming */
  void* notice_req;               /* send: the notice relayed to this peer, while in flight */
  int notice_state;               /* send: 0 none, 1 in flight, 2 sent (or given up): never twice */
  struct weft_proxy_watchq watch; /* operations the profiler watches (watch.h) */
  struct weft_proxy_conn* next;
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct weft_proxy_conn* conns;
  int nconns, started;
  pthread_t thread;
  pthread_once_t atfork_once;
} px = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, PTHREAD_ONCE_INIT};

/* Ranges a communicator registered (ncclCommRegister), kept registered on each of its send
 * connections, those made later too; under px.mu, which also serializes every use of a
 * connection's network comm (the progress loop holds it). */
struct user_range {
  volatile uint32_t* owner; /* the communicator's abort flag, which its connections carry */
  void* data;
  size_t size;
  struct user_range* next;
};
static struct user_range* user_ranges;

static void keep_on(struct weft_proxy_conn* c, const struct user_range* r, int keep) {
  const struct weft_net_ops* net = c->d.net;
  if (!c->d.is_send || c->d.abort_flag != r->owner || !net->keep_registered || !net->drop_registered) return;
  if (!keep) {
    net->drop_registered(c->d.net_comm, r->data, r->size);
    return;
  }
  if (net->keep_registered(c->d.net_comm, r->data, r->size) != ncclSuccess)
    WEFT_INFO(WEFT_PROXY | WEFT_NET, "Rank %d: %zu registered bytes at %p are registered per step to rank %d",
              c->d.rank, r->size, r->data, c->d.peer);
}

/* Publish a counter and wake an executor sleeping on it (the executor's doorbell protocol). */
static void post(uint64_t* counter, uint32_t* waiting, uint64_t value) {
  __atomic_store_n(counter, value, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (__atomic_load_n(waiting, __ATOMIC_RELAXED))
    syscall(SYS_futex, (uint32_t*)counter, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Tell the communicator's other network peers which rank was lost (best effort, once per peer);
 * returns how many notices are still in flight. Called with px.mu held. */
static int relay(volatile uint32_t* abort_flag, const struct weft_proxy_conn* from, const struct notice* n) {
  int pending = 0;
  for (struct weft_proxy_conn* c = px.conns; c; c = c->next) {
    if (c == from || !c->d.is_send || c->failed || c->closed || c->d.abort_flag != abort_flag) continue;
    if (c->notice_state == 0) {
      c->notice = *n;
      ncclResult_t res =
          c->d.net->isend(c->d.net_comm, &c->notice, sizeof(c->notice), TAG_NOTICE, &c->notice_req);
      c->notice_state = res != ncclSuccess      ? 2
                        : c->notice_req != NULL ? 1
                                                : 0; /* NULL: no request free yet */
    }
    int done = 0;
    if (c->notice_state == 1) {
      ncclResult_t res = c->d.net->test(c->notice_req, &done, NULL);
      if (res != ncclSuccess || done) c->notice_state = 2;
    }
    pending += c->notice_state != 2;
  }
  return pending;
}

/* The communicator failed already: a peer that left since is its aftermath (log.h). */
static void announce(volatile uint32_t* abort_flag, const struct notice* n) {
  uint64_t start = weft_time_ns();
  int was = weft_log_set_aftermath(1);
  for (;;) {
    pthread_mutex_lock(&px.mu);
    int pending = relay(abort_flag, NULL, n);
    pthread_mutex_unlock(&px.mu);
    if (pending == 0 || weft_time_ns() - start > 1000000000ull) break;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
  weft_log_set_aftermath(was);
}

void weft_proxy_announce(volatile uint32_t* abort_flag, const struct weft_cause* cause) {
  struct weft_cause c;
  if (!weft_cause_get(cause, &c)) return;
  struct notice n = notice_of((int)c.kind, c.rank, c.host, c.what);
  announce(abort_flag, &n);
}

void weft_proxy_announce_mismatch(volatile uint32_t* abort_flag, int finder, const char* host,
                                  const char* what) {
  struct notice n = notice_of(NOTICE_MISMATCH, finder, host, what);
  announce(abort_flag, &n);
}

/* Record the failure on the communicator (async error, abort flag); the first one relays. A lost
 * rank is the communicator's cause (ncclRemoteError); a mismatch is the callers' (ncclInvalidUsage). */
static void fail_comm(struct weft_proxy_conn* c, const struct notice* n) {
  c->failed = 1;
  int first = 0;
  int mismatch = n->kind == NOTICE_MISMATCH;
  ncclResult_t res = mismatch ? ncclInvalidUsage : ncclRemoteError;
  /* The cause goes on to this rank's neighbours on its host (connector pages) when it gives up;
   * it is recorded before the async error, so a call refused on that error can say why. */
  if (c->d.cause != NULL) weft_cause_set_kind(c->d.cause, n->kind, n->rank, n->host, n->what);
  if (c->d.async_result != NULL)
    first = __atomic_compare_exchange_n(c->d.async_result, &(ncclResult_t){ncclSuccess}, res, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  if (c->d.abort_flag != NULL) __atomic_store_n(c->d.abort_flag, 1, __ATOMIC_RELEASE);
  if (first) relay(c->d.abort_flag, c, n);
}

static int comm_failed(const struct weft_proxy_conn* c) {
  ncclResult_t r =
      c->d.async_result != NULL ? __atomic_load_n(c->d.async_result, __ATOMIC_ACQUIRE) : ncclSuccess;
  return r != ncclSuccess && r != ncclInProgress;
}

static int progress_recv(struct weft_proxy_conn* c);

/* A peer that lost a rank tells the others (a notice on each of its send connections), then gives
 * up and closes; its close can reach one connection before its notice is read on another. So
 * before a failed connection names its peer, the communicator's other receive connections are read
 * for a while (the notice has normally landed already): a notice heard there names the rank lost
 * first. Returns whether one was. Called with px.mu held; c is marked failed, so a connection that
 * fails while being read here does not come back to it. */
static int notice_heard_elsewhere(struct weft_proxy_conn* c) {
  uint64_t start = weft_time_ns();
  for (;;) {
    int live = 0;
    for (struct weft_proxy_conn* o = px.conns; o && !comm_failed(c); o = o->next) {
      if (o == c || o->d.is_send || o->failed || o->closed || o->d.abort_flag != c->d.abort_flag) continue;
      progress_recv(o);
      live++;
    }
    if (comm_failed(c)) return 1;
    if (live == 0 || weft_time_ns() - start > 50000000ull) return 0;
    sched_yield();
  }
}

static void fail(struct weft_proxy_conn* c, ncclResult_t res) {
  c->failed = 1;
  if (!comm_failed(c) && notice_heard_elsewhere(c)) {
    WEFT_INFO(WEFT_PROXY | WEFT_NET,
              "Rank %d: network connection %s peer rank %d (host %s) failed (%s) after another connection "
              "of the communicator named the cause",
              c->d.rank, c->d.is_send ? "to" : "from", c->d.peer, c->d.peer_host, ncclGetErrorString(res));
    return;
  }
  WEFT_WARN(
      "Rank %d: network connection %s peer rank %d (host %s) failed (%s) after %llu step(s); "
      "rank %d is lost, the communicator is aborted",
      c->d.rank, c->d.is_send ? "to" : "from", c->d.peer, c->d.peer_host, ncclGetErrorString(res),
      (unsigned long long)c->done, c->d.peer);
  struct notice n = notice_of(NOTICE_LOST, c->d.peer, c->d.peer_host, NULL);
  fail_comm(c, &n);
}

static int progress_send(struct weft_proxy_conn* c) {
  struct weft_conn* v = &c->view;
  const struct weft_net_ops* net = c->d.net;
  int moved = 0;
  uint64_t tail = __atomic_load_n(&v->ctrl->tail, __ATOMIC_ACQUIRE);
  while (c->posted < tail && c->posted < c->done + WEFT_NSTEPS) {
    int slot = (int)(c->posted % WEFT_NSTEPS);
    uint32_t info = v->ctrl->step_info[slot];
    const char* ptr;
    size_t size;
    int tag;
    if (info & WEFT_STEP_LL) {
      ptr = (const char*)v->ll + (size_t)slot * v->ll_slot;
      size = ((info & WEFT_STEP_BYTES) + 7) / 8 * sizeof(struct weft_ll_line);
      tag = TAG_LL;
    } else {
      ptr = v->ctrl->step_ref[slot] ? (const char*)(uintptr_t)v->ctrl->step_ref[slot]
                                    : v->simple + (size_t)slot * v->simple_slot;
      size = info ? (info & WEFT_STEP_BYTES) : v->simple_slot;
      tag = TAG_SIMPLE;
    }
    /* The step's call tag (collectives/host/step_tag.h) travels with it where the network can
     * carry one, so the receiver checks it as on shared memory. */
    uint64_t step_tag = __atomic_load_n(&v->ctrl->step_tag[slot], __ATOMIC_RELAXED);
    void* req = NULL;
    ncclResult_t res = net->isend_meta ? net->isend_meta(c->d.net_comm, ptr, size, tag, step_tag, &req)
                                       : net->isend(c->d.net_comm, ptr, size, tag, &req);
    if (res != ncclSuccess) return fail(c, res), 0;
    if (req == NULL) break;
    c->reqs[slot] = req;
    c->posted++;
    moved = 1;
  }
  while (c->done < c->posted) {
    int done = 0;
    ncclResult_t res = net->test(c->reqs[c->done % WEFT_NSTEPS], &done, NULL);
    if (res != ncclSuccess) return fail(c, res), 0;
    if (!done) break;
    c->done++;
    post(&v->ctrl->head, &v->ctrl->head_waiting, c->done); /* the slot may be refilled */
    moved = 1;
  }
  return moved;
}

/* LL lines are stored whole 8-byte words at a time, so the executor never sees a flag before
 * the data it guards. */
static void store_ll(struct weft_proxy_conn* c, int slot, size_t bytes) {
  uint64_t* dst = (uint64_t*)((char*)c->view.ll + (size_t)slot * c->view.ll_slot);
  const uint64_t* src = (const uint64_t*)(c->bounce + (size_t)slot * c->view.ll_slot);
  for (size_t i = 0; i < bytes / 8; i++) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

static void heard_notice(struct weft_proxy_conn* c) {
  struct notice* n = &c->notice;
  n->host[sizeof(n->host) - 1] = 0;
  n->what[sizeof(n->what) - 1] = 0;
  if (n->kind != NOTICE_MISMATCH && n->kind != NOTICE_LEFT) n->kind = NOTICE_LOST;
  if (n->kind == NOTICE_MISMATCH)
    WEFT_WARN(
        "Rank %d: mismatched collective%s%s%s, found by rank %d (host %s) and reported by peer rank %d (host "
        "%s): every rank must call the same collectives with the same count, datatype, op and root; the "
        "communicator is unusable",
        c->d.rank, n->what[0] ? " (" : "", n->what, n->what[0] ? ")" : "", n->rank, n->host, c->d.peer,
        c->d.peer_host);
  else
    WEFT_WARN(
        "Rank %d: peer rank %d (host %s) reports that rank %d (host %s) %s; the communicator is aborted",
        c->d.rank, c->d.peer, c->d.peer_host, n->rank, n->host,
        n->kind == NOTICE_LEFT ? "destroyed its communicator" : "was lost");
  fail_comm(c, n);
}

static int progress_recv(struct weft_proxy_conn* c) {
  struct weft_conn* v = &c->view;
  const struct weft_net_ops* net = c->d.net;
  int moved = 0;
  uint64_t head = __atomic_load_n(&v->ctrl->head, __ATOMIC_ACQUIRE);
  ncclResult_t post_err = ncclSuccess;
  /* An executor may take a step before its request is done here (LL lines a NIC wrote straight
   * into GPU memory), so head alone does not bound the requests in flight. */
  while (c->posted < head + WEFT_NSTEPS && c->posted < c->done + WEFT_NSTEPS) {
    int slot = (int)(c->posted % WEFT_NSTEPS);
    char* ll = c->bounce != NULL ? c->bounce : (char*)v->ll;
    void* bufs[4] = {v->simple + (size_t)slot * v->simple_slot, ll + (size_t)slot * v->ll_slot, &c->notice,
                     &c->notice};
    size_t sizes[4] = {v->simple_slot, v->ll_slot, 0, sizeof(c->notice)};
    int tags[4] = {TAG_SIMPLE, TAG_LL, TAG_BYE, TAG_NOTICE};
    void* req = NULL;
    /* A failed post may be the EOF after a goodbye that an earlier request holds: the
     * requests already posted decide first. */
    if ((post_err = net->irecv(c->d.net_comm, 4, bufs, sizes, tags, &req)) != ncclSuccess || req == NULL)
      break;
    c->reqs[slot] = req;
    c->posted++;
    moved = 1;
  }
  while (c->done < c->posted) {
    int slot = (int)(c->done % WEFT_NSTEPS), done = 0;
    size_t got[4];
    uint64_t step_tag = 0;
    ncclResult_t res = net->test_meta ? net->test_meta(c->reqs[slot], &done, got, &step_tag)
                                      : net->test(c->reqs[slot], &done, got);
    if (res != ncclSuccess) return fail(c, res), 0;
    if (!done) break;
    if (got[2] != SIZE_MAX) { /* the peer tore down normally; nothing more will come */
      c->closed = 1;
      return 1;
    }
    if (got[3] != SIZE_MAX) {
      heard_notice(c);
      return 1;
    }
    /* The tag before the step: an LL receiver reads it as soon as the lines' flags are there. */
    if (net->test_meta) {
      __atomic_store_n(&v->ctrl->step_tag[slot], step_tag, __ATOMIC_RELAXED);
      __atomic_thread_fence(__ATOMIC_RELEASE);
    }
    if (got[1] != SIZE_MAX && c->bounce != NULL) store_ll(c, slot, got[1]);
    if (got[0] != SIZE_MAX && c->d.mem->fifo_flush) { /* LL lines need none: their flags order them */
      if (weft_cuda_gdr_flush(c->d.mem->fifo_dev) != 0) return fail(c, ncclUnhandledCudaError), 0;
      c->flushes++;
    }
    c->done++;
    post(&v->ctrl->tail, &v->ctrl->tail_waiting, c->done);
    moved = 1;
  }
  if (post_err != ncclSuccess && c->done == c->posted) return fail(c, post_err), 0;
  return moved;
}

/* The peer said goodbye after its last step on this connection (it destroyed the communicator). An
 * executor that has taken every step and waits for another (a host executor sleeping on its
 * doorbell, a CUDA kernel that said which call it waits in) would wait until WEFT_TIMEOUT for a
 * step that never comes: the ranks did not make the same calls. It fails now instead, naming the
 * peer. */
static void check_peer_left(struct weft_proxy_conn* c) {
  const struct weft_conn_ctrl* ctrl = c->view.ctrl;
  int waits = __atomic_load_n(&ctrl->tail_waiting, __ATOMIC_ACQUIRE) ||
              __atomic_load_n(&ctrl->wait_tag, __ATOMIC_ACQUIRE) != 0;
  if (comm_failed(c) || !waits || __atomic_load_n(&ctrl->head, __ATOMIC_ACQUIRE) != c->done) return;
  WEFT_WARN(
      "Rank %d: peer rank %d (host %s) destroyed the communicator after its last step to this rank (step "
      "%llu), and this rank waits for another: the ranks did not call the same collectives; the "
      "communicator is aborted",
      c->d.rank, c->d.peer, c->d.peer_host, (unsigned long long)c->done);
  struct notice n = notice_of(NOTICE_LEFT, c->d.peer, c->d.peer_host, NULL);
  fail_comm(c, &n);
}

static void idle_pause(uint64_t idle_ns, uint64_t spin_ns) {
  if (idle_ns < spin_ns) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, idle_ns < 100000000ull ? 20000 : 1000000};
  nanosleep(&ts, NULL);
}

/* Receives are posted ahead, into the next operation's steps: a received step is known to be the
 * watched operation's only once its executor has taken it (head), so that is when it is reported. */
static void watch_sweep(struct weft_proxy_conn* c) {
  if (c->d.is_send) {
    weft_proxy_watch_sweep(&c->watch, c->posted, c->done);
    return;
  }
  uint64_t head = __atomic_load_n(&c->view.ctrl->head, __ATOMIC_ACQUIRE);
  uint64_t taken = head < c->done ? head : c->done;
  weft_proxy_watch_sweep(&c->watch, taken, taken);
}

static void* proxy_main(void* arg) {
  (void)arg;
  prctl(PR_SET_TIMERSLACK, 1000UL); /* short sleeps must stay short: they add to latency */
  int64_t spin_us = weft_param_int("WEFT_SPIN_USEC");
  uint64_t spin_ns = (uint64_t)(spin_us > 0 ? spin_us : 0) * 1000 + 200000;
  uint64_t idle_since = weft_time_ns();
  for (;;) {
    int moved = 0;
    pthread_mutex_lock(&px.mu);
    while (px.conns == NULL) {
      pthread_cond_wait(&px.cv, &px.mu);
      idle_since = weft_time_ns();
    }
    for (struct weft_proxy_conn* c = px.conns; c; c = c->next) {
      /* A connection of a communicator that failed already fails in its aftermath (log.h). */
      weft_log_set_aftermath(comm_failed(c));
      if (!c->failed && !c->closed) moved |= c->d.is_send ? progress_send(c) : progress_recv(c);
      if (!c->failed && c->closed && !c->d.is_send) check_peer_left(c);
      if (__atomic_load_n(&c->watch.w, __ATOMIC_RELAXED) != c->watch.r) watch_sweep(c);
    }
    weft_log_set_aftermath(0);
    pthread_mutex_unlock(&px.mu);
    uint64_t now = weft_time_ns();
    if (moved)
      idle_since = now;
    else
      idle_pause(now - idle_since, spin_ns);
  }
  return NULL;
}

/* A forked child has no proxy thread and none of the parent's connections. */
static void atfork_child(void) {
  user_ranges = NULL; /* the parent's (its memory, now the child's copy, is left as it is) */
  pthread_mutex_init(&px.mu, NULL);
  pthread_cond_init(&px.cv, NULL);
  px.conns = NULL;
  px.nconns = 0;
  px.started = 0;
}
static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

ncclResult_t weft_proxy_conn_add(const struct weft_proxy_conn_desc* d, struct weft_proxy_conn** out) {
  pthread_once(&px.atfork_once, install_atfork);
  struct weft_proxy_conn* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->d = *d;
  weft_conn_bind(&c->view, d->mem, d->peer);
  /* FIFOs in GPU memory (GPUDirect RDMA) take LL lines straight from the NIC, which writes them
   * whole 8-byte words at a time; host FIFOs take them through a bounce buffer (store_ll). */
  int gpu_fifo = d->mem->fifo != NULL;
  if (!d->is_send && !gpu_fifo && (c->bounce = malloc(WEFT_NSTEPS * c->view.ll_slot + 8)) == NULL) {
    free(c);
    return ncclSystemError;
  }
  /* The buffers every step of this connector goes through, registered once where the network
   * registers memory; the steps a sender leaves in the caller's buffer are not among them. */
  const struct weft_net_ops* net = d->net;
  ncclResult_t res = ncclSuccess;
  if (gpu_fifo)
    res = net->keep_registered_gpu(d->net_comm, d->mem->fifo, d->mem->fifo_size, d->mem->fifo_dmabuf);
  if (net->keep_registered && res == ncclSuccess) {
    res = net->keep_registered(d->net_comm, d->mem->base, d->mem->size);
    if (res == ncclSuccess && c->bounce)
      res = net->keep_registered(d->net_comm, c->bounce, WEFT_NSTEPS * c->view.ll_slot);
    if (res == ncclSuccess) res = net->keep_registered(d->net_comm, &c->notice, sizeof(c->notice));
  }
  if (res != ncclSuccess) {
    free(c->bounce);
    free(c);
    return res;
  }
  pthread_mutex_lock(&px.mu);
  if (!px.started) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&px.thread, &attr, proxy_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      pthread_mutex_unlock(&px.mu);
      WEFT_WARN("Cannot start the proxy progress thread: %s", strerror(rc));
      free(c->bounce);
      free(c);
      return ncclSystemError;
    }
    pthread_setname_np(px.thread, "weft-proxy");
    px.started = 1;
  }
  c->next = px.conns;
  px.conns = c;
  px.nconns++;
  for (const struct user_range* r = user_ranges; r; r = r->next) keep_on(c, r, 1);
  pthread_cond_signal(&px.cv);
  pthread_mutex_unlock(&px.mu);
  WEFT_INFO(WEFT_PROXY | WEFT_NET, "Rank %d: proxy drives the %s connector %s rank %d (host %s)", d->rank,
            d->is_send ? "send" : "receive", d->is_send ? "to" : "from", d->peer, d->peer_host);
  *out = c;
  return ncclSuccess;
}

/* A sender's last steps may still sit in its FIFO when its rank tears down (the executor is
 * done once a step is in the FIFO): forward them first, unless aborted or failed. */
static void drain(struct weft_proxy_conn* c) {
  int64_t tmo = weft_param_int("WEFT_TIMEOUT");
  uint64_t start = weft_time_ns(), limit = (uint64_t)(tmo > 0 ? tmo : 1800) * 1000000000ull;
  for (;;) {
    pthread_mutex_lock(&px.mu);
    int idle = c->failed || c->done == __atomic_load_n(&c->view.ctrl->tail, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&px.mu);
    if (idle || (c->d.abort_flag && __atomic_load_n(c->d.abort_flag, __ATOMIC_ACQUIRE))) return;
    if (weft_time_ns() - start > limit) {
      WEFT_WARN("Rank %d: %llu step(s) to peer rank %d (host %s) still unsent at teardown after %lld s",
                c->d.rank, (unsigned long long)(c->view.ctrl->tail - c->done), c->d.peer, c->d.peer_host,
                (long long)tmo);
      return;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

/* After a normal teardown, say goodbye so the peer does not take the EOF for a failure. A
 * network that writes only into receives the peer has posted (IB) sends it once the peer's
 * executor frees a slot, which a busy peer may take a while to do: wait as long as a step may
 * (WEFT_TIMEOUT); a peer that is gone or closed fails the send at once. */
static void bye(struct weft_proxy_conn* c) {
  void* req = NULL;
  int64_t tmo = weft_param_int("WEFT_TIMEOUT");
  uint64_t start = weft_time_ns(), limit = (uint64_t)(tmo > 0 ? tmo : 1800) * 1000000000ull;
  int done = 0;
  while (!done && weft_time_ns() - start < limit) {
    pthread_mutex_lock(&px.mu);
    ncclResult_t res =
        req ? c->d.net->test(req, &done, NULL) : c->d.net->isend(c->d.net_comm, &c->notice, 0, TAG_BYE, &req);
    pthread_mutex_unlock(&px.mu);
    if (res != ncclSuccess) return;
    struct timespec ts = {0, 50000};
    if (!done) nanosleep(&ts, NULL);
  }
  if (!done)
    WEFT_INFO(WEFT_PROXY | WEFT_NET,
              "Rank %d: goodbye to peer rank %d (host %s) not sent within WEFT_TIMEOUT", c->d.rank, c->d.peer,
              c->d.peer_host);
}

void weft_proxy_conn_remove(struct weft_proxy_conn* c) {
  if (c == NULL) return;
  int aborted = c->d.abort_flag && __atomic_load_n(c->d.abort_flag, __ATOMIC_ACQUIRE);
  if (c->d.is_send && !aborted) drain(c);
  aborted = c->d.abort_flag && __atomic_load_n(c->d.abort_flag, __ATOMIC_ACQUIRE);
  if (c->d.is_send && !aborted && !c->failed) bye(c);
  pthread_mutex_lock(&px.mu);
  for (struct weft_proxy_conn** pp = &px.conns; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      px.nconns--;
      break;
    }
  pthread_mutex_unlock(&px.mu);
  weft_proxy_watch_flush(&c->watch); /* off the list: the proxy thread no longer sweeps it */
  if (c->d.mem->fifo_flush && c->done > 0)
    WEFT_INFO(WEFT_NET, "Rank %d: connector from rank %d: %llu of %llu steps flushed to GPU %d", c->d.rank,
              c->d.peer, (unsigned long long)c->flushes, (unsigned long long)c->done, c->d.mem->fifo_dev);
  if (c->d.is_send)
    c->d.net->close_send(c->d.net_comm);
  else
    c->d.net->close_recv(c->d.net_comm);
  free(c->bounce);
  free(c);
}

ncclResult_t weft_proxy_keep_registered(volatile uint32_t* owner, void* data, size_t size, int keep) {
  pthread_mutex_lock(&px.mu);
  struct user_range* r = NULL;
  if (keep) {
    if ((r = calloc(1, sizeof(*r))) == NULL) {
      pthread_mutex_unlock(&px.mu);
      return ncclSystemError;
    }
    *r = (struct user_range){owner, data, size, user_ranges};
    user_ranges = r;
  } else {
    struct user_range** at = &user_ranges;
    while (*at && !((*at)->owner == owner && (*at)->data == data && (*at)->size == size)) at = &(*at)->next;
    if ((r = *at) != NULL) *at = r->next;
  }
  for (struct weft_proxy_conn* c = px.conns; c && r; c = c->next) keep_on(c, r, keep);
  pthread_mutex_unlock(&px.mu);
  if (!keep) free(r);
  return ncclSuccess;
}

struct weft_proxy_watchq* weft_proxy_conn_watchq(struct weft_proxy_conn* c) {
  return &c->watch;
}

int weft_proxy_nconns(void) {
  pthread_mutex_lock(&px.mu);
  int n = px.nconns;
  pthread_mutex_unlock(&px.mu);
  return n;
}
