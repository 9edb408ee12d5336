/* Host prims over connectors. Simple: wait for a slot (tail for data, head for credit), move
 * the bytes, publish the counter with release order. LL: the sender writes flagged 8-byte words
 * and bumps tail only as a doorbell; the receiver trusts the flags, never the tail. */
#include "collectives/host/prims.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/host/interleave.h"
#include "collectives/host/reduce.h"
#include "collectives/host/step_tag.h"

int weft_conn_send_ready(struct weft_conn* c) {
  return __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE) + WEFT_NSTEPS > c->step;
}
int weft_conn_recv_ready(struct weft_conn* c) {
  return __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE) > c->step;
}
static int send_ready(void* arg) { return weft_conn_send_ready(arg); }
static int recv_ready(void* arg) { return weft_conn_recv_ready(arg); }

/* Block this thread, or, when channels are interleaved, let the others run until ready. */
static ncclResult_t wait_for(struct weft_prims* p, weft_ready_fn ready, void* arg, uint64_t* doorbell,
                             uint32_t* waiting, int peer, const char* what) {
  if (p->sched) return weft_host_sched_wait(p->sched, ready, arg, doorbell, waiting, peer, what);
  return weft_host_wait(p->waiter, ready, arg, doorbell, waiting, peer, p->channel, what);
}

/* LL's scratch (a slot's payload, unpacked or to pack) is kept per thread between operations: a
 * small LL call then allocates nothing (a malloc and a free of two buffers per channel and call
 * before). Interleaved channels of one thread each take their own. */
#define SCRATCH_KEEP 8
struct scratch_pool {
  int n;
  void* buf[SCRATCH_KEEP];
  size_t cap[SCRATCH_KEEP];
};
static pthread_key_t scratch_key;
static int scratch_key_ok;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_pool_free(void* arg) {
  struct scratch_pool* pool = arg;
  for (int i = 0; i < pool->n; i++) free(pool->buf[i]);
  free(pool);
}

static void scratch_key_make(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, scratch_pool_free) == 0;
}

static struct scratch_pool* scratch_pool(int create) {
  pthread_once(&scratch_once, scratch_key_make);
  if (!scratch_key_ok) return NULL;
  struct scratch_pool* pool = pthread_getspecific(scratch_key);
  if (pool == NULL && create && (pool = calloc(1, sizeof(*pool))) != NULL &&
      pthread_setspecific(scratch_key, pool) != 0) {
    free(pool);
    pool = NULL;
  }
  return pool;
}

static void* scratch_take(size_t bytes) {
  struct scratch_pool* pool = scratch_pool(0);
  for (int i = 0; pool && i < pool->n; i++)
    if (pool->cap[i] >= bytes) {
      void* b = pool->buf[i];
      pool->n--;
      pool->buf[i] = pool->buf[pool->n];
      pool->cap[i] = pool->cap[pool->n];
      return b;
    }
  return malloc(bytes);
}

static void scratch_give(void* buf, size_t bytes) {
  if (buf == NULL) return;
  struct scratch_pool* pool = scratch_pool(1);
  if (pool == NULL || pool->n == SCRATCH_KEEP) {
    free(buf);
    return;
  }
  pool->buf[pool->n] = buf;
  pool->cap[pool->n++] = bytes;
}

size_t weft_prims_max_chunk_bytes(int proto, size_t simple_slot, size_t ll_slot) {
  if (proto == WEFT_PROTO_LL) return ll_slot / sizeof(struct weft_ll_line) * WEFT_LL_LINE_DATA;
  return simple_slot;
}

