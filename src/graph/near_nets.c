/* The network devices nearest each rank of a host: which NICs a rank's traffic leaves through.
 * NCCL's rule for a GPU's local NICs, applied to host ranks too: the NETs with the most bandwidth
 * from the rank, then the shortest path type; ranks that share those NETs take them in turn
 * (rails), so eight GPUs with eight NICs use one each. */
#include <stdlib.h>
#include <string.h>

#include "graph/topo.h"
#include "util/check.h"

/* 1 when NET node net is the device the network calls name: "mlx5_0" or "mlx5_0:1" (with its
 * port, as the IB network names a port), "eth0"; a merged device ("mlx5_0+mlx5_1", the ports of
 * one card's functions) is where its first member is. */
static int net_is(const struct weft_topo_node* net, const char* name) {
  size_t len = strcspn(name, ":+");
  if (strncmp(net->name, name, len) != 0 || net->name[len] != 0) return 0;
  return name[len] != ':' || atoi(name + len + 1) == net->u.net.port;
}

static int rank_net_path(struct weft_topo_system* sys, const struct weft_topo_node* rank, int net,
                         struct weft_topo_path* p) {
  if (rank->paths[WEFT_NODE_NET] != NULL) {
    *p = rank->paths[WEFT_NODE_NET][net];
    return 1;
  }
  return weft_topo_host_rank_path(sys, rank, WEFT_NODE_NET, net, p);
}

/* The names (bit i: names[i]) whose NETs are nearest rank; 0 when the topology holds none. */
static uint64_t nearest(struct weft_topo_system* sys, const struct weft_topo_node* rank, const int* net_of,
                        int nnames) {
  uint64_t set = 0;
  float best_bw = 0;
  int best_type = WEFT_PATH_DIS;
  for (int i = 0; i < nnames; i++) {
    struct weft_topo_path p;
    if (net_of[i] < 0 || !rank_net_path(sys, rank, net_of[i], &p) || p.type == WEFT_PATH_DIS) continue;
    if (p.bw > best_bw || (p.bw == best_bw && p.type < best_type)) {
      best_bw = p.bw;
      best_type = p.type;
      set = 0;
    }
    if (p.bw == best_bw && p.type == best_type) set |= 1ull << i;
  }
  return set;
}

static struct weft_topo_node* rank_node(struct weft_topo_system* sys, int host, const int64_t* bus_ids,
                                        int r) {
  return bus_ids != NULL ? weft_topo_gpu_by_busid(sys, host, bus_ids[r]) : weft_topo_rank_node(sys, host, r);
}

static int rank_gdr(struct weft_topo_system* sys, const struct weft_topo_node* rank, int net) {
  struct weft_topo_path p;
  return rank != NULL && rank_net_path(sys, rank, net, &p) &&
         weft_topo_net_gdr(rank, &sys->nodes[WEFT_NODE_NET][net], &p);
}

static int lowest_bit(uint64_t set) { return set ? __builtin_ctzll(set) : -1; }

ncclResult_t weft_topo_near_nets(struct weft_topo_system* sys, int host, const char* const* names, int nnames,
                                 const int64_t* bus_ids, int nlocal, struct weft_topo_near_nets* out) {
  memset(out, 0, sizeof(*out) * (size_t)nlocal);
  if (nnames > 64) nnames = 64; /* the sets are 64-bit masks; more NICs on one host are not seen */
  if (nnames <= 0 || nlocal <= 0) return ncclSuccess;
  if (!sys->paths_ready) WEFT_CHECK(weft_topo_compute_paths(sys));
  int net_of[64];
  for (int i = 0; i < nnames; i++) {
    net_of[i] = -1;
    for (int j = 0; j < sys->count[WEFT_NODE_NET] && net_of[i] < 0; j++) {
      const struct weft_topo_node* n = &sys->nodes[WEFT_NODE_NET][j];
      if (n->host == host && net_is(n, names[i])) net_of[i] = j;
    }
  }
  uint64_t* sets = calloc((size_t)nlocal, sizeof(*sets));
  if (sets == NULL) return ncclSystemError;
  int sharers[64] = {0}; /* ranks whose nearest include name i */
  for (int r = 0; r < nlocal; r++) {
    struct weft_topo_node* node = rank_node(sys, host, bus_ids, r);
    sets[r] = node != NULL ? nearest(sys, node, net_of, nnames) : 0;
    for (int i = 0; i < nnames; i++) sharers[i] += (int)(sets[r] >> i & 1);
  }
  int seen[64] = {0};
  for (int r = 0; r < nlocal; r++) {
    int first = lowest_bit(sets[r]);
    if (first < 0) continue;
    for (int i = 0; i < nnames; i++)
      if (sets[r] >> i & 1 && out[r].n < WEFT_TOPO_MAX_NEAR_NETS) {
        if (rank_gdr(sys, rank_node(sys, host, bus_ids, r), net_of[i])) out[r].gdr |= 1u << out[r].n;
        out[r].dev[out[r].n++] = i;
      }
    out[r].rail = seen[first];
    out[r].sharers = sharers[first];
    for (int i = 0; i < nnames; i++) seen[i] += (int)(sets[r] >> i & 1);
  }
  free(sets);
  return ncclSuccess;
}
