/* Peer information exchanged at communicator init. */
#ifndef WEFT_CORE_PEERS_H
#define WEFT_CORE_PEERS_H

#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"

uint64_t weft_hash_bytes(const void* data, size_t size, uint64_t seed);
void weft_peer_info_fill(const struct ncclComm* comm, struct weft_peer_info* info);
/* All-gather peer info over the bootstrap, check that every rank uses the same backend, and
 * derive hosts and local ranks. */
ncclResult_t weft_peers_exchange(struct ncclComm* comm);
/* From comm->ctx.peers: hosts numbered by their lowest rank (rank_to_node, nnodes, node) and this
 * rank's host-mates (local_ranks, local_nranks, local_rank); O(n). */
ncclResult_t weft_peers_map_hosts(struct ncclComm* comm);

#endif
