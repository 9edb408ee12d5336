/* What collectives/ sees of a communicator: its ranks and peers, the bootstrap, the abort flag
 * and asynchronous result, the tuning model's answer (collectives/tuned.h) and the state that
 * collectives/ owns. core/ keeps the rest (lifecycle, groups, suspend requests, splits) in
 * struct weft_comm_ctx, which begins with this context: collectives/ never sees the communicator,
 * and the context's address is the communicator's, so logs name the pointer users hold. */
#ifndef WEFT_COLLECTIVES_CONTEXT_H
#define WEFT_COLLECTIVES_CONTEXT_H

#include <stdint.h>

#include "collectives/task.h"
#include "nccl.h"
#include "transport/connector.h"
#include "transport/net.h"

enum weft_backend { WEFT_BACKEND_HOST = 1, WEFT_BACKEND_CUDA = 2 };

/* Exchanged by every rank at init (bootstrap all-gather). Fixed size, no pointers. */
struct weft_peer_info {
  int rank;
  int backend;        /* enum weft_backend */
  uint64_t host_hash; /* host name + boot id, or WEFT_HOSTID / NCCL_HOSTID */
  uint64_t pid_hash;  /* host hash + pid namespace + pid: ranks of one process share it */
  uint64_t pid_ns;    /* inode of the pid namespace (0: unknown): pids compare only within one */
  int pid;
  int cuda_dev;     /* -1 on the host backend; the rank's own numbering (CUDA_VISIBLE_DEVICES) */
  int64_t bus_id;   /* PCI bus id of the device (weft_cuda_device_busid), -1 if none */
  uint64_t shm_dev; /* st_dev of /dev/shm: same value means shared memory can be mapped */
  int numa_node;    /* NUMA node of the CPU the rank runs on, -1 unknown */
  float copy_bw;    /* GB/s of memcpy measured by the rank's process: the slowest sets tuning */
  char host_name[64];
  uint64_t comm_ptr; /* address of the communicator: meaningful only within one process */
};

struct weft_coll_state; /* owned by collectives/ */
struct weft_cuda_state; /* owned by collectives/cuda */
struct weft_rma_state;  /* collectives/rma.h: windows' signals, queued one-sided operations */
struct weft_comm_topo;  /* core/topology.c: system, rings, trees, tuning (read through tuned.h) */
struct weft_bootstrap;
struct weft_trace; /* collectives/trace.h: the flight recorder */
struct weft_tuner; /* collectives/tuner.h: this comm's external tuner plugin context */
struct weft_prof;  /* collectives/profiler.h: the profiler plugin's events */

struct weft_comm_ctx {
  int rank;
  int nranks;
  int cuda_dev;
  enum weft_backend backend;
  uint64_t comm_hash;  /* identifies this communicator in logs */
  ncclConfig_t config; /* the caller's config with defaults applied */

  /* Abort: set by ncclCommAbort or on a fatal error; polled by every wait. */
  volatile uint32_t abort_flag;
  /* Result of asynchronous work (nonblocking init, failed background ops). */
  volatile ncclResult_t async_result;
  struct weft_cause cause; /* the rank lost first, once known (proxy or waits) */

  struct weft_bootstrap* bootstrap;
  struct weft_peer_info* peers; /* [nranks] */
  int local_rank;               /* rank among the ranks of this host */
  int local_nranks;
  int* local_ranks; /* [local_nranks] global ranks on this host, ascending */
  int node;         /* index of this host among hosts, by lowest rank */
  int nnodes;
  int* rank_to_node; /* [nranks] */
  /* CUDA backend: P2P with each peer of this host by the topology model (enum weft_topo_p2p,
   * transport/transport.h), kept when the model is released; NULL when there is no model or it
   * places no peer. Read through weft_comm_p2p_verdict (collectives/tuned.h). */
  unsigned char* topo_p2p; /* [nranks] */
  /* The network devices this rank's connectors leave through, by the topology model when it
   * placed them (core/topology.c), else this rank's turn among its host's ranks. */
  struct weft_net_near net_near;

  /* Tasks queued by collective/p2p calls of the current group; launched at group end. */
  struct weft_task_queue tasks;
  /* One task of a launch that ended, kept for the next call (weft_enqueue_free_tasks): an
   * ungrouped call then allocates nothing. Exchanged atomically: a launch may end on a worker. */
  struct weft_task* task_spare;
  uint64_t next_seq;
  /* The per-call selection (nccl*Config) every rank last agreed on (collectives/agree.c). */
  uint64_t sel_agreed;
  /* User reduction ops (ncclRedOpCreatePreMulSum). */
  struct weft_redop* user_ops;
  int user_ops_capacity;
  /* Set by core/suspend.c once ncclCommSuspend released the buffers: a launch must not run. */
  volatile int suspend_released;

  struct weft_coll_state* coll;
  struct weft_cuda_state* cuda; /* CUDA backend state */
  struct weft_comm_topo* topo;  /* NULL when the topology could not be modelled */
  struct weft_rma_state* rma;   /* NULL until the first window or one-sided operation */
  struct weft_trace* trace;     /* flight recorder; NULL when WEFT_TRACE_BUFFER=0 */
  struct weft_tuner* tuner;     /* NCCL_TUNER_PLUGIN's context; NULL: none (the usual case) */
  struct weft_prof* prof;       /* profiler plugin's view; NULL: none */
};

/* Whether peer is a thread of this process (its memory is ours: no shared segments needed). */
static inline int weft_comm_same_process(const struct weft_comm_ctx* comm, int peer) {
  return comm->peers[peer].pid_hash == comm->peers[comm->rank].pid_hash;
}
static inline int weft_comm_aborted(const struct weft_comm_ctx* comm) {
  return __atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) != 0;
}
/* Record an asynchronous error once (the first one wins). */
static inline void weft_comm_set_async_error(struct weft_comm_ctx* comm, ncclResult_t res) {
  ncclResult_t expected = ncclSuccess;
  __atomic_compare_exchange_n(&comm->async_result, &expected, res, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
/* Whether a call queued work that the group's end must launch (or drop). */
int weft_comm_has_queued(const struct weft_comm_ctx* comm);

#endif
