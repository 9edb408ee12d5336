/* The IB network's data path. irecv registers its buffers (or finds them kept registered),
 * posts a receive and writes the offer (addresses, rkeys, sizes, tags) into the sender's FIFO
 * slot for that receive, then the slot's sequence word in a second, later write, so a sender that
 * sees the word sees the whole offer. isend waits for its slot's offer and writes the message,
 * with immediate data naming the buffer and the size, straight into the buffer whose tag matches.
 * Sends go out in order, so immediates consume posted receives in the order the receives were
 * made. On a merged device each queue pair belongs to a member on either side: a message written
 * on one uses our member's lkey and the rkey the receiver offered for its member. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net_ib_comm.h"
#include "util/check.h"
#include "util/log.h"
#include "util/time.h"

#if WEFT_IBVERBS_HEADERS

ncclResult_t weft_ib_fail(struct ib_comm* c, ncclResult_t res, const char* fmt, ...) {
  if (c->error != ncclSuccess) return c->error;
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  WEFT_WARN("NET/IB: %s connection %s peer GID %s: %s", c->dev->name, c->is_send ? "to" : "from",
            c->peer_addr, why);
  c->error = res;
  return res;
}

/* A peer that closed its end (no verbs error): INFO, as for sockets (net_socket.c, fail_conn). */
static ncclResult_t peer_left(struct ib_comm* c, const char* why) {
  if (c->error != ncclSuccess) return c->error;
  WEFT_INFO(WEFT_NET, "NET/IB: %s connection %s peer GID %s: %s", c->dev->name, c->is_send ? "to" : "from",
            c->peer_addr, why);
  c->error = ncclRemoteError;
  return c->error;
}

void weft_ib_mrs_release(struct ib_mrs* out) {
  for (int k = 0; k < IB_MAX_MEMBERS; k++) {
    if (out->mr[k]) weft_ibv_load(NULL)->dereg_mr(out->mr[k]);
    out->mr[k] = NULL;
  }
}

void weft_ib_req_release(struct ib_req* r) {
  for (int i = 0; i < WEFT_NET_MAX_RECVS; i++) {
    if (r->kept[i]) weft_net_regcache_release(&r->c->regs, r->kept[i]);
    weft_ib_mrs_release(&r->own[i]);
    r->kept[i] = NULL;
  }
  r->used = 0;
}

/* The registrations buffer i of r goes with. */
static const struct ib_mrs* req_mrs(const struct ib_req* r, int i) {
  return r->kept[i] ? (const struct ib_mrs*)r->kept[i]->mh : &r->own[i];
}

static int turn(const struct ib_comm* c, uint64_t seq) { return (int)(seq % (uint64_t)c->nqps); }

/* Our members whose queue pairs carry request seq's message: all when it is split over every
 * queue pair (there are at least as many as members), else its turn's. */
static unsigned req_members(const struct ib_comm* c, uint64_t seq) {
  return c->split ? (1u << c->nmembers) - 1 : 1u << ib_qp_member(c, turn(c, seq));
}

/* The next request in order, or NULL when its slot's earlier request is not released yet. */
static struct ib_req* req_alloc(struct ib_comm* c) {
  struct ib_req* r = &c->reqs[c->issued % IB_SLOTS];
  if (r->used) return NULL;
  memset(r, 0, sizeof(*r));
  r->c = c;
  r->used = 1;
  r->seq = c->issued++;
  return r;
}

/* ---- registrations ---- */

int weft_ib_access_of(const struct ib_comm* c) {
  return c->is_send ? 0 : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
}

