/* Joining a job: check in with the root(s), learn the ring successor, connect the ring and
 * all-gather every rank's listen address; and the same ring built over a parent (split). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

int64_t weft_bs_timeout_s(void) { return weft_param_int("WEFT_BOOTSTRAP_TIMEOUT"); }
int weft_bs_max_conns(void) {
  int64_t k = weft_param_int("WEFT_BOOTSTRAP_MAX_CONNS");
  return k < 0 ? 0 : k > 4096 ? 4096 : (int)k;
}

int weft_bootstrap_rank(const struct weft_bootstrap* bs) { return bs->rank; }
int weft_bootstrap_nranks(const struct weft_bootstrap* bs) { return bs->nranks; }
const struct weft_auth_key* weft_bootstrap_key(const struct weft_bootstrap* bs) { return &bs->key; }

void weft_bootstrap_destroy(struct weft_bootstrap* bs) {
  if (bs == NULL) return;
  weft_bs_root_watch_close(bs);
  weft_bs_local_close(bs);
  weft_bs_conns_close(bs);
  weft_socket_close(bs->listen_fd);
  weft_socket_close(bs->next_fd);
  weft_socket_close(bs->prev_fd);
  weft_bs_incoming_drop_all(bs);
  weft_bs_msg_free_list(bs->parked);
  free(bs->inc);
  free(bs->conns);
  free(bs->pfds);
  free(bs->peers);
  free(bs->send_seq);
  free(bs->recv_seq);
  memset(&bs->key, 0, sizeof(bs->key));
  free(bs);
}

/* A bootstrap object listening on addr's host (any port). */
static ncclResult_t create(int rank, int nranks, uint64_t magic, const struct weft_auth_key* key,
                           volatile uint32_t* abort_flag, const union weft_socket_addr* addr,
                           struct weft_bootstrap** out) {
  struct weft_bootstrap* bs = calloc(1, sizeof(*bs));
  if (bs == NULL) goto oom;
  bs->rank = rank;
  bs->nranks = nranks;
  bs->magic = magic;
  bs->key = *key;
  bs->abort_flag = abort_flag;
  bs->maxconns = weft_bs_max_conns();
  bs->probe_ms = weft_param_int("WEFT_BOOTSTRAP_PROBE_MS");
  bs->listen_fd = bs->next_fd = bs->prev_fd = bs->root.fd = bs->event_fd = -1;
  bs->peers = calloc(nranks, sizeof(*bs->peers));
  bs->send_seq = calloc(nranks, sizeof(*bs->send_seq));
  bs->recv_seq = calloc(nranks, sizeof(*bs->recv_seq));
  if (bs->peers == NULL || bs->send_seq == NULL || bs->recv_seq == NULL) goto oom;
  bs->listen_addr = *addr;
  weft_socket_addr_set_port(&bs->listen_addr, 0);
  ncclResult_t res = weft_auth_random(bs->nonce, sizeof(bs->nonce));
  if (res == ncclSuccess) res = weft_socket_listen(&bs->listen_addr, &bs->listen_fd);
  if (res == ncclSuccess) res = weft_bs_local_open(bs);
  if (res != ncclSuccess) {
    weft_bootstrap_destroy(bs);
    return res;
  }
  *out = bs;
  return ncclSuccess;
oom:
  weft_bootstrap_destroy(bs);
  WEFT_WARN("Bootstrap: rank %d: out of memory for %d ranks", rank, nranks);
  return ncclSystemError;
}

static int have_prev(struct weft_bootstrap* bs, void* arg) {
  (void)arg;
  return bs->prev_fd >= 0;
}

