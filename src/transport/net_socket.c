/* The socket network: one control socket per connection carries message headers (and small
 * messages inline); larger messages are split over NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD
 * data sockets served by helper threads. Both sides split a message the same way, so no
 * per-chunk headers are needed. Every call returns at once.
 * Every socket opens with HMAC(key, label || listener's challenge || hello): the challenge is a
 * random nonce of the listener that reaches the connector inside the handle, over the
 * authenticated bootstrap (the connector must finish before the listener starts accepting, so
 * the challenge cannot come on the socket itself). A listener serves one connection, so an
 * answer is good for nothing else; hellos that fail, or do not match the connection being
 * assembled, are dropped without disturbing it.
 * With a pre-shared key (ncclSetEncryption), every socket then runs TLS 1.3 with a key derived
 * from the connection key: the opening stays in clear (it proves membership), all else is
 * encrypted; the connector is the TLS client. */
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/net.h"
#include "transport/net_socket_wire.h"
#include "util/auth.h"
#include "util/log.h"
#include "util/param.h"
#include "util/psk.h"
#include "util/sha256.h"
#include "util/socket.h"
#include "util/tls.h"

#define MAGIC WEFT_NET_SOCKET_MAGIC
#define MAX_IFS 16
#define MAX_THREADS 16
#define MAX_SOCKS WEFT_NET_SOCKET_MAX_SOCKS
#define MIN_CHUNK (64 * 1024)  /* a data socket gets at least this much of a message */
#define INLINE_MAX (64 * 1024) /* messages up to this size ride on the control socket */
#define QLEN WEFT_NET_MAX_REQUESTS
#define NONCE_BYTES 16                    /* what fits in the handle beside the address */
#define MAX_PENDING (2 * (MAX_SOCKS + 1)) /* accepted sockets not yet authenticated */

struct handle {
  uint64_t magic;
  union weft_socket_addr addr;
  void* state; /* the connecting side's progress; NULL as sent */
  uint8_t nonce[NONCE_BYTES];
};
_Static_assert(sizeof(struct handle) <= WEFT_NET_SOCKET_HANDLE_BYTES, "socket handle too large");

struct req {
  struct comm* comm;
  int used, is_send, nbuf, stage; /* stage: 0 header, 1 inline data, 2 chunks, 3 done */
  void* bufs[WEFT_NET_MAX_RECVS];
  size_t sizes[WEFT_NET_MAX_RECVS];
  int tags[WEFT_NET_MAX_RECVS];
  struct weft_net_socket_msg_hdr hdr;
  size_t hdr_done, data_done, size;
  int matched;
  char* data;
  atomic_int chunks_left;
};

struct task {
  char* ptr;
  size_t len, done;
  struct req* req;
};

struct dsock {
  int fd;
  struct weft_tls* tls; /* NULL: clear */
  struct task q[QLEN];
  atomic_uint head, tail; /* single producer (caller), single consumer (its helper) */
};

struct helper {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop, started, index;
  struct comm* comm;
};

struct comm {
  int is_send, ctrl, nsocks, nhelpers;
  struct weft_tls* ctrl_tls;
  struct dsock socks[MAX_SOCKS];
  struct helper helpers[MAX_THREADS];
  struct req reqs[QLEN];
  uint64_t next_req, ctrl_next;
  unsigned rr; /* first data socket of the next split message */
  _Atomic ncclResult_t err;
  atomic_int warned;
  int ctrl_eof; /* the peer closed the control socket: an error only for requests that need it */
  char peer[WEFT_SOCKET_ADDR_STRLEN];
};

struct pending {
  int fd;
  struct weft_net_socket_opening in;
  size_t got;
  int64_t deadline;
};

struct listen_comm {
  int fd, encrypt;
  struct weft_auth_key key;
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES]; /* the handle's nonce, zero-padded */
  int npending;
  struct pending pending[MAX_PENDING];
  /* The connection being assembled, fixed by the first authenticated hello. */
  int have_id, nfound;
  uint64_t id;
  uint32_t nsocks;
  int fds[MAX_SOCKS + 1];
  char addr[WEFT_SOCKET_ADDR_STRLEN];
};