ncclResult_t weft_prims_setup(struct weft_prims* p, struct weft_conn* send, struct weft_conn* recv,
                              struct weft_waiter* waiter, int channel, int proto, int dtype,
                              const struct weft_dev_redop* op, int reducing, const void* in, void* out) {
  memset(p, 0, sizeof(*p));
  p->send = send;
  p->recv = recv;
  p->waiter = waiter;
  p->channel = channel;
  p->proto = proto;
  p->dtype = dtype;
  p->esize = weft_dt_size(dtype);
  p->op = *op;
  p->reducing = reducing;
  p->in = in;
  p->out = out;
  p->by_ref = proto == WEFT_PROTO_SIMPLE && send != NULL && send->by_ref;
  if (proto == WEFT_PROTO_LL) {
    struct weft_conn* c = send ? send : recv;
    p->tmp_bytes = (c ? weft_prims_max_chunk_bytes(proto, 0, c->ll_slot) : 0) + 8;
    p->tmp_recv = scratch_take(p->tmp_bytes);
    p->tmp_send = scratch_take(p->tmp_bytes);
    if (p->tmp_recv == NULL || p->tmp_send == NULL) {
      weft_prims_teardown(p);
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

int weft_conn_sends_drained(void* conn) {
  struct weft_conn* c = conn;
  return __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE) >= c->step;
}

/* A step sent by reference still reads the user's buffer until the proxy has handed it to the
 * network (head passes it); the caller may reuse or free that buffer once this returns. */
ncclResult_t weft_prims_flush(struct weft_prims* p) {
  if (p->err != ncclSuccess || !p->refs_sent) return p->err;
  struct weft_conn* c = p->send;
  p->err = wait_for(p, weft_conn_sends_drained, c, &c->ctrl->head, &c->ctrl->head_waiting, c->peer,
                    "the network to send the last steps");
  return p->err;
}

void weft_prims_teardown(struct weft_prims* p) {
  scratch_give(p->tmp_recv, p->tmp_bytes);
  scratch_give(p->tmp_send, p->tmp_bytes);
  p->tmp_recv = p->tmp_send = NULL;
}

struct ll_wait {
  const struct weft_ll_line* line;
  uint32_t flag;
};
static int ll_line_ready(void* arg) {
  struct ll_wait* lw = arg;
  uint64_t a = __atomic_load_n(&lw->line->w[0], __ATOMIC_ACQUIRE);
  uint64_t b = __atomic_load_n(&lw->line->w[1], __ATOMIC_ACQUIRE);
  return (uint32_t)(a >> 32) == lw->flag && (uint32_t)(b >> 32) == lw->flag;
}

/* Wait for the next incoming step and return where its payload is readable. */
static const void* recv_begin(struct weft_prims* p, size_t bytes) {
  struct weft_conn* c = p->recv;
  if (p->proto == WEFT_PROTO_SIMPLE) {
    p->err = wait_for(p, recv_ready, c, &c->ctrl->tail, &c->ctrl->tail_waiting, c->peer,
                      "data from the previous rank");
    if (p->err == ncclSuccess) p->err = weft_step_tag_check(p->waiter, c);
    return p->err ? NULL : c->simple + (c->step % WEFT_NSTEPS) * c->simple_slot;
  }
  const struct weft_ll_line* lines =
      (const struct weft_ll_line*)((char*)c->ll + (c->step % WEFT_NSTEPS) * c->ll_slot);
  uint32_t flag = (uint32_t)(c->step + 1);
  uint32_t* dst = p->tmp_recv;
  for (size_t i = 0; i < (bytes + 7) / 8; i++) {
    struct ll_wait lw = {&lines[i], flag};
    if (!ll_line_ready(&lw)) {
      p->err = wait_for(p, ll_line_ready, &lw, &c->ctrl->tail, &c->ctrl->tail_waiting, c->peer,
                        "LL data from the previous rank");
      if (p->err) return NULL;
    }
    /* The first word seen is the step seen: its tag decides before the rest is awaited. */
    if (i == 0 && (p->err = weft_step_tag_check(p->waiter, c)) != ncclSuccess) return NULL;
    dst[2 * i] = (uint32_t)__atomic_load_n(&lines[i].w[0], __ATOMIC_RELAXED);
    dst[2 * i + 1] = (uint32_t)__atomic_load_n(&lines[i].w[1], __ATOMIC_RELAXED);
  }
  return p->tmp_recv;
}

static void recv_end(struct weft_prims* p) {
  struct weft_conn* c = p->recv;
  c->step++;
  weft_host_post(&c->ctrl->head, &c->ctrl->head_waiting, c->step);
}

/* Wait for a free slot toward the next rank; returns where to put the payload. */
static void* send_begin(struct weft_prims* p) {
  struct weft_conn* c = p->send;
  p->err = wait_for(p, send_ready, c, &c->ctrl->head, &c->ctrl->head_waiting, c->peer,
                    "a free slot at the next rank");
  if (p->err) return NULL;
  if (p->proto == WEFT_PROTO_LL) return p->tmp_send;
  return c->simple + (c->step % WEFT_NSTEPS) * c->simple_slot;
}

/* ref: the payload left where it lies (by_ref only), or NULL when it is in the slot. */
static void send_end(struct weft_prims* p, size_t bytes, const void* ref) {
  struct weft_conn* c = p->send;
  weft_step_tag_put(c, p->waiter->step_tag);
  if (p->proto == WEFT_PROTO_LL) {
    struct weft_ll_line* lines = (struct weft_ll_line*)((char*)c->ll + (c->step % WEFT_NSTEPS) * c->ll_slot);
    uint64_t flag = (uint64_t)(uint32_t)(c->step + 1) << 32;
    uint32_t* src = p->tmp_send;
    size_t nlines = (bytes + 7) / 8;
    if (bytes % 8) memset((char*)src + bytes, 0, 8 - bytes % 8);
    for (size_t i = 0; i < nlines; i++) {
      __atomic_store_n(&lines[i].w[0], flag | src[2 * i], __ATOMIC_RELAXED);
      __atomic_store_n(&lines[i].w[1], flag | src[2 * i + 1], __ATOMIC_RELAXED);
    }
  }
  weft_conn_note_step(c, bytes, p->proto == WEFT_PROTO_LL); /* for a network proxy */
  if (ref != NULL) {
    weft_conn_note_ref(c, ref);
    p->refs_sent = 1;
  }
  c->step++;
  weft_host_post(&c->ctrl->tail, &c->ctrl->tail_waiting, c->step);
}

enum { P_RECV = 1, P_SEND = 2, P_REDUCE = 4, P_COPY = 8 };

/* One step of any prim: receive and/or send one slot, combining with own input and output. */
static void prim(struct weft_prims* p, int flags, size_t in_off, size_t out_off, size_t n) {
  if (p->err != ncclSuccess || n == 0) return;
  size_t bytes = n * p->esize;
  const char* in = p->in + in_off * p->esize;
  char* out = p->out + out_off * p->esize;
  const void* r = NULL;
  void* s = NULL;
  if ((flags & P_RECV) && (r = recv_begin(p, bytes)) == NULL) return;
  if ((flags & P_SEND) && (s = send_begin(p)) == NULL) return;
  const struct weft_dev_redop* op = &p->op;
  /* by_ref: what goes out unchanged is not copied into the slot; the proxy sends it from here. */
  const void* ref = NULL;
  switch (flags) {
    case P_SEND: /* own input, pre-op applied, to the next rank */
      if (p->by_ref && !(p->reducing && op->kind == WEFT_RED_PREMULSUM))
        ref = in;
      else if (p->reducing)
        weft_host_preop(p->dtype, op, s, in, n);
      else
        memcpy(s, in, bytes);
      break;
    case P_SEND | P_COPY:
      if (out != in) memcpy(out, in, bytes);
      if (p->by_ref)
        ref = in;
      else
        memcpy(s, in, bytes);
      break;
    case P_RECV:
      memcpy(out, r, bytes);
      break;
    case P_RECV | P_SEND | P_COPY:
      memcpy(out, r, bytes);
      if (p->by_ref)
        ref = out;
      else
        memcpy(s, r, bytes);
      break;
    case P_RECV | P_SEND | P_REDUCE:
      weft_host_reduce(p->dtype, op, s, r, in, n);
      break;
    case P_RECV | P_REDUCE | P_COPY:
      weft_host_reduce(p->dtype, op, out, r, in, n);
      weft_host_postop(p->dtype, op, out, n);
      break;
    case P_RECV | P_SEND | P_REDUCE | P_COPY:
      weft_host_reduce(p->dtype, op, out, r, in, n);
      weft_host_postop(p->dtype, op, out, n);
      if (p->by_ref)
        ref = out;
      else
        memcpy(s, out, bytes);
      break;
  }
  if (flags & P_SEND) send_end(p, bytes, ref);
  if (flags & P_RECV) recv_end(p);
}

void weft_prims_send(struct weft_prims* p, size_t in_off, size_t n) { prim(p, P_SEND, in_off, 0, n); }
void weft_prims_copy_send(struct weft_prims* p, size_t in_off, size_t out_off, size_t n) {
  prim(p, P_SEND | P_COPY, in_off, out_off, n);
}
void weft_prims_recv(struct weft_prims* p, size_t out_off, size_t n) { prim(p, P_RECV, 0, out_off, n); }
void weft_prims_recv_copy_send(struct weft_prims* p, size_t out_off, size_t n) {
  prim(p, P_RECV | P_SEND | P_COPY, 0, out_off, n);
}
void weft_prims_recv_reduce_send(struct weft_prims* p, size_t in_off, size_t n) {
  prim(p, P_RECV | P_SEND | P_REDUCE, in_off, 0, n);
}
void weft_prims_recv_reduce_copy(struct weft_prims* p, size_t in_off, size_t out_off, size_t n) {
  prim(p, P_RECV | P_REDUCE | P_COPY, in_off, out_off, n);
}
void weft_prims_recv_reduce_copy_send(struct weft_prims* p, size_t in_off, size_t out_off, size_t n) {
  prim(p, P_RECV | P_SEND | P_REDUCE | P_COPY, in_off, out_off, n);
}

void weft_prims_local(struct weft_prims* p, size_t in_off, size_t out_off, size_t n) {
  if (p->err != ncclSuccess || n == 0) return;
  const char* in = p->in + in_off * p->esize;
  char* out = p->out + out_off * p->esize;
  if (!p->reducing) {
    if (out != in) memcpy(out, in, n * p->esize);
    return;
  }
  weft_host_preop(p->dtype, &p->op, out, in, n);
  weft_host_postop(p->dtype, &p->op, out, n);
}