struct ibv_mr* weft_ib_register_range(struct ib_comm* c, int k, void* p, size_t n, int dmabuf_fd) {
  const struct weft_ibv_fns* ibv = weft_ibv_load(NULL);
  int access = weft_ib_access_of(c) | (c->relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);
  if (dmabuf_fd >= 0) return ibv->reg_dmabuf_mr(c->m[k].pd, 0, n, (uint64_t)(uintptr_t)p, dmabuf_fd, access);
  if (c->relaxed) return ibv->reg_mr_iova2(c->m[k].pd, p, n, (uint64_t)(uintptr_t)p, (unsigned)access);
  return ibv->reg_mr(c->m[k].pd, p, n, access);
}

struct ib_mrs* weft_ib_mrs_keep(struct ib_comm* c, void* p, size_t n, int dmabuf_fd, int* failed) {
  struct ib_mrs* mrs = calloc(1, sizeof(*mrs));
  *failed = -1;
  for (int k = 0; mrs != NULL && k < c->nmembers; k++) {
    if ((mrs->mr[k] = weft_ib_register_range(c, k, p, n, dmabuf_fd)) != NULL) continue;
    int err = errno;
    weft_ib_mrs_release(mrs);
    free(mrs);
    errno = err;
    *failed = k;
    return NULL;
  }
  return mrs;
}

/* A request's buffer, in the members of mask; one that cannot be registered fails the connection. */
static ncclResult_t reg_mrs(struct ib_comm* c, unsigned mask, void* p, size_t n, struct ib_mrs* out) {
  for (int k = 0; k < c->nmembers; k++) {
    if (!(mask >> k & 1)) continue;
    if ((out->mr[k] = weft_ib_register_range(c, k, p, n, -1)) == NULL)
      return weft_ib_fail(c, ncclSystemError, "cannot register %zu bytes at %p on %s:%d: %s", n, p,
                          c->m[k].port->name, c->m[k].port->port, strerror(errno));
  }
  return ncclSuccess;
}

/* A range to keep, registered in every member (any queue pair may carry a message from or into
 * it); one that cannot be is only refused (the caller says what follows: a connector's setup
 * fails, a registered user buffer is registered per request instead). */
static ncclResult_t kept_reg(void* owner, void* data, size_t size, void** mh) {
  struct ib_comm* c = owner;
  int k;
  if ((*mh = weft_ib_mrs_keep(c, data, size, -1, &k)) != NULL) return ncclSuccess;
  if (k >= 0)
    WEFT_INFO(WEFT_NET, "NET/IB: %s:%d cannot keep %zu bytes at %p registered: %s", c->m[k].port->name,
              c->m[k].port->port, size, data, strerror(errno));
  return ncclSystemError;
}

static void kept_dereg(void* owner, void* mh) {
  (void)owner;
  weft_ib_mrs_release(mh);
  free(mh);
}

void weft_ib_regcache_init(struct ib_comm* c) {
  weft_net_regcache_init(&c->regs, c, kept_reg, kept_dereg);
  c->regs.reg_gpu = weft_ib_reg_gpu;
}

ncclResult_t weft_ib_keep_registered(void* comm, void* data, size_t size) {
  struct ib_comm* c = comm;
  return weft_net_regcache_keep(&c->regs, data, size);
}

void weft_ib_drop_registered(void* comm, void* data, size_t size) {
  struct ib_comm* c = comm;
  weft_net_regcache_drop(&c->regs, data, size);
}

/* Buffer i of request r goes with a kept registration that covers it (the proxy's connector
 * buffers), else with one of its own until the request is done: any other buffer may be freed
 * and its addresses reused after that, and a registration cached past it would point at pages
 * that are no longer the caller's. */
static ncclResult_t reg(struct ib_comm* c, struct ib_req* r, int i, void* p, size_t n) {
  if (n == 0) return ncclSuccess;
  if ((r->kept[i] = weft_net_regcache_find(&c->regs, p, n)) != NULL) return ncclSuccess;
  c->own_regs++;
  return reg_mrs(c, req_members(c, r->seq), p, n, &r->own[i]);
}