struct connecting {
  int n, encrypt;
  uint64_t id;
  struct weft_auth_key key;
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES];
  int fds[MAX_SOCKS + 1];
  int state[MAX_SOCKS + 1]; /* 0 connecting, 1 opening sent */
};

/* NULL key: the public one (unit tests of the transport alone). */
static void key_or_public(const struct weft_auth_key* key, struct weft_auth_key* out) {
  if (key != NULL)
    *out = *key;
  else
    weft_auth_public_key(out);
}

/* Whether connections made now run TLS (a pre-shared key is set); -1 when the key is unusable. */
static int encryption_on(void) {
  uint8_t digest[WEFT_PSK_DIGEST_BYTES];
  int on = weft_psk_digest(digest);
  memset(digest, 0, sizeof(digest));
  return on;
}

static struct weft_socket_if ifs[MAX_IFS];
static int nifs;

static ncclResult_t sock_init(void) {
  nifs = weft_socket_find_ifs(NULL, ifs, MAX_IFS);
  if (nifs <= 0) {
    WEFT_WARN("Net/Socket: no usable network interface (NCCL_SOCKET_IFNAME=%s)",
              weft_param_str("NCCL_SOCKET_IFNAME") ? weft_param_str("NCCL_SOCKET_IFNAME") : "");
    return ncclSystemError;
  }
  char text[WEFT_SOCKET_ADDR_STRLEN];
  for (int i = 0; i < nifs; i++)
    WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/Socket : Using [%d]%s:%s", i, ifs[i].name,
              weft_socket_addr_str(&ifs[i].addr, text, sizeof(text)));
  return ncclSuccess;
}

static ncclResult_t sock_devices(int* n) {
  *n = nifs;
  return ncclSuccess;
}

static ncclResult_t sock_props(int dev, struct weft_net_props* p) {
  if (dev < 0 || dev >= nifs) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "%s", ifs[dev].name);
  weft_socket_addr_str(&ifs[dev].addr, p->addr, sizeof(p->addr));
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifs[dev].name);
  FILE* f = fopen(path, "r");
  if (f != NULL) {
    if (fscanf(f, "%d", &p->speed_mbps) != 1 || p->speed_mbps < 0) p->speed_mbps = 0;
    fclose(f);
  }
  p->latency_us = 0;
  p->max_comms = 65536;
  return ncclSuccess;
}

/* Helper threads x sockets per thread from the environment (0 sockets: control socket only).
 * Default 0: on hosts with few CPUs a helper thread competes with the executor and the proxy
 * (measured slower on namespace hosts, best of 3 alternating runs; docs/PERFORMANCE.md). */
static void sock_counts(int* nthreads, int* nsocks) {
  int64_t nt = weft_param_is_set("NCCL_SOCKET_NTHREADS") ? weft_param_int("NCCL_SOCKET_NTHREADS") : 0;
  int64_t per = weft_param_is_set("NCCL_NSOCKS_PERTHREAD") ? weft_param_int("NCCL_NSOCKS_PERTHREAD") : 1;
  if (nt < 0) nt = 0;
  if (nt > MAX_THREADS) nt = MAX_THREADS;
  if (per < 1) per = 1;
  if (nt * per > MAX_SOCKS) per = MAX_SOCKS / (nt ? nt : 1);
  *nthreads = (int)nt;
  *nsocks = (int)(nt * per);
}

/* A host that vanishes without closing (link down, power off) would leave TCP retrying for
 * minutes: keepalive probes on idle sockets and a user timeout on unacknowledged data make the
 * kernel fail the connection within a third of WEFT_TIMEOUT (2..30 s), so the ranks next to the
 * lost host name it (and relay it) before the others' waits time out. */
static void set_liveness(int fd) {
  int64_t tmo = weft_param_int("WEFT_TIMEOUT");
  int secs = tmo > 0 ? (int)(tmo / 3) : 30;
  if (secs < 2) secs = 2;
  if (secs > 30) secs = 30;
  int one = 1, ms = secs * 1000;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &secs, sizeof(secs));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
}

