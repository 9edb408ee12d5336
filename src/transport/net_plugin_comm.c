/* Weft's messages over a plugin's comms. Weft's receives offer several buffers and the tag of
 * the arriving message picks one; a plugin's receive has one buffer per message, matched in
 * posting order. So every Weft message travels as two plugin messages: a 24-byte header (tag,
 * size, the step's call tag), then the payload (none when empty), which the receiver posts into
 * the buffer the tag picks once the header is in. Plugins match in order, so a receive comm has
 * at most one header posted ahead of the payloads; senders post header and payload back to back.
 * Memory is host memory, registered with regMr: the connector's buffers once, for the comm's
 * life (the proxy announces them; net_regcache.h keeps them), any other buffer for the one
 * request that uses it; and a receiving connector's FIFOs in GPU memory (GPUDirect RDMA), with
 * regMrDmaBuf or regMr of type NCCL_PTR_CUDA, once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net_plugin.h"
#include "transport/net_regcache.h"
#include "util/check.h"
#include "util/log.h"

#define HDR_MAGIC 0x57656674u /* "Weft" */

struct hdr {
  uint32_t magic;
  int32_t tag;
  uint64_t size;
  uint64_t meta; /* isend_meta's word: the step's call tag (collectives/host/step_tag.h), else 0 */
};

enum { R_FREE, R_NEW, R_HDR, R_DATA_POST, R_DATA, R_DONE };

struct preq {
  struct pcomm* c;
  int state, pick, n;
  int hdr_done, data_done;
  ncclResult_t err; /* receive: what moving it along failed with, reported by its test */
  struct hdr hdr;   /* in the comm's registered request array */
  void *hreq, *dreq;
  struct weft_net_kept* kept; /* a kept registration covering the payload, or NULL */
  void* oneshot;              /* mhandle registered for this request alone */
  void* bufs[WEFT_NET_MAX_RECVS];
  size_t caps[WEFT_NET_MAX_RECVS];
  int tags[WEFT_NET_MAX_RECVS];
  struct preq* next; /* receive: posting order */
};

struct pcomm {
  struct weft_plugin* p;
  void* comm;
  int is_send;
  void* reqs_mh; /* registration of reqs[] (the headers live there) */
  struct preq reqs[WEFT_NET_MAX_REQUESTS];
  struct preq* queue;            /* receive: requests not yet returned done, oldest first */
  struct preq* pending;          /* send: header posted, payload not yet */
  struct weft_net_regcache regs; /* the ranges kept registered */
};

struct plisten {
  struct weft_plugin* p;
  void* comm;
};

ncclResult_t weft_plugin_wrap_listen(struct weft_plugin* p, void* lc, void** out) {
  struct plisten* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    p->t->close_listen(lc);
    return ncclSystemError;
  }
  l->p = p;
  l->comm = lc;
  *out = l;
  return ncclSuccess;
}

ncclResult_t weft_plugin_close_listen(void* listen_comm) {
  struct plisten* l = listen_comm;
  if (l == NULL) return ncclSuccess;
  ncclResult_t res = l->p->t->close_listen(l->comm);
  free(l);
  return res;
}

static void close_plugin_comm(struct weft_plugin* p, void* comm, int is_send) {
  is_send ? p->t->close_send(comm) : p->t->close_recv(comm);
}

static ncclResult_t kept_reg(void* owner, void* data, size_t size, void** mh);
static ncclResult_t kept_reg_gpu(void* owner, void* data, size_t size, int dmabuf_fd, void** mh);
static void kept_dereg(void* owner, void* mh);

ncclResult_t weft_plugin_wrap_comm(struct weft_plugin* p, void* comm, int is_send, void** out) {
  struct pcomm* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    close_plugin_comm(p, comm, is_send);
    return ncclSystemError;
  }
  c->p = p;
  c->comm = comm;
  c->is_send = is_send;
  weft_net_regcache_init(&c->regs, c, kept_reg, kept_dereg);
  c->regs.reg_gpu = kept_reg_gpu;
  ncclResult_t res =
      weft_plugin_call_reg(p, comm, c->reqs, sizeof(c->reqs), WEFT_PLUGIN_PTR_HOST, &c->reqs_mh);
  if (res != ncclSuccess) {
    WEFT_WARN("NET/Plugin %s: regMr of %zu bytes of host memory failed: %s", p->t->name, sizeof(c->reqs),
              ncclGetErrorString(res));
    close_plugin_comm(p, comm, is_send);
    free(c);
    return res;
  }
  *out = c;
  return ncclSuccess;
}

