/* Topology for a communicator: detect (or load NCCL_TOPO_FILE), place the host ranks, search
 * rings and trees, connect channels across hosts, and set up the tuning model. */
#include "core/topology.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/check.h"

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float copy_bw_gbs;

static void measure_once(void) {
  const size_t size = 4u << 20;
  char* src = malloc(size);
  char* dst = malloc(size);
  if (src == NULL || dst == NULL) {
    free(src);
    free(dst);
    copy_bw_gbs = 10.0f;
    return;
  }
  memset(src, 1, size);
  memset(dst, 0, size); /* first touch outside the timing: page faults are not bandwidth */
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now_sec();
    memcpy(dst, src, size);
    __asm__ volatile("" ::"r"(dst) : "memory");
    double t = now_sec() - t0;
    if (t < best) best = t;
  }
  copy_bw_gbs = best > 0 ? (float)(size / best / 1e9) : 10.0f;
  free(src);
  free(dst);
}

float weft_measure_copy_bw(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, measure_once);
  return copy_bw_gbs;
}

int weft_current_numa_node(void) {
  int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  for (int node = 0; node < 64; node++) {
    char path[128];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/node%d", cpu, node);
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      fclose(f);
      return node;
    }
  }
  return -1;
}

/* The model assumes identical hosts (NCCL's rule too): same number of ranks on each. */
static int hosts_alike(const struct ncclComm* comm) {
  int* count = calloc((size_t)comm->nnodes, sizeof(int));
  if (count == NULL) return 0;
  for (int r = 0; r < comm->nranks; r++) count[comm->rank_to_node[r]]++;
  int alike = 1;
  for (int n = 1; n < comm->nnodes; n++) alike &= count[n] == count[0];
  free(count);
  return alike;
}

static float slowest_copy_bw(const struct ncclComm* comm) {
  float bw = comm->peers[0].copy_bw;
  for (int r = 1; r < comm->nranks; r++)
    if (comm->peers[r].copy_bw < bw) bw = comm->peers[r].copy_bw;
  return bw > 0 ? bw : 1.0f;
}

static ncclResult_t place_host_ranks(struct ncclComm* comm, struct weft_comm_topo* t, float bw) {
  int* numa = malloc(sizeof(int) * (size_t)comm->local_nranks);
  if (numa == NULL) return ncclSystemError;
  for (int i = 0; i < comm->local_nranks; i++) numa[i] = comm->peers[comm->local_ranks[i]].numa_node;
  ncclResult_t res = weft_topo_add_host_ranks(t->sys, 0, comm->local_nranks, numa, bw);
  free(numa);
  return res;
}

static ncclResult_t build(struct ncclComm* comm, struct weft_comm_topo* t) {
  float bw = slowest_copy_bw(comm);
  WEFT_CHECK(weft_topo_get_system(&t->sys));
  if (comm->backend == WEFT_BACKEND_HOST) WEFT_CHECK(place_host_ranks(comm, t, bw));
  WEFT_CHECK(weft_topo_search_all(t->sys, 0, comm->nnodes, &t->ring, &t->tree));
  WEFT_CHECK(weft_topo_connect_channels(&t->ring, &t->tree, comm->nnodes, &t->channels));
  struct weft_tuning_input in = {.arch = WEFT_ARCH_HOST,
                                 .cpu_vendor = weft_topo_cpu_is_amd(t->sys, 0),
                                 .nranks = comm->nranks,
                                 .nnodes = comm->nnodes,
                                 .nchannels = t->channels->nchannels,
                                 .ring = &t->ring,
                                 .tree = &t->tree,
                                 .host_copy_bw = bw,
                                 .algo_impl = 1u << WEFT_ALGO_RING,
                                 .proto_impl = (1u << WEFT_PROTO_LL) | (1u << WEFT_PROTO_SIMPLE)};
  WEFT_CHECK(weft_tuning_init(&t->tuning, &in));
  WEFT_INFO(WEFT_INIT | WEFT_GRAPH,
            "comm %p rank %d: %d host(s) x %d rank(s), ring %d channel(s) at %.1f GB/s, "
            "copy bandwidth %.1f GB/s (slowest rank)",
            (void*)comm, comm->rank, comm->nnodes, comm->local_nranks, t->ring.nchannels, t->ring.bw_intra,
            bw);
  return ncclSuccess;
}

ncclResult_t weft_comm_topo_init(struct ncclComm* comm) {
  if (!hosts_alike(comm)) {
    WEFT_INFO(WEFT_INIT | WEFT_GRAPH,
              "comm %p: hosts hold different numbers of ranks; no topology model, "
              "rings in rank order",
              (void*)comm);
    return ncclSuccess;
  }
  struct weft_comm_topo* t = calloc(1, sizeof(*t));
  if (t == NULL) return ncclSystemError;
  comm->topo = t;
  ncclResult_t res = build(comm, t);
  if (res != ncclSuccess) {
    /* Topology is advice: without it the engine still works, so a failure only loses tuning. */
    WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "comm %p: topology model unavailable (%s); using defaults", (void*)comm,
              ncclGetErrorString(res));
    weft_comm_topo_fini(comm);
  }
  return ncclSuccess;
}

void weft_comm_topo_fini(struct ncclComm* comm) {
  struct weft_comm_topo* t = comm->topo;
  if (t == NULL) return;
  weft_topo_channels_destroy(t->channels);
  weft_topo_system_destroy(t->sys);
  free(t);
  comm->topo = NULL;
}
