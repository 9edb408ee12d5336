/* The bootstrap's progress engine and what runs on it: tagged point-to-point messages (parked
 * until received), the ring all-gather and the barrier (the log-round all-gather is in gather.c).
 * Every wait also accepts and reads incoming connections, so two ranks sending to each other never
 * block. Each message is authenticated before anything in it is acted on: it is signed over the
 * receiver's session nonce (no round trip, so a send never waits for its receiver), the ring
 * opening answers the acceptor's challenge (see struct weft_bs_opening). A sender keeps a
 * message's connection for its next messages to that rank, each a frame signed as a first one
 * (struct weft_bs_conn): a connection per pair of ranks instead of one per message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/log.h"

static void conn_close(struct weft_bootstrap* bs, int i);

void weft_bs_op_send(struct weft_bs_op* op, int fd, int peer, const struct weft_bs_opening* open,
                     const void* data, size_t len) {
  memset(op, 0, sizeof(*op));
  op->fd = fd;
  op->is_send = 1;
  op->peer = peer;
  op->prefix = len;
  if (open) op->opening = *open;
  op->seg[0] = open ? (char*)&op->opening : (char*)&op->prefix;
  op->len[0] = open ? sizeof(op->opening) : sizeof(op->prefix);
  op->seg[1] = (char*)data;
  op->len[1] = len;
  if (open && open->hdr.kind == WEFT_BS_RING) {
    op->chal_len = sizeof(op->challenge);
    op->seg[1] = (char*)op->answer;
    op->len[1] = sizeof(op->answer);
  }
}

void weft_bs_op_recv(struct weft_bs_op* op, int fd, int peer, void* data, size_t len) {
  memset(op, 0, sizeof(*op));
  op->fd = fd;
  op->peer = peer;
  op->seg[0] = (char*)&op->prefix;
  op->len[0] = sizeof(op->prefix);
  op->seg[1] = data;
  op->len[1] = len;
  op->expect = len;
}

static int op_done(const struct weft_bs_op* op) {
  return op->done[0] == op->len[0] && op->done[1] == op->len[1];
}

static int op_awaits_challenge(const struct weft_bs_op* op) { return op->chal_got < op->chal_len; }

/* Whether the op's next step is reading (a receive, or a ring opening's challenge). */
static int op_reads(const struct weft_bs_op* op) {
  return !op->is_send || (op->done[0] == op->len[0] && op_awaits_challenge(op));
}

static ncclResult_t op_failed(struct weft_bootstrap* bs, struct weft_bs_op* op, ssize_t n, int sending,
                              const char* what) {
  int err = errno;
  op->failed = 1;
  if (op->quiet)
    WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap: rank %d: kept connection to rank %d closed while %s", bs->rank,
              op->peer, what);
  else if (n == WEFT_SOCKET_CLOSED)
    WEFT_WARN("Bootstrap: rank %d: rank %d closed the connection while %s", bs->rank, op->peer, what);
  else
    WEFT_WARN("Bootstrap: rank %d: %s rank %d failed while %s: %s", bs->rank,
              sending ? "sending to" : "receiving from", op->peer, what, strerror(err));
  return n == WEFT_SOCKET_CLOSED || err == ECONNRESET || err == EPIPE ? ncclRemoteError : ncclSystemError;
}

/* Read the acceptor's challenge; once it is whole, the answer covers it and the opening. */
static ncclResult_t op_challenge(struct weft_bootstrap* bs, struct weft_bs_op* op, const char* what) {
  while (op_awaits_challenge(op)) {
    ssize_t n = weft_socket_try_recv(op->fd, op->challenge + op->chal_got, op->chal_len - op->chal_got);
    if (n == 0) return ncclSuccess;
    if (n < 0) return op_failed(bs, op, n, 0, what);
    op->chal_got += (size_t)n;
  }
  weft_auth_mac(&bs->key, WEFT_AUTH_LABEL_PEER, op->challenge, &op->opening.hdr, sizeof(op->opening.hdr),
                op->answer);
  return ncclSuccess;
}

/* Move as many bytes as the socket takes now. */
static ncclResult_t op_progress(struct weft_bootstrap* bs, struct weft_bs_op* op, const char* what) {
  for (int s = 0; s < 2; s++) {
    if (s == 1 && op_awaits_challenge(op)) {
      WEFT_CHECK(op_challenge(bs, op, what));
      if (op_awaits_challenge(op)) return ncclSuccess;
    }
    while (op->done[s] < op->len[s]) {
      ssize_t n = op->is_send
                      ? weft_socket_try_send(op->fd, op->seg[s] + op->done[s], op->len[s] - op->done[s])
                      : weft_socket_try_recv(op->fd, op->seg[s] + op->done[s], op->len[s] - op->done[s]);
      if (n == 0) return ncclSuccess;
      if (n < 0) return op_failed(bs, op, n, op->is_send, what);
      op->done[s] += (size_t)n;
    }
    if (s == 0 && !op->is_send && op->prefix != op->expect) {
      WEFT_WARN("Bootstrap: rank %d: rank %d sent %llu bytes while %s, expected %zu", bs->rank, op->peer,
                (unsigned long long)op->prefix, what, op->expect);
      return ncclInternalError;
    }
  }
  return ncclSuccess;
}