static ncclResult_t sock_listen(int dev, const struct weft_auth_key* key, void* handle, void** out) {
  *out = NULL;
  if (dev < 0 || dev >= nifs) {
    WEFT_WARN("Net/Socket: device %d does not exist (%d devices)", dev, nifs);
    return ncclInvalidArgument;
  }
  struct listen_comm* l = calloc(1, sizeof(*l));
  if (l == NULL) return ncclSystemError;
  union weft_socket_addr addr = ifs[dev].addr;
  weft_socket_addr_set_port(&addr, 0);
  ncclResult_t res = weft_socket_listen(&addr, &l->fd);
  if (res != ncclSuccess) {
    free(l);
    return res;
  }
  weft_socket_addr_str(&addr, l->addr, sizeof(l->addr));
  key_or_public(key, &l->key);
  l->encrypt = encryption_on();
  if (l->encrypt < 0) {
    weft_socket_close(l->fd);
    free(l);
    return ncclInvalidUsage;
  }
  for (int i = 0; i <= MAX_SOCKS; i++) l->fds[i] = -1;
  struct handle h;
  memset(&h, 0, sizeof(h));
  h.magic = MAGIC;
  h.addr = addr;
  res = weft_auth_random(h.nonce, sizeof(h.nonce));
  if (res != ncclSuccess) {
    weft_socket_close(l->fd);
    free(l);
    return res;
  }
  memcpy(l->challenge, h.nonce, sizeof(h.nonce));
  memset(handle, 0, WEFT_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof(h));
  *out = l;
  return ncclSuccess;
}

/* The first failure of a connection: a WARN, except for a peer that closed its end or reset
 * it (peer_left), logged as INFO: the proxy then names the lost rank in its own WARN, or says
 * nothing when the communicator had failed already and the peer left because of it (a WARN here
 * would replace that failure's text in ncclGetLastError). */
static void fail_conn(struct comm* c, ncclResult_t res, const char* what, int err, int peer_left) {
  ncclResult_t expected = ncclSuccess;
  atomic_compare_exchange_strong(&c->err, &expected, res);
  if (atomic_exchange(&c->warned, 1) != 0) return;
  const char* dir = c->is_send ? "send" : "receive";
  if (peer_left)
    WEFT_INFO(WEFT_NET, "NET/Socket : %s connection with %s failed: %s%s%s", dir, c->peer, what,
              err ? ": " : "", err ? strerror(err) : "");
  else
    WEFT_WARN("NET/Socket : %s connection with %s failed: %s%s%s", dir, c->peer, what, err ? ": " : "",
              err ? strerror(err) : "");
}
static void set_err(struct comm* c, ncclResult_t res, const char* what, int err) {
  fail_conn(c, res, what, err, 0);
}
/* An I/O error on a socket: the peer left when it reset the connection or it broke. */
static void io_err(struct comm* c, const char* what, int err) {
  int left = err == ECONNRESET || err == EPIPE;
  fail_conn(c, left ? ncclRemoteError : ncclSystemError, what, err, left);
}

/* One non-blocking attempt on a socket, through its TLS session when it has one. */
static ssize_t sock_io(int fd, struct weft_tls* tls, int is_send, void* buf, size_t len) {
  if (tls != NULL) return is_send ? weft_tls_send(tls, buf, len) : weft_tls_recv(tls, buf, len);
  return is_send ? weft_socket_try_send(fd, buf, len) : weft_socket_try_recv(fd, buf, len);
}

/* Move bytes of the oldest task of socket s; returns 1 if any moved, -1 on error. */
static int progress_sock(struct comm* c, struct dsock* s) {
  unsigned h = atomic_load_explicit(&s->head, memory_order_relaxed);
  if (h == atomic_load_explicit(&s->tail, memory_order_acquire)) return 0;
  struct task* t = &s->q[h % QLEN];
  int moved = 0;
  while (t->done < t->len) {
    ssize_t n = sock_io(s->fd, s->tls, c->is_send, t->ptr + t->done, t->len - t->done);
    if (n == 0) break;
    if (n < 0) {
      if (n == WEFT_SOCKET_CLOSED)
        fail_conn(c, ncclRemoteError, "peer closed a data socket", 0, 1);
      else
        io_err(c, "data socket", errno);
      return -1;
    }
    t->done += (size_t)n;
    moved = 1;
  }
  if (t->done == t->len) {
    atomic_fetch_sub_explicit(&t->req->chunks_left, 1, memory_order_release);
    atomic_store_explicit(&s->head, h + 1, memory_order_release);
  }
  return moved;
}

