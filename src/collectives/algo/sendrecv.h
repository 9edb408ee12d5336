/* Point-to-point bodies: a send or a receive of `count` elements in chunks over one
 * connector. Written over the prims interface like ring.h (the includer declares the prims).
 * The host executor progresses many of these at once without blocking (host/p2p.c) and so
 * uses the same chunking, weft_p2p_chunk_n, rather than these blocking loops. */
#ifndef WEFT_COLLECTIVES_ALGO_SENDRECV_H
#define WEFT_COLLECTIVES_ALGO_SENDRECV_H

#include "collectives/dev_types.h"

/* Elements of step i of a transfer of count elements in chunks of chunk. */
WEFT_DEVICE_INLINE size_t weft_p2p_chunk_n(size_t count, size_t chunk, size_t i) {
  size_t start = i * chunk;
  return start >= count ? 0 : weft_min_sz(chunk, count - start);
}

WEFT_DEVICE_INLINE void weft_p2p_send(struct weft_prims* p, size_t count, size_t chunk) {
  for (size_t o = 0; o < count && !weft_prims_failed(p); o += chunk)
    weft_prims_send(p, o, weft_min_sz(chunk, count - o));
}

WEFT_DEVICE_INLINE void weft_p2p_recv(struct weft_prims* p, size_t count, size_t chunk) {
  for (size_t o = 0; o < count && !weft_prims_failed(p); o += chunk)
    weft_prims_recv(p, o, weft_min_sz(chunk, count - o));
}

#endif
