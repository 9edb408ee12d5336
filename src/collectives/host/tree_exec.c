/* Host tree prims: the operations algo/tree.h needs over a channel's parent and children
 * connectors (several receives reduced together, one result sent to several peers), with the
 * same Simple and LL slot formats and waits as the ring prims. */
#include <stdlib.h>
#include <string.h>

#include "collectives/dev_types.h"
#include "collectives/host/reduce.h"
#include "collectives/host/step_tag.h"
#include "collectives/host/wait.h"
#include "collectives/tree.h"

struct weft_tree_prims {
  struct weft_tree_channel* ch;
  struct weft_waiter* w;
  int channel, proto, dtype;
  size_t esize;
  struct weft_dev_redop op, op_acc; /* op_acc: combines partial results (no pre-multiplier) */
  const char* in;
  char* out;
  char *acc[2], *tmp; /* a chunk each; tmp: LL unpack/pack */
  ncclResult_t err;
};

static int send_ready(void* a) {
  struct weft_conn* c = a;
  return __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE) + WEFT_NSTEPS > c->step;
}
static int recv_ready(void* a) {
  struct weft_conn* c = a;
  return __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE) > c->step;
}
struct ll_wait {
  const struct weft_ll_line* line;
  uint32_t flag;
};
static int ll_ready(void* a) {
  struct ll_wait* lw = a;
  return (uint32_t)(__atomic_load_n(&lw->line->w[0], __ATOMIC_ACQUIRE) >> 32) == lw->flag &&
         (uint32_t)(__atomic_load_n(&lw->line->w[1], __ATOMIC_ACQUIRE) >> 32) == lw->flag;
}

/* The next step from c, readable at the returned pointer until recv_done. */
static const void* recv_data(struct weft_tree_prims* p, struct weft_conn* c, size_t bytes, const char* what) {
  if (p->err) return NULL;
  if (p->proto == WEFT_PROTO_SIMPLE) {
    p->err = weft_host_wait(p->w, recv_ready, c, &c->ctrl->tail, &c->ctrl->tail_waiting, c->peer, p->channel,
                            what);
    if (p->err == ncclSuccess) p->err = weft_step_tag_check(p->w, c);
    return p->err ? NULL : c->simple + (c->step % WEFT_NSTEPS) * c->simple_slot;
  }
  const struct weft_ll_line* lines =
      (const struct weft_ll_line*)((char*)c->ll + (c->step % WEFT_NSTEPS) * c->ll_slot);
  uint32_t* dst = (uint32_t*)p->tmp;
  struct ll_wait lw = {NULL, (uint32_t)(c->step + 1)};
  for (size_t i = 0; i < (bytes + 7) / 8; i++) {
    lw.line = &lines[i];
    if (!ll_ready(&lw) &&
        (p->err = weft_host_wait(p->w, ll_ready, &lw, &c->ctrl->tail, &c->ctrl->tail_waiting, c->peer,
                                 p->channel, what)) != ncclSuccess)
      return NULL;
    if (i == 0 && (p->err = weft_step_tag_check(p->w, c)) != ncclSuccess) return NULL; /* before the rest */
    dst[2 * i] = (uint32_t)__atomic_load_n(&lines[i].w[0], __ATOMIC_RELAXED);
    dst[2 * i + 1] = (uint32_t)__atomic_load_n(&lines[i].w[1], __ATOMIC_RELAXED);
  }
  return p->tmp;
}

static void recv_done(struct weft_conn* c) {
  c->step++;
  weft_host_post(&c->ctrl->head, &c->ctrl->head_waiting, c->step);
}

static void send_data(struct weft_tree_prims* p, struct weft_conn* c, const void* src, size_t bytes,
                      const char* what) {
  if (p->err) return;
  p->err =
      weft_host_wait(p->w, send_ready, c, &c->ctrl->head, &c->ctrl->head_waiting, c->peer, p->channel, what);
  if (p->err) return;
  weft_step_tag_put(c, p->w->step_tag); /* LL: before the flagged words */
  if (p->proto == WEFT_PROTO_SIMPLE) {
    memcpy(c->simple + (c->step % WEFT_NSTEPS) * c->simple_slot, src, bytes);
  } else {
    struct weft_ll_line* lines = (struct weft_ll_line*)((char*)c->ll + (c->step % WEFT_NSTEPS) * c->ll_slot);
    uint64_t flag = (uint64_t)(uint32_t)(c->step + 1) << 32;
    uint32_t* s = (uint32_t*)p->tmp;
    if (src != p->tmp) memcpy(s, src, bytes);
    if (bytes % 8) memset((char*)s + bytes, 0, 8 - bytes % 8);
    for (size_t i = 0; i < (bytes + 7) / 8; i++) {
      __atomic_store_n(&lines[i].w[0], flag | s[2 * i], __ATOMIC_RELAXED);
      __atomic_store_n(&lines[i].w[1], flag | s[2 * i + 1], __ATOMIC_RELAXED);
    }
  }
  weft_conn_note_step(c, bytes, p->proto == WEFT_PROTO_LL);
  c->step++;
  weft_host_post(&c->ctrl->tail, &c->ctrl->tail_waiting, c->step);
}