static void* helper_main(void* arg) {
  struct helper* hp = arg;
  struct comm* c = hp->comm;
  struct pollfd pfd[MAX_SOCKS];
  pthread_mutex_lock(&hp->mu);
  while (!hp->stop) {
    int busy = 0, moved = 0, np = 0;
    for (int j = hp->index; j < c->nsocks; j += c->nhelpers) {
      struct dsock* s = &c->socks[j];
      if (atomic_load(&s->head) == atomic_load(&s->tail)) continue;
      busy = 1;
      pthread_mutex_unlock(&hp->mu);
      int r = atomic_load(&c->err) == ncclSuccess ? progress_sock(c, s) : -1;
      pthread_mutex_lock(&hp->mu);
      if (r > 0) moved = 1;
      if (r == 0) pfd[np++] = (struct pollfd){.fd = s->fd, .events = c->is_send ? POLLOUT : POLLIN};
    }
    if (!busy || atomic_load(&c->err) != ncclSuccess) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 20000000;
      if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
      pthread_cond_timedwait(&hp->cv, &hp->mu, &ts);
    } else if (!moved && np > 0) {
      pthread_mutex_unlock(&hp->mu);
      poll(pfd, (nfds_t)np, 10); /* bounded: stop is noticed within 10 ms */
      pthread_mutex_lock(&hp->mu);
    }
  }
  pthread_mutex_unlock(&hp->mu);
  return NULL;
}

static void comm_free(struct comm* c) {
  if (c == NULL) return;
  for (int i = 0; i < c->nhelpers; i++) {
    struct helper* hp = &c->helpers[i];
    if (!hp->started) continue;
    pthread_mutex_lock(&hp->mu);
    hp->stop = 1;
    pthread_cond_signal(&hp->cv);
    pthread_mutex_unlock(&hp->mu);
    pthread_join(hp->thread, NULL);
    pthread_mutex_destroy(&hp->mu);
    pthread_cond_destroy(&hp->cv);
  }
  for (int i = 0; i < c->nsocks; i++) {
    weft_tls_free(c->socks[i].tls);
    weft_socket_close(c->socks[i].fd);
  }
  weft_tls_free(c->ctrl_tls);
  weft_socket_close(c->ctrl);
  free(c);
}

/* Build a comm from connected fds (fds[0] control); starts the helper threads. */
/* Encryption on: TLS sessions on every socket before any helper thread touches one. */
static ncclResult_t start_tls(struct comm* c, const struct weft_auth_key* key) {
  uint8_t tls_key[WEFT_TLS_KEY_BYTES];
  static const char label[] = "weft-net-socket-tls";
  weft_hmac_sha256(key->bytes, sizeof(key->bytes), label, sizeof(label) - 1, tls_key);
  c->ctrl_tls = weft_tls_new(c->ctrl, !c->is_send, tls_key, c->peer);
  int ok = c->ctrl_tls != NULL;
  for (int i = 0; i < c->nsocks && ok; i++)
    ok = (c->socks[i].tls = weft_tls_new(c->socks[i].fd, !c->is_send, tls_key, c->peer)) != NULL;
  memset(tls_key, 0, sizeof(tls_key));
  if (ok)
    WEFT_INFO(WEFT_NET,
              "NET/Socket : %s connection with %s encrypted: TLS 1.3 with the pre-shared key, %d sockets",
              c->is_send ? "send" : "receive", c->peer, c->nsocks + 1);
  return ok ? ncclSuccess : ncclSystemError;
}

/* Build a comm from connected fds (fds[0] control); starts the helper threads. tls_key NULL: the
 * sockets stay clear. */