/* Member k's key of buffer i of r (0 when the buffer is empty). */
static uint32_t lkey_of(const struct ib_req* r, int i, int k) {
  const struct ibv_mr* mr = req_mrs(r, i)->mr[k];
  return mr ? mr->lkey : 0;
}
static uint32_t rkey_of(const struct ib_req* r, int i, int k) {
  const struct ibv_mr* mr = req_mrs(r, i)->mr[k];
  return mr ? mr->rkey : 0;
}

static ncclResult_t post_write(struct ib_comm* c, struct ibv_qp* qp, uint64_t wr_id, const void* src,
                               size_t size, uint32_t lkey, uint64_t remote, uint32_t rkey, int with_imm,
                               uint32_t imm) {
  struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)src, .length = (uint32_t)size, .lkey = lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = size > 0;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED; /* every write retires its queue entry */
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  int rc = ibv_post_send(qp, &wr, &bad);
  if (rc != 0) return weft_ib_fail(c, ncclSystemError, "cannot post an RDMA write: %s", strerror(rc));
  return ncclSuccess;
}

/* ---- completions ---- */

/* A failed completion on member k: its text, naming the member where there are several. */
static void record_failure(struct ib_comm* c, int k, const struct ibv_wc* wc) {
  char where[80] = "";
  if (c->nmembers > 1) snprintf(where, sizeof(where), " on %s:%d", c->m[k].port->name, c->m[k].port->port);
  snprintf(c->broken_why, sizeof(c->broken_why), "%s%s: %s (verbs status %d)",
           (wc->wr_id & IB_WR_CTS)     ? "offer"
           : (wc->wr_id & IB_WR_PROBE) ? "probe"
           : (wc->wr_id & IB_WR_SETUP) ? "setup"
                                       : "transfer",
           where, weft_ibv_load(NULL)->wc_status_str(wc->status), (int)wc->status);
}

static ncclResult_t on_completion(struct ib_comm* c, int k, const struct ibv_wc* wc) {
  if (wc->status != IBV_WC_SUCCESS) {
    /* A peer that closes flushes the receives posted ahead of its goodbye: the requests already
     * complete stay so, and only what is still waiting fails (with the first error's text). */
    if (!c->broken) record_failure(c, k, wc);
    c->broken = 1;
    return ncclSuccess;
  }
  if (wc->wr_id & IB_WR_PROBE) c->probing = 0;
  if (wc->wr_id &
      (IB_WR_CTS | IB_WR_PROBE | IB_WR_CLOSE | IB_WR_REJECT | IB_WR_META | IB_WR_DATA | IB_WR_SETUP))
    return ncclSuccess;
  struct ib_req* r = &c->reqs[wc->wr_id % IB_SLOTS];
  if (!c->is_send) {
    uint32_t imm = ntohl(wc->imm_data);
    if (imm == IB_IMM_REJECT) {
      snprintf(c->broken_why, sizeof(c->broken_why), "the sender's message fits none of the buffers offered");
      c->broken = 1;
      return ncclSuccess;
    }
    int index = (int)(imm >> IB_IMM_SIZE_BITS);
    size_t size = imm & (IB_MAX_MESSAGE - 1);
    /* Under adaptive routing a part's data came by a plain write and its immediate by an empty one. */
    int carried = wc->byte_len == size || (c->ar && wc->byte_len == 0);
    if ((r->got_size > 0 && index != r->got_index) || index >= r->nbuf || !carried ||
        r->got_size + size > r->sizes[index])
      return weft_ib_fail(c, ncclRemoteError, "message does not match the offer (buffer %d, %zu bytes)",
                          index, size);
    r->got_index = index;
    r->got_size += size;
  }
  r->done = --r->pending == 0;
  return ncclSuccess;
}

static ncclResult_t poll_member(struct ib_comm* c, int k) {
  struct ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(c->m[k].cq, 16, wc);
    if (n < 0) return weft_ib_fail(c, ncclSystemError, "cannot poll the completion queue");
    for (int i = 0; i < n; i++) WEFT_CHECK(on_completion(c, k, &wc[i]));
    if (n < 16) return ncclSuccess;
  }
}

