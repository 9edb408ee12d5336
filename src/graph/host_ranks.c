/* Host-backend ranks: CPU ranks placed on NUMA nodes, each linked to its CPU by a local link whose
 * bandwidth is the measured copy bandwidth, so the same search and tuning serve the host backend. */
#include "graph/topo.h"
#include "util/check.h"

static ncclResult_t host_cpu(struct weft_topo_system* sys, int host, int numa, struct weft_topo_node** out) {
  struct weft_topo_node* first = NULL;
  for (int i = 0; i < sys->count[WEFT_NODE_CPU]; i++) {
    struct weft_topo_node* c = &sys->nodes[WEFT_NODE_CPU][i];
    if (c->host != host) continue;
    if (first == NULL) first = c;
    if (c->id == numa) {
      *out = c;
      return ncclSuccess;
    }
  }
  if (first) {
    *out = first;
    return ncclSuccess;
  }
  /* A system without CPUs (e.g. an empty file): give the ranks one NUMA node. */
  WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_CPU, host, 0, out));
  (*out)->cpu = (*out)->index;
  snprintf((*out)->name, sizeof((*out)->name), "0");
  return ncclSuccess;
}

ncclResult_t weft_topo_add_host_ranks(struct weft_topo_system* sys, int host, int nranks, const int* numa,
                                      float copy_bw_gbs) {
  if (host < 0 || host >= sys->nhosts || nranks <= 0 || nranks > WEFT_GRAPH_MAX_LOCAL) {
    WEFT_WARN("topology: cannot place %d host ranks on host %d (hosts %d, at most %d ranks)", nranks, host,
              sys->nhosts, WEFT_GRAPH_MAX_LOCAL);
    return ncclInvalidUsage;
  }
  /* The host backend runs on CPUs: GPUs of this host stay in the graph but stop being ranks. */
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->host == host && !g->u.gpu.host_rank) g->u.gpu.rank = -1;
    if (g->host == host && g->u.gpu.host_rank) {
      WEFT_WARN("topology: host %d already has host ranks", host);
      return ncclInvalidUsage;
    }
  }
  float bw = copy_bw_gbs > 0 ? copy_bw_gbs : 10.0f;
  for (int r = 0; r < nranks; r++) {
    struct weft_topo_node *cpu, *g;
    WEFT_CHECK(host_cpu(sys, host, numa ? numa[r] : 0, &cpu));
    WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_GPU, host, ((int64_t)1 << 62) + r, &g));
    g->cpu = cpu->index;
    g->u.gpu.host_rank = 1;
    g->u.gpu.rank = r;
    g->u.gpu.dev = r;
    snprintf(g->name, sizeof(g->name), "cpu-rank-%d", r);
    WEFT_CHECK(weft_topo_connect(g, cpu, WEFT_LINK_LOC, bw));
  }
  sys->host_copy_bw = bw;
  weft_topo_free_paths(sys);
  WEFT_INFO(WEFT_GRAPH, "Placed %d host ranks on host %d, copy bandwidth %.1f GB/s", nranks, host, bw);
  return ncclSuccess;
}
