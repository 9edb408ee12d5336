/* The bootstrap root: a thread that collects every rank's check-in, then tells each rank the
 * address of its ring successor. It answers "who is missing?" queries from ranks that time out
 * and drops connections that do not speak the protocol without disturbing the job. Nothing is
 * parsed before its sender proved it holds the job key (answer to our challenge), and every
 * reply carries a MAC over the rank's nonce, so neither side can be impersonated. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/log.h"

/* How long the root outlives the last check-in beyond the ranks' own timeout, so ranks that time
 * out can still ask it who is missing. */
#define ROOT_GRACE_NS (5LL * 1000000000LL)
#define ROOT_POLL_MS 1000

/* A rank that checked in and then went away (gave up, aborted) is not what the job waits for:
 * keep it apart from ranks that never came, which are the ones errors must name. */
enum { HAVE_NEVER = 0, HAVE_PRESENT = 1, HAVE_LEFT = 2 };

struct root_conn {
  int fd;
  int rank; /* checked in and waiting for its reply; -1 while the check-in is arriving */
  size_t got, qgot;
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES];
  struct weft_bs_signed_checkin in; /* in.body only once in.mac is verified */
  uint32_t query;
  int64_t deadline;
  union weft_socket_addr peer;
};

struct root {
  int listen_fd;
  uint64_t magic;
  struct weft_auth_key key;
  char name[WEFT_SOCKET_ADDR_STRLEN];
  int64_t timeout_s, start, give_up;
  int nranks, nroots, iroot; /* nranks is 0 until the first check-in */
  int lo, hi, extra;         /* our block, and the next block's first rank (-1: none) */
  int nneeded, nhave;
  union weft_socket_addr* addrs; /* by slot: rank - lo, extra at hi - lo */
  uint8_t* have;                 /* HAVE_* by slot */
  struct root_conn* conns;
  int nconns, capconns;
  struct pollfd* fds;
  int capfds;
};

static int slot_of(const struct root* r, int rank) {
  if (rank >= r->lo && rank < r->hi) return rank - r->lo;
  return rank == r->extra ? r->hi - r->lo : -1;
}

static int rank_of_slot(const struct root* r, int slot) {
  return slot < r->hi - r->lo ? r->lo + slot : r->extra;
}

static void drop_conn(struct root* r, int i, const char* why) {
  char text[WEFT_SOCKET_ADDR_STRLEN];
  if (why) {
    WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: dropping connection from %s: %s", r->name,
              weft_socket_addr_str(&r->conns[i].peer, text, sizeof(text)), why);
  }
  weft_socket_close(r->conns[i].fd);
  r->conns[i] = r->conns[--r->nconns];
}

/* Reply to the rank on conns[i], signed over the nonce of its (verified) check-in. */
static void send_reply(struct root* r, int i, const struct weft_bs_reply* reply) {
  struct root_conn* c = &r->conns[i];
  char who[WEFT_SOCKET_ADDR_STRLEN + 32];
  snprintf(who, sizeof(who), "rank %d (from root %s)", c->in.body.rank, r->name);
  struct weft_bs_signed_reply out;
  memset(&out, 0, sizeof(out));
  out.body = *reply;
  weft_auth_mac(&r->key, WEFT_AUTH_LABEL_REPLY, c->in.body.nonce, &out.body, sizeof(out.body), out.mac);
  /* Small replies fit the socket buffer; a short deadline keeps a dead rank from holding us. */
  (void)weft_socket_send_all(c->fd, &out, sizeof(out), who, NULL, weft_socket_deadline(5));
}

static void fill_missing(const struct root* r, struct weft_bs_reply* reply) {
  memset(reply, 0, sizeof(*reply));
  reply->kind = WEFT_BS_REPLY_MISSING;
  reply->nneeded = r->nneeded;
  for (int s = 0; s < r->nneeded; s++) {
    if (r->have[s] != HAVE_NEVER) continue;
    if (reply->nlisted < WEFT_BOOTSTRAP_MAX_LISTED) reply->missing[reply->nlisted++] = rank_of_slot(r, s);
    reply->count++;
  }
  for (int s = 0; s < r->nneeded; s++) {
    if (r->have[s] != HAVE_LEFT) continue;
    if (reply->nlisted + reply->nlisted_left < WEFT_BOOTSTRAP_MAX_LISTED)
      reply->missing[reply->nlisted + reply->nlisted_left++] = rank_of_slot(r, s);
    reply->nleft++;
  }
}

