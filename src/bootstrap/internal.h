/* Wire formats and state shared by the bootstrap files: the unique-id handle, the root's
 * check-in protocol, rank-to-rank connection headers and the per-rank bootstrap object. */
#ifndef WEFT_BOOTSTRAP_INTERNAL_H
#define WEFT_BOOTSTRAP_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bootstrap/bootstrap.h"
#include "util/auth.h"
#include "util/sha256.h"
#include "util/socket.h"

/* NCCL's fixed magic when NCCL_COMM_ID gives the root address to every rank. */
#define WEFT_BOOTSTRAP_COMM_ID_MAGIC 0x0280028002800280ULL
/* Upper bounds that let a receiver reject garbage before allocating for it. */
#define WEFT_BOOTSTRAP_MAX_RANKS (1 << 24)
#define WEFT_BOOTSTRAP_MAX_MSG (1ULL << 32)
/* How many missing ranks one root reply lists (the count is always exact). */
#define WEFT_BOOTSTRAP_MAX_LISTED 64

/* What ncclUniqueId carries (zero-padded to 128 bytes). The key is what connections prove they
 * know; it never goes on the wire (the id itself travels over the caller's channel, as in NCCL). */
struct weft_bootstrap_handle {
  uint64_t magic;
  union weft_socket_addr addr;
  uint32_t pad;
  struct weft_auth_key key;
};

/* Connection purposes, sent after the magic and the socket type. */
enum weft_bs_kind {
  WEFT_BS_CHECKIN = 1, /* rank -> its root: my listen address, reply when all are in */
  WEFT_BS_ADDR = 2,    /* first rank of a block -> previous block's root: address only */
  WEFT_BS_QUERY = 3,   /* rank -> root on the check-in connection: who is missing? */
  WEFT_BS_RING = 4,    /* rank -> ring successor */
  WEFT_BS_P2P = 5,     /* tagged message of weft_bootstrap_send */
  WEFT_BS_BARRIER = 6, /* dissemination barrier round */
  WEFT_BS_SPLIT = 7,   /* listen address of a split's new ring neighbour */
  WEFT_BS_BYE = 8,     /* rank -> root on the check-in connection: leaving on purpose (not dead) */
  WEFT_BS_GATHER = 9,  /* a round of the log-round all-gather (gather.c) */
  WEFT_BS_FINGER = 10, /* pointer doubling before the address all-gather (gather.c) */
  WEFT_BS_NOTE = 11    /* a note no receive waits for (weft_bootstrap_note) */
};

struct weft_bs_checkin {
  uint64_t magic;
  uint32_t type; /* WEFT_SOCKET_BOOTSTRAP */
  uint32_t kind; /* WEFT_BS_CHECKIN or WEFT_BS_ADDR */
  int32_t rank, nranks, nroots, iroot;
  union weft_socket_addr listen;
  uint32_t pad;
  uint8_t nonce[WEFT_AUTH_NONCE_BYTES]; /* the root's replies carry a MAC over it */
};

/* What a rank sends after the root's challenge: the answer covers the check-in it precedes. */
struct weft_bs_signed_checkin {
  uint8_t mac[WEFT_AUTH_MAC_BYTES];
  struct weft_bs_checkin body;
};

enum weft_bs_reply_kind {
  WEFT_BS_REPLY_NEXT = 1,    /* next: the successor's listen address */
  WEFT_BS_REPLY_MISSING = 2, /* count ranks missing, the first nlisted of them in missing[] */
  WEFT_BS_REPLY_REJECT = 3,  /* count = what the root expected (nranks) */
  WEFT_BS_REPLY_GONE = 4     /* rank `gone` went away without a goodbye: the job cannot form */
};

struct weft_bs_reply {
  uint32_t kind;
  int32_t count, nlisted, nneeded;
  /* MISSING: nleft ranks checked in but went away; missing[] lists the ranks that never came
   * (nlisted of count), then nlisted_left of the ranks that left. */
  int32_t nleft, nlisted_left;
  int32_t gone; /* GONE: the rank whose check-in connection closed without WEFT_BS_BYE */
  union weft_socket_addr next;
  int32_t missing[WEFT_BOOTSTRAP_MAX_LISTED];
};

