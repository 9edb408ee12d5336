/* The bootstrap root: a thread that collects every rank's check-in, then tells each rank the
 * address of its ring successor, and keeps each check-in connection until that rank's bootstrap
 * is up, so a rank killed meanwhile is named to the others at once. It answers "who is missing?"
 * queries from ranks that time out and drops connections that do not speak the protocol without
 * disturbing the job. Nothing is parsed before its sender proved it holds the job key (answer to
 * our challenge), and every reply carries a MAC over the rank's nonce, so neither side can be
 * impersonated. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/log.h"

/* How long the root outlives the last check-in beyond the ranks' own timeout, so ranks that time
 * out can still ask it who is missing. */
#define ROOT_GRACE_NS (5LL * 1000000000LL)
#define ROOT_POLL_MS 1000
/* Events taken per wake-up. */
#define ROOT_EVENTS 64

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

/* A rank that checked in and then left on purpose (gave up, aborted: it says WEFT_BS_BYE) may come
 * back; one whose connection closed without a word was killed, so the job cannot form and every
 * rank is told at once (GONE) instead of waiting for its timeout. After pairing, the check-in
 * connections stay open until each rank's bootstrap is up, so a rank lost while the ring
 * connects is named to all the others too. */
struct root {
  int listen_fd;
  uint64_t magic;
  struct weft_auth_key key;
  char name[WEFT_SOCKET_ADDR_STRLEN];
  int64_t timeout_s, start, give_up;
  struct weft_bs_roster ros;
  int paired; /* every rank got its successor: now waiting for their goodbyes */
  int gone;   /* the first rank that vanished, -1: none */
  struct root_conn* conns;
  int nconns, capconns;
  int nwaiting; /* conns with rank >= 0 */
  /* One epoll set over the listen socket and every connection, so a wake-up costs what arrived,
   * not the number of connections; slot[fd] is the fd's index in conns (-1: none), as dropping a
   * connection moves the last one into its place. */
  int ep;
  int* slot;
  int capslot;
  int64_t next_deadline; /* earliest deadline of an unauthenticated connection (a bound) */
};

static void drop_conn(struct root* r, int i, const char* why) {
  char text[WEFT_SOCKET_ADDR_STRLEN];
  if (why) {
    WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: dropping connection from %s: %s", r->name,
              weft_socket_addr_str(&r->conns[i].peer, text, sizeof(text)), why);
  }
  r->nwaiting -= r->conns[i].rank >= 0;
  r->slot[r->conns[i].fd] = -1;
  /* Explicitly: a close alone keeps it in the set while a forked child holds a copy. */
  (void)epoll_ctl(r->ep, EPOLL_CTL_DEL, r->conns[i].fd, NULL);
  weft_socket_close(r->conns[i].fd);
  r->conns[i] = r->conns[--r->nconns];
  if (i < r->nconns) r->slot[r->conns[i].fd] = i;
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

static void fill_gone(const struct root* r, struct weft_bs_reply* reply) {
  weft_bs_roster_missing(&r->ros, reply);
  reply->kind = WEFT_BS_REPLY_GONE;
  reply->gone = r->gone;
}

static void reject(struct root* r, int i, int expected, const char* why) {
  WEFT_WARN("Bootstrap root %s: rejecting check-in of rank %d: %s", r->name, r->conns[i].in.body.rank, why);
  struct weft_bs_reply reply;
  memset(&reply, 0, sizeof(reply));
  reply.kind = WEFT_BS_REPLY_REJECT;
  reply.count = expected;
  send_reply(r, i, &reply);
  drop_conn(r, i, NULL);
}

/* Tell every waiting rank that r->gone went away, and let them go. Highest rank first: the root
 * usually lives in rank 0's process, which exits once told, taking the root with it. */
static void announce_gone(struct root* r) {
  struct weft_bs_reply reply;
  fill_gone(r, &reply);
  WEFT_WARN("Bootstrap root %s: rank %d went away %s; telling the %s ranks", r->name, r->gone,
            r->paired ? "while the ranks connected" : "before all ranks checked in",
            r->paired ? "remaining" : "waiting");
  for (;;) {
    int last = -1;
    for (int i = 0; i < r->nconns; i++)
      if (r->conns[i].rank >= 0 && (last < 0 || r->conns[i].rank > r->conns[last].rank)) last = i;
    if (last < 0) return;
    send_reply(r, last, &reply);
    drop_conn(r, last, NULL);
  }
}