ncclResult_t weft_plugin_accept(void* listen_comm, void** recv_comm) {
  struct plisten* l = listen_comm;
  void* rc = NULL;
  *recv_comm = NULL;
  ncclResult_t res = weft_plugin_call_accept(l->p, l->comm, &rc);
  if (res != ncclSuccess) {
    WEFT_WARN("NET/Plugin %s: accept failed: %s", l->p->t->name, ncclGetErrorString(res));
    return res;
  }
  return rc ? weft_plugin_wrap_comm(l->p, rc, 0, recv_comm) : ncclSuccess;
}

/* A failed plugin call is only an INFO here: the caller (the proxy) WARNs with the peer's rank
 * and host, and at teardown a peer that closed first is no error at all. */
static ncclResult_t said(struct pcomm* c, const char* what, ncclResult_t res) {
  if (res != ncclSuccess)
    WEFT_INFO(WEFT_NET, "NET/Plugin %s: %s on a %s comm failed: %s", c->p->t->name, what,
              c->is_send ? "send" : "receive", ncclGetErrorString(res));
  return res;
}

/* ---- Registrations ---- */
/* Ranges announced with weft_plugin_keep_registered stay registered until dropped or the comm
 * closes; anything else (a caller's buffer, sent in place) is registered for its request alone:
 * it may be freed and its addresses reused once the request is done, and a registration kept
 * past that would point the plugin at memory that is no longer it. */
ncclResult_t weft_plugin_keep_registered(void* comm, void* data, size_t size) {
  struct pcomm* c = comm;
  return weft_net_regcache_keep(&c->regs, data, size);
}

void weft_plugin_drop_registered(void* comm, void* data, size_t size) {
  struct pcomm* c = comm;
  weft_net_regcache_drop(&c->regs, data, size);
}

ncclResult_t weft_plugin_keep_registered_gpu(void* comm, void* data, size_t size, int dmabuf_fd) {
  struct pcomm* c = comm;
  return weft_net_regcache_keep_gpu(&c->regs, data, size, dmabuf_fd);
}

/* GPU memory (GPUDirect RDMA): a receiving connector's FIFOs, the whole range its DMA-BUF covers. */
static ncclResult_t kept_reg_gpu(void* owner, void* data, size_t size, int dmabuf_fd, void** mh) {
  struct pcomm* c = owner;
  ncclResult_t res = dmabuf_fd >= 0
                         ? c->p->t->reg_mr_dmabuf(c->comm, data, size, WEFT_PLUGIN_PTR_CUDA, 0, dmabuf_fd, mh)
                         : weft_plugin_call_reg(c->p, c->comm, data, size, WEFT_PLUGIN_PTR_CUDA, mh);
  if (res != ncclSuccess)
    WEFT_WARN("NET/Plugin %s: %s of %zu bytes of GPU memory at %p failed: %s", c->p->t->name,
              dmabuf_fd >= 0 ? "regMrDmaBuf" : "regMr", size, data, ncclGetErrorString(res));
  return res;
}

static ncclResult_t mr_reg(struct pcomm* c, void* data, size_t size, void** mh) {
  ncclResult_t res = weft_plugin_call_reg(c->p, c->comm, data, size, WEFT_PLUGIN_PTR_HOST, mh);
  if (res != ncclSuccess)
    WEFT_WARN("NET/Plugin %s: regMr of %zu bytes of host memory at %p failed: %s", c->p->t->name, size, data,
              ncclGetErrorString(res));
  return res;
}

static ncclResult_t kept_reg(void* owner, void* data, size_t size, void** mh) {
  return mr_reg(owner, data, size, mh);
}

static void kept_dereg(void* owner, void* mh) {
  struct pcomm* c = owner;
  c->p->t->dereg_mr(c->comm, mh);
}

static ncclResult_t mr_get(struct preq* r, void* data, size_t size) {
  struct pcomm* c = r->c;
  if ((r->kept = weft_net_regcache_find(&c->regs, data, size)) != NULL) return ncclSuccess;
  return mr_reg(c, data, size, &r->oneshot);
}

/* The registration a request's payload goes with (mr_get made it). */
static void* req_mh(const struct preq* r) { return r->kept ? r->kept->mh : r->oneshot; }

static void req_release(struct preq* r) {
  if (r->oneshot) r->c->p->t->dereg_mr(r->c->comm, r->oneshot);
  weft_net_regcache_release(&r->c->regs, r->kept);
  memset(r, 0, sizeof(*r));
}

static struct preq* req_alloc(struct pcomm* c) {
  for (int i = 0; i < WEFT_NET_MAX_REQUESTS; i++)
    if (c->reqs[i].state == R_FREE) {
      struct preq* r = &c->reqs[i];
      memset(r, 0, sizeof(*r));
      r->c = c;
      r->state = R_NEW;
      return r;
    }
  return NULL;
}