static ncclResult_t poll(struct ib_comm* c) {
  for (int k = 0; k < c->nmembers; k++) WEFT_CHECK(poll_member(c, k));
  return ncclSuccess;
}

/* ---- sends ---- */

/* The message into the receiver's buffer index i: on its turn's queue pair, or split in equal
 * parts over all of them, each part with its own immediate (buffer index, part size). Each part
 * goes with our member's key for the buffer and the receiver's for its member. */
static ncclResult_t write_message(struct ib_comm* c, struct ib_req* r, const struct ib_cts_slot* s, int i) {
  const struct ib_cts_entry* e = &s->e[i];
  uint64_t wr_id = r->seq % IB_SLOTS;
  int parts = c->split ? c->nqps : 1;
  /* The metadata word goes first on the queue pair of the first part: the receive completes
   * only after that part, which lands after it. */
  if (r->meta != 0) {
    c->meta[wr_id] = r->meta;
    int q = c->split ? 0 : turn(c, r->seq);
    WEFT_CHECK(post_write(c, c->qp[q], IB_WR_META | wr_id, &c->meta[wr_id], sizeof(uint64_t),
                          c->m[ib_qp_member(c, q)].meta_mr->lkey, s->meta_addr,
                          s->meta_rkey[ib_qp_peer_member(c, q)], 0, 0));
  }
  size_t part = (r->size + (size_t)parts - 1) / (size_t)parts;
  r->pending = parts;
  for (int p = 0; p < parts; p++) {
    size_t off = part * (size_t)p < r->size ? part * (size_t)p : r->size;
    size_t len = r->size - off < part ? r->size - off : part;
    int q = c->split ? p : turn(c, r->seq);
    uint32_t lkey = lkey_of(r, 0, ib_qp_member(c, q)), rkey = e->rkey[ib_qp_peer_member(c, q)];
    uint32_t imm = (uint32_t)i << IB_IMM_SIZE_BITS | (uint32_t)len;
    const char* src = (const char*)r->data + off;
    if (c->ar && len > 0 && len >= c->ar_threshold) {
      WEFT_CHECK(post_write(c, c->qp[q], IB_WR_DATA | wr_id, src, len, lkey, e->addr + off, rkey, 0, 0));
      WEFT_CHECK(post_write(c, c->qp[q], wr_id, NULL, 0, 0, e->addr + off, rkey, 1, imm));
    } else {
      WEFT_CHECK(post_write(c, c->qp[q], wr_id, src, len, lkey, e->addr + off, rkey, 1, imm));
    }
  }
  return ncclSuccess;
}

/* The message fits no buffer of its offer (no tag matches, or too large): the receive is told
 * with an empty write whose immediate no message has, and both sides' requests fail. */
static ncclResult_t reject(struct ib_comm* c, struct ib_req* r, const struct ib_cts_slot* s, int i) {
  if (i == (int)s->n)
    snprintf(c->broken_why, sizeof(c->broken_why), "the receiver offers no buffer for tag %d", r->tag);
  else
    snprintf(c->broken_why, sizeof(c->broken_why),
             "a %zu-byte message does not fit the receiver's %llu-byte buffer", r->size,
             (unsigned long long)s->e[i].size);
  c->broken = 1;
  struct ibv_qp* qp = c->split ? c->qp[0] : c->qp[turn(c, r->seq)];
  return post_write(c, qp, IB_WR_REJECT, NULL, 0, 0, c->peer.info.fifo_addr, 0, 1, IB_IMM_REJECT);
}