/* Every root reply: mac = HMAC(key, REPLY label || the rank's nonce || body), so a rank knows its
 * successor's address came from the root. */
struct weft_bs_signed_reply {
  struct weft_bs_reply body;
  uint8_t mac[WEFT_AUTH_MAC_BYTES];
};
/* Sent (unauthenticated, informative only) by a root that refused a check-in's answer, so the
 * rank can say why instead of "connection closed". */
#define WEFT_BS_AUTH_REFUSED 0x5745465452454655ULL /* "WEFTREFU" */

/* Opening of every rank-to-rank connection; size bytes of payload follow. */
struct weft_bs_header {
  uint64_t magic;
  uint32_t type;
  uint32_t kind;
  int32_t src, dst, tag, pad;
  uint64_t seq; /* per (src, dst), from 1: keeps (peer, tag) order and refuses replays */
  uint64_t size;
  uint8_t digest[WEFT_SHA256_BYTES]; /* messages: SHA-256 of the payload (zero for the ring) */
};

/* The connector's first bytes. A message (P2P, BARRIER, SPLIT) is signed without a round trip:
 * mac = HMAC(key, MESSAGE label || the receiver's session nonce || hdr), so a sender never waits
 * for a receiver that is busy elsewhere (its bytes wait in the socket, as in NCCL). Replays fail
 * on seq, other sessions' messages on the nonce, altered payloads on the digest. A ring opening
 * carries no mac: the acceptor then sends a challenge and the connector answers
 * HMAC(key, PEER label || challenge || hdr); the ring forms before any nonce is known. */
struct weft_bs_opening {
  uint8_t mac[WEFT_AUTH_MAC_BYTES];
  struct weft_bs_header hdr;
};
/* A sender keeps the connection of a message open for its next messages to the same rank (at most
 * WEFT_BOOTSTRAP_MAX_CONNS per bootstrap object, the least recently used closed first): every
 * further message is one more frame, an opening signed exactly as a connection's first (so each
 * frame stands on its own: seq under the MAC refuses replays and reorderings, the nonce other
 * sessions, the digest altered payloads) followed by its payload. The receiver keeps reading the
 * connection until the sender closes it between frames; frames on one connection must all come
 * from the rank of its first message, and a ring opening is only ever a connection's first.
 * Receivers bound what they keep too: beyond WEFT_BOOTSTRAP_MAX_CONNS idle ones, the least
 * recently used is shut for writing (never closed: a frame already on its way is still read), and
 * the sender, seeing it readable, closes it (and sends its next message on a new connection). */
struct weft_bs_conn {
  int peer, fd;
  uint64_t used; /* conn_clock at the last message: the smallest is closed first */
};

/* What the all-gather tells every rank about each rank: where to connect, and the nonce that
 * messages to it are signed over (fresh for every bootstrap object, splits included). */
struct weft_bs_peer {
  union weft_socket_addr addr;
  uint32_t pad;
  uint8_t nonce[WEFT_AUTH_NONCE_BYTES];
};

/* A complete message waiting for its receive call. */
struct weft_bs_msg {
  struct weft_bs_msg* next;
  int src, kind, tag;
  uint64_t seq;
  size_t size;
  char* data;
};

/* An accepted connection: its header or payload (or, for the ring, the answer to our challenge)
 * is arriving, or (authed) it delivered a message and waits for the sender's next one. */
struct weft_bs_incoming {
  int fd;
  int challenged; /* ring opening: challenge sent, answer awaited */
  int authed;     /* a message from src came whole: the sender keeps the connection for more */
  int src;
  int closing;   /* we shut our side (too many kept): read on until the sender closes */
  uint64_t used; /* inc_clock when its last message came */
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES];
  uint8_t answer[WEFT_AUTH_MAC_BYTES];
  struct weft_bs_opening open;
  size_t hgot, agot, got, cap;
  char* data;
  int64_t deadline;
};

