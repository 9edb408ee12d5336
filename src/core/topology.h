/* The communicator's view of the machine: topology system, searched rings and trees, and the
 * tuning model the planner asks for algorithm, protocol and channel count. */
#ifndef WEFT_CORE_TOPOLOGY_H
#define WEFT_CORE_TOPOLOGY_H

#include "core/comm.h"
#include "graph/graph.h"

struct weft_comm_topo {
  struct weft_topo_system* sys;
  struct weft_topo_graph ring, tree;
  struct weft_topo_channels* channels;
  /* What tuning needs of sys and channels, kept so both are freed right after the search (ranks
   * of one process share one build: topology.c, build_shared). */
  int min_sm, cpu_amd, comm_channels;
  struct weft_tuning tuning;
  int min_channels, max_channels;     /* NCCL_MIN/MAX_NCHANNELS at init, rank 0's (0: unset) */
  char algo_env[256], proto_env[256]; /* NCCL_ALGO / NCCL_PROTO, rank 0's ("" when unset) */
};

/* The nearest network devices of each rank of this host, by local index (topo_nets.c): built with
 * the model (only for jobs across hosts: n == 0 otherwise), kept by each rank in ctx.net_near. */
struct weft_topo_nets {
  int n;
  struct weft_topo_near_nets* near; /* [n] */
};
ncclResult_t weft_topo_nets_build(const struct ncclComm* comm, struct weft_topo_system* sys,
                                  struct weft_topo_nets* tn);
void weft_topo_nets_keep(struct ncclComm* comm, const struct weft_topo_nets* tn);
void weft_topo_nets_free(struct weft_topo_nets* tn);

/* memcpy bandwidth of this process in GB/s, measured once (a few MiB, a millisecond or two), or
 * WEFT_HOST_COPY_BW when set. */
float weft_measure_copy_bw(void);
/* NUMA node of the CPU the calling thread runs on, -1 when unknown. */
int weft_current_numa_node(void);
/* Builds comm->ctx.topo after the peer exchange. Every rank derives the same result from the same
 * inputs (the slowest rank's copy bandwidth, identical node shapes). When hosts hold different
 * numbers of ranks the model does not apply: comm->ctx.topo stays NULL and rank-order rings are used. */
ncclResult_t weft_comm_topo_init(struct ncclComm* comm);
void weft_comm_topo_fini(struct ncclComm* comm);

#endif
