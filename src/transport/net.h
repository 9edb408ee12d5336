/* The network interface, modelled on NCCL's net plugin API: devices, listen/connect/accept,
 * non-blocking isend/irecv/test and close. The socket network implements it; InfiniBand and
 * external plugins plug in through the same table. Also: network connectors for the engine. */
#ifndef WEFT_TRANSPORT_NET_H
#define WEFT_TRANSPORT_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* What listen fills and connect reads; travels over the bootstrap. 128 bytes: as much as an
 * NCCL net plugin may use (NCCL_NET_HANDLE_MAXSIZE). The socket network's part is the first 64
 * bytes: the IB network adds its own after it. */
#define WEFT_NET_HANDLE_BYTES 128
#define WEFT_NET_SOCKET_HANDLE_BYTES 64
#define WEFT_NET_MAX_RECVS 4     /* buffers one irecv may offer (the message's tag picks one) */
#define WEFT_NET_MAX_REQUESTS 32 /* requests in flight per comm; isend/irecv give NULL beyond */

struct weft_auth_key;

struct weft_net_props {
  char name[64];  /* interface name */
  char addr[64];  /* its address, printable */
  int speed_mbps; /* link speed, 0 when unknown */
  int latency_us;
  int max_comms;
};

/* Every call returns at once. connect and accept leave *comm NULL until the connection is
 * complete (call again); isend and irecv leave *request NULL when no request slot is free.
 * A message sent with tag t lands in the irecv buffer whose tags[i] == t; test reports its
 * size in sizes[i] and SIZE_MAX in the other entries (isend: sizes[0] = bytes sent). */
struct weft_net_ops {
  const char* name;
  ncclResult_t (*init)(void);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct weft_net_props* props);
  /* key: what every connection proves (the communicator's, weft_bootstrap_key); NULL: the public
   * key, for tests of a network alone. It never goes into the handle. */
  ncclResult_t (*listen)(int dev, const struct weft_auth_key* key, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, const struct weft_auth_key* key, void* handle,
                          void** send_comm); /* keeps its progress in handle */
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm);
  ncclResult_t (*isend)(void* send_comm, const void* data, size_t size, int tag, void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void* const* data, const size_t* sizes, const int* tags,
                        void** request);
  ncclResult_t (*test)(void* request, int* done, size_t* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  /* Optional (NULL: nothing to do): [data, data+size) stays allocated while comm is open (or
   * until drop_registered) and many transfers will use it, so a network that registers memory
   * may do so once (IB, plugins; transport/net_regcache.h). Any other buffer is registered for
   * the one request that uses it. */
  ncclResult_t (*keep_registered)(void* comm, void* data, size_t size);
  /* Optional, with keep_registered: the range's lifetime ends before the comm's; its
   * registration goes once no request in flight uses it. Closing the comm drops every range. */
  void (*drop_registered)(void* comm, void* data, size_t size);
  /* Optional (NULL: steps over this network carry no call tag and go unchecked; every built-in
   * network and the plugin adapter, which carries it in its header, have it):
   * isend with 64 bits of metadata (a step's call tag) that the receiving request gives back in
   * test_meta, which is test with that value (0 for sends, and for receives of plain isends). */
  ncclResult_t (*isend_meta)(void* send_comm, const void* data, size_t size, int tag, uint64_t meta,
                             void** request);
  ncclResult_t (*test_meta)(void* request, int* done, size_t* sizes, uint64_t* meta);
  /* Optional (NULL: host memory only): how device dev can reach GPU memory directly (GPUDirect
   * RDMA): WEFT_NET_GPU_DMABUF, WEFT_NET_GPU_PEERMEM, or both (bits); 0 when it cannot. */
  int (*gpu_direct)(int dev);
  /* With gpu_direct: keep_registered for GPU memory. dmabuf_fd is a DMA-BUF of exactly [data,
   * data+size) (the caller closes it), or -1: peer memory, registered by its address. Dropped
   * with drop_registered. */
  ncclResult_t (*keep_registered_gpu)(void* comm, void* data, size_t size, int dmabuf_fd);
};
#define WEFT_NET_GPU_DMABUF 1  /* registers a DMA-BUF of GPU memory (ibv_reg_dmabuf_mr) */
#define WEFT_NET_GPU_PEERMEM 2 /* registers GPU addresses as they are (nvidia-peermem) */