/* Writes every send whose offer has arrived, in order. */
static ncclResult_t post_sends(struct ib_comm* c) {
  if (c->broken) return ncclSuccess; /* nothing more goes out; test reports why */
  WEFT_CHECK(weft_ib_connect_rest(c));
  if (!c->qps_up) return ncclSuccess; /* no offer can have come before the members' addresses */
  if (c->posted < c->issued && __atomic_load_n(&c->fifo[IB_CLOSED_SLOT].seq, __ATOMIC_ACQUIRE) != 0)
    return peer_left(c, "the receiver closed the connection with sends still to go");
  while (c->posted < c->issued) {
    struct ib_req* r = &c->reqs[c->posted % IB_SLOTS];
    struct ib_cts_slot* s = &c->fifo[c->posted % IB_SLOTS];
    if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != c->posted + 1) return ncclSuccess;
    int i = 0, n = s->n < WEFT_NET_MAX_RECVS ? (int)s->n : WEFT_NET_MAX_RECVS;
    while (i < n && s->e[i].tag != r->tag) i++;
    if (i == n || r->size > s->e[i].size) return reject(c, r, s, i);
    WEFT_CHECK(write_message(c, r, s, i));
    c->posted++;
  }
  return ncclSuccess;
}

/* An immediate carries the size: a message (or a buffer) must stay below its reserved value. */
static int fits_one_send(size_t size, const char* what) {
  if (size < IB_MAX_MESSAGE - 1) return 1;
  WEFT_WARN("NET/IB: %s of %zu bytes is larger than the %zu bytes one send carries", what, size,
            IB_MAX_MESSAGE - 2);
  return 0;
}

/* The next request, once setup is done; NULL (no error) while it is not, or no slot is free. */
static ncclResult_t next_request(struct ib_comm* c, struct ib_req** r) {
  *r = NULL;
  WEFT_CHECK(weft_ib_progress_setup(c));
  if (c->stage == IB_READY) *r = req_alloc(c);
  return ncclSuccess;
}

ncclResult_t weft_ib_isend_meta(void* send_comm, const void* data, size_t size, int tag, uint64_t meta,
                                void** request) {
  struct ib_comm* c = send_comm;
  *request = NULL;
  if (!fits_one_send(size, "a message")) return ncclInvalidArgument;
  struct ib_req* r;
  WEFT_CHECK(next_request(c, &r));
  if (r == NULL) return ncclSuccess;
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->meta = meta;
  r->nbuf = 1;
  ncclResult_t res = reg(c, r, 0, (void*)data, size);
  if (res == ncclSuccess) res = post_sends(c);
  if (res != ncclSuccess) return res;
  *request = r;
  return ncclSuccess;
}

ncclResult_t weft_ib_isend(void* send_comm, const void* data, size_t size, int tag, void** request) {
  return weft_ib_isend_meta(send_comm, data, size, tag, 0, request);
}

/* ---- receives ---- */

/* The queue pair an offer goes on: its turn's where that pair was connected at setup on both
 * sides (its member here is our first), else queue pair 0. */
static int offer_qp(const struct ib_comm* c, uint64_t seq) {
  int q = turn(c, seq);
  return ib_qp_member(c, q) == 0 ? q : 0;
}

/* Receiver: an RDMA write from our FIFO memory (registered in every member) into the sender's, on
 * queue pair q with the keys of both its ends. */
static ncclResult_t write_to_fifo(struct ib_comm* c, int q, uint64_t wr_id, const void* src, size_t size,
                                  uint32_t lkey, uint64_t offset) {
  return post_write(c, c->qp[q], wr_id, src, size, lkey, c->peer.info.fifo_addr + offset,
                    c->peer.m.a[ib_qp_peer_member(c, q)].fifo_rkey, 0, 0);
}