/* ---- Send ---- */
static ncclResult_t post_payload(struct preq* r, void* data) {
  struct pcomm* c = r->c;
  if (req_mh(r) == NULL) WEFT_CHECK(mr_get(r, data, r->hdr.size));
  WEFT_CHECK(said(c, "isend", weft_plugin_call_isend(c->p, c->comm, data, r->hdr.size, req_mh(r), &r->dreq)));
  if (r->dreq) r->state = R_DATA;
  return ncclSuccess;
}

/* The payload a full plugin left unposted goes before anything else on this comm. */
static ncclResult_t flush_pending(struct pcomm* c) {
  struct preq* r = c->pending;
  if (r == NULL) return ncclSuccess;
  WEFT_CHECK(post_payload(r, r->bufs[0]));
  if (r->state == R_DATA) c->pending = NULL;
  return ncclSuccess;
}

ncclResult_t weft_plugin_isend_meta(void* send_comm, const void* data, size_t size, int tag, uint64_t meta,
                                    void** request) {
  struct pcomm* c = send_comm;
  *request = NULL;
  WEFT_CHECK(flush_pending(c));
  struct preq* r = c->pending ? NULL : req_alloc(c);
  if (r == NULL) return ncclSuccess; /* try again later */
  r->hdr = (struct hdr){HDR_MAGIC, tag, size, meta};
  r->bufs[0] = (void*)data;
  ncclResult_t res =
      said(c, "isend", weft_plugin_call_isend(c->p, c->comm, &r->hdr, sizeof(r->hdr), c->reqs_mh, &r->hreq));
  if (res != ncclSuccess || r->hreq == NULL) {
    req_release(r);
    return res;
  }
  r->state = R_DATA_POST;
  *request = r;
  if (size == 0) {
    r->state = R_DATA;
    r->data_done = 1;
    return ncclSuccess;
  }
  res = post_payload(r, (void*)data);
  if (res == ncclSuccess && r->state != R_DATA) c->pending = r;
  return res;
}

ncclResult_t weft_plugin_isend(void* send_comm, const void* data, size_t size, int tag, void** request) {
  return weft_plugin_isend_meta(send_comm, data, size, tag, 0, request);
}

/* Test a plugin request once; a done one is gone from the plugin, so never again. */
static ncclResult_t test_once(struct pcomm* c, void* req, int* done, int* size) {
  if (*done) return ncclSuccess;
  return said(c, "test", c->p->t->test(req, done, size));
}

static ncclResult_t test_send(struct preq* r, int* done, size_t* sizes) {
  struct pcomm* c = r->c;
  int got = 0;
  WEFT_CHECK(flush_pending(c));
  WEFT_CHECK(test_once(c, r->hreq, &r->hdr_done, &got));
  if (r->state == R_DATA) WEFT_CHECK(test_once(c, r->dreq, &r->data_done, &got));
  if (!r->hdr_done || !r->data_done) return ncclSuccess;
  if (sizes) sizes[0] = r->hdr.size;
  req_release(r);
  *done = 1;
  return ncclSuccess;
}

/* ---- Receive ---- */
/* Which offered buffer the header's tag picks, after checking the header. */
static ncclResult_t pick_buffer(struct preq* r, int got) {
  struct pcomm* c = r->c;
  if (got != (int)sizeof(r->hdr) || r->hdr.magic != HDR_MAGIC) {
    WEFT_WARN(
        "NET/Plugin %s: a message header of %d bytes (magic 0x%x) is not Weft's: is the peer using the same "
        "network?",
        c->p->t->name, got, (unsigned)r->hdr.magic);
    return ncclRemoteError;
  }
  for (int i = 0; i < r->n; i++)
    if (r->tags[i] == r->hdr.tag) {
      if (r->hdr.size > r->caps[i]) {
        WEFT_WARN(
            "NET/Plugin %s: a message of %llu bytes with tag %d exceeds the %zu-byte buffer offered for it",
            c->p->t->name, (unsigned long long)r->hdr.size, r->hdr.tag, r->caps[i]);
        return ncclRemoteError;
      }
      r->pick = i;
      r->state = r->hdr.size ? R_DATA_POST : R_DONE;
      return ncclSuccess;
    }
  WEFT_WARN("NET/Plugin %s: a message arrived with tag %d, which no buffer of the receive offers",
            c->p->t->name, r->hdr.tag);
  return ncclRemoteError;
}