extern const struct weft_net_ops weft_net_socket_ops;
extern const struct weft_net_ops weft_net_ib_ops; /* InfiniBand / RoCE verbs (net_ib.c) */

/* The network selected by NCCL_NET among the plugins NCCL_NET_PLUGIN loads, then the built-ins
 * ("IB", then "Socket"); the first one usable when unset. Chosen once per process. */
ncclResult_t weft_net_get(const struct weft_net_ops** out);

/* ---- Network connectors (engine side) ---- */
struct weft_bootstrap;
struct weft_conn_mem;
struct weft_cause;

/* The network devices a rank's connectors leave through: the ones nearest the rank by the
 * topology (NCCL's local NICs), taken in turn by the ranks that share them (rails), and by
 * channel when they outnumber those ranks. n == 0: the topology placed none; every device of the
 * network is then equally near, rail and sharers being the rank's place among its host's ranks. */
#define WEFT_NET_MAX_NEAR 16
struct weft_net_near {
  int n;
  int dev[WEFT_NET_MAX_NEAR];
  int rail, sharers;
  /* GPUDirect RDMA as the topology allows it (NCCL_NET_GDR_LEVEL, the GPU's and the NIC's gdr):
   * bit i for dev[i]; gdr_unplaced for every device when the topology placed none (n == 0), as
   * NICs hung under the CPU (path PHB). */
  uint32_t gdr;
  int gdr_unplaced;
};
/* The device channel's connectors use, of the network's ndev: dev[(rail * spread + channel %
 * spread) % n] with spread = ceil(n / sharers), so ranks sharing NICs take one each (or a share of
 * as many), and a rank's channels spread over its share. */
int weft_net_near_dev(const struct weft_net_near* near, int ndev, int channel);
/* Whether the topology lets the GPU of near's rank and device dev (of those near placed, or any
 * when it placed none) use GPUDirect RDMA. */
int weft_net_near_gdr(const struct weft_net_near* near, int dev);

/* Who is at the other end of a connector, and where errors go. */
struct weft_net_peer {
  struct weft_bootstrap* bootstrap;
  int rank, peer;
  const char* peer_host;
  volatile uint32_t* abort_flag;
  volatile ncclResult_t* async_result;
  struct weft_cause* cause;         /* the communicator's record of the rank lost first */
  const struct weft_net_near* near; /* NULL: the network's first device */
  int channel;                      /* of the connector (point-to-point: 0) */
};

/* The receiving side creates the connector memory and a listener and fills handle (what
 * transport/transport.c sends the peer); the sending side takes it (connects, acknowledges on
 * ack_tag); then the receiving side finishes (accepts). Both connectors are then driven by the
 * proxy thread. */
ncclResult_t weft_net_offer(const struct weft_net_peer* p, size_t simple, size_t ll,
                            struct weft_conn_mem** mem, void* handle);
/* before_proxy, when not NULL, is called with the sending side's connector memory once it is
 * made and connected, before the proxy registers it and starts (where its FIFOs may move to GPU
 * memory). */
typedef void (*weft_net_before_proxy_fn)(const void* arg, struct weft_conn_mem* mem);
ncclResult_t weft_net_take(const struct weft_net_peer* p, const void* handle, int ack_tag,
                           struct weft_conn_mem** mem, weft_net_before_proxy_fn before_proxy,
                           const void* arg);
ncclResult_t weft_net_finish_offer(const struct weft_net_peer* p, int ack_tag, struct weft_conn_mem* mem);

/* How either side of p's connector may keep its FIFOs in GPU memory (WEFT_NET_GPU_* bits of the
 * network's device for it), 0 when the topology (NCCL_NET_GDR_LEVEL) or the network says no. The
 * GPU's side (transport/gpu_link.c) decides the rest. */
int weft_net_gpu_direct(const struct weft_net_peer* p);

struct weft_proxy_conn;
/* The proxy connection that drives a network connector, NULL for any other (profiler watches). */
struct weft_proxy_conn* weft_net_proxy_conn(const struct weft_conn_mem* mem);

#endif