/* Connect to the successor and accept the predecessor's connection. */
static ncclResult_t ring_connect(struct weft_bootstrap* bs, const union weft_socket_addr* next_addr,
                                 volatile uint32_t* abort_flag, int64_t deadline) {
  if (bs->nranks == 1) return ncclSuccess;
  int next = (bs->rank + 1) % bs->nranks, prev = (bs->rank - 1 + bs->nranks) % bs->nranks;
  char who[64], what[160];
  snprintf(who, sizeof(who), "rank %d (ring successor of rank %d)", next, bs->rank);
  /* The successor listened before it checked in: a refusal means it is gone, so it is final. */
  ncclResult_t res = weft_socket_connect_listening(next_addr, who, 1, abort_flag, deadline, &bs->next_fd);
  if (res != ncclSuccess) return weft_bs_root_explain(bs, res, "connecting the ring");
  struct weft_bs_opening open = {.hdr = {.magic = bs->magic,
                                         .type = WEFT_SOCKET_BOOTSTRAP,
                                         .kind = WEFT_BS_RING,
                                         .src = bs->rank,
                                         .dst = next}};
  struct weft_bs_op op;
  weft_bs_op_send(&op, bs->next_fd, next, &open, NULL, 0);
  snprintf(what, sizeof(what), "waiting for rank %d (ring predecessor) to connect", prev);
  return weft_bs_progress(bs, &op, 1, have_prev, NULL, abort_flag, deadline, what);
}

/* All-gather every rank's address and session nonce (over the authenticated ring), and check
 * what came. */
static ncclResult_t gather_peers(struct weft_bootstrap* bs, volatile uint32_t* abort_flag, int64_t deadline) {
  struct weft_bs_peer* me = &bs->peers[bs->rank];
  me->addr = bs->listen_addr;
  memcpy(me->nonce, bs->nonce, sizeof(me->nonce));
  WEFT_CHECK(weft_bs_gather_addresses(bs, abort_flag, deadline));
  char why[160];
  if (weft_bs_peers_valid(bs->peers, bs->nranks, why, sizeof(why))) {
    bs->peers_known = 1;
    return ncclSuccess;
  }
  WEFT_WARN("Bootstrap: rank %d of %d: the all-gather of listen addresses is corrupt: %s", bs->rank,
            bs->nranks, why);
  return ncclRemoteError;
}

/* The id's contents, with the key connections prove in place of the bare job key. */
static ncclResult_t handle_of(const ncclUniqueId* id, struct weft_bootstrap_handle* h) {
  memcpy(h, id->internal, sizeof(*h));
  return weft_bs_conn_key(&h->key, &h->key);
}

static void warn_missing(const struct weft_bootstrap* bs, const struct weft_bs_reply* r, const char* root,
                         double waited) {
  char text[768];
  weft_bs_format_missing(r, text, sizeof(text));
  WEFT_WARN("Bootstrap: rank %d of %d gave up after %.1f s waiting at %s for the other ranks: %s", bs->rank,
            bs->nranks, waited, root, text);
}

void weft_bs_warn_gone(const struct weft_bootstrap* bs, const struct weft_bs_reply* r, const char* root,
                       const char* what) {
  char text[768];
  weft_bs_format_missing(r, text, sizeof(text));
  WEFT_WARN("Bootstrap: rank %d of %d: rank %d went away (killed or crashed) while %s, says %s; %s", bs->rank,
            bs->nranks, r->gone, what, root, text);
}

static ncclResult_t on_reply(const struct weft_bootstrap* bs, const struct weft_bs_reply* r, const char* root,
                             int64_t start, union weft_socket_addr* next) {
  char why[160];
  if (!weft_bs_reply_valid(r, bs->nranks, why, sizeof(why))) {
    WEFT_WARN("Bootstrap: rank %d: malformed reply from %s: %s", bs->rank, root, why);
    return ncclRemoteError;
  }
  switch (r->kind) {
    case WEFT_BS_REPLY_GONE:
      weft_bs_warn_gone(bs, r, root, "we waited for the others to check in");
      return ncclRemoteError;
    case WEFT_BS_REPLY_NEXT:
      *next = r->next;
      return ncclSuccess;
    case WEFT_BS_REPLY_MISSING:
      warn_missing(bs, r, root, (weft_socket_now_ns() - start) / 1e9);
      return ncclRemoteError;
    case WEFT_BS_REPLY_REJECT:
      WEFT_WARN(
          "Bootstrap: rank %d of %d: %s rejected our check-in (it serves %d ranks); ranks disagree "
          "on "
          "nranks or a rank is used twice",
          bs->rank, bs->nranks, root, r->count);
      return ncclInvalidUsage;
    default:
      WEFT_WARN("Bootstrap: rank %d: unknown reply %u from %s", bs->rank, r->kind, root);
      return ncclRemoteError;
  }
}

