/* Who the ranks are: the peer information every rank publishes at init, and what follows from
 * it (ranks per host, host numbering, backend agreement). */
#include "core/peers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/topology.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/param.h"
#include "util/sysfs.h"

uint64_t weft_hash_bytes(const void* data, size_t size, uint64_t seed) {
  const unsigned char* p = data;
  uint64_t h = 0xcbf29ce484222325ull ^ seed; /* FNV-1a */
  for (size_t i = 0; i < size; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* Host identity: WEFT_HOSTID, else NCCL_HOSTID, else host name + boot id, so containers on one
 * machine with different host names still count as different hosts, as in NCCL. */
static void host_identity(char* out, size_t size) {
  const char* id = weft_param_str("WEFT_HOSTID");
  if (id == NULL) id = weft_param_str("NCCL_HOSTID");
  if (id != NULL) {
    snprintf(out, size, "%s", id);
    return;
  }
  char host[256] = {0}, boot[128] = {0};
  gethostname(host, sizeof(host) - 1);
  weft_read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
  snprintf(out, size, "%s%s", host, boot);
}

void weft_peer_info_fill(const struct ncclComm* comm, struct weft_peer_info* info) {
  memset(info, 0, sizeof(*info));
  char ident[512];
  host_identity(ident, sizeof(ident));
  info->rank = comm->ctx.rank;
  info->backend = comm->ctx.backend;
  info->host_hash = weft_hash_bytes(ident, strlen(ident), 0);
  info->pid = (int)getpid();
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) == 0) info->pid_ns = (uint64_t)st.st_ino;
  info->pid_hash = weft_hash_bytes(&info->pid, sizeof(info->pid), info->host_hash ^ info->pid_ns);
  info->cuda_dev = comm->ctx.backend == WEFT_BACKEND_CUDA ? comm->ctx.cuda_dev : -1;
  /* Ordinals are per process (CUDA_VISIBLE_DEVICES): the bus id names the device on the host. */
  info->bus_id = comm->ctx.backend == WEFT_BACKEND_CUDA ? weft_cuda_device_busid(comm->ctx.cuda_dev) : -1;
  const char* shm_dir = weft_param_str("WEFT_SHM_DIR");
  if (stat(shm_dir ? shm_dir : "/dev/shm", &st) == 0) info->shm_dev = (uint64_t)st.st_dev;
  info->numa_node = weft_current_numa_node();
  info->copy_bw = weft_measure_copy_bw();
  gethostname(info->host_name, sizeof(info->host_name) - 1);
  info->comm_ptr = (uint64_t)(uintptr_t)comm;
}

static const char* backend_name(int b) { return b == WEFT_BACKEND_CUDA ? "cuda" : "host"; }

static ncclResult_t check_backends(const struct ncclComm* comm) {
  for (int r = 0; r < comm->ctx.nranks; r++) {
    if (comm->ctx.peers[r].backend != (int)comm->ctx.backend) {
      WEFT_WARN(
          "Backend mismatch: rank %d uses the %s backend but rank %d (host %s) uses the %s backend; "
          "set WEFT_BACKEND the same on every rank",
          comm->ctx.rank, backend_name(comm->ctx.backend), r, comm->ctx.peers[r].host_name,
          backend_name(comm->ctx.peers[r].backend));
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

/* Hosts are numbered in the order of their lowest rank, so every rank derives the same table.
 * A hash table of each host's first rank keeps this O(n): scanning the earlier ranks for each
 * rank was O(n^2) with few ranks per host (5e9 steps for 100,000 hosts). */
static ncclResult_t number_hosts(struct ncclComm* comm) {
  int n = comm->ctx.nranks;
  size_t cap = 16;
  while (cap < 2 * (size_t)n) cap <<= 1;
  int* first = malloc(cap * sizeof(*first)); /* a host's lowest rank, -1: empty slot */
  if (first == NULL) return ncclSystemError;
  memset(first, 0xff, cap * sizeof(*first));
  comm->ctx.nnodes = 0;
  for (int r = 0; r < n; r++) {
    uint64_t h = comm->ctx.peers[r].host_hash;
    size_t i = (size_t)((h ^ (h >> 29)) * 0x9e3779b97f4a7c15ull) & (cap - 1);
    while (first[i] >= 0 && comm->ctx.peers[first[i]].host_hash != h) i = (i + 1) & (cap - 1);
    if (first[i] < 0) {
      first[i] = r;
      comm->ctx.rank_to_node[r] = comm->ctx.nnodes++;
    } else {
      comm->ctx.rank_to_node[r] = comm->ctx.rank_to_node[first[i]];
    }
  }
  free(first);
  return ncclSuccess;
}

ncclResult_t weft_peers_map_hosts(struct ncclComm* comm) {
  int n = comm->ctx.nranks;
  if (n <= 0) return ncclInternalError;
  comm->ctx.rank_to_node = calloc((size_t)n, sizeof(int));
  comm->ctx.local_ranks = calloc((size_t)n, sizeof(int));
  if (comm->ctx.rank_to_node == NULL || comm->ctx.local_ranks == NULL) return ncclSystemError;
  WEFT_CHECK(number_hosts(comm));
  comm->ctx.node = comm->ctx.rank_to_node[comm->ctx.rank];
  comm->ctx.local_nranks = 0;
  for (int r = 0; r < n; r++) {
    if (comm->ctx.rank_to_node[r] != comm->ctx.node) continue;
    if (r == comm->ctx.rank) comm->ctx.local_rank = comm->ctx.local_nranks;
    comm->ctx.local_ranks[comm->ctx.local_nranks++] = r;
  }
  /* Until the topology model says which NICs are near: every device, taken in turn by the
   * host's ranks (core/topology.c replaces it), as if hung under the CPU (NCCL's place for a
   * NIC it cannot place), so GPUDirect RDMA only where NCCL_NET_GDR_LEVEL reaches PHB. */
  comm->ctx.net_near = (struct weft_net_near){.rail = comm->ctx.local_rank,
                                              .sharers = comm->ctx.local_nranks,
                                              .gdr_unplaced = weft_topo_gdr_level() >= WEFT_PATH_PHB};
  return ncclSuccess;
}

ncclResult_t weft_peers_exchange(struct ncclComm* comm) {
  comm->ctx.peers = calloc(comm->ctx.nranks, sizeof(*comm->ctx.peers));
  if (comm->ctx.peers == NULL) {
    WEFT_WARN("Out of memory allocating peer table for %d ranks", comm->ctx.nranks);
    return ncclSystemError;
  }
  weft_peer_info_fill(comm, &comm->ctx.peers[comm->ctx.rank]);
  WEFT_CHECK(weft_bootstrap_allgather(comm->ctx.bootstrap, comm->ctx.peers, sizeof(*comm->ctx.peers)));
  WEFT_CHECK(check_backends(comm));
  return weft_peers_map_hosts(comm);
}