static ncclResult_t offer(struct ib_comm* c, struct ib_req* r, void* const* data, const int* tags) {
  int slot = (int)(r->seq % IB_SLOTS);
  struct ib_cts_slot* s = &c->fifo[slot];
  memset(s, 0, sizeof(*s));
  for (int i = 0; i < r->nbuf; i++) {
    WEFT_CHECK(reg(c, r, i, data[i], r->sizes[i]));
    s->e[i] =
        (struct ib_cts_entry){.addr = (uint64_t)(uintptr_t)data[i], .size = r->sizes[i], .tag = tags[i]};
    for (int k = 0; k < c->nmembers; k++) s->e[i].rkey[k] = rkey_of(r, i, k);
  }
  s->n = (uint32_t)r->nbuf;
  c->meta[slot] = 0; /* stays 0 unless the sender writes one */
  s->meta_addr = (uint64_t)(uintptr_t)&c->meta[slot];
  for (int k = 0; k < c->nmembers; k++) s->meta_rkey[k] = c->m[k].meta_mr->rkey;
  c->seq_out[slot] = r->seq + 1;
  /* A receive on each queue pair a part of the message comes by. */
  r->pending = c->split ? c->nqps : 1;
  for (int q = 0; q < r->pending; q++) {
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot}, *bad = NULL;
    int rc = ibv_post_recv(c->qp[c->split ? q : turn(c, r->seq)], &wr, &bad);
    if (rc != 0) return weft_ib_fail(c, ncclSystemError, "cannot post a receive: %s", strerror(rc));
  }
  int q = offer_qp(c, r->seq);
  const struct ib_member* m = &c->m[ib_qp_member(c, q)];
  uint64_t at = (uint64_t)slot * sizeof(*s);
  WEFT_CHECK(write_to_fifo(c, q, IB_WR_CTS | (uint64_t)slot, s, offsetof(struct ib_cts_slot, seq),
                           m->fifo_mr->lkey, at));
  return write_to_fifo(c, q, IB_WR_CTS | (uint64_t)slot, &c->seq_out[slot], sizeof(uint64_t), m->seq_mr->lkey,
                       at + offsetof(struct ib_cts_slot, seq));
}

ncclResult_t weft_ib_send_members(struct ib_comm* c) {
  struct ib_members* mine = ib_fifo_members(c);
  memcpy(mine->a, c->info.m.a, sizeof(mine->a));
  mine->ready = 1;
  uint32_t lkey = c->m[0].fifo_mr->lkey;
  WEFT_CHECK(write_to_fifo(c, 0, IB_WR_SETUP, mine->a, sizeof(mine->a), lkey, IB_FIFO_MEMBERS));
  return write_to_fifo(c, 0, IB_WR_SETUP, &mine->ready, sizeof(mine->ready), lkey,
                       IB_FIFO_MEMBERS + offsetof(struct ib_members, ready));
}

ncclResult_t weft_ib_irecv(void* recv_comm, int n, void* const* data, const size_t* sizes, const int* tags,
                           void** request) {
  struct ib_comm* c = recv_comm;
  *request = NULL;
  if (n < 1 || n > WEFT_NET_MAX_RECVS) {
    WEFT_WARN("NET/IB: irecv with %d buffers (1 to %d)", n, WEFT_NET_MAX_RECVS);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < n; i++)
    if (!fits_one_send(sizes[i], "a receive buffer")) return ncclInvalidArgument;
  struct ib_req* r;
  WEFT_CHECK(next_request(c, &r));
  if (r == NULL) return ncclSuccess;
  r->nbuf = n;
  memcpy(r->sizes, sizes, (size_t)n * sizeof(*sizes));
  WEFT_CHECK(offer(c, r, data, tags));
  *request = r;
  return ncclSuccess;
}

void weft_ib_say_closed(struct ib_comm* c) {
  c->seq_out[IB_CLOSED_SLOT] = 1;
  uint64_t at = (uint64_t)IB_CLOSED_SLOT * sizeof(struct ib_cts_slot) + offsetof(struct ib_cts_slot, seq);
  if (write_to_fifo(c, 0, IB_WR_CLOSE, &c->seq_out[IB_CLOSED_SLOT], sizeof(uint64_t), c->m[0].seq_mr->lkey,
                    at) != ncclSuccess)
    return;
  /* Its completion says it landed; a sender that is gone fails it, and 100 ms bounds the wait. */
  int64_t deadline = (int64_t)weft_time_ns() + 100000000ll;
  struct ibv_wc wc;
  while ((int64_t)weft_time_ns() < deadline) {
    int n = ibv_poll_cq(c->m[0].cq, 1, &wc);
    if (n < 0 || (n == 1 && (wc.wr_id & IB_WR_CLOSE))) return;
  }
}