static int weft_tprims_has_up(const struct weft_tree_prims* p) { return p->ch->up >= 0; }
static int weft_tprims_has_down(const struct weft_tree_prims* p) { return p->ch->ndown > 0; }
static int weft_tprims_failed(const struct weft_tree_prims* p) { return p->err != ncclSuccess; }

/* Own input (pre-op applied) combined with every child's partial result; returns the buffer. */
static char* reduce_children(struct weft_tree_prims* p, size_t off, size_t n) {
  const char* own = p->in + off * p->esize;
  int cur = 0;
  for (int i = 0; i < p->ch->ndown; i++) {
    const void* r = recv_data(p, &p->ch->recv_down[i], n * p->esize, "partial results from a child");
    if (r == NULL) return NULL;
    if (i == 0)
      weft_host_reduce(p->dtype, &p->op, p->acc[0], r, own, n);
    else
      weft_host_reduce(p->dtype, &p->op_acc, p->acc[1 - cur], r, p->acc[cur], n), cur = 1 - cur;
    recv_done(&p->ch->recv_down[i]);
  }
  return p->acc[cur];
}

static void weft_tprims_local(struct weft_tree_prims* p, size_t off, size_t n) {
  weft_host_preop(p->dtype, &p->op, p->out + off * p->esize, p->in + off * p->esize, n);
  weft_host_postop(p->dtype, &p->op, p->out + off * p->esize, n);
}

static void weft_tprims_send_up(struct weft_tree_prims* p, size_t off, size_t n) {
  weft_host_preop(p->dtype, &p->op, p->acc[0], p->in + off * p->esize, n);
  send_data(p, &p->ch->send_up, p->acc[0], n * p->esize, "a free slot at the parent");
}

static void weft_tprims_recv_reduce_send_up(struct weft_tree_prims* p, size_t off, size_t n) {
  char* acc = reduce_children(p, off, n);
  if (acc) send_data(p, &p->ch->send_up, acc, n * p->esize, "a free slot at the parent");
}

static void send_down(struct weft_tree_prims* p, const char* src, size_t n) {
  for (int i = 0; i < p->ch->ndown; i++)
    send_data(p, &p->ch->send_down[i], src, n * p->esize, "a free slot at a child");
}

static void weft_tprims_recv_reduce_copy_send_down(struct weft_tree_prims* p, size_t off, size_t n) {
  char* acc = reduce_children(p, off, n);
  if (acc == NULL) return;
  char* out = p->out + off * p->esize;
  memcpy(out, acc, n * p->esize);
  weft_host_postop(p->dtype, &p->op, out, n);
  send_down(p, out, n);
}

static void weft_tprims_recv_up(struct weft_tree_prims* p, size_t off, size_t n) {
  const void* r = recv_data(p, &p->ch->recv_up, n * p->esize, "results from the parent");
  if (r == NULL) return;
  memcpy(p->out + off * p->esize, r, n * p->esize);
  recv_done(&p->ch->recv_up);
}

static void weft_tprims_recv_up_copy_send_down(struct weft_tree_prims* p, size_t off, size_t n) {
  weft_tprims_recv_up(p, off, n);
  if (!p->err) send_down(p, p->out + off * p->esize, n);
}

/* The body after the prims it calls. */
#include "collectives/algo/tree.h"

ncclResult_t weft_host_run_tree(const struct weft_dev_work* w, struct weft_tree_channel* ch,
                                struct weft_waiter* waiter, int channel, const void* in, void* out) {
  struct weft_tree_prims p = {.ch = ch,
                              .w = waiter,
                              .channel = channel,
                              .proto = w->proto,
                              .dtype = w->dtype,
                              .esize = weft_dt_size(w->dtype),
                              .op = w->op,
                              .op_acc = w->op,
                              .in = in,
                              .out = out};
  if (p.op_acc.kind == WEFT_RED_PREMULSUM) p.op_acc.kind = WEFT_RED_SUM;
  size_t bytes = w->chunk * p.esize + 16;
  p.acc[0] = malloc(bytes);
  p.acc[1] = malloc(bytes);
  p.tmp = malloc(bytes);
  if (p.acc[0] == NULL || p.acc[1] == NULL || p.tmp == NULL)
    p.err = ncclSystemError;
  else
    weft_tree_allreduce(&p, w);
  free(p.acc[0]);
  free(p.acc[1]);
  free(p.tmp);
  return p.err;
}
