/* Tree all-reduce body for one channel, written once over the tree prims interface (the
 * includer declares struct weft_tree_prims and the weft_tprims_* functions): partial sums flow
 * up from the leaves, the root finishes each chunk and sends it straight back down. The up
 * phase runs WEFT_TREE_LAG chunks ahead of the down phase, so both directions stay busy while
 * fewer chunks are in flight than a connector has slots. */
#ifndef WEFT_COLLECTIVES_ALGO_TREE_H
#define WEFT_COLLECTIVES_ALGO_TREE_H

#include "collectives/dev_types.h"

#define WEFT_TREE_LAG 4 /* < WEFT_NSTEPS, or a full FIFO could stall the pipeline */

WEFT_DEVICE_INLINE void weft_tree_allreduce(struct weft_tree_prims* p, const struct weft_dev_work* w) {
  int up = weft_tprims_has_up(p), down = weft_tprims_has_down(p);
  size_t nchunks = (w->ch_count + w->chunk - 1) / w->chunk;
  for (size_t j = 0; j < nchunks + WEFT_TREE_LAG && !weft_tprims_failed(p); j++) {
    if (j < nchunks) {
      size_t o = w->ch_offset + j * w->chunk, n = weft_min_sz(w->chunk, w->ch_count - j * w->chunk);
      if (!up && !down)
        weft_tprims_local(p, o, n);
      else if (!up)
        weft_tprims_recv_reduce_copy_send_down(p, o, n); /* root: the chunk is final here */
      else if (!down)
        weft_tprims_send_up(p, o, n);
      else
        weft_tprims_recv_reduce_send_up(p, o, n);
    }
    if (j >= WEFT_TREE_LAG && up) {
      size_t k = j - WEFT_TREE_LAG;
      if (k >= nchunks) continue;
      size_t o = w->ch_offset + k * w->chunk, n = weft_min_sz(w->chunk, w->ch_count - k * w->chunk);
      if (down)
        weft_tprims_recv_up_copy_send_down(p, o, n);
      else
        weft_tprims_recv_up(p, o, n);
    }
  }
}

#endif
