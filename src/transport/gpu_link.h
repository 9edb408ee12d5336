/* Connectors the CUDA kernel can use, whichever transport carries them: CUDA peer-to-peer
 * (device memory of the receiving GPU, transport/p2p.c), shared memory (a host segment both
 * processes map, registered with CUDA, for GPUs that cannot reach each other), or the network
 * (host FIFOs on both sides, registered with CUDA, moved by the proxy thread; transport/net.c).
 * The receiving side picks the transport and says which before the handshake of that transport
 * (transport/link.c for shared memory and the network). */
#ifndef WEFT_TRANSPORT_GPU_LINK_H
#define WEFT_TRANSPORT_GPU_LINK_H

#include <stddef.h>

#include "transport/link.h"
#include "transport/p2p.h"

enum weft_gpu_link { WEFT_GPU_LINK_P2P = 1, WEFT_GPU_LINK_SHM = 2, WEFT_GPU_LINK_NET = 3 };

struct weft_gpu_peer {
  struct weft_link_peer link; /* link.remote: on another host */
  int my_dev, peer_dev;       /* CUDA devices; ranks of one host are taken to number them alike */
  void* stream;               /* private setup stream (zeroing device memory) */
};

struct weft_gpu_mem {
  int link;                   /* enum weft_gpu_link */
  struct weft_p2p_mem* p2p;   /* P2P */
  struct weft_conn_mem* host; /* shared memory or network: host memory */
  int registered;             /* this process registered host with CUDA (and unregisters it) */
  char* base;                 /* device address of the control page; the FIFOs follow */
  size_t simple_bytes, ll_bytes;
};

/* The transport the receiving side offers: P2P within a device or between devices that can map
 * each other (unless NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC), else shared memory (unless
 * NCCL_SHM_DISABLE=1), else the network; always the network to another host. */
int weft_gpu_link_choose(const struct weft_gpu_peer* p);
const char* weft_gpu_link_name(int link);
ncclResult_t weft_gpu_link_offer(const struct weft_gpu_peer* p, int tag, size_t simple, size_t ll,
                                 struct weft_gpu_mem** out);
ncclResult_t weft_gpu_link_take(const struct weft_gpu_peer* p, int tag, int ack_tag,
                                struct weft_gpu_mem** out);
ncclResult_t weft_gpu_link_finish_offer(const struct weft_gpu_peer* p, int ack_tag, struct weft_gpu_mem* m);
/* Drop this side's use (no kernel may use it any more); NULL-safe. P2P memory shared with another
 * process has rules of its own at teardown (collectives/cuda/engine_cuda.c). */
void weft_gpu_link_release(struct weft_gpu_mem* m);

#endif
