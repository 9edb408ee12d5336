/* Tree channels of a communicator: per channel the parent and up to three children (the chain
 * of ranks inside a host, joined across hosts by NCCL's double binary tree over hosts; channel
 * c uses tree c % 2), their connectors, connected at the first tree collective. */
#ifndef WEFT_COLLECTIVES_TREE_H
#define WEFT_COLLECTIVES_TREE_H

#include "collectives/plan.h"
#include "transport/connector.h"

struct weft_link_mem;

#define WEFT_TREE_MAX_DOWN 3

struct weft_tree_channel {
  int up;                       /* parent rank, -1 at the root */
  int down[WEFT_TREE_MAX_DOWN]; /* children, -1 when absent */
  int ndown;
  struct weft_conn send_up, recv_up;
  struct weft_conn send_down[WEFT_TREE_MAX_DOWN], recv_down[WEFT_TREE_MAX_DOWN];
  struct weft_link_mem* mem[2 * (1 + WEFT_TREE_MAX_DOWN)];
};

struct weft_tree_state {
  int nchannels;
  struct weft_tree_channel ch[WEFT_PLAN_MAX_CHANNELS];
};

struct weft_comm_ctx;
/* Parent and children of rank in tree t (0 or 1) given each rank's host; pure, for tests. */
void weft_tree_links(int nranks, const int* rank_to_node, int nnodes, int rank, int t, int* up,
                     int down[WEFT_TREE_MAX_DOWN]);
/* Connect the tree connectors of every channel (collective: every rank calls it together). */
ncclResult_t weft_tree_connect(struct weft_comm_ctx* comm, int nchannels, size_t simple, size_t ll,
                               struct weft_tree_state** out);
void weft_tree_free(struct weft_tree_state* t); /* NULL-safe */
/* Host executor: run one channel's share of a tree all-reduce (host/tree_exec.c). */
struct weft_waiter;
ncclResult_t weft_host_run_tree(const struct weft_dev_work* w, struct weft_tree_channel* ch,
                                struct weft_waiter* waiter, int channel, const void* in, void* out);

#endif