static int format_list(char* buf, size_t len, const int32_t* ranks, int n, int total) {
  int used = 0;
  for (int k = 0; k < n && used < (int)len - 16; k++)
    used += snprintf(buf + used, len - used, "%s%d", k ? "," : "", ranks[k]);
  if (total > n && used < (int)len - 4) used += snprintf(buf + used, len - used, ",...");
  return used;
}

void weft_bs_format_missing(const struct weft_bs_reply* reply, char* buf, size_t len) {
  int nlisted = reply->nlisted < 0                           ? 0
                : reply->nlisted > WEFT_BOOTSTRAP_MAX_LISTED ? WEFT_BOOTSTRAP_MAX_LISTED
                                                             : reply->nlisted;
  int nleft = reply->nlisted_left < 0 ? 0 : reply->nlisted_left;
  if (nleft > WEFT_BOOTSTRAP_MAX_LISTED - nlisted) nleft = WEFT_BOOTSTRAP_MAX_LISTED - nlisted;
  int used = snprintf(buf, len, "%d of %d never checked in: missing ranks ", reply->count, reply->nneeded);
  if (used < (int)len) used += format_list(buf + used, len - used, reply->missing, nlisted, reply->count);
  if (reply->nleft > 0 && used < (int)len) {
    used += snprintf(buf + used, len - used, "; %d checked in and left: ranks ", reply->nleft);
    if (used < (int)len) format_list(buf + used, len - used, reply->missing + nlisted, nleft, reply->nleft);
  }
}

static void reject(struct root* r, int i, int expected, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reject(struct root* r, int i, int expected, const char* fmt, ...) {
  char why[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  WEFT_WARN("Bootstrap root %s: rejecting check-in of rank %d: %s", r->name, r->conns[i].in.body.rank, why);
  struct weft_bs_reply reply;
  memset(&reply, 0, sizeof(reply));
  reply.kind = WEFT_BS_REPLY_REJECT;
  reply.count = expected;
  send_reply(r, i, &reply);
  drop_conn(r, i, NULL);
}

/* First valid check-in: learn the job's shape and size our tables. */
static int configure(struct root* r, const struct weft_bs_checkin* m) {
  r->nranks = m->nranks;
  r->nroots = m->nroots;
  r->iroot = m->iroot;
  weft_bs_block(r->nranks, r->nroots, r->iroot, &r->lo, &r->hi);
  r->extra = (r->lo == 0 && r->hi == r->nranks) ? -1 : r->hi % r->nranks;
  r->nneeded = r->hi - r->lo + (r->extra >= 0 ? 1 : 0);
  r->addrs = calloc(r->nneeded, sizeof(*r->addrs));
  r->have = calloc(r->nneeded, 1);
  if (r->addrs == NULL || r->have == NULL) return 0;
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: root %d of %d serving ranks %d-%d of %d", r->name, r->iroot,
            r->nroots, r->lo, r->hi - 1, r->nranks);
  return 1;
}

static void checkin(struct root* r, int i) {
  struct root_conn* c = &r->conns[i];
  const struct weft_bs_checkin* m = &c->in.body;
  if (m->magic != r->magic) return drop_conn(r, i, "wrong magic");
  if (m->type != WEFT_SOCKET_BOOTSTRAP || (m->kind != WEFT_BS_CHECKIN && m->kind != WEFT_BS_ADDR))
    return drop_conn(r, i, "not a bootstrap check-in");
  if (m->nranks < 1 || m->nranks > WEFT_BOOTSTRAP_MAX_RANKS || m->nroots < 1 || m->nroots > m->nranks ||
      m->iroot < 0 || m->iroot >= m->nroots || m->rank < 0 || m->rank >= m->nranks)
    return drop_conn(r, i, "check-in fields out of range");
  if (r->nranks == 0 && !configure(r, m)) return drop_conn(r, i, "out of memory");
  if (m->nranks != r->nranks)
    return reject(r, i, r->nranks, "it says nranks %d, earlier ranks said %d", m->nranks, r->nranks);
  if (m->nroots != r->nroots || m->iroot != r->iroot)
    return reject(r, i, r->nranks, "it counts %d roots, earlier ranks %d", m->nroots, r->nroots);
  int slot = slot_of(r, m->rank);
  int wants_reply = m->kind == WEFT_BS_CHECKIN;
  if (slot < 0 || (wants_reply && m->rank == r->extra) || (!wants_reply && m->rank != r->extra))
    return reject(r, i, r->nranks, "rank %d does not belong to this root (kind %d)", m->rank, (int)m->kind);
  if (r->have[slot] == HAVE_PRESENT) return reject(r, i, r->nranks, "rank %d checked in twice", m->rank);
  r->addrs[slot] = m->listen;
  r->have[slot] = HAVE_PRESENT;
  r->nhave++;
  r->give_up = r->timeout_s > 0 ? weft_socket_now_ns() + r->timeout_s * 1000000000LL + ROOT_GRACE_NS
                                : WEFT_SOCKET_NO_DEADLINE;
  WEFT_TRACE(WEFT_BOOTSTRAP, "Bootstrap root %s: rank %d checked in (%d/%d)", r->name, m->rank, r->nhave,
             r->nneeded);
  if (wants_reply)
    c->rank = m->rank;
  else
    drop_conn(r, i, NULL);
}

/* A checked-in rank's connection is readable: a query, or the rank went away. */
static void rank_left(struct root* r, int i, const char* why) {
  struct root_conn* c = &r->conns[i];
  r->have[slot_of(r, c->rank)] = HAVE_LEFT;
  r->nhave--;
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: rank %d left before all ranks arrived: %s", r->name, c->rank,
            why);
  drop_conn(r, i, NULL);
}