/* The check-in connection to one root: the key it proves and the nonce its replies sign. */
struct root_link {
  int fd;
  struct weft_auth_key key;
  uint8_t nonce[WEFT_AUTH_NONCE_BYTES];
};

/* A complete reply counts only with the MAC over our nonce: anything else is a forgery. */
static ncclResult_t on_signed_reply(const struct weft_bootstrap* bs, const struct root_link* link,
                                    const struct weft_bs_signed_reply* r, const char* root, int64_t start,
                                    union weft_socket_addr* next) {
  if (!weft_auth_check(&link->key, WEFT_AUTH_LABEL_REPLY, link->nonce, &r->body, sizeof(r->body), r->mac)) {
    WEFT_WARN("Bootstrap: rank %d of %d: the reply on our connection to %s is not signed with the job key",
              bs->rank, bs->nranks, root);
    return ncclRemoteError;
  }
  return on_reply(bs, &r->body, root, start, next);
}

static ncclResult_t root_closed(const struct weft_bootstrap* bs, const void* got_bytes, size_t got,
                                const char* root, ssize_t n) {
  uint64_t code = 0;
  if (got == sizeof(code)) memcpy(&code, got_bytes, sizeof(code));
  if (code == WEFT_BS_AUTH_REFUSED) {
    WEFT_WARN(
        "Bootstrap: rank %d of %d: %s refused our check-in because we do not hold its job key: every rank "
        "must use the same unique id, or with NCCL_COMM_ID the same WEFT_JOB_SECRET, and the same "
        "pre-shared key (ncclSetEncryption / WEFT_PSK_FILE) or none",
        bs->rank, bs->nranks, root);
    return ncclInvalidUsage;
  }
  WEFT_WARN("Bootstrap: rank %d of %d: %s %s before pairing the ranks", bs->rank, bs->nranks, root,
            n == WEFT_SOCKET_CLOSED ? "closed the connection" : strerror(errno));
  return ncclRemoteError;
}

/* Wait for the root's answer on the check-in connection. At our deadline ask the root who is
 * missing, so the error names the ranks that never arrived. */
static ncclResult_t wait_root(struct weft_bootstrap* bs, const struct root_link* link, const char* root,
                              volatile uint32_t* abort_flag, int64_t start, int64_t deadline,
                              union weft_socket_addr* next) {
  struct weft_bs_signed_reply reply;
  size_t got = 0;
  int64_t answer_by = 0;
  int fd = link->fd;
  for (;;) {
    ssize_t n = weft_socket_try_recv(fd, (char*)&reply + got, sizeof(reply) - got);
    if (n > 0 && (got += (size_t)n) == sizeof(reply))
      return on_signed_reply(bs, link, &reply, root, start, next);
    if (n < 0) return root_closed(bs, &reply, got, root, n);
    if (weft_socket_aborted(abort_flag)) {
      WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap: rank %d: abort flag set while waiting for %s", bs->rank, root);
      return ncclInvalidUsage;
    }
    int64_t now = weft_socket_now_ns();
    if (now >= deadline && answer_by == 0) {
      uint32_t query = WEFT_BS_QUERY;
      answer_by = now + 1000000000LL;
      /* 4 bytes on an idle socket go out at once. If the root has just replied and closed, the
       * send fails but the reply is still ours to read, so the outcome is decided below. */
      (void)weft_socket_try_send(fd, &query, sizeof(query));
    } else if (answer_by != 0 && now >= answer_by) {
      WEFT_WARN(
          "Bootstrap: rank %d of %d timed out after %.1f s waiting for %s, which did not say who is "
          "missing",
          bs->rank, bs->nranks, (now - start) / 1e9, root);
      return ncclRemoteError;
    }
    weft_socket_poll_one(fd, POLLIN, WEFT_SOCKET_POLL_MS);
  }
}

