/* CUDA tree prims: what collectives/algo/tree.h needs (several children reduced together, one
 * result sent to several peers), built from the ring prims' single-send, single-receive steps by
 * swapping a channel's tree connectors in and out of them. Children's partial results are folded
 * into the output buffer one at a time (own input, pre-op applied, with the first child's; then
 * the others with the partial so far), and the result goes to each child in turn. */
#ifndef WEFT_COLLECTIVES_CUDA_TREE_DEV_CUH
#define WEFT_COLLECTIVES_CUDA_TREE_DEV_CUH

#include "collectives/cuda/prims_dev.cuh"

struct weft_tree_prims {
  struct weft_prims p;                      /* the step engine; its send and recv are the connectors in use */
  struct weft_cuda_conn c[WEFT_TREE_CONNS]; /* this channel's connectors, steps advancing here */
  int tag[WEFT_TREE_CONNS];                 /* the call's first step on that connector is to come */
  int peer[WEFT_TREE_CONNS];
  int up, ndown;
  const char* in; /* the call's input (the prims' input switches to the output to fold) */
  struct weft_dev_redop op;
};

enum { TP_NONE = -1 };
/* A step's input: the call's own, or the partial result folded so far in the output. */
enum { TP_OWN = 0, TP_PARTIAL = 1 };

/* One step of the ring prims over connectors s and r (TP_NONE: not used). A step on the partial
 * result combines with the base op (PreMulSum's multiplier was applied once, to own input);
 * only the root's last step (final) divides for an average. */
__device__ __noinline__ void weft_tp_step(struct weft_tree_prims* t, int s, int r, int flags, int input,
                                          int final, size_t off, size_t n) {
  struct weft_prims* p = &t->p;
  if (p->failed) return;
  if (s != TP_NONE) p->send = t->c[s], p->tag_send = t->tag[s], p->send_peer = t->peer[s];
  if (r != TP_NONE) p->recv = t->c[r], p->tag_recv = t->tag[r], p->recv_peer = t->peer[r];
  p->in = input == TP_PARTIAL ? p->out : t->in;
  p->op = t->op;
  if (input == TP_PARTIAL && p->op.kind == WEFT_RED_PREMULSUM) p->op.kind = WEFT_RED_SUM;
  if (!final) p->op.divisor = 1;
  weft_prim(p, flags, off, off, n);
  if (s != TP_NONE) t->c[s] = p->send, t->tag[s] = p->tag_send;
  if (r != TP_NONE) t->c[r] = p->recv, t->tag[r] = p->tag_recv;
}

__device__ __forceinline__ int weft_tprims_has_up(const struct weft_tree_prims* t) { return t->up >= 0; }
__device__ __forceinline__ int weft_tprims_has_down(const struct weft_tree_prims* t) { return t->ndown > 0; }
__device__ __forceinline__ int weft_tprims_failed(const struct weft_tree_prims* t) { return t->p.failed; }

__device__ __forceinline__ int tp_send_down(int i) { return WEFT_TREE_DOWN + 2 * i; }
__device__ __forceinline__ int tp_recv_down(int i) { return WEFT_TREE_DOWN + 2 * i + 1; }

__device__ __forceinline__ void weft_tprims_local(struct weft_tree_prims* t, size_t off, size_t n) {
  t->p.in = t->in;
  t->p.op = t->op;
  weft_prims_local(&t->p, off, off, n);
}

__device__ __forceinline__ void weft_tprims_send_up(struct weft_tree_prims* t, size_t off, size_t n) {
  weft_tp_step(t, WEFT_TREE_UP_SEND, TP_NONE, WEFT_P_SEND, TP_OWN, 0, off, n);
}

/* Every child but the last folded into the output (own input with the first). */
__device__ __forceinline__ void tp_fold_children(struct weft_tree_prims* t, size_t off, size_t n) {
  for (int i = 0; i + 1 < t->ndown; i++)
    weft_tp_step(t, TP_NONE, tp_recv_down(i), WEFT_P_RECV | WEFT_P_REDUCE | WEFT_P_COPY,
                 i == 0 ? TP_OWN : TP_PARTIAL, 0, off, n);
}

__device__ __forceinline__ void weft_tprims_recv_reduce_send_up(struct weft_tree_prims* t, size_t off,
                                                                size_t n) {
  tp_fold_children(t, off, n);
  weft_tp_step(t, WEFT_TREE_UP_SEND, tp_recv_down(t->ndown - 1), WEFT_P_RECV | WEFT_P_SEND | WEFT_P_REDUCE,
               t->ndown > 1 ? TP_PARTIAL : TP_OWN, 0, off, n);
}

/* The output, final now, to children 1.. (child 0 got it with the step that made it). */
__device__ __forceinline__ void tp_send_rest_down(struct weft_tree_prims* t, size_t off, size_t n) {
  for (int i = 1; i < t->ndown; i++)
    weft_tp_step(t, tp_send_down(i), TP_NONE, WEFT_P_SEND | WEFT_P_COPY, TP_PARTIAL, 0, off, n);
}

/* Root: the last child's partial completes the chunk, post-op and all, into the output and to
 * child 0, then to the others. */
__device__ __forceinline__ void weft_tprims_recv_reduce_copy_send_down(struct weft_tree_prims* t, size_t off,
                                                                       size_t n) {
  tp_fold_children(t, off, n);
  weft_tp_step(t, tp_send_down(0), tp_recv_down(t->ndown - 1),
               WEFT_P_RECV | WEFT_P_SEND | WEFT_P_REDUCE | WEFT_P_COPY, t->ndown > 1 ? TP_PARTIAL : TP_OWN, 1,
               off, n);
  tp_send_rest_down(t, off, n);
}

__device__ __forceinline__ void weft_tprims_recv_up(struct weft_tree_prims* t, size_t off, size_t n) {
  weft_tp_step(t, TP_NONE, WEFT_TREE_UP_RECV, WEFT_P_RECV, TP_OWN, 0, off, n);
}

__device__ __forceinline__ void weft_tprims_recv_up_copy_send_down(struct weft_tree_prims* t, size_t off,
                                                                   size_t n) {
  weft_tp_step(t, tp_send_down(0), WEFT_TREE_UP_RECV, WEFT_P_RECV | WEFT_P_SEND | WEFT_P_COPY, TP_OWN, 0, off,
               n);
  tp_send_rest_down(t, off, n);
}

#endif