/* The check-in connection kept while the ring forms: if a rank vanishes meanwhile, the root says
 * so there (a signed GONE reply), and the wait it interrupts fails naming that rank. */
struct weft_bs_root_watch {
  int fd; /* -1: none (after init, and in splits) */
  struct weft_auth_key key;
  uint8_t nonce[WEFT_AUTH_NONCE_BYTES];
  struct weft_bs_signed_reply reply;
  size_t got;
  char name[WEFT_SOCKET_ADDR_STRLEN + 64];
};

struct weft_bootstrap {
  int rank, nranks;
  uint64_t magic;
  struct weft_auth_key key; /* every connection between ranks proves it */
  volatile uint32_t* abort_flag;
  int listen_fd;
  union weft_socket_addr listen_addr;
  uint8_t nonce[WEFT_AUTH_NONCE_BYTES]; /* messages to us are signed over it */
  struct weft_bs_peer* peers;           /* listen address and nonce of every rank */
  int peers_known;                      /* peers is filled: messages can go to any rank */
  int next_fd, prev_fd;
  uint64_t* send_seq; /* messages sent to each rank */
  uint64_t* recv_seq; /* messages from each rank complete without gaps */
  struct weft_bs_incoming* inc;
  int ninc, capinc;
  /* p2p.c: connections kept to send further messages (see struct weft_bs_conn). */
  struct weft_bs_conn* conns;
  int nconns, maxconns; /* maxconns: WEFT_BOOTSTRAP_MAX_CONNS (0: one connection a message) */
  uint64_t conn_clock, inc_clock;
  uint64_t nconnects, naccepts; /* message connections opened, and accepted (tests, bench) */
  int64_t probe_ms;             /* WEFT_BOOTSTRAP_PROBE_MS: see weft_bs_recv_kind */
  int idle_polls;               /* polls in a row that timed out (wait_once: a longer slice) */
  struct weft_bs_msg* parked;   /* completion order */
  struct pollfd* pfds;          /* scratch of weft_bs_progress */
  int cappfds;
  struct weft_bs_root_watch root;
  /* local.c: messages from ranks of this process, and the eventfd that says some came. */
  int event_fd;
  pid_t local_pid;                   /* the process that listed this object */
  struct weft_bootstrap* local_next; /* the process's list (local.c) */
  struct weft_bs_msg* mailbox;       /* under local.c's lock */
};

/* Ranks of root iroot of nroots: [lo, hi); the first nranks % nroots roots get one more. */
static inline void weft_bs_block(int nranks, int nroots, int iroot, int* lo, int* hi) {
  int base = nranks / nroots, extra = nranks % nroots;
  *lo = iroot * base + (iroot < extra ? iroot : extra);
  *hi = *lo + base + (iroot < extra ? 1 : 0);
}

static inline int weft_bs_root_of(int nranks, int nroots, int rank) {
  int base = nranks / nroots, extra = nranks % nroots;
  int boundary = extra * (base + 1);
  return rank < boundary ? rank / (base + 1) : extra + (rank - boundary) / base;
}

/* unique_id.c: the key connections prove: the id's job key, bound to ncclSetEncryption's
 * pre-shared key when one is set (ncclInvalidUsage when WEFT_PSK_FILE is unusable). */
ncclResult_t weft_bs_conn_key(const struct weft_auth_key* job, struct weft_auth_key* out);

/* What a root knows of its block: who checked in, and their listen addresses. */
enum { WEFT_BS_HAVE_NEVER = 0, WEFT_BS_HAVE_PRESENT = 1, WEFT_BS_HAVE_LEFT = 2 };
struct weft_bs_roster {
  int nranks, nroots, iroot; /* nranks is 0 until the first check-in */
  int lo, hi, extra;         /* our block, and the next block's first rank (-1: none) */
  int nneeded, nhave;
  union weft_socket_addr* addrs; /* by slot: rank - lo, extra at hi - lo */
  uint8_t* have;                 /* WEFT_BS_HAVE_* by slot */
};