/* Connect to the root, answer its challenge and check in (the answer covers the check-in). */
static ncclResult_t send_checkin(struct weft_bootstrap* bs, const struct weft_bootstrap_handle* h, int kind,
                                 int nroots, int iroot, const char* root, volatile uint32_t* abort_flag,
                                 int64_t deadline, struct root_link* link) {
  link->fd = -1;
  struct weft_bs_signed_checkin m;
  memset(&m, 0, sizeof(m));
  m.body.magic = h->magic;
  m.body.type = WEFT_SOCKET_BOOTSTRAP;
  m.body.kind = (uint32_t)kind;
  m.body.rank = bs->rank;
  m.body.nranks = bs->nranks;
  m.body.nroots = nroots;
  m.body.iroot = iroot;
  m.body.listen = bs->listen_addr;
  link->key = h->key;
  WEFT_CHECK(weft_auth_random(m.body.nonce, sizeof(m.body.nonce)));
  memcpy(link->nonce, m.body.nonce, sizeof(link->nonce));
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES];
  WEFT_CHECK(weft_socket_connect(&h->addr, root, abort_flag, deadline, &link->fd));
  ncclResult_t res = weft_socket_recv_all(link->fd, challenge, sizeof(challenge), root, abort_flag, deadline);
  if (res == ncclSuccess) {
    weft_auth_mac(&h->key, WEFT_AUTH_LABEL_CHECKIN, challenge, &m.body, sizeof(m.body), m.mac);
    res = weft_socket_send_all(link->fd, &m, sizeof(m), root, abort_flag, deadline);
  }
  if (res != ncclSuccess) {
    weft_socket_close(link->fd);
    link->fd = -1;
  }
  return res;
}

/* Large jobs pace their check-ins (NCCL_UID_STAGGER_*) so one root is not flooded at once. */
static ncclResult_t stagger(int local, int block, volatile uint32_t* abort_flag) {
  int64_t threshold = weft_param_int("NCCL_UID_STAGGER_THRESHOLD"),
          rate = weft_param_int("NCCL_UID_STAGGER_RATE");
  if (block <= threshold || rate <= 0) return ncclSuccess;
  int64_t until = weft_socket_now_ns() + (int64_t)local * 1000000000LL / rate;
  while (weft_socket_now_ns() < until) {
    if (weft_socket_aborted(abort_flag)) return ncclInvalidUsage;
    weft_socket_poll_one(-1, 0, WEFT_SOCKET_POLL_MS);
  }
  return ncclSuccess;
}

