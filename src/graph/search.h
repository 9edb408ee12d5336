/* Search state shared by search.c and graph_io.c (graph-internal). */
#ifndef WEFT_GRAPH_SEARCH_H
#define WEFT_GRAPH_SEARCH_H

#include "graph/topo.h"

struct search {
  struct weft_topo_system* sys;
  struct weft_topo_graph* g;
  int host, n, nnet;
  struct weft_topo_node** rank; /* [n], by local rank */
  struct weft_topo_node* net[WEFT_TOPO_CAP_NET];
  int pattern, inter, cross_nic, host_ranks, min_sm;
  float speed;
  int type_intra, type_inter;
  long steps, step_limit, total_limit;
  int cur_net_in, cur_net_out;
  int channel;       /* channel being built (NIC rotation) */
  const int* replay; /* previous channel's order, tried first */
};

/* Fills s with the host's ranks and NETs; ncclInvalidUsage when the host has no ranks. Paths are
 * computed unless ready. weft_search_fini releases it (NULL-safe on a failed init). */
ncclResult_t weft_search_init(struct search* s, struct weft_topo_system* sys, int host, int inter);
void weft_search_fini(struct search* s);

/* What hop i of path p costs for bw of traffic (PCIe past an Intel root complex costs more). */
float weft_search_hop_cost(const struct weft_topo_path* p, int i, float bw);

/* search_numa.c: the graph for a host with more than WEFT_GRAPH_SEARCH_LOCAL host ranks. */
void weft_search_numa(struct search* s, struct weft_topo_graph* g);

#endif
