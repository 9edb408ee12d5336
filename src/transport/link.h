/* Connector setup between two ranks, the one path both executors take: the receiving side
 * offers memory it owns (a shared-memory segment, process memory, or a network FIFO with its
 * listener), the sending side takes it (maps it, or connects) and acknowledges, and the offer is
 * finished (the segment unlinked, the connection accepted). The CUDA backend's connectors that
 * are not CUDA peer-to-peer go through here too (transport/gpu_link.c). */
#ifndef WEFT_TRANSPORT_LINK_H
#define WEFT_TRANSPORT_LINK_H

#include <stddef.h>

#include "transport/connector.h"
#include "transport/net.h"

/* The other end of a connector and how to reach it. */
struct weft_link_peer {
  struct weft_net_peer net; /* bootstrap, both ranks, the peer's host, where errors go */
  int remote;               /* through the network (another host, or no shared memory) */
  int same_process;         /* shared by address, not through a segment */
  int peer_pid;             /* for the WARN when mapping fails */
};

/* Create the connector peer -> me (its memory is mine) and send peer the handle under tag. */
ncclResult_t weft_link_offer(const struct weft_link_peer* p, int tag, size_t simple, size_t ll,
                             struct weft_conn_mem** mem);
/* Attach the connector me -> peer that peer offered, then acknowledge on ack_tag. */
ncclResult_t weft_link_take(const struct weft_link_peer* p, int tag, int ack_tag, struct weft_conn_mem** mem);
/* Wait for the acknowledgement; then nobody else may open the memory (or the connection is up). */
ncclResult_t weft_link_finish_offer(const struct weft_link_peer* p, int ack_tag, struct weft_conn_mem* mem);

#endif