static void inc_remove(struct weft_bootstrap* bs, int i, int close_fd) {
  if (close_fd) weft_socket_close(bs->inc[i].fd);
  bs->inc[i] = bs->inc[--bs->ninc];
}

static void inc_drop(struct weft_bootstrap* bs, int i, const char* why) {
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap: rank %d: dropping an incoming connection: %s", bs->rank, why);
  free(bs->inc[i].data);
  inc_remove(bs, i, 1);
}

/* Whether a message from src with seq was received already or is parked: a replay. */
static int seen(const struct weft_bootstrap* bs, int src, uint64_t seq) {
  if (seq <= bs->recv_seq[src]) return 1;
  for (const struct weft_bs_msg* p = bs->parked; p; p = p->next)
    if (p->src == src && p->seq == seq) return 1;
  return 0;
}

/* Messages from one rank become receivable only without gaps in seq, so a later message cannot
 * overtake an earlier one still arriving on its own connection. */
static void park(struct weft_bootstrap* bs, struct weft_bs_msg* m) {
  struct weft_bs_msg** tail = &bs->parked;
  while (*tail) tail = &(*tail)->next;
  *tail = m;
  for (int advanced = 1; advanced;) {
    advanced = 0;
    for (struct weft_bs_msg* p = bs->parked; p; p = p->next) {
      if (p->src == m->src && p->seq == bs->recv_seq[m->src] + 1) {
        bs->recv_seq[m->src]++;
        advanced = 1;
      }
    }
  }
}

/* A ring opening is answered with a challenge (the answer arrives next); a message must carry
 * the MAC over our nonce. Returns 0 when the entry was dropped. */
static int inc_header(struct weft_bootstrap* bs, int i) {
  struct weft_bs_incoming* c = &bs->inc[i];
  const struct weft_bs_header* h = &c->open.hdr;
  /* A further frame: a message from the rank whose first message opened the connection. */
  if (c->authed && (h->kind == WEFT_BS_RING || h->src != c->src))
    return inc_drop(bs, i, "a frame from another rank (or a ring opening) on a message connection"), 0;
  if (h->kind != WEFT_BS_RING &&
      !weft_auth_check(&bs->key, WEFT_AUTH_LABEL_MESSAGE, bs->nonce, h, sizeof(*h), c->open.mac))
    return inc_drop(bs, i, "message not signed for this session with the job key"), 0;
  char why[160];
  if (!weft_bs_header_valid(h, bs->magic, bs->rank, bs->nranks, bs->recv_seq, why, sizeof(why)))
    return inc_drop(bs, i, why), 0;
  if (h->kind == WEFT_BS_RING) {
    /* The socket sent nothing yet: its buffer takes the challenge whole, or the peer is gone. */
    if (weft_auth_random(c->challenge, sizeof(c->challenge)) != ncclSuccess ||
        weft_socket_try_send(c->fd, c->challenge, sizeof(c->challenge)) != (ssize_t)sizeof(c->challenge))
      return inc_drop(bs, i, "could not send the ring challenge"), 0;
    c->challenged = 1;
    return 1;
  }
  if (seen(bs, h->src, h->seq)) return inc_drop(bs, i, "a replayed message"), 0;
  c->deadline = weft_socket_deadline(weft_bs_timeout_s());
  return 1;
}

/* The answer to our challenge is complete: the connection becomes prev_fd if it checks out. */
static void inc_ring_answer(struct weft_bootstrap* bs, int i) {
  struct weft_bs_incoming* c = &bs->inc[i];
  const struct weft_bs_header* h = &c->open.hdr;
  if (!weft_auth_check(&bs->key, WEFT_AUTH_LABEL_PEER, c->challenge, h, sizeof(*h), c->answer))
    return inc_drop(bs, i, "wrong answer to the challenge (not holding the job key)");
  int prev = (bs->rank - 1 + bs->nranks) % bs->nranks;
  if (h->src != prev || bs->prev_fd >= 0) return inc_drop(bs, i, "unexpected ring connection");
  bs->prev_fd = c->fd;
  inc_remove(bs, i, 0);
}

/* Beyond maxconns idle kept connections, shut the least recently used one for writing: its
 * sender closes it when it sees that, and we read on until then, so no frame is lost. */
static void inc_trim(struct weft_bootstrap* bs) {
  int idle = 0, lru = -1;
  for (int i = 0; i < bs->ninc; i++) {
    const struct weft_bs_incoming* c = &bs->inc[i];
    if (!c->authed || c->closing || c->hgot != 0) continue;
    idle++;
    if (lru < 0 || c->used < bs->inc[lru].used) lru = i;
  }
  if (idle <= bs->maxconns || lru < 0) return;
  bs->inc[lru].closing = 1;
  shutdown(bs->inc[lru].fd, SHUT_WR);
}