static ncclResult_t comm_create(int is_send, const int* fds, int nsocks, const char* peer,
                                const struct weft_auth_key* tls_key, struct comm** out) {
  int nthreads, unused;
  sock_counts(&nthreads, &unused);
  struct comm* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->is_send = is_send;
  c->ctrl = fds[0];
  c->nsocks = nsocks;
  for (int i = 0; i < nsocks; i++) c->socks[i].fd = fds[i + 1];
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  if (tls_key != NULL && start_tls(c, tls_key) != ncclSuccess) {
    comm_free(c);
    return ncclSystemError;
  }
  c->nhelpers = nthreads < nsocks ? nthreads : nsocks;
  for (int i = 0; i < c->nhelpers; i++) {
    struct helper* hp = &c->helpers[i];
    hp->index = i;
    hp->comm = c;
    pthread_mutex_init(&hp->mu, NULL);
    pthread_cond_init(&hp->cv, NULL);
    if (pthread_create(&hp->thread, NULL, helper_main, hp) != 0) {
      WEFT_WARN("NET/Socket : cannot start helper thread %d for %s", i, peer);
      pthread_mutex_destroy(&hp->mu);
      pthread_cond_destroy(&hp->cv);
      c->nhelpers = i;
      comm_free(c);
      return ncclSystemError;
    }
    hp->started = 1;
  }
  for (int i = 0; i < c->nhelpers; i++) pthread_setname_np(c->helpers[i].thread, "weft-sock");
  *out = c;
  return ncclSuccess;
}

