/* Tree channels: rank links from hosts and the double binary tree over hosts, and their
 * connectors. The tree over hosts is graph/'s weft_topo_dtree (NCCL's ncclGetDtree); inside a
 * host the ranks form a chain below the host's lowest rank, which talks to the other hosts. */
#include "collectives/tree.h"

#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/engine.h"
#include "transport/transport.h"
#include "util/check.h"
#include "util/log.h"

#define TAG_TREE 0x57450500 /* + channel */
#define TAG_TREE_ACK 0x57450600

/* From graph/graph.h, whose protocol enum clashes with dev_types.h's (the device-side one). */
void weft_topo_dtree(int n, int r, int t, int* parent, int* child0, int* child1);

/* The i-th rank (ascending) of node, or -1. */
static int node_rank(int nranks, const int* rank_to_node, int node, int i) {
  for (int r = 0; r < nranks; r++)
    if (rank_to_node[r] == node && i-- == 0) return r;
  return -1;
}

void weft_tree_links(int nranks, const int* rank_to_node, int nnodes, int rank, int t, int* up,
                     int down[WEFT_TREE_MAX_DOWN]) {
  int node = rank_to_node[rank], pos = 0;
  for (int r = 0; r < rank; r++) pos += rank_to_node[r] == node;
  for (int i = 0; i < WEFT_TREE_MAX_DOWN; i++) down[i] = -1;
  int nd = 0;
  int chain_child = node_rank(nranks, rank_to_node, node, pos + 1);
  if (pos > 0) {
    *up = node_rank(nranks, rank_to_node, node, pos - 1);
    down[0] = chain_child;
    return;
  }
  int parent = -1, c0 = -1, c1 = -1;
  if (nnodes > 1) weft_topo_dtree(nnodes, node, t, &parent, &c0, &c1);
  *up = parent >= 0 ? node_rank(nranks, rank_to_node, parent, 0) : -1;
  if (chain_child >= 0) down[nd++] = chain_child;
  if (c0 >= 0) down[nd++] = node_rank(nranks, rank_to_node, c0, 0);
  if (c1 >= 0) down[nd++] = node_rank(nranks, rank_to_node, c1, 0);
}

static void bind_pair(struct weft_conn* send, struct weft_conn* recv, const struct weft_engine_link* l) {
  weft_conn_bind(send, (*l->send)->host, l->peer);
  weft_conn_bind(recv, (*l->recv)->host, l->peer);
}

/* Channel c's connectors: a send and a receive one with the parent, then with each child. */
static ncclResult_t connect_channel(struct weft_comm_ctx* comm, int c, size_t simple, size_t ll,
                                    struct weft_tree_channel* ch) {
  weft_tree_links(comm->nranks, comm->rank_to_node, comm->nnodes, comm->rank, c % 2, &ch->up, ch->down);
  struct weft_engine_link links[1 + WEFT_TREE_MAX_DOWN];
  int n = 0;
  if (ch->up >= 0) links[n++].peer = ch->up;
  for (int i = 0; i < WEFT_TREE_MAX_DOWN; i++)
    if (ch->down[i] >= 0) links[n++].peer = ch->down[i];
  ch->ndown = n - (ch->up >= 0);
  for (int i = 0; i < n; i++) {
    links[i].channel = c;
    links[i].tag = TAG_TREE + c;
    links[i].ack_tag = TAG_TREE_ACK + c;
    links[i].send = &ch->mem[i];
    links[i].recv = &ch->mem[n + i];
  }
  WEFT_CHECK(weft_engine_connect(comm, links, n, simple, ll, NULL));
  int k = 0;
  if (ch->up >= 0) bind_pair(&ch->send_up, &ch->recv_up, &links[k++]);
  for (int i = 0; i < ch->ndown; i++) bind_pair(&ch->send_down[i], &ch->recv_down[i], &links[k++]);
  WEFT_INFO(WEFT_INIT, "Trees [%d] %d/%d/%d->%d->%d", c, ch->down[0], ch->down[1], ch->down[2], comm->rank,
            ch->up);
  return ncclSuccess;
}

ncclResult_t weft_tree_connect(struct weft_comm_ctx* comm, int nchannels, size_t simple, size_t ll,
                               struct weft_tree_state** out) {
  struct weft_tree_state* ts = calloc(1, sizeof(*ts));
  if (ts == NULL) return ncclSystemError;
  ts->nchannels = nchannels;
  for (int c = 0; c < nchannels; c++) {
    ncclResult_t res = connect_channel(comm, c, simple, ll, &ts->ch[c]);
    if (res != ncclSuccess) {
      weft_tree_free(ts);
      return res;
    }
  }
  *out = ts;
  return ncclSuccess;
}

void weft_tree_free(struct weft_tree_state* ts) {
  if (ts == NULL) return;
  for (int c = 0; c < WEFT_PLAN_MAX_CHANNELS; c++)
    for (int i = 0; i < 2 * (1 + WEFT_TREE_MAX_DOWN); i++) weft_transport_release(ts->ch[c].mem[i]);
  free(ts);
}