/* 1 when the message is parked and the entry waits for the next frame, 0 after a drop. */
static int inc_complete(struct weft_bootstrap* bs, int i) {
  struct weft_bs_incoming* c = &bs->inc[i];
  const struct weft_bs_header* h = &c->open.hdr;
  uint8_t digest[WEFT_SHA256_BYTES];
  weft_sha256(c->data, h->size, digest);
  if (!weft_auth_equal(digest, h->digest, sizeof(digest))) return inc_drop(bs, i, "payload altered"), 0;
  /* Another connection may have delivered the same message meanwhile. */
  if (seen(bs, h->src, h->seq)) return inc_drop(bs, i, "a replayed message"), 0;
  struct weft_bs_msg* m = calloc(1, sizeof(*m));
  if (m == NULL) return inc_drop(bs, i, "out of memory"), 0;
  m->src = h->src;
  m->kind = (int)h->kind;
  m->tag = h->tag;
  m->seq = h->seq;
  m->size = h->size;
  m->data = c->data;
  park(bs, m);
  /* The sender may send more frames: wait for them (or for its close) without a deadline. */
  c->authed = 1;
  c->src = h->src;
  c->data = NULL;
  c->hgot = c->got = c->cap = 0;
  c->deadline = WEFT_SOCKET_NO_DEADLINE;
  c->used = ++bs->inc_clock;
  inc_trim(bs);
  return 1;
}

/* Read into buf[*got..want); 0 when it is now whole, 1 while more must come, -1 after a drop. */
static int inc_fill(struct weft_bootstrap* bs, int i, void* buf, size_t* got, size_t want, const char* part) {
  ssize_t n = weft_socket_try_recv(bs->inc[i].fd, (char*)buf + *got, want - *got);
  if (n == WEFT_SOCKET_CLOSED && bs->inc[i].authed && buf == &bs->inc[i].open && *got == 0) {
    inc_remove(bs, i, 1); /* the sender closed a kept connection between frames */
    return -1;
  }
  if (n < 0) {
    char why[96];
    snprintf(why, sizeof(why), "%s %s", n == WEFT_SOCKET_CLOSED ? "closed before its" : "failed reading its",
             part);
    return inc_drop(bs, i, why), -1;
  }
  *got += (size_t)n;
  return *got < want;
}

/* One step of inc[i]: 1 when it may go on at once (a message completed and the next frame may be
 * there already, or the payload buffer filled), else 0 (more must come, or the entry is gone). */
static int incoming_step(struct weft_bootstrap* bs, int i) {
  struct weft_bs_incoming* c = &bs->inc[i];
  if (c->hgot < sizeof(c->open)) {
    if (inc_fill(bs, i, &c->open, &c->hgot, sizeof(c->open), "header") != 0) return 0;
    if (!inc_header(bs, i)) return 0;
    if (c->challenged) return 0; /* the answer comes after our challenge */
  }
  if (c->challenged) {
    if (inc_fill(bs, i, c->answer, &c->agot, sizeof(c->answer), "answer") == 0) inc_ring_answer(bs, i);
    return 0;
  }
  size_t size = c->open.hdr.size;
  if (c->got == c->cap && c->got < size) {
    /* Grow as bytes arrive, so a lying size costs nothing until the data really comes. */
    size_t cap = c->cap ? 2 * c->cap : 65536;
    if (cap > size) cap = size;
    char* grown = realloc(c->data, cap);
    if (grown == NULL) return inc_drop(bs, i, "out of memory"), 0;
    c->data = grown;
    c->cap = cap;
  }
  if (c->got < size && inc_fill(bs, i, c->data, &c->got, c->cap, "payload") != 0) return 0;
  if (c->got < size) return 1;
  return inc_complete(bs, i);
}

void weft_bs_incoming_read(struct weft_bootstrap* bs, int i) {
  while (incoming_step(bs, i)) {
  }
}

int weft_bs_incoming_add(struct weft_bootstrap* bs, int fd) {
  if (bs->ninc == bs->capinc) {
    int cap = bs->capinc ? 2 * bs->capinc : 16;
    struct weft_bs_incoming* grown = realloc(bs->inc, cap * sizeof(*grown));
    if (grown == NULL) {
      weft_socket_close(fd);
      return 0;
    }
    bs->inc = grown;
    bs->capinc = cap;
  }
  struct weft_bs_incoming* c = &bs->inc[bs->ninc++];
  memset(c, 0, sizeof(*c));
  c->fd = fd;
  /* An honest connector sends its opening at once: a silent one holds an fd only this long. */
  c->deadline = weft_socket_deadline(WEFT_AUTH_TIMEOUT_S);
  return 1;
}

