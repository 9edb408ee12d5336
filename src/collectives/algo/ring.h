/* Ring algorithm bodies for one channel, written once over the prims interface and compiled
 * by both executors. The includer first declares struct weft_prims and the weft_prims_*
 * functions (host: collectives/host/prims.h; CUDA: the kernel's prims).
 * Ring order is rank order: position r sends to r+1 and receives from r-1. */
#ifndef WEFT_COLLECTIVES_ALGO_RING_H
#define WEFT_COLLECTIVES_ALGO_RING_H

#include "collectives/dev_types.h"

WEFT_DEVICE_INLINE int weft_ring_mod(int x, int k) { return ((x % k) + k) % k; }

/* Block b of a loop of k blocks of bs elements starting at base: its first element and size. */
WEFT_DEVICE_INLINE size_t weft_ring_blk_n(size_t rem, size_t bs, int b) {
  size_t start = (size_t)b * bs;
  return start >= rem ? 0 : weft_min_sz(bs, rem - start);
}

/* AllReduce: reduce-scatter then all-gather over k blocks per loop of k chunks; each rank
 * finishes one block (recvReduceCopySend applies the post-op), which then travels the ring. */
WEFT_DEVICE_INLINE void weft_ring_allreduce(struct weft_prims* p, const struct weft_dev_work* w) {
  int k = w->nranks, r = w->rank;
  if (k == 1) {
    weft_prims_local(p, w->ch_offset, w->ch_offset, w->ch_count);
    return;
  }
  size_t loop = (size_t)k * w->chunk;
  for (size_t base = 0; base < w->ch_count && !weft_prims_failed(p); base += loop) {
    size_t rem = weft_min_sz(loop, w->ch_count - base);
    size_t bs = (rem + k - 1) / k, o = w->ch_offset + base;
    int b = weft_ring_mod(r - 1, k);
    weft_prims_send(p, o + b * bs, weft_ring_blk_n(rem, bs, b));
    for (int j = 2; j < k; j++) {
      b = weft_ring_mod(r - j, k);
      weft_prims_recv_reduce_send(p, o + b * bs, weft_ring_blk_n(rem, bs, b));
    }
    weft_prims_recv_reduce_copy_send(p, o + r * bs, o + r * bs, weft_ring_blk_n(rem, bs, r));
    for (int j = 1; j < k - 1; j++) {
      b = weft_ring_mod(r - j, k);
      weft_prims_recv_copy_send(p, o + b * bs, weft_ring_blk_n(rem, bs, b));
    }
    b = weft_ring_mod(r + 1, k);
    weft_prims_recv(p, o + b * bs, weft_ring_blk_n(rem, bs, b));
  }
}

/* AllGather: rank b's input lands at block b of the output; each block travels k-1 hops. */
WEFT_DEVICE_INLINE void weft_ring_allgather(struct weft_prims* p, const struct weft_dev_work* w) {
  int k = w->nranks, r = w->rank;
  for (size_t base = 0; base < w->ch_count && !weft_prims_failed(p); base += w->chunk) {
    size_t n = weft_min_sz(w->chunk, w->ch_count - base), o = w->ch_offset + base;
    if (k == 1) {
      weft_prims_local(p, o, o, n);
      continue;
    }
    weft_prims_copy_send(p, o, r * w->count + o, n);
    for (int j = 1; j < k - 1; j++) weft_prims_recv_copy_send(p, weft_ring_mod(r - j, k) * w->count + o, n);
    weft_prims_recv(p, weft_ring_mod(r + 1, k) * w->count + o, n);
  }
}

/* ReduceScatter: block b of every input is reduced along the ring and ends at rank b. */
WEFT_DEVICE_INLINE void weft_ring_reducescatter(struct weft_prims* p, const struct weft_dev_work* w) {
  int k = w->nranks, r = w->rank;
  for (size_t base = 0; base < w->ch_count && !weft_prims_failed(p); base += w->chunk) {
    size_t n = weft_min_sz(w->chunk, w->ch_count - base), o = w->ch_offset + base;
    if (k == 1) {
      weft_prims_local(p, o, o, n);
      continue;
    }
    weft_prims_send(p, weft_ring_mod(r - 1, k) * w->count + o, n);
    for (int j = 2; j < k; j++) weft_prims_recv_reduce_send(p, weft_ring_mod(r - j, k) * w->count + o, n);
    weft_prims_recv_reduce_copy(p, r * w->count + o, o, n);
  }
}

/* Broadcast, pipelined in chunks from the root around the ring; the rank before the root
 * only receives. */
WEFT_DEVICE_INLINE void weft_ring_broadcast(struct weft_prims* p, const struct weft_dev_work* w) {
  int k = w->nranks, r = w->rank;
  for (size_t base = 0; base < w->ch_count && !weft_prims_failed(p); base += w->chunk) {
    size_t n = weft_min_sz(w->chunk, w->ch_count - base), o = w->ch_offset + base;
    if (k == 1)
      weft_prims_local(p, o, o, n);
    else if (r == w->root)
      weft_prims_copy_send(p, o, o, n);
    else if (weft_ring_mod(r + 1, k) == w->root)
      weft_prims_recv(p, o, n);
    else
      weft_prims_recv_copy_send(p, o, n);
  }
}

/* Reduce: partial results flow from the rank after the root around to the root. */
WEFT_DEVICE_INLINE void weft_ring_reduce(struct weft_prims* p, const struct weft_dev_work* w) {
  int k = w->nranks, r = w->rank;
  for (size_t base = 0; base < w->ch_count && !weft_prims_failed(p); base += w->chunk) {
    size_t n = weft_min_sz(w->chunk, w->ch_count - base), o = w->ch_offset + base;
    if (k == 1)
      weft_prims_local(p, o, o, n);
    else if (r == w->root)
      weft_prims_recv_reduce_copy(p, o, o, n);
    else if (weft_ring_mod(r - 1, k) == w->root)
      weft_prims_send(p, o, n);
    else
      weft_prims_recv_reduce_send(p, o, n);
  }
}

#endif