static void checkin(struct root* r, int i) {
  struct root_conn* c = &r->conns[i];
  const struct weft_bs_checkin* m = &c->in.body;
  char why[160];
  if (!weft_bs_checkin_valid(m, r->magic, why, sizeof(why))) return drop_conn(r, i, why);
  if (r->ros.nranks == 0) {
    if (!weft_bs_roster_init(&r->ros, m)) return drop_conn(r, i, "out of memory");
    WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: root %d of %d serving ranks %d-%d of %d", r->name,
              r->ros.iroot, r->ros.nroots, r->ros.lo, r->ros.hi - 1, r->ros.nranks);
  }
  int slot;
  if (!weft_bs_roster_admit(&r->ros, m, &slot, why, sizeof(why))) return reject(r, i, r->ros.nranks, why);
  if (r->gone >= 0 && m->kind == WEFT_BS_CHECKIN) {
    /* The job is lost already: say so now rather than after the timeout. */
    struct weft_bs_reply reply;
    fill_gone(r, &reply);
    send_reply(r, i, &reply);
    return drop_conn(r, i, NULL);
  }
  r->ros.addrs[slot] = m->listen;
  r->ros.have[slot] = WEFT_BS_HAVE_PRESENT;
  r->ros.nhave++;
  r->give_up = r->timeout_s > 0 ? weft_socket_now_ns() + r->timeout_s * 1000000000LL + ROOT_GRACE_NS
                                : WEFT_SOCKET_NO_DEADLINE;
  WEFT_TRACE(WEFT_BOOTSTRAP, "Bootstrap root %s: rank %d checked in (%d/%d)", r->name, m->rank, r->ros.nhave,
             r->ros.nneeded);
  if (m->kind == WEFT_BS_CHECKIN) {
    c->rank = m->rank;
    r->nwaiting++;
  } else
    drop_conn(r, i, NULL);
}

/* A checked-in rank's connection ended: said goodbye (vanished 0) or closed without a word. */
static void rank_left(struct root* r, int i, int vanished, const char* why) {
  struct root_conn* c = &r->conns[i];
  int rank = c->rank;
  if (!r->paired) {
    r->ros.have[weft_bs_roster_slot(&r->ros, rank)] = WEFT_BS_HAVE_LEFT;
    r->ros.nhave--;
    WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: rank %d left before all ranks arrived: %s", r->name, rank,
              why);
  }
  drop_conn(r, i, NULL);
  if (vanished && r->gone < 0) {
    r->gone = rank;
    announce_gone(r);
  }
}

static void waiting_readable(struct root* r, int i) {
  struct root_conn* c = &r->conns[i];
  ssize_t n = weft_socket_try_recv(c->fd, (char*)&c->query + c->qgot, sizeof(c->query) - c->qgot);
  if (n < 0) return rank_left(r, i, 1, n == WEFT_SOCKET_CLOSED ? "connection closed" : strerror(errno));
  c->qgot += (size_t)n;
  if (c->qgot < sizeof(c->query)) return;
  c->qgot = 0;
  if (c->query == WEFT_BS_BYE) return rank_left(r, i, 0, "it gave up");
  if (c->query != WEFT_BS_QUERY || r->paired) return rank_left(r, i, 0, "unknown request");
  struct weft_bs_reply reply;
  weft_bs_roster_missing(&r->ros, &reply);
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
    if (fd >= r->capslot) {
      int cap = 2 * fd + 64;
      int* grown = realloc(r->slot, cap * sizeof(*grown));
      if (grown == NULL) {
        weft_socket_close(fd);
        return;
      }
      for (int k = r->capslot; k < cap; k++) grown[k] = -1;
      r->slot = grown;
      r->capslot = cap;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      weft_socket_close(fd);
      continue;
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
    r->slot[fd] = r->nconns++;
    /* An honest rank answers at once: a silent or slow one only holds an fd this long. */
    c->deadline = weft_socket_now_ns() + WEFT_AUTH_TIMEOUT_S * 1000000000LL;
    if (c->deadline < r->next_deadline) r->next_deadline = c->deadline;
  }
}

static void finish(struct root* r) {
  for (int i = 0; i < r->nconns; i++) {
    struct root_conn* c = &r->conns[i];
    if (c->rank < 0) continue;
    struct weft_bs_reply reply;
    memset(&reply, 0, sizeof(reply));
    reply.kind = WEFT_BS_REPLY_NEXT;
    reply.next = r->ros.addrs[weft_bs_roster_slot(&r->ros, (c->rank + 1) % r->ros.nranks)];
    send_reply(r, i, &reply);
  }
  r->paired = 1;
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root %s: all %d ranks checked in after %.1f ms", r->name,
            r->ros.nneeded, (weft_socket_now_ns() - r->start) / 1e6);
}