static void accept_all(struct weft_bootstrap* bs) {
  int fd;
  while ((fd = weft_socket_try_accept(bs->listen_fd, NULL)) >= 0) {
    bs->naccepts++;
    (void)weft_bs_incoming_add(bs, fd);
  }
}

void weft_bs_incoming_drop_all(struct weft_bootstrap* bs) {
  while (bs->ninc > 0) {
    free(bs->inc[bs->ninc - 1].data);
    inc_remove(bs, bs->ninc - 1, 1);
  }
}

/* Idle polls double the poll's slice, up to WEFT_SOCKET_POLL_MS << POLL_BACKOFF_SHIFT (160 ms). */
#define POLL_BACKOFF_SHIFT 3

/* One poll over the ops still running, the listen socket and the incoming connections. */
static ncclResult_t wait_once(struct weft_bootstrap* bs, struct weft_bs_op* ops, int nops, int64_t deadline,
                              const char* what) {
  int need = nops + 3 + bs->ninc + bs->nconns;
  if (need > bs->cappfds) {
    struct pollfd* grown = realloc(bs->pfds, 2 * need * sizeof(*grown));
    if (grown == NULL) {
      WEFT_WARN("Bootstrap: rank %d: out of memory", bs->rank);
      return ncclSystemError;
    }
    bs->pfds = grown;
    bs->cappfds = 2 * need;
  }
  int n = 0;
  for (int i = 0; i < nops; i++)
    if (!op_done(&ops[i]))
      bs->pfds[n++] = (struct pollfd){.fd = ops[i].fd, .events = op_reads(&ops[i]) ? POLLIN : POLLOUT};
  int first_inc = n + 1;
  bs->pfds[n++] = (struct pollfd){.fd = bs->listen_fd, .events = POLLIN};
  for (int i = 0; i < bs->ninc; i++) bs->pfds[n++] = (struct pollfd){.fd = bs->inc[i].fd, .events = POLLIN};
  int root = bs->root.fd >= 0 ? n : -1;
  if (root >= 0) bs->pfds[n++] = (struct pollfd){.fd = bs->root.fd, .events = POLLIN};
  int local = n;
  bs->pfds[n++] = (struct pollfd){.fd = bs->event_fd, .events = POLLIN};
  /* Kept connections: readable when the receiver shut its side or went away. */
  int first_conn = n, nconns = bs->nconns;
  for (int i = 0; i < nconns; i++) bs->pfds[n++] = (struct pollfd){.fd = bs->conns[i].fd, .events = POLLIN};
  /* The slice bounds how late the abort flag (memory, not an fd) is seen. It grows while
   * nothing arrives: with hundreds of waiting processes on a few cores, 50 wake-ups a second
   * each (every one polling all the fds above) took a growing share of the CPUs the ranks that
   * do work need. */
  int slice =
      WEFT_SOCKET_POLL_MS << (bs->idle_polls < POLL_BACKOFF_SHIFT ? bs->idle_polls : POLL_BACKOFF_SHIFT);
  int64_t left_ms =
      deadline == WEFT_SOCKET_NO_DEADLINE ? slice : (deadline - weft_socket_now_ns() + 999999) / 1000000;
  int ms = left_ms < 0 ? 0 : left_ms < slice ? (int)left_ms : slice;
  int ready = poll(bs->pfds, n, ms);
  if (ready < 0 && errno != EINTR) {
    WEFT_WARN("Bootstrap: rank %d: poll failed: %s", bs->rank, strerror(errno));
    return ncclSystemError;
  }
  bs->idle_polls = ready > 0 ? 0 : bs->idle_polls + 1;
  int64_t now = weft_socket_now_ns();
  int ninc = bs->ninc;
  /* Backwards: removing entry i moves the last (already visited) one into its place. */
  for (int i = ninc - 1; i >= 0; i--) {
    if (bs->pfds[first_inc + i].revents)
      weft_bs_incoming_read(bs, i);
    else if (now >= bs->inc[i].deadline)
      inc_drop(bs, i, "nothing arrived before the timeout");
  }
  for (int i = nconns - 1; i >= 0; i--)
    if (bs->pfds[first_conn + i].revents) conn_close(bs, i);
  if (bs->pfds[first_inc - 1].revents) accept_all(bs);
  if (bs->pfds[local].revents) weft_bs_local_drain(bs, park);
  if (root >= 0 && bs->pfds[root].revents) return weft_bs_root_watch_read(bs, what);
  return ncclSuccess;
}

/* Read what the root sent: 0 while a reply is incomplete, 1 when one is complete (and signed and
 * well formed: *why empty), -1 when the link closed or failed. */
