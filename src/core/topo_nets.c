/* Which network devices each rank of this host leaves through, by the topology model: the
 * network's devices are matched with the model's NETs by name and port, and each rank keeps its
 * nearest (graph/near_nets.c) in ctx.net_near, which the network connectors read (transport/net.c).
 * Only for jobs across hosts: a job on one host never starts the network for this. */
#include "core/topology.h"

#include <stdlib.h>
#include <string.h>

#include "transport/net.h"
#include "util/check.h"
#include "util/log.h"

void weft_topo_nets_free(struct weft_topo_nets* tn) {
  free(tn->near);
  memset(tn, 0, sizeof(*tn));
}

/* The network's device names ("mlx5_0:1", "eth0"); 0 when no network can be used. */
static int device_names(char (*names)[64], int max) {
  const struct weft_net_ops* net;
  int ndev = 0;
  if (weft_net_get(&net) != ncclSuccess || net->devices(&ndev) != ncclSuccess) return 0;
  if (ndev > max) ndev = max;
  for (int i = 0; i < ndev; i++) {
    struct weft_net_props p;
    if (net->get_properties(i, &p) != ncclSuccess) return 0;
    snprintf(names[i], 64, "%s", p.name);
  }
  return ndev;
}

ncclResult_t weft_topo_nets_build(const struct ncclComm* comm, struct weft_topo_system* sys,
                                  struct weft_topo_nets* tn) {
  memset(tn, 0, sizeof(*tn));
  if (comm->ctx.nnodes < 2) return ncclSuccess;
  char names[64][64];
  const char* list[64];
  int n = device_names(names, 64);
  if (n == 0) return ncclSuccess;
  for (int i = 0; i < n; i++) list[i] = names[i];
  int k = comm->ctx.local_nranks;
  int64_t* bus = NULL;
  if (comm->ctx.backend == WEFT_BACKEND_CUDA) {
    if ((bus = malloc(sizeof(*bus) * (size_t)k)) == NULL) return ncclSystemError;
    for (int i = 0; i < k; i++) bus[i] = comm->ctx.peers[comm->ctx.local_ranks[i]].bus_id;
  }
  tn->near = calloc((size_t)k, sizeof(*tn->near));
  ncclResult_t res = tn->near ? weft_topo_near_nets(sys, 0, list, n, bus, k, tn->near) : ncclSystemError;
  free(bus);
  if (res != ncclSuccess) {
    weft_topo_nets_free(tn);
    return res;
  }
  tn->n = k;
  return ncclSuccess;
}

void weft_topo_nets_keep(struct ncclComm* comm, const struct weft_topo_nets* tn) {
  int me = comm->ctx.local_rank;
  if (tn->near == NULL || me >= tn->n || tn->near[me].n == 0) return;
  const struct weft_topo_near_nets* m = &tn->near[me];
  struct weft_net_near* out = &comm->ctx.net_near;
  out->n = m->n < WEFT_NET_MAX_NEAR ? m->n : WEFT_NET_MAX_NEAR;
  memcpy(out->dev, m->dev, sizeof(int) * (size_t)out->n);
  out->rail = m->rail;
  out->sharers = m->sharers;
  out->gdr = m->gdr;
  char text[256];
  int len = 0;
  for (int i = 0; i < out->n && len < (int)sizeof(text) - 8; i++)
    len += snprintf(text + len, sizeof(text) - (size_t)len, " %d", out->dev[i]);
  WEFT_INFO(WEFT_INIT | WEFT_NET | WEFT_GRAPH,
            "comm %p rank %d: nearest network devices%s (turn %d of %d ranks sharing them; GPUDirect RDMA "
            "mask %#x)",
            (void*)comm, comm->ctx.rank, text, out->rail, out->sharers, (unsigned)out->gdr);
}