/* Drop the connections that did not check in by their deadline; the next deadline after. */
static void expire(struct root* r, int64_t now) {
  r->next_deadline = WEFT_SOCKET_NO_DEADLINE;
  for (int i = r->nconns - 1; i >= 0; i--) {
    if (r->conns[i].rank >= 0) continue;
    if (now >= r->conns[i].deadline)
      drop_conn(r, i, "no authenticated check-in in time");
    else if (r->conns[i].deadline < r->next_deadline)
      r->next_deadline = r->conns[i].deadline;
  }
}

static void give_up(struct root* r) {
  if (r->paired) return; /* the ranks have their successors: nothing to tell */
  struct weft_bs_reply reply;
  weft_bs_roster_missing(&r->ros, &reply);
  char text[768];
  weft_bs_format_missing(&reply, text, sizeof(text));
  WEFT_WARN("Bootstrap root %s: gave up waiting; %s", r->name, text);
  for (int i = 0; i < r->nconns; i++)
    if (r->conns[i].rank >= 0) send_reply(r, i, &reply);
}

static void serve(struct root* r) {
  for (;;) {
    int started = r->ros.nranks > 0;
    if (started && !r->paired && r->gone < 0 && r->ros.nhave == r->ros.nneeded) finish(r);
    if (r->paired && r->nwaiting == 0) return;
    int64_t now = weft_socket_now_ns();
    if (started && now >= r->give_up) return give_up(r);
    int64_t wait_ms = started ? (r->give_up - now) / 1000000 + 1 : ROOT_POLL_MS;
    if (r->next_deadline != WEFT_SOCKET_NO_DEADLINE && (r->next_deadline - now) / 1000000 + 1 < wait_ms)
      wait_ms = (r->next_deadline - now) / 1000000 + 1;
    struct epoll_event ev[ROOT_EVENTS];
    int nev = epoll_wait(r->ep, ev, ROOT_EVENTS,
                         wait_ms < 0              ? 0
                         : wait_ms < ROOT_POLL_MS ? (int)wait_ms
                                                  : ROOT_POLL_MS);
    if (nev < 0 && errno != EINTR) {
      WEFT_WARN("Bootstrap root %s: epoll_wait failed: %s", r->name, strerror(errno));
      return;
    }
    int listen_ready = 0;
    for (int k = 0; k < nev; k++) {
      int fd = ev[k].data.fd;
      if (fd == r->listen_fd) {
        listen_ready = 1;
        continue;
      }
      /* An earlier event of this batch may have dropped it (no fd is reused before accept_all). */
      if (fd < r->capslot && r->slot[fd] >= 0) readable(r, r->slot[fd]);
    }
    now = weft_socket_now_ns();
    if (now >= r->next_deadline) expire(r, now);
    if (listen_ready) accept_all(r);
  }
}

static void* root_main(void* arg) {
  struct root* r = arg;
  serve(r);
  for (int i = 0; i < r->nconns; i++) weft_socket_close(r->conns[i].fd);
  weft_socket_close(r->listen_fd);
  free(r->conns);
  free(r->slot);
  weft_socket_close(r->ep);
  weft_bs_roster_fini(&r->ros);
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
  r->capconns = 64;
  r->conns = calloc(r->capconns, sizeof(*r->conns));
  r->capslot = 1024;
  r->slot = malloc(r->capslot * sizeof(*r->slot));
  r->ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = r->listen_fd};
  if (r->conns == NULL || r->slot == NULL || r->ep < 0 ||
      epoll_ctl(r->ep, EPOLL_CTL_ADD, r->listen_fd, &ev) != 0) {
    WEFT_WARN("Bootstrap root: out of memory (or no epoll set: %s)", strerror(errno));
    weft_socket_close(r->listen_fd);
    if (r->ep >= 0) weft_socket_close(r->ep);
    free(r->conns);
    free(r->slot);
    free(r);
    return ncclSystemError;
  }
  for (int k = 0; k < r->capslot; k++) r->slot[k] = -1;
  r->next_deadline = WEFT_SOCKET_NO_DEADLINE;
  r->magic = magic;
  r->key = *key;
  r->gone = -1;
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
    weft_socket_close(r->ep);
    free(r->conns);
    free(r->slot);
    free(r);
    return ncclSystemError;
  }
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap root listening on %s", r->name);
  return ncclSuccess;
}