static ncclResult_t sock_connect(int dev, const struct weft_auth_key* key, void* handle_in, void** out) {
  (void)dev;
  struct handle* h = handle_in;
  char text[WEFT_SOCKET_ADDR_STRLEN];
  weft_socket_addr_str(&h->addr, text, sizeof(text));
  *out = NULL;
  if (h->magic != MAGIC) {
    WEFT_WARN("NET/Socket : connect handle has a bad magic %llx", (unsigned long long)h->magic);
    return ncclInvalidArgument;
  }
  struct connecting* st = h->state;
  if (st == NULL) {
    int nthreads, nsocks;
    sock_counts(&nthreads, &nsocks);
    st = calloc(1, sizeof(*st));
    if (st == NULL) return ncclSystemError;
    st->n = nsocks + 1;
    for (int i = 0; i < st->n; i++) st->fds[i] = -1;
    h->state = st;
    key_or_public(key, &st->key);
    st->encrypt = encryption_on();
    if (st->encrypt < 0) goto fail;
    memcpy(st->challenge, h->nonce, sizeof(h->nonce));
    if (weft_auth_random(&st->id, sizeof(st->id)) != ncclSuccess) goto fail;
    for (int i = 0; i < st->n; i++) {
      st->fds[i] = socket(h->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (st->fds[i] < 0 ||
          (connect(st->fds[i], &h->addr.sa, weft_socket_addr_len(&h->addr)) != 0 && errno != EINPROGRESS)) {
        WEFT_WARN("NET/Socket : connect to %s failed: %s", text, strerror(errno));
        goto fail;
      }
      set_liveness(st->fds[i]);
    }
  }
  int all = 1;
  for (int i = 0; i < st->n; i++) {
    if (st->state[i]) continue;
    if (weft_socket_poll_one(st->fds[i], POLLOUT, 0) == 0) {
      all = 0;
      continue;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(st->fds[i], SOL_SOCKET, SO_ERROR, &err, &len);
    struct weft_net_socket_opening o;
    memset(&o, 0, sizeof(o));
    o.h = (struct weft_net_socket_hello){
        .magic = MAGIC, .id = st->id, .index = (uint32_t)i, .nsocks = (uint32_t)(st->n - 1)};
    weft_auth_mac(&st->key, WEFT_AUTH_LABEL_NET, st->challenge, &o.h, sizeof(o.h), o.mac);
    /* A fresh socket's send buffer is empty: the opening goes whole or not at all. */
    if (err != 0 || send(st->fds[i], &o, sizeof(o), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(o)) {
      WEFT_WARN("NET/Socket : connect to %s failed: %s", text, strerror(err ? err : errno));
      goto fail;
    }
    st->state[i] = 1;
  }
  if (!all) return ncclSuccess;
  struct comm* c;
  ncclResult_t res = comm_create(1, st->fds, st->n - 1, text, st->encrypt ? &st->key : NULL, &c);
  if (res != ncclSuccess) goto fail;
  memset(st, 0, sizeof(*st));
  free(st);
  h->state = NULL;
  *out = c;
  return ncclSuccess;
fail:
  for (int i = 0; i < st->n; i++) weft_socket_close(st->fds[i]);
  memset(st, 0, sizeof(*st));
  free(st);
  h->state = NULL;
  return ncclSystemError;
}

static void pending_drop(struct listen_comm* l, int i, const char* why) {
  WEFT_INFO(WEFT_NET, "NET/Socket : listener %s drops a connection: %s", l->addr, why);
  weft_socket_close(l->pending[i].fd);
  l->pending[i] = l->pending[--l->npending];
}

/* An authenticated opening: its socket joins the connection being assembled if it fits. */
static void pending_place(struct listen_comm* l, int i) {
  const struct weft_net_socket_hello* h = &l->pending[i].in.h;
  char why[64];
  if (!weft_net_socket_hello_fits(l->have_id, l->id, l->nsocks, l->fds, h, why, sizeof(why)))
    return pending_drop(l, i, why);
  if (!l->have_id) {
    l->have_id = 1;
    l->id = h->id;
    l->nsocks = h->nsocks;
  }
  l->fds[h->index] = l->pending[i].fd;
  l->nfound++;
  l->pending[i] = l->pending[--l->npending];
}

static void pending_read(struct listen_comm* l, int i, int64_t now) {
  struct pending* p = &l->pending[i];
  ssize_t n = weft_socket_try_recv(p->fd, (char*)&p->in + p->got, sizeof(p->in) - p->got);
  if (n < 0) return pending_drop(l, i, n == WEFT_SOCKET_CLOSED ? "closed before its hello" : strerror(errno));
  p->got += (size_t)n;
  if (p->got < sizeof(p->in)) {
    if (now >= p->deadline) pending_drop(l, i, "no hello in time");
    return;
  }
  if (!weft_auth_check(&l->key, WEFT_AUTH_LABEL_NET, l->challenge, &p->in.h, sizeof(p->in.h), p->in.mac))
    return pending_drop(l, i, "wrong answer to the challenge (not holding the job key)");
  pending_place(l, i);
}

static ncclResult_t sock_accept(void* lc, void** out) {
  struct listen_comm* l = lc;
  *out = NULL;
  union weft_socket_addr peer;
  int fd;
  int64_t now = weft_socket_now_ns();
  while (l->npending < MAX_PENDING && (fd = weft_socket_try_accept(l->fd, &peer)) >= 0) {
    set_liveness(fd);
    struct pending* p = &l->pending[l->npending++];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->deadline = now + WEFT_AUTH_TIMEOUT_S * 1000000000LL;
  }
  /* Backwards: dropping or placing entry i moves the last (already visited) one into its place. */
  for (int i = l->npending - 1; i >= 0; i--) pending_read(l, i, now);
  if (!l->have_id || l->nfound < (int)l->nsocks + 1) return ncclSuccess;
  char text[WEFT_SOCKET_ADDR_STRLEN];
  socklen_t len = sizeof(peer);
  getpeername(l->fds[0], &peer.sa, &len);
  weft_socket_addr_str(&peer, text, sizeof(text));
  struct comm* c;
  ncclResult_t res = comm_create(0, l->fds, (int)l->nsocks, text, l->encrypt ? &l->key : NULL, &c);
  if (res != ncclSuccess) return res;
  /* Now owned by the comm. */
  for (int i = 0; i <= MAX_SOCKS; i++) l->fds[i] = -1;
  l->have_id = 0;
  l->nfound = 0;
  *out = c;
  return ncclSuccess;
}

static struct req* req_alloc(struct comm* c) {
  struct req* r = &c->reqs[c->next_req % QLEN];
  if (r->used) return NULL;
  memset(r, 0, sizeof(*r));
  r->used = 1;
  r->comm = c;
  c->next_req++;
  return r;
}

/* Chunks of a message over the data sockets, the same on both sides. */
static void queue_chunks(struct comm* c, struct req* r) {
  size_t n = r->size / MIN_CHUNK;
  if (n > (size_t)c->nsocks) n = (size_t)c->nsocks;
  if (n < 1) n = 1;
  size_t chunk = (r->size + n - 1) / n;
  atomic_store(&r->chunks_left, (int)n);
  for (size_t i = 0; i < n; i++) {
    int j = (int)((c->rr + i) % (unsigned)c->nsocks);
    struct dsock* s = &c->socks[j];
    unsigned t = atomic_load_explicit(&s->tail, memory_order_relaxed);
    size_t off = i * chunk;
    s->q[t % QLEN] = (struct task){r->data + off, off + chunk > r->size ? r->size - off : chunk, 0, r};
    atomic_store_explicit(&s->tail, t + 1, memory_order_release);
    if (c->nhelpers > 0) {
      struct helper* hp = &c->helpers[j % c->nhelpers];
      pthread_mutex_lock(&hp->mu);
      pthread_cond_signal(&hp->cv);
      pthread_mutex_unlock(&hp->mu);
    }
  }
  c->rr = (unsigned)((c->rr + n) % (unsigned)c->nsocks);
}

static int ctrl_io(struct comm* c, void* buf, size_t len, size_t* done) {
  ssize_t n = sock_io(c->ctrl, c->ctrl_tls, c->is_send, (char*)buf + *done, len - *done);
  if (n == WEFT_SOCKET_CLOSED) {
    /* Not yet an error: after its goodbye a peer closes while earlier messages' chunks may
     * still be arriving on the data sockets (sock_test decides). */
    c->ctrl_eof = 1;
    return -1;
  }
  if (n < 0) {
    io_err(c, "control socket", errno);
    return -1;
  }
  *done += (size_t)n;
  return 0;
}

/* Receiver: pick the buffer by tag once the header is in. */
static int match_header(struct comm* c, struct req* r) {
  int i = weft_net_socket_match(&r->hdr, r->nbuf, r->tags, r->sizes);
  if (i == -1) {
    set_err(c, ncclRemoteError, "garbled message header", 0);
    return -1;
  }
  if (i >= 0) {
    r->matched = i;
    r->data = r->bufs[i];
    r->size = (size_t)r->hdr.size;
    return 0;
  }
  WEFT_WARN("NET/Socket : message of %llu bytes with tag %d from %s fits no posted buffer",
            (unsigned long long)r->hdr.size, r->hdr.tag, c->peer);
  set_err(c, ncclInternalError, "unexpected message", 0);
  return -1;
}

/* Advance the header / inline stage of requests in order on the control socket. */
static void progress_ctrl(struct comm* c) {
  while (c->ctrl_next < c->next_req && atomic_load(&c->err) == ncclSuccess && !c->ctrl_eof) {
    struct req* r = &c->reqs[c->ctrl_next % QLEN];
    if (r->stage == 0) {
      if (ctrl_io(c, &r->hdr, sizeof(r->hdr), &r->hdr_done) < 0 || r->hdr_done < sizeof(r->hdr)) return;
      if (!c->is_send) {
        int m = match_header(c, r);
        if (m != 0) return;
      }
      r->stage = (r->size <= INLINE_MAX || c->nsocks == 0) ? 1 : 2;
    }
    if (r->stage == 1) {
      if (r->data_done < r->size &&
          (ctrl_io(c, r->data, r->size, &r->data_done) < 0 || r->data_done < r->size))
        return;
      r->stage = 3;
    } else if (r->stage == 2) {
      queue_chunks(c, r);
    }
    c->ctrl_next++;
  }
}

static void progress(struct comm* c) {
  progress_ctrl(c);
  if (c->nhelpers == 0)
    for (int j = 0; j < c->nsocks && atomic_load(&c->err) == ncclSuccess; j++) progress_sock(c, &c->socks[j]);
}

static ncclResult_t sock_isend_meta(void* sc, const void* data, size_t size, int tag, uint64_t meta,
                                    void** request) {
  struct comm* c = sc;
  *request = NULL;
  if (atomic_load(&c->err) != ncclSuccess) return atomic_load(&c->err);
  struct req* r = req_alloc(c);
  if (r == NULL) return ncclSuccess;
  r->is_send = 1;
  r->data = (char*)data;
  r->size = size;
  r->hdr = (struct weft_net_socket_msg_hdr){size, tag, (uint32_t)MAGIC, meta};
  *request = r;
  progress(c);
  return ncclSuccess;
}

static ncclResult_t sock_isend(void* sc, const void* data, size_t size, int tag, void** request) {
  return sock_isend_meta(sc, data, size, tag, 0, request);
}

static ncclResult_t sock_irecv(void* rc, int n, void* const* data, const size_t* sizes, const int* tags,
                               void** request) {
  struct comm* c = rc;
  *request = NULL;
  if (n < 1 || n > WEFT_NET_MAX_RECVS) return ncclInvalidArgument;
  if (atomic_load(&c->err) != ncclSuccess) return atomic_load(&c->err);
  struct req* r = req_alloc(c);
  if (r == NULL) return ncclSuccess;
  r->nbuf = n;
  for (int i = 0; i < n; i++) {
    r->bufs[i] = data[i];
    r->sizes[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  *request = r;
  progress(c);
  return ncclSuccess;
}

static ncclResult_t sock_test_meta(void* request, int* done, size_t* sizes, uint64_t* meta) {
  struct req* r = request;
  struct comm* c = r->comm;
  *done = 0;
  progress(c);
  /* A finished request is done even if the connection failed after it (e.g. EOF right after a
   * goodbye message): errors belong to the requests they hit. */
  if (r->stage < 2 && c->ctrl_eof) fail_conn(c, ncclRemoteError, "peer closed the connection", 0, 1);
  if (r->stage < 2 || (r->stage == 2 && atomic_load_explicit(&r->chunks_left, memory_order_acquire) > 0))
    return atomic_load(&c->err);
  *done = 1;
  if (sizes != NULL) {
    if (r->is_send) {
      sizes[0] = r->size;
    } else {
      for (int i = 0; i < r->nbuf; i++) sizes[i] = i == r->matched ? r->size : SIZE_MAX;
    }
  }
  if (meta != NULL) *meta = r->is_send ? 0 : r->hdr.meta;
  r->used = 0;
  return ncclSuccess;
}

static ncclResult_t sock_test(void* request, int* done, size_t* sizes) {
  return sock_test_meta(request, done, sizes, NULL);
}

/* Closing is abrupt: the peer sees EOF, an error unless the layer above said goodbye first. */
static ncclResult_t sock_close_send(void* sc) {
  comm_free(sc);
  return ncclSuccess;
}

static ncclResult_t sock_close_recv(void* rc) {
  comm_free(rc);
  return ncclSuccess;
}

static ncclResult_t sock_close_listen(void* lc) {
  struct listen_comm* l = lc;
  if (l == NULL) return ncclSuccess;
  for (int i = 0; i < l->npending; i++) weft_socket_close(l->pending[i].fd);
  for (int i = 0; i <= MAX_SOCKS; i++) weft_socket_close(l->fds[i]);
  weft_socket_close(l->fd);
  memset(l, 0, sizeof(*l));
  free(l);
  return ncclSuccess;
}

const struct weft_net_ops weft_net_socket_ops = {
    .name = "Socket",
    .init = sock_init,
    .devices = sock_devices,
    .get_properties = sock_props,
    .listen = sock_listen,
    .connect = sock_connect,
    .accept = sock_accept,
    .isend = sock_isend,
    .irecv = sock_irecv,
    .test = sock_test,
    .close_send = sock_close_send,
    .close_recv = sock_close_recv,
    .close_listen = sock_close_listen,
    .isend_meta = sock_isend_meta,
    .test_meta = sock_test_meta,
};