static int root_read(struct weft_bootstrap* bs, char* why, size_t len) {
  struct weft_bs_root_watch* w = &bs->root;
  ssize_t n = weft_socket_try_recv(w->fd, (char*)&w->reply + w->got, sizeof(w->reply) - w->got);
  if (n < 0) {
    snprintf(why, len, "%s", n == WEFT_SOCKET_CLOSED ? "connection closed" : strerror(errno));
    return -1;
  }
  w->got += (size_t)n;
  if (w->got < sizeof(w->reply)) return 0;
  w->got = 0;
  const struct weft_bs_reply* r = &w->reply.body;
  why[0] = '\0';
  if (!weft_auth_check(&w->key, WEFT_AUTH_LABEL_REPLY, w->nonce, r, sizeof(*r), w->reply.mac))
    snprintf(why, len, "not signed with the job key");
  else if (weft_bs_reply_valid(r, bs->nranks, why, len) && r->kind != WEFT_BS_REPLY_GONE)
    snprintf(why, len, "reply kind %u after pairing", r->kind);
  return 1;
}

ncclResult_t weft_bs_root_watch_read(struct weft_bootstrap* bs, const char* what) {
  struct weft_bs_root_watch* w = &bs->root;
  char why[160];
  int got = root_read(bs, why, sizeof(why));
  if (got == 0) return ncclSuccess;
  if (got < 0) {
    WEFT_WARN("Bootstrap: rank %d of %d: lost %s while %s: %s", bs->rank, bs->nranks, w->name, what, why);
  } else if (why[0] == '\0') {
    weft_bs_warn_gone(bs, &w->reply.body, w->name, what);
  } else {
    WEFT_WARN("Bootstrap: rank %d of %d: unexpected message from %s while %s: %s", bs->rank, bs->nranks,
              w->name, what, why);
  }
  return ncclRemoteError;
}

/* How long a failed wait asks the root whether a rank vanished: its word comes within
 * microseconds of the loss, a peer's closed connection being one of its echoes. */
#define ROOT_EXPLAIN_MS 500

ncclResult_t weft_bs_root_explain(struct weft_bootstrap* bs, ncclResult_t res, const char* what) {
  if (bs->root.fd < 0 || res != ncclRemoteError) return res;
  int64_t until = weft_socket_now_ns() + ROOT_EXPLAIN_MS * 1000000LL;
  while (weft_socket_now_ns() < until) {
    weft_socket_poll_one(bs->root.fd, POLLIN, WEFT_SOCKET_POLL_MS);
    char why[160];
    int got = root_read(bs, why, sizeof(why));
    if (got < 0 || (got > 0 && why[0] != '\0')) break;
    if (got > 0) {
      /* The WARN after the peer's: the last error names the rank that is really gone. */
      weft_bs_warn_gone(bs, &bs->root.reply.body, bs->root.name, what);
      break;
    }
  }
  return res;
}

void weft_bs_root_watch_close(struct weft_bootstrap* bs) {
  if (bs->root.fd < 0) return;
  uint32_t bye = WEFT_BS_BYE;
  (void)weft_socket_try_send(bs->root.fd, &bye, sizeof(bye));
  weft_socket_close(bs->root.fd);
  bs->root.fd = -1;
}

ncclResult_t weft_bs_progress(struct weft_bootstrap* bs, struct weft_bs_op* ops, int nops,
                              int (*until)(struct weft_bootstrap*, void*), void* arg,
                              volatile uint32_t* abort_flag, int64_t deadline, const char* what) {
  int64_t start = weft_socket_now_ns();
  for (;;) {
    int pending = 0;
    for (int i = 0; i < nops; i++) {
      ncclResult_t res = op_progress(bs, &ops[i], what);
      if (res != ncclSuccess) return weft_bs_root_explain(bs, res, what);
      pending += !op_done(&ops[i]);
    }
    if (!pending && (until == NULL || until(bs, arg))) return ncclSuccess;
    if (weft_socket_aborted(abort_flag)) {
      WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap: rank %d: abort flag set while %s", bs->rank, what);
      return ncclInvalidUsage;
    }
    int64_t now = weft_socket_now_ns();
    if (now >= deadline) {
      WEFT_WARN("Bootstrap: rank %d of %d timed out after %.1f s %s (WEFT_BOOTSTRAP_TIMEOUT=%lld)", bs->rank,
                bs->nranks, (now - start) / 1e9, what, (long long)weft_bs_timeout_s());
      return ncclRemoteError;
    }
    WEFT_CHECK(wait_once(bs, ops, nops, deadline, what));
  }
}

struct match {
  int src, kind, tag;
};

/* Link to the earliest receivable message matching (src, kind, tag), or NULL; src -1: from any
 * rank. */
static struct weft_bs_msg** find_match(struct weft_bootstrap* bs, const struct match* want) {
  struct weft_bs_msg** best = NULL;
  for (struct weft_bs_msg** link = &bs->parked; *link; link = &(*link)->next) {
    struct weft_bs_msg* m = *link;
    if ((want->src >= 0 && m->src != want->src) || m->kind != want->kind || m->tag != want->tag) continue;
    if (m->seq > bs->recv_seq[m->src]) continue;
    if (best == NULL || m->seq < (*best)->seq) best = link;
  }
  return best;
}