static void waiting_readable(struct root* r, int i) {
  struct root_conn* c = &r->conns[i];
  ssize_t n = weft_socket_try_recv(c->fd, (char*)&c->query + c->qgot, sizeof(c->query) - c->qgot);
  if (n < 0) return rank_left(r, i, n == WEFT_SOCKET_CLOSED ? "connection closed" : strerror(errno));
  c->qgot += (size_t)n;
  if (c->qgot < sizeof(c->query)) return;
  c->qgot = 0;
  if (c->query != WEFT_BS_QUERY) return rank_left(r, i, "unknown request");
  struct weft_bs_reply reply;
  fill_missing(r, &reply);
  send_reply(r, i, &reply);
}

static void readable(struct root* r, int i) {
  struct root_conn* c = &r->conns[i];
  if (c->rank >= 0) return waiting_readable(r, i);
  ssize_t n = weft_socket_try_recv(c->fd, (char*)&c->in + c->got, sizeof(c->in) - c->got);
  if (n == WEFT_SOCKET_CLOSED) return drop_conn(r, i, "closed before a complete check-in");
  if (n == WEFT_SOCKET_ERROR) return drop_conn(r, i, strerror(errno));
  c->got += (size_t)n;
  if (c->got < sizeof(c->in)) return;
  if (!weft_auth_check(&r->key, WEFT_AUTH_LABEL_CHECKIN, c->challenge, &c->in.body, sizeof(c->in.body),
                       c->in.mac)) {
    /* Tell an honest rank with the wrong key why; a stranger learns nothing from it. */
    uint64_t refused = WEFT_BS_AUTH_REFUSED;
    (void)weft_socket_try_send(c->fd, &refused, sizeof(refused));
    return drop_conn(r, i, "wrong answer to the challenge (not holding the job key)");
  }
  checkin(r, i);
}

static void accept_all(struct root* r) {
  for (;;) {
    union weft_socket_addr peer;
    int fd = weft_socket_try_accept(r->listen_fd, &peer);
    if (fd < 0) return;
    if (r->nconns == r->capconns) {
      int cap = r->capconns ? 2 * r->capconns : 64;
      struct root_conn* grown = realloc(r->conns, cap * sizeof(*grown));
      if (grown == NULL) {
        weft_socket_close(fd);
        return;
      }
      r->conns = grown;
      r->capconns = cap;
    }
    struct root_conn* c = &r->conns[r->nconns];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->rank = -1;
    c->peer = peer;
    /* A fresh socket's send buffer is empty: the challenge goes whole or the peer is gone. */
    if (weft_auth_random(c->challenge, sizeof(c->challenge)) != ncclSuccess ||
        weft_socket_try_send(fd, c->challenge, sizeof(c->challenge)) != (ssize_t)sizeof(c->challenge)) {
      weft_socket_close(fd);
      continue;
    }
    r->nconns++;
    /* An honest rank answers at once: a silent or slow one only holds an fd this long. */
    c->deadline = weft_socket_now_ns() + WEFT_AUTH_TIMEOUT_S * 1000000000LL;
  }
}

