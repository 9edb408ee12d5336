/* The transport seam: every connector of both executors is set up here. A table of transports in
 * NCCL's order of preference (P2P, SHM, NET); the receiving side walks it, takes the first that
 * can connect to the peer, offers memory it owns over it, and sends the transport's id with its
 * handle; the sending side takes it (maps it, or connects) and acknowledges; the offer is
 * finished (the segment unlinked, the connection accepted). */
#ifndef WEFT_TRANSPORT_TRANSPORT_H
#define WEFT_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "transport/connector.h"
#include "transport/net.h"
#include "transport/p2p.h"

/* Whether two GPUs of one host may go peer to peer: the topology model's verdict (core/topology.c,
 * by the path between them and NCCL_P2P_LEVEL), unknown without a model or when it lacks either
 * GPU; the CUDA executor makes unknown denied when NCCL_P2P_DISABLE or NCCL_P2P_LEVEL=LOC. */
enum weft_topo_p2p { WEFT_TOPO_P2P_UNKNOWN = 0, WEFT_TOPO_P2P_ALLOWED = 1, WEFT_TOPO_P2P_DENIED = 2 };

/* The other end of a connector and how to reach it. */
struct weft_link_peer {
  struct weft_net_peer net; /* bootstrap, both ranks, the peer's host, where errors go */
  int remote;               /* on another host: only the network reaches it */
  int same_process;         /* shared by address, not through a segment */
  int peer_pid;             /* for the WARN when mapping fails */
  /* For a CUDA kernel (the CUDA executor): host memory is mapped for the device, and P2P is
   * possible. Devices are this process's ordinals: the peer's device as this process numbers it
   * (found by its bus id), -1 when this process cannot see it (CUDA_VISIBLE_DEVICES). */
  int gpu;
  int my_dev, peer_dev;
  int same_device; /* the peer runs on this rank's GPU (same host, same bus id) */
  int topo_p2p;    /* enum weft_topo_p2p for this GPU and the peer's (unknown: ask the devices) */
  void* stream;    /* private setup stream (zeroing device memory) */
};

/* One side of one connector as its transport made it. */
struct weft_link_mem {
  const struct weft_transport_ops* tr;
  struct weft_conn_mem* host; /* SHM and NET: host memory, what host executors bind */
  struct weft_p2p_mem* p2p;   /* P2P: GPU memory */
  /* GPU connectors: the device address of the control page (the FIFOs follow) and their sizes. */
  char* base;
  size_t simple_bytes, ll_bytes;
  int registered; /* this process registered host with CUDA (and unregisters it) */
};

/* What the offering side sends, in one message: nothing reaches the peer before the offer is made,
 * so a rank that cannot make it fails with its own reason, not with its peer's closed socket. */
#define WEFT_TRANSPORT_HANDLE_BYTES 320
struct weft_transport_handle {
  int32_t id;                                         /* the transport's */
  _Alignas(8) char data[WEFT_TRANSPORT_HANDLE_BYTES]; /* transports cast it to their handle types */
};

struct weft_transport_ops {
  const char* name; /* "P2P", "SHM", "NET": in the log lines that say what a connector runs over */
  int id;           /* names it in the handle (the same on every rank) */
  /* Whether this transport reaches p from here; the first in the table that does is used. */
  int (*can_connect)(const struct weft_link_peer* p);
  /* Create the connector peer -> me (its memory is mine) and fill handle with what peer needs. */
  ncclResult_t (*offer)(const struct weft_link_peer* p, size_t simple, size_t ll, struct weft_link_mem* m,
                        void* handle);
  /* Attach the connector me -> peer that peer offered (its handle), then acknowledge on ack_tag. */
  ncclResult_t (*take)(const struct weft_link_peer* p, const void* handle, int ack_tag,
                       struct weft_link_mem* m);
  /* Wait for the acknowledgement; then nobody else may open the memory (or the connection is up). */
  ncclResult_t (*finish_offer)(const struct weft_link_peer* p, int ack_tag, struct weft_link_mem* m);
  /* Drop this side's use of what offer or take made (a half-made m too). */
  void (*release)(struct weft_link_mem* m);
};

/* The table, in order of preference; its last entry (the network) connects to anyone. */
extern const struct weft_transport_ops* const weft_transports[];
extern const int weft_ntransports;
extern const struct weft_transport_ops weft_transport_p2p; /* transport/gpu_link.c */
extern const struct weft_transport_ops weft_transport_shm;
extern const struct weft_transport_ops weft_transport_net;

/* The transport the receiving side offers to p: the first in the table that can connect. */
const struct weft_transport_ops* weft_transport_choose(const struct weft_link_peer* p);
/* The connector setup of both executors: offer (choose, offer over it, send the handle under
 * tag), take, and finish the offer, as the ops above; *out is NULL on failure. */
ncclResult_t weft_transport_offer(const struct weft_link_peer* p, int tag, size_t simple, size_t ll,
                                  struct weft_link_mem** out);
ncclResult_t weft_transport_take(const struct weft_link_peer* p, int tag, int ack_tag,
                                 struct weft_link_mem** out);
ncclResult_t weft_transport_finish_offer(const struct weft_link_peer* p, int ack_tag,
                                         struct weft_link_mem* m);
/* Drop this side's use (no executor may use it any more); NULL-safe. P2P memory shared with
 * another process has rules of its own at teardown (collectives/cuda/engine_cuda.c). */
void weft_transport_release(struct weft_link_mem* m);

/* For transports' take and finish_offer: tell the offering side whether taking worked (returns
 * res, or the send's error), and wait to hear it (ncclRemoteError when it did not). */
ncclResult_t weft_transport_ack(const struct weft_link_peer* p, int ack_tag, ncclResult_t res);
ncclResult_t weft_transport_wait_ack(const struct weft_link_peer* p, int ack_tag);

/* GPU connectors over host memory (SHM, NET): map it for the device, and unmap (gpu_link.c). */
ncclResult_t weft_gpu_link_map(struct weft_link_mem* m);
void weft_gpu_link_unmap(struct weft_link_mem* m);
/* GPUDirect RDMA for a NET connector of this GPU (how: the network's WEFT_NET_GPU_* bits): its
 * FIFOs move to this GPU's memory (m->host->fifo), where the NIC writes them (receive) or reads
 * them (send, NCCL_NET_GDR_READ). 1 when they did; 0 when this GPU, build or setting says no (INFO
 * says why): the FIFOs stay in host memory. */
int weft_gpu_link_gdr(const struct weft_link_peer* p, struct weft_link_mem* m, int how, int is_send);

#endif