/* ---- test ---- */

/* Receiver: whether the sender closed its end (the one receive on the control connection
 * ends then). */
static void watch_sender(struct ib_comm* c) {
  int done = 0;
  if (c->peer_gone || c->ctrl_req == NULL) return;
  if (weft_net_socket_ops.test(c->ctrl_req, &done, NULL) != ncclSuccess || done) {
    c->peer_gone = 1;
    c->ctrl_req = NULL;
  }
}

/* Sender: while a send waits for its offer, an empty write each second finds a receiver that
 * is gone (it completes with an error once the queue pair's retries run out). */
static ncclResult_t probe_receiver(struct ib_comm* c) {
  int64_t now = weft_time_ns();
  if (c->probing || now - c->probe_ns < 1000000000ll) return ncclSuccess;
  c->probing = 1;
  c->probe_ns = now;
  return post_write(c, c->qp[0], IB_WR_PROBE, NULL, 0, 0, c->peer.info.fifo_addr, 0, 0, 0);
}

static ncclResult_t progress(struct ib_comm* c) {
  WEFT_CHECK(poll(c));
  if (!c->is_send) return ncclSuccess;
  int done = 0;
  if (c->ctrl_req != NULL && weft_net_socket_ops.test(c->ctrl_req, &done, NULL) != ncclSuccess)
    return weft_ib_fail(c, ncclRemoteError, "the receiver went away during setup");
  if (done) c->ctrl_req = NULL;
  return post_sends(c);
}

ncclResult_t weft_ib_test(void* request, int* done, size_t* sizes) {
  return weft_ib_test_meta(request, done, sizes, NULL);
}

/* A sender whose receiver said it closed (its word in our FIFO) lost its writes to the receiver
 * leaving, as a goodbye sent while the peer tears down does: INFO, as a closed socket is. */
static ncclResult_t broken(struct ib_comm* c) {
  if (c->is_send && __atomic_load_n(&c->fifo[IB_CLOSED_SLOT].seq, __ATOMIC_ACQUIRE) != 0)
    return peer_left(c, c->broken_why);
  return weft_ib_fail(c, ncclRemoteError, "%s", c->broken_why);
}

ncclResult_t weft_ib_test_meta(void* request, int* done, size_t* sizes, uint64_t* meta) {
  struct ib_req* r = request;
  struct ib_comm* c = r->c;
  *done = 0;
  if (c->error != ncclSuccess) return c->error;
  WEFT_CHECK(progress(c));
  if (!r->done && c->broken) return broken(c);
  if (!r->done && c->is_send) return probe_receiver(c);
  if (!r->done) {
    watch_sender(c);
    /* The sender's last message completes before it closes: look once more before failing. */
    if (c->peer_gone) WEFT_CHECK(progress(c));
    if (!r->done && c->peer_gone) return peer_left(c, "the sender closed the connection");
    if (!r->done) return ncclSuccess;
  }
  if (sizes != NULL) {
    for (int i = 0; i < r->nbuf; i++) sizes[i] = c->is_send ? r->size : SIZE_MAX;
    if (!c->is_send) sizes[r->got_index] = r->got_size;
  }
  if (meta != NULL) *meta = c->is_send ? 0 : __atomic_load_n(&c->meta[r->seq % IB_SLOTS], __ATOMIC_RELAXED);
  weft_ib_req_release(r);
  *done = 1;
  return ncclSuccess;
}

#endif