static ncclResult_t checkin(struct weft_bootstrap* bs, const ncclUniqueId* ids, int nids,
                            volatile uint32_t* abort_flag, int64_t start, int64_t deadline,
                            union weft_socket_addr* next) {
  int n = bs->nranks, k = weft_bs_root_of(n, nids, bs->rank), lo, hi;
  weft_bs_block(n, nids, k, &lo, &hi);
  struct weft_bootstrap_handle h;
  WEFT_CHECK(handle_of(&ids[k], &h));
  /* label names the root in connect errors (which add the address); root also has the address. */
  char label[64], root[WEFT_SOCKET_ADDR_STRLEN + 64], text[WEFT_SOCKET_ADDR_STRLEN];
  if (h.magic == WEFT_BOOTSTRAP_COMM_ID_MAGIC)
    snprintf(label, sizeof(label), "the NCCL_COMM_ID root (hosted by rank 0)");
  else
    snprintf(label, sizeof(label), "root %d of %d", k, nids);
  snprintf(root, sizeof(root), "%s at %s", label, weft_socket_addr_str(&h.addr, text, sizeof(text)));
  WEFT_CHECK(stagger(bs->rank - lo, hi - lo, abort_flag));
  struct root_link link;
  WEFT_CHECK(send_checkin(bs, &h, WEFT_BS_CHECKIN, nids, k, label, abort_flag, deadline, &link));
  int prev_root = weft_bs_root_of(n, nids, (bs->rank - 1 + n) % n);
  ncclResult_t res = ncclSuccess;
  if (bs->rank == lo && prev_root != k) {
    /* The previous block's last rank learns our address from its own root. */
    struct weft_bootstrap_handle hp;
    WEFT_CHECK(handle_of(&ids[prev_root], &hp));
    char plabel[32];
    snprintf(plabel, sizeof(plabel), "root %d of %d", prev_root, nids);
    struct root_link plink;
    res = send_checkin(bs, &hp, WEFT_BS_ADDR, nids, prev_root, plabel, abort_flag, deadline, &plink);
    weft_socket_close(plink.fd);
  }
  if (res == ncclSuccess) res = wait_root(bs, &link, root, abort_flag, start, deadline, next);
  if (res != ncclSuccess) {
    /* Leaving on purpose: the root must not take us for dead and fail the others. */
    uint32_t bye = WEFT_BS_BYE;
    (void)weft_socket_try_send(link.fd, &bye, sizeof(bye));
    weft_socket_close(link.fd);
    return res;
  }
  /* Keep the link while the ring forms: the root reports ranks lost meanwhile on it. */
  bs->root.fd = link.fd;
  bs->root.key = link.key;
  memcpy(bs->root.nonce, link.nonce, sizeof(link.nonce));
  snprintf(bs->root.name, sizeof(bs->root.name), "%s", root);
  return ncclSuccess;
}

ncclResult_t weft_bootstrap_init_scalable(const ncclUniqueId* ids, int nids, int rank, int nranks,
                                          volatile uint32_t* abort_flag, struct weft_bootstrap** out) {
  WEFT_ARG_CHECK(out != NULL && ids != NULL, "ids %p out %p", (const void*)ids, (void*)out);
  WEFT_ARG_CHECK(nranks >= 1 && nranks <= WEFT_BOOTSTRAP_MAX_RANKS, "nranks %d", nranks);
  WEFT_ARG_CHECK(rank >= 0 && rank < nranks, "rank %d of nranks %d", rank, nranks);
  WEFT_ARG_CHECK(nids >= 1 && nids <= nranks, "%d unique ids for %d ranks", nids, nranks);
  *out = NULL;
  int64_t start = weft_socket_now_ns();
  int64_t deadline = weft_socket_deadline(weft_bs_timeout_s());
  struct weft_bootstrap_handle h0;
  WEFT_CHECK(handle_of(&ids[0], &h0));
  const char* comm_id = weft_param_str("NCCL_COMM_ID");
  if (nids == 1 && rank == 0 && comm_id != NULL && comm_id[0] != '\0' &&
      h0.magic == WEFT_BOOTSTRAP_COMM_ID_MAGIC)
    WEFT_CHECK(weft_bs_root_start(&h0.addr, h0.magic, &h0.key));
  struct weft_socket_if itf;
  WEFT_CHECK(weft_socket_bootstrap_if(&itf));
  struct weft_bootstrap* bs;
  /* Every id of a scalable init has its own root key; rank-to-rank connections use the first. */
  WEFT_CHECK(create(rank, nranks, h0.magic, &h0.key, abort_flag, &itf.addr, &bs));
  union weft_socket_addr next;
  ncclResult_t res;
  WEFT_CHECK_GOTO(checkin(bs, ids, nids, abort_flag, start, deadline, &next), res, fail);
  WEFT_CHECK_GOTO(ring_connect(bs, &next, abort_flag, deadline), res, fail);
  WEFT_CHECK_GOTO(gather_peers(bs, abort_flag, deadline), res, fail);
  weft_bs_root_watch_close(bs);
  char text[WEFT_SOCKET_ADDR_STRLEN];
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap: rank %d nranks %d ready in %.1f ms (%d root%s, listening on %s)",
            rank, nranks, (weft_socket_now_ns() - start) / 1e6, nids, nids > 1 ? "s" : "",
            weft_socket_addr_str(&bs->listen_addr, text, sizeof(text)));
  *out = bs;
  return ncclSuccess;