/* wire.c: pure checks of what arrives, shared by the state machines and tests/fuzz. Each returns 1
 * when the message is acceptable, else 0 with the reason in why (may be NULL). */
int weft_bs_checkin_valid(const struct weft_bs_checkin* m, uint64_t magic, char* why, size_t len);
/* The job's shape from the first valid check-in; 0 when out of memory. */
int weft_bs_roster_init(struct weft_bs_roster* r, const struct weft_bs_checkin* m);
void weft_bs_roster_fini(struct weft_bs_roster* r);
int weft_bs_roster_slot(const struct weft_bs_roster* r, int rank); /* -1: not ours */
int weft_bs_roster_rank(const struct weft_bs_roster* r, int slot);
/* Whether a valid check-in fits the roster (else the root rejects it); slot gets its place. */
int weft_bs_roster_admit(const struct weft_bs_roster* r, const struct weft_bs_checkin* m, int* slot,
                         char* why, size_t len);
/* A MISSING reply: ranks that never came, then ranks that checked in and left. */
void weft_bs_roster_missing(const struct weft_bs_roster* r, struct weft_bs_reply* reply);
/* A reply's fields as a rank of nranks reads it (after its MAC). */
int weft_bs_reply_valid(const struct weft_bs_reply* r, int nranks, char* why, size_t len);
/* A rank-to-rank opening for rank of nranks, recv_seq[src] being the messages complete from src. */
int weft_bs_header_valid(const struct weft_bs_header* h, uint64_t magic, int rank, int nranks,
                         const uint64_t* recv_seq, char* why, size_t len);
/* Every address of the all-gather can be connected to. */
int weft_bs_peers_valid(const struct weft_bs_peer* peers, int nranks, char* why, size_t len);
/* "N of M never checked in: missing ranks a,b; K checked in and left: c" */
void weft_bs_format_missing(const struct weft_bs_reply* reply, char* buf, size_t len);
/* root.c: listen on addr (port 0 picks one) and serve check-ins from a detached thread. */
ncclResult_t weft_bs_root_start(union weft_socket_addr* addr, uint64_t magic,
                                const struct weft_auth_key* key);

/* p2p.c: the progress engine shared by every wait. */
struct weft_bs_op {
  int fd, is_send, peer;
  char* seg[2]; /* seg[0]: opening or length prefix; seg[1]: payload, or a ring opening's answer */
  size_t len[2], done[2];
  uint64_t prefix; /* length prefix storage */
  size_t expect;   /* receive: required prefix value */
  struct weft_bs_opening opening;
  /* A ring opening waits, once it is sent, for the acceptor's challenge and answers it. */
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES];
  uint8_t answer[WEFT_AUTH_MAC_BYTES];
  size_t chal_got, chal_len;
  int quiet;  /* a failure is not WARNed (a kept connection the receiver closed: sent again) */
  int failed; /* the socket failed (not a timeout or abort) */
};
/* open (copied) starts a new connection: a signed message, or a ring opening (kind WEFT_BS_RING)
 * that answers a challenge; NULL sends a length prefix on an established connection. */
void weft_bs_op_send(struct weft_bs_op* op, int fd, int peer, const struct weft_bs_opening* open,
                     const void* data, size_t len);
void weft_bs_op_recv(struct weft_bs_op* op, int fd, int peer, void* data, size_t len);
/* Run ops (and accept/read incoming connections) until all are done and, when until is not
 * NULL, until(bs, arg) holds. what describes the wait for WARNs ("receiving tag 3 from rank 2"). */
ncclResult_t weft_bs_progress(struct weft_bootstrap* bs, struct weft_bs_op* ops, int nops,
                              int (*until)(struct weft_bootstrap*, void*), void* arg,
                              volatile uint32_t* abort_flag, int64_t deadline, const char* what);