static ncclResult_t check_peer(struct weft_bootstrap* bs, int peer, const char* op) {
  if (peer < 0 || peer >= bs->nranks) {
    WEFT_WARN("Bootstrap: rank %d: %s with peer %d, outside 0..%d", bs->rank, op, peer, bs->nranks - 1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static int conn_find(const struct weft_bootstrap* bs, int peer) {
  for (int i = 0; i < bs->nconns; i++)
    if (bs->conns[i].peer == peer) return i;
  return -1;
}

static void conn_close(struct weft_bootstrap* bs, int i) {
  weft_socket_close(bs->conns[i].fd);
  bs->conns[i] = bs->conns[--bs->nconns];
}

void weft_bs_conns_close(struct weft_bootstrap* bs) {
  while (bs->nconns > 0) conn_close(bs, bs->nconns - 1);
}

/* Keep fd for further messages to peer, closing the least recently used beyond maxconns; 0 when
 * it is not kept (the caller closes it). */
static int conn_keep(struct weft_bootstrap* bs, int peer, int fd) {
  if (bs->maxconns <= 0) return 0;
  if (bs->nconns == bs->maxconns) {
    int lru = 0;
    for (int i = 1; i < bs->nconns; i++)
      if (bs->conns[i].used < bs->conns[lru].used) lru = i;
    conn_close(bs, lru);
  }
  if (bs->conns == NULL) {
    bs->conns = calloc((size_t)bs->maxconns, sizeof(*bs->conns));
    if (bs->conns == NULL) return 0;
  }
  bs->conns[bs->nconns++] = (struct weft_bs_conn){.peer = peer, .fd = fd, .used = ++bs->conn_clock};
  return 1;
}

/* Send one frame on fd. */
static ncclResult_t send_frame(struct weft_bootstrap* bs, int fd, int peer,
                               const struct weft_bs_opening* open, const void* data, size_t size, int quiet,
                               int* failed, volatile uint32_t* abort_flag, int64_t deadline,
                               const char* what) {
  struct weft_bs_op op;
  weft_bs_op_send(&op, fd, peer, open, data, size);
  op.quiet = quiet;
  ncclResult_t res = weft_bs_progress(bs, &op, 1, NULL, NULL, abort_flag, deadline, what);
  *failed = op.failed;
  return res;
}

ncclResult_t weft_bs_send_kind(struct weft_bootstrap* bs, int peer, int kind, int tag, const void* data,
                               size_t size, volatile uint32_t* abort_flag, int64_t deadline) {
  WEFT_CHECK(check_peer(bs, peer, "send"));
  struct weft_bs_header hdr = {.magic = bs->magic,
                               .type = WEFT_SOCKET_BOOTSTRAP,
                               .kind = (uint32_t)kind,
                               .src = bs->rank,
                               .dst = peer,
                               .tag = tag,
                               .seq = ++bs->send_seq[peer],
                               .size = size};
  if (peer == bs->rank) {
    struct weft_bs_msg* m = calloc(1, sizeof(*m));
    char* copy = size ? malloc(size) : NULL;
    if (m == NULL || (size && copy == NULL)) {
      free(m);
      WEFT_WARN("Bootstrap: rank %d: out of memory for a %zu-byte message to itself", bs->rank, size);
      return ncclSystemError;
    }
    if (size) memcpy(copy, data, size);
    *m = (struct weft_bs_msg){
        .src = peer, .kind = kind, .tag = tag, .seq = hdr.seq, .size = size, .data = copy};
    park(bs, m);
    return ncclSuccess;
  }
  struct weft_bs_msg local = {.src = bs->rank, .kind = kind, .tag = tag, .seq = hdr.seq, .size = size};
  int delivered = weft_bs_local_deliver(bs, peer, &local, data);
  if (delivered != 0) return delivered > 0 ? ncclSuccess : ncclSystemError;
  char who[48], what[160];
  snprintf(who, sizeof(who), "rank %d (from rank %d)", peer, bs->rank);
  snprintf(what, sizeof(what), "sending %zu bytes (tag %d) to rank %d", size, tag, peer);
  int fd;
  struct weft_bs_opening open = {.hdr = hdr};
  weft_sha256(data, size, open.hdr.digest);
  weft_auth_mac(&bs->key, WEFT_AUTH_LABEL_MESSAGE, bs->peers[peer].nonce, &open.hdr, sizeof(open.hdr),
                open.mac);
  int failed = 0, kept = conn_find(bs, peer);
  if (kept >= 0) {
    /* Out of the cache while in use (the progress loop closes kept connections that turn
     * readable). The receiver never writes on a message connection: readable means it shut its
     * side or went away. Then, as when the frame fails, open a new one and send again: a frame cut
     * short is dropped whole by the receiver, so it cannot arrive twice. */
    fd = bs->conns[kept].fd;
    bs->conns[kept] = bs->conns[--bs->nconns];
    if (weft_socket_poll_one(fd, POLLIN, 0) == 0) {
      ncclResult_t res = send_frame(bs, fd, peer, &open, data, size, 1, &failed, abort_flag, deadline, what);
      if (res != ncclSuccess || !conn_keep(bs, peer, fd)) weft_socket_close(fd);
      if (res == ncclSuccess || !failed) return res;
    } else {
      weft_socket_close(fd);
    }
  }
  /* Every address in peers listened before its rank checked in: a refusal means it is gone. */
  WEFT_CHECK(weft_socket_connect_listening(&bs->peers[peer].addr, who, 1, abort_flag, deadline, &fd));
  bs->nconnects++;
  ncclResult_t res = send_frame(bs, fd, peer, &open, data, size, 0, &failed, abort_flag, deadline, what);
  if (res != ncclSuccess || !conn_keep(bs, peer, fd)) weft_socket_close(fd);
  return res;
}

/* A receive that waits long asks now and then whether the sender still listens: a refused
 * connect means its process exited or it left the bootstrap (gave up, aborted), so the wait ends
 * within seconds instead of at WEFT_BOOTSTRAP_TIMEOUT. A message it sent just before leaving
 * (written whole to its socket, so already on its way) still has PROBE_GRACE_MS to arrive. A host that went
 * away answers nothing and is not told. */
#define PROBE_CONNECT_MS 200
#define PROBE_GRACE_MS 500
/* Probes at the first interval (a lost rank is often found by a lost rank's peers, a hop later),
 * then each interval twice the last, up to PROBE_BACKOFF_MAX times the first. */
#define PROBE_STEADY 4
#define PROBE_BACKOFF_MAX 8

struct recv_wait {
  struct match want;
  int64_t probe_at, interval_ns, gone_at; /* gone_at: when the sender refused (0: never) */
  int probes;
};

static int arrived_or_gone(struct weft_bootstrap* bs, void* arg) {
  struct recv_wait* w = arg;
  if (find_match(bs, &w->want) != NULL) return 1;
  int64_t now = weft_socket_now_ns();
  if (w->gone_at) return now >= w->gone_at + PROBE_GRACE_MS * 1000000LL;
  if (w->interval_ns <= 0 || now < w->probe_at || !bs->peers_known) return 0;
  if (weft_socket_refuses(&bs->peers[w->want.src].addr, PROBE_CONNECT_MS)) w->gone_at = now;
  if (++w->probes >= PROBE_STEADY && w->interval_ns < PROBE_BACKOFF_MAX * bs->probe_ms * 1000000LL)
    w->interval_ns *= 2;
  w->probe_at = now + w->interval_ns;
  return 0;
}

ncclResult_t weft_bs_recv_kind(struct weft_bootstrap* bs, int peer, int kind, int tag, void* data,
                               size_t size, volatile uint32_t* abort_flag, int64_t deadline) {
  WEFT_CHECK(check_peer(bs, peer, "recv"));
  struct recv_wait wait = {.want = {peer, kind, tag}, .interval_ns = bs->probe_ms * 1000000LL};
  wait.probe_at = weft_socket_now_ns() + wait.interval_ns;
  char what[160];
  snprintf(what, sizeof(what), "waiting for a message (tag %d) from rank %d", tag, peer);
  WEFT_CHECK(weft_bs_progress(bs, NULL, 0, arrived_or_gone, &wait, abort_flag, deadline, what));
  struct weft_bs_msg** link = find_match(bs, &wait.want);
  if (link == NULL) { /* the wait ended because the sender is gone */
    char addr[WEFT_SOCKET_ADDR_STRLEN];
    WEFT_WARN(
        "Bootstrap: rank %d of %d: rank %d (at %s) is gone: it refuses connections (it exited, "
        "failed or aborted) while %s",
        bs->rank, bs->nranks, peer, weft_socket_addr_str(&bs->peers[peer].addr, addr, sizeof(addr)), what);
    return ncclRemoteError;
  }
  struct weft_bs_msg* m = *link;
  *link = m->next;
  ncclResult_t res = ncclSuccess;
  if (m->size > size) {
    WEFT_WARN("Bootstrap: rank %d: message from rank %d (tag %d) has %zu bytes, more than the %zu expected",
              bs->rank, peer, tag, m->size, size);
    res = ncclInternalError;
  } else if (m->size) {
    memcpy(data, m->data, m->size);
  }
  free(m->data);
  free(m);
  return res;
}

ncclResult_t weft_bs_ring_allgather(struct weft_bootstrap* bs, void* data, size_t size,
                                    volatile uint32_t* abort_flag, int64_t deadline) {
  int n = bs->nranks, rank = bs->rank;
  int prev = (rank - 1 + n) % n;
  char* base = data;
  /* Unidirectional ring: at step s we pass on the slice we received at step s-1. */
  for (int s = 0; s < n - 1; s++) {
    int send_slice = (rank - s + n) % n, recv_slice = (rank - s - 1 + n) % n;
    struct weft_bs_op ops[2];
    weft_bs_op_send(&ops[0], bs->next_fd, (rank + 1) % n, NULL, base + send_slice * size, size);
    weft_bs_op_recv(&ops[1], bs->prev_fd, prev, base + recv_slice * size, size);
    char what[160];
    snprintf(what, sizeof(what), "in all-gather step %d of %d, receiving rank %d's data from rank %d", s + 1,
             n - 1, recv_slice, prev);
    WEFT_CHECK(weft_bs_progress(bs, ops, 2, NULL, NULL, abort_flag, deadline, what));
  }
  WEFT_TRACE(WEFT_BOOTSTRAP, "Bootstrap: rank %d nranks %d all-gather of %zu bytes done", rank, n, size);
  return ncclSuccess;
}

ncclResult_t weft_bootstrap_allgather(struct weft_bootstrap* bs, void* data, size_t size) {
  WEFT_ARG_CHECK(bs != NULL && (data != NULL || size == 0), "bootstrap %p data %p", (void*)bs, data);
  return weft_bs_allgather(bs, data, size, bs->abort_flag, weft_socket_deadline(weft_bs_timeout_s()));
}

ncclResult_t weft_bootstrap_send(struct weft_bootstrap* bs, int peer, int tag, const void* data,
                                 size_t size) {
  WEFT_ARG_CHECK(bs != NULL && (data != NULL || size == 0), "bootstrap %p data %p", (void*)bs, data);
  return weft_bs_send_kind(bs, peer, WEFT_BS_P2P, tag, data, size, bs->abort_flag,
                           weft_socket_deadline(weft_bs_timeout_s()));
}

ncclResult_t weft_bootstrap_recv(struct weft_bootstrap* bs, int peer, int tag, void* data, size_t size) {
  WEFT_ARG_CHECK(bs != NULL && (data != NULL || size == 0), "bootstrap %p data %p", (void*)bs, data);
  return weft_bs_recv_kind(bs, peer, WEFT_BS_P2P, tag, data, size, bs->abort_flag,
                           weft_socket_deadline(weft_bs_timeout_s()));
}

ncclResult_t weft_bootstrap_recv_within(struct weft_bootstrap* bs, int peer, int tag, void* data, size_t size,
                                        int64_t seconds) {
  WEFT_ARG_CHECK(bs != NULL && (data != NULL || size == 0), "bootstrap %p data %p", (void*)bs, data);
  return weft_bs_recv_kind(bs, peer, WEFT_BS_P2P, tag, data, size, bs->abort_flag,
                           weft_socket_deadline(seconds));
}

ncclResult_t weft_bootstrap_note(struct weft_bootstrap* bs, int peer, const void* data, size_t size,
                                 int64_t within_ms) {
  WEFT_ARG_CHECK(bs != NULL && (data != NULL || size == 0), "bootstrap %p data %p", (void*)bs, data);
  return weft_bs_send_kind(bs, peer, WEFT_BS_NOTE, 0, data, size, bs->abort_flag,
                           weft_socket_now_ns() + within_ms * 1000000LL);
}

int weft_bootstrap_take_note(struct weft_bootstrap* bs, void* data, size_t size, int* from) {
  if (bs == NULL) return 0;
  /* One poll that does not wait: what arrived is read and parked. Its errors are the waits' to
   * report (a poll failure, the root's link), and a poll that found nothing says nothing about
   * how idle the bootstrap's own waits are. */
  int idle = bs->idle_polls;
  (void)wait_once(bs, NULL, 0, weft_socket_now_ns(), "reading notes");
  bs->idle_polls = idle;
  const struct match any_note = {-1, WEFT_BS_NOTE, 0};
  for (struct weft_bs_msg** link; (link = find_match(bs, &any_note)) != NULL;) {
    struct weft_bs_msg* m = *link;
    *link = m->next;
    int fits = m->size == size;
    if (fits) {
      memcpy(data, m->data, size);
      *from = m->src;
    }
    free(m->data);
    free(m);
    if (fits) return 1; /* a note of another size is not one the caller knows: dropped */
  }
  return 0;
}

/* Dissemination barrier: in round k everyone signals rank + 2^k and waits for rank - 2^k. */
ncclResult_t weft_bootstrap_barrier(struct weft_bootstrap* bs) {
  WEFT_ARG_CHECK(bs != NULL, "bootstrap is NULL");
  int64_t deadline = weft_socket_deadline(weft_bs_timeout_s());
  int n = bs->nranks;
  for (int dist = 1, round = 0; dist < n; dist <<= 1, round++) {
    WEFT_CHECK(weft_bs_send_kind(bs, (bs->rank + dist) % n, WEFT_BS_BARRIER, round, NULL, 0, bs->abort_flag,
                                 deadline));
    WEFT_CHECK(weft_bs_recv_kind(bs, (bs->rank - dist + n) % n, WEFT_BS_BARRIER, round, NULL, 0,
                                 bs->abort_flag, deadline));
  }
  return ncclSuccess;
}