/* Move one receive along; ncclSuccess with r->state unchanged when it has to wait. */
static ncclResult_t recv_step(struct pcomm* c, struct preq* r) {
  if (r->state == R_NEW) {
    WEFT_CHECK(said(c, "irecv",
                    weft_plugin_call_irecv(c->p, c->comm, &r->hdr, sizeof(r->hdr), c->reqs_mh, &r->hreq)));
    if (r->hreq == NULL) return ncclSuccess;
    r->state = R_HDR;
  }
  if (r->state == R_HDR) {
    int got = 0;
    WEFT_CHECK(test_once(c, r->hreq, &r->hdr_done, &got));
    if (!r->hdr_done) return ncclSuccess;
    WEFT_CHECK(pick_buffer(r, got));
  }
  if (r->state == R_DATA_POST) {
    void* buf = r->bufs[r->pick];
    if (req_mh(r) == NULL) WEFT_CHECK(mr_get(r, buf, r->hdr.size));
    WEFT_CHECK(
        said(c, "irecv", weft_plugin_call_irecv(c->p, c->comm, buf, r->hdr.size, req_mh(r), &r->dreq)));
    if (r->dreq != NULL) r->state = R_DATA;
  }
  return ncclSuccess;
}

/* Move the queued receives along in posting order; it stops at the first that cannot move, so
 * the plugin sees header, payload, header, payload... in the order the sender sent them. A
 * failure belongs to the receive it hit: an earlier one (the goodbye before the peer's EOF)
 * still completes. */
static void recv_advance(struct pcomm* c) {
  for (struct preq* r = c->queue; r; r = r->next) {
    if (r->err != ncclSuccess) return;
    if ((r->err = recv_step(c, r)) != ncclSuccess) return;
    if (r->state != R_DATA && r->state != R_DONE) return; /* waits: so do the later ones */
  }
}

ncclResult_t weft_plugin_irecv(void* recv_comm, int n, void* const* data, const size_t* sizes,
                               const int* tags, void** request) {
  struct pcomm* c = recv_comm;
  *request = NULL;
  if (n < 1 || n > WEFT_NET_MAX_RECVS) {
    WEFT_WARN("NET/Plugin %s: irecv of %d buffers (1 to %d)", c->p->t->name, n, WEFT_NET_MAX_RECVS);
    return ncclInvalidArgument;
  }
  struct preq* r = req_alloc(c);
  if (r == NULL) return ncclSuccess;
  r->n = n;
  for (int i = 0; i < n; i++) {
    r->bufs[i] = data[i];
    r->caps[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  struct preq** tail = &c->queue;
  while (*tail) tail = &(*tail)->next;
  *tail = r;
  *request = r;
  recv_advance(c);
  return ncclSuccess;
}

static ncclResult_t test_recv(struct preq* r, int* done, size_t* sizes, uint64_t* meta) {
  struct pcomm* c = r->c;
  recv_advance(c);
  if (r->err != ncclSuccess) return r->err;
  if (r->state == R_DATA) {
    int got = 0;
    WEFT_CHECK(test_once(c, r->dreq, &r->data_done, &got));
    if (!r->data_done) return ncclSuccess;
    if ((uint64_t)got != r->hdr.size) {
      WEFT_WARN("NET/Plugin %s: %d bytes arrived where the header announced %llu", c->p->t->name, got,
                (unsigned long long)r->hdr.size);
      return ncclRemoteError;
    }
    r->state = R_DONE;
  }
  if (r->state != R_DONE) return ncclSuccess;
  for (int i = 0; sizes && i < r->n; i++) sizes[i] = i == r->pick ? r->hdr.size : SIZE_MAX;
  if (meta) *meta = r->hdr.meta;
  for (struct preq** pp = &c->queue; *pp; pp = &(*pp)->next)
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  req_release(r);
  *done = 1;
  return ncclSuccess;
}

ncclResult_t weft_plugin_test_meta(void* request, int* done, size_t* sizes, uint64_t* meta) {
  struct preq* r = request;
  *done = 0;
  if (meta) *meta = 0;
  if (r == NULL || r->state == R_FREE) {
    WEFT_WARN("NET/Plugin: test of a request that is not in flight (%p)", request);
    return ncclInvalidArgument;
  }
  return r->c->is_send ? test_send(r, done, sizes) : test_recv(r, done, sizes, meta);
}

ncclResult_t weft_plugin_test(void* request, int* done, size_t* sizes) {
  return weft_plugin_test_meta(request, done, sizes, NULL);
}

/* Registrations go before the comm they belong to. */
static ncclResult_t close_comm(struct pcomm* c) {
  if (c == NULL) return ncclSuccess;
  for (int i = 0; i < WEFT_NET_MAX_REQUESTS; i++)
    if (c->reqs[i].oneshot) c->p->t->dereg_mr(c->comm, c->reqs[i].oneshot);
  weft_net_regcache_fini(&c->regs);
  if (c->reqs_mh) c->p->t->dereg_mr(c->comm, c->reqs_mh);
  ncclResult_t res = c->is_send ? c->p->t->close_send(c->comm) : c->p->t->close_recv(c->comm);
  free(c);
  return res;
}
ncclResult_t weft_plugin_close_send(void* send_comm) { return close_comm(send_comm); }
ncclResult_t weft_plugin_close_recv(void* recv_comm) { return close_comm(recv_comm); }