fail:
  weft_bootstrap_destroy(bs);
  return res;
}

ncclResult_t weft_bootstrap_init(const ncclUniqueId* id, int rank, int nranks, volatile uint32_t* abort_flag,
                                 struct weft_bootstrap** out) {
  return weft_bootstrap_init_scalable(id, 1, rank, nranks, abort_flag, out);
}

ncclResult_t weft_bootstrap_split(struct weft_bootstrap* parent, int new_rank, int new_nranks,
                                  const int* parent_ranks, volatile uint32_t* abort_flag,
                                  struct weft_bootstrap** out) {
  WEFT_ARG_CHECK(parent != NULL && parent_ranks != NULL && out != NULL, "parent %p parent_ranks %p out %p",
                 (void*)parent, (const void*)parent_ranks, (void*)out);
  WEFT_ARG_CHECK(new_nranks >= 1 && new_nranks <= parent->nranks, "split into %d ranks from %d", new_nranks,
                 parent->nranks);
  WEFT_ARG_CHECK(new_rank >= 0 && new_rank < new_nranks, "new rank %d of %d", new_rank, new_nranks);
  WEFT_ARG_CHECK(parent_ranks[new_rank] == parent->rank, "parent_ranks[%d] is %d, but this is parent rank %d",
                 new_rank, parent_ranks[new_rank], parent->rank);
  for (int i = 0; i < new_nranks; i++)
    WEFT_ARG_CHECK(parent_ranks[i] >= 0 && parent_ranks[i] < parent->nranks, "parent_ranks[%d] = %d", i,
                   parent_ranks[i]);
  *out = NULL;
  int64_t start = weft_socket_now_ns();
  int64_t deadline = weft_socket_deadline(weft_bs_timeout_s());
  struct weft_bootstrap* bs;
  WEFT_CHECK(
      create(new_rank, new_nranks, parent->magic, &parent->key, abort_flag, &parent->listen_addr, &bs));
  ncclResult_t res = ncclSuccess;
  if (new_nranks > 1) {
    /* The parent carries our new listen address to our new predecessor: no root needed. */
    int prev = parent_ranks[(new_rank - 1 + new_nranks) % new_nranks];
    int next = parent_ranks[(new_rank + 1) % new_nranks];
    union weft_socket_addr next_addr;
    WEFT_CHECK_GOTO(weft_bs_send_kind(parent, prev, WEFT_BS_SPLIT, 0, &bs->listen_addr,
                                      sizeof(bs->listen_addr), abort_flag, deadline),
                    res, fail);
    WEFT_CHECK_GOTO(weft_bs_recv_kind(parent, next, WEFT_BS_SPLIT, 0, &next_addr, sizeof(next_addr),
                                      abort_flag, deadline),
                    res, fail);
    if (!weft_socket_addr_valid(&next_addr)) {
      WEFT_WARN("Bootstrap: split rank %d: parent rank %d sent a listen address of family %d", new_rank, next,
                next_addr.sa.sa_family);
      res = ncclRemoteError;
      goto fail;
    }
    WEFT_CHECK_GOTO(ring_connect(bs, &next_addr, abort_flag, deadline), res, fail);
  }
  WEFT_CHECK_GOTO(gather_peers(bs, abort_flag, deadline), res, fail);
  WEFT_INFO(WEFT_BOOTSTRAP, "Bootstrap: split parent rank %d -> rank %d nranks %d ready in %.1f ms",
            parent->rank, new_rank, new_nranks, (weft_socket_now_ns() - start) / 1e6);
  *out = bs;
  return ncclSuccess;
fail:
  weft_bootstrap_destroy(bs);
  return res;
}