static void finish(struct root* r) {
  for (int i = 0; i < r->nconns; i++) {
    struct root_conn* c = &r->conns[i];
    if (c->rank < 0) continue;
    struct weft_bs_reply reply;
    memset(&reply, 0, sizeof(reply));
    reply.kind = WEFT_BS_REPLY_NEXT;
    reply.next = r->addrs[slot_of(r, (c->rank + 1) % r->nranks)];
    send_reply(r, i, &reply);
  }
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: all %d ranks checked in after %.1f ms", r->name, r->nneeded,
            (weft_socket_now_ns() - r->start) / 1e6);
}

static void give_up(struct root* r) {
  struct weft_bs_reply reply;
  fill_missing(r, &reply);
  char text[768];
  weft_bs_format_missing(&reply, text, sizeof(text));
  WEFT_WARN("Bootstrap root %s: gave up waiting; %s", r->name, text);
  for (int i = 0; i < r->nconns; i++)
    if (r->conns[i].rank >= 0) send_reply(r, i, &reply);
}

static void serve(struct root* r) {
  for (;;) {
    if (r->nranks > 0 && r->nhave == r->nneeded) return finish(r);
    int64_t now = weft_socket_now_ns();
    if (r->nranks > 0 && now >= r->give_up) return give_up(r);
    if (r->capfds < r->nconns + 1) {
      int cap = 2 * (r->nconns + 1);
      struct pollfd* grown = realloc(r->fds, cap * sizeof(*grown));
      if (grown == NULL) {
        WEFT_WARN("Bootstrap root %s: out of memory with %d connections", r->name, r->nconns);
        return;
      }
      r->fds = grown;
      r->capfds = cap;
    }
    struct pollfd* fds = r->fds;
    fds[0] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
    for (int i = 0; i < r->nconns; i++) fds[i + 1] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
    int nfds = r->nconns + 1;
    int64_t wait_ms = r->nranks > 0 ? (r->give_up - now) / 1000000 + 1 : ROOT_POLL_MS;
    if (poll(fds, nfds, wait_ms < ROOT_POLL_MS ? (int)wait_ms : ROOT_POLL_MS) < 0 && errno != EINTR) {
      WEFT_WARN("Bootstrap root %s: poll failed: %s", r->name, strerror(errno));
      return;
    }
    now = weft_socket_now_ns();
    /* Walk backwards: dropping a connection moves the last one into its place. */
    for (int i = nfds - 2; i >= 0; i--) {
      if (fds[i + 1].revents)
        readable(r, i);
      else if (r->conns[i].rank < 0 && now >= r->conns[i].deadline)
        drop_conn(r, i, "no authenticated check-in in time");
    }
    if (fds[0].revents) accept_all(r);
  }
}

static void* root_main(void* arg) {
  struct root* r = arg;
  serve(r);
  for (int i = 0; i < r->nconns; i++) weft_socket_close(r->conns[i].fd);
  weft_socket_close(r->listen_fd);
  free(r->conns);
  free(r->fds);
  free(r->addrs);
  free(r->have);
  memset(&r->key, 0, sizeof(r->key));
  free(r);
  return NULL;
}

ncclResult_t weft_bs_root_start(union weft_socket_addr* addr, uint64_t magic,
                                const struct weft_auth_key* key) {
  struct root* r = calloc(1, sizeof(*r));
  if (r == NULL) {
    WEFT_WARN("Bootstrap root: out of memory");
    return ncclSystemError;
  }
  ncclResult_t res = weft_socket_listen(addr, &r->listen_fd);
  if (res != ncclSuccess) {
    free(r);
    return res;
  }
  /* Allocate up front: until a rank connects the thread then takes no locks (malloc, log), so
   * the process may fork right after ncclGetUniqueId (launchers and tests do). */
  r->capconns = r->capfds = 64;
  r->conns = calloc(r->capconns, sizeof(*r->conns));
  r->fds = calloc(r->capfds, sizeof(*r->fds));
  if (r->conns == NULL || r->fds == NULL) {
    WEFT_WARN("Bootstrap root: out of memory");
    weft_socket_close(r->listen_fd);
    free(r->conns);
    free(r->fds);
    free(r);
    return ncclSystemError;
  }
  r->magic = magic;
  r->key = *key;
  r->timeout_s = weft_bs_timeout_s();
  r->start = weft_socket_now_ns();
  weft_socket_addr_str(addr, r->name, sizeof(r->name));
  pthread_attr_t attr;
  pthread_t thread;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&thread, &attr, root_main, r);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    WEFT_WARN("Bootstrap root %s: cannot start its thread: %s", r->name, strerror(err));
    weft_socket_close(r->listen_fd);
    free(r);
    return ncclSystemError;
  }
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root listening on %s", r->name);
  return ncclSuccess;
}