ncclResult_t weft_bs_send_kind(struct weft_bootstrap* bs, int peer, int kind, int tag, const void* data,
                               size_t size, volatile uint32_t* abort_flag, int64_t deadline);
ncclResult_t weft_bs_recv_kind(struct weft_bootstrap* bs, int peer, int kind, int tag, void* data,
                               size_t size, volatile uint32_t* abort_flag, int64_t deadline);
/* n - 1 steps over the ring sockets: needs no addresses (the first all-gather, of addresses). */
ncclResult_t weft_bs_ring_allgather(struct weft_bootstrap* bs, void* data, size_t size,
                                    volatile uint32_t* abort_flag, int64_t deadline);
/* gather.c: the log-round all-gather once peers are known and the job is large enough, else
 * the ring. */
ncclResult_t weft_bs_allgather(struct weft_bootstrap* bs, void* data, size_t size,
                               volatile uint32_t* abort_flag, int64_t deadline);
int weft_bs_uses_log_gather(const struct weft_bootstrap* bs);
/* The first all-gather, of every rank's address and nonce (peers[rank] is ours), over the ring
 * or, in log rounds, ring step + pointer doubling + Bruck (gather.c). */
ncclResult_t weft_bs_gather_addresses(struct weft_bootstrap* bs, volatile uint32_t* abort_flag,
                                      int64_t deadline);
void weft_bs_incoming_drop_all(struct weft_bootstrap* bs);
/* Close every connection kept for sending. */
void weft_bs_conns_close(struct weft_bootstrap* bs);
/* An accepted connection joins the incoming ones; 0 (fd closed) on failure.
 * weft_bs_incoming_read reads what arrived on inc[i]: a complete message is parked and the entry
 * stays for the sender's next frame (removed when the sender closes it between frames); a ring
 * opening becomes prev_fd and the entry is removed (as when it is dropped). */
int weft_bs_incoming_add(struct weft_bootstrap* bs, int fd);
void weft_bs_incoming_read(struct weft_bootstrap* bs, int i);

/* local.c: messages between ranks of one process, through memory. open lists bs (by its nonce)
 * and makes its eventfd; close unlists it and drops undelivered mail. deliver: 1 when peer is a
 * rank of this process and msg (with a copy of data) is in its mailbox, 0 when it is not (send
 * over TCP), -1 out of memory. drain hands the mailbox to take, once the eventfd polled readable. */
ncclResult_t weft_bs_local_open(struct weft_bootstrap* bs);
void weft_bs_msg_free_list(struct weft_bs_msg* m); /* m and every message after it */
void weft_bs_local_close(struct weft_bootstrap* bs);
int weft_bs_local_deliver(struct weft_bootstrap* bs, int peer, const struct weft_bs_msg* msg,
                          const void* data);
void weft_bs_local_drain(struct weft_bootstrap* bs,
                         void (*take)(struct weft_bootstrap*, struct weft_bs_msg*));

/* bootstrap.c */
int64_t weft_bs_timeout_s(void);
int weft_bs_max_conns(void);
/* WARN that the root reported rank r->gone went away while we were doing `what`. */
void weft_bs_warn_gone(const struct weft_bootstrap* bs, const struct weft_bs_reply* r, const char* root,
                       const char* what);
/* p2p.c: the root link is readable during `what`: ncclRemoteError (after a WARN) if it reports a
 * lost rank or closes; ncclSuccess while a message is still arriving. */
ncclResult_t weft_bs_root_watch_read(struct weft_bootstrap* bs, const char* what);
/* A wait failed with res (a peer closed or refused): if the root reports a vanished rank within
 * moments, WARN that (the real cause) too. Returns res. */
ncclResult_t weft_bs_root_explain(struct weft_bootstrap* bs, ncclResult_t res, const char* what);
/* Say goodbye to the root (so it does not take us for dead) and close the link. */
void weft_bs_root_watch_close(struct weft_bootstrap* bs);

#endif
