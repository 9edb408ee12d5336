/* The communicator: what every layer may read about its job, its peers and its state. */
#ifndef WEFT_CORE_COMM_H
#define WEFT_CORE_COMM_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "collectives/task.h"
#include "nccl.h"
#include "transport/connector.h"

#define WEFT_COMM_MAGIC 0x5745465443304d4dull /* "WEFTC0MM": catches stale or foreign pointers */

enum weft_backend { WEFT_BACKEND_HOST = 1, WEFT_BACKEND_CUDA = 2 };

/* Exchanged by every rank at init (bootstrap all-gather). Fixed size, no pointers. */
struct weft_peer_info {
  int rank;
  int backend;        /* enum weft_backend */
  uint64_t host_hash; /* host name + boot id, or WEFT_HOSTID / NCCL_HOSTID */
  uint64_t pid_hash;  /* host hash + pid: ranks of one process share it */
  int pid;
  int cuda_dev;     /* -1 on the host backend */
  int64_t bus_id;   /* PCI bus id of the device, -1 if none */
  uint64_t shm_dev; /* st_dev of /dev/shm: same value means shared memory can be mapped */
  int numa_node;    /* NUMA node of the CPU the rank runs on, -1 unknown */
  float copy_bw;    /* GB/s of memcpy measured by the rank's process: the slowest sets tuning */
  char host_name[64];
  uint64_t comm_ptr; /* address of the peer's ncclComm: meaningful only within one process */
};

struct weft_coll_state; /* owned by collectives/ */
struct weft_cuda_state; /* owned by collectives/cuda */
struct weft_rma_state;  /* collectives/rma.h: windows' signals, queued one-sided operations */
struct weft_comm_topo;  /* core/topology.c: system, rings, trees, tuning */
struct weft_bootstrap;
struct weft_mem_usage; /* collectives/memstat.h */
struct weft_trace;     /* collectives/trace.h: the flight recorder */
struct weft_tuner;     /* collectives/tuner.h: this comm's external tuner plugin context */
struct weft_prof;      /* collectives/profiler.h: the profiler plugin's events */

struct ncclComm {
  uint64_t magic;
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
  pthread_t init_thread;
  int init_thread_running;
  int finalized;
  int launches_in_flight; /* blocking inits and group launches running; abort waits for them */
  int claimed_for_free;   /* set once by whoever frees the comm (destroy/abort vs. failed init) */
  struct weft_group_worker* group_worker; /* core/group.c: launches this comm beside others */

  struct weft_bootstrap* bootstrap;
  struct weft_peer_info* peers; /* [nranks] */
  int local_rank;               /* rank among the ranks of this host */
  int local_nranks;
  int* local_ranks; /* [local_nranks] global ranks on this host, ascending */
  int node;         /* index of this host among hosts, by lowest rank */
  int nnodes;
  int* rank_to_node; /* [nranks] */

  /* Tasks queued by collective/p2p calls of the current group; launched at group end. */
  struct weft_task_queue tasks;
  uint64_t next_seq;
  /* The per-call selection (nccl*Config) every rank last agreed on (collectives/agree.c). */
  uint64_t sel_agreed;
  int in_group; /* already listed in this thread's group */
  /* User reduction ops (ncclRedOpCreatePreMulSum), owned by collectives/. */
  struct weft_redop* user_ops;
  int user_ops_capacity;

  struct weft_coll_state* coll;
  struct weft_cuda_state* cuda; /* CUDA backend state, owned by collectives/cuda */
  struct weft_comm_topo* topo;  /* NULL when the topology could not be modelled */
  struct weft_rma_state* rma;   /* NULL until the first window or one-sided operation */
  struct weft_trace* trace;     /* flight recorder; NULL when WEFT_TRACE_BUFFER=0 */
  struct weft_tuner* tuner;     /* NCCL_TUNER_PLUGIN's context; NULL: none (the usual case) */
  struct weft_prof* prof;       /* profiler plugin's view (collectives/profiler.h); NULL: none */

  /* Split bookkeeping: children made from this comm, so splits get distinct hashes. */
  int split_count;

  /* ncclCommSuspend / ncclCommResume (core/suspend.c). suspend_requested: suspended as far as
   * later calls are concerned (set by the call, even when a group defers the work to its end);
   * suspend_queued: that work still waits for the end of the caller's group; suspend_released:
   * the buffers are released now, and suspended_usage says what they were. */
  int suspend_requested, suspend_queued;
  volatile int suspend_released;
  struct weft_mem_usage* suspended_usage;

  /* ncclCommRevoke (or a shrink with NCCL_SHRINK_ABORT) stopped this comm's operations: its
   * connectors may be mid-operation, so only destroy, split and shrink may follow. */
  volatile int revoked;
  /* ncclCommGetUniqueId: the id a later ncclCommGrow of this comm consumes. */
  int grow_id_pending;
  ncclUniqueId grow_id;
};

/* Checks that comm is a live, initialized, healthy and not revoked communicator; WARNs naming
 * the caller on failure. */
ncclResult_t weft_comm_check(const struct ncclComm* comm, const char* caller);
/* The same, but a revoked comm passes: what split and shrink require of their parent. */
ncclResult_t weft_comm_check_parent(const struct ncclComm* comm, const char* caller);
/* The abort flag, or a fatal async error, as a result for waits to return. */
/* Whether peer is a thread of this process (its memory is ours: no shared segments needed). */
static inline int weft_comm_same_process(const struct ncclComm* comm, int peer) {
  return comm->peers[peer].pid_hash == comm->peers[comm->rank].pid_hash;
}
static inline int weft_comm_aborted(const struct ncclComm* comm) {
  return __atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) != 0;
}
/* Record an asynchronous error once (the first one wins) and raise the abort flag. */
void weft_comm_set_async_error(struct ncclComm* comm, ncclResult_t res);

#endif
