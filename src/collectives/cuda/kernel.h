/* What the host side of the CUDA backend hands its kernel: the device view of connectors, the
 * per-communicator device state (in device memory: the kernel keeps step counters there across
 * launches), the few host-mapped flags both sides watch while kernels run (abort, errors, the
 * flight recorder's progress) and the work list of one launch. Compiles as C11 (engine_cuda.c) and as CUDA
 * (kernel.cu). */
#ifndef WEFT_COLLECTIVES_CUDA_KERNEL_H
#define WEFT_COLLECTIVES_CUDA_KERNEL_H

#include <stdint.h>

#include "collectives/progress.h"
#include "transport/connector.h"

#define WEFT_CUDA_MAX_CHANNELS 32
#define WEFT_CUDA_MAX_THREADS 512
/* Works carried in the kernel arguments (they stay under 4 KiB); a larger group's list goes to
 * device memory, so that a group is always one launch. */
#define WEFT_CUDA_MAX_WORKS 44
/* Tree all-reduce runs on at most this many channels (each holds a parent and up to three
 * children, 8 connectors, where a ring channel holds 2). */
#define WEFT_CUDA_TREE_CHANNELS 4
#define WEFT_CUDA_TREE_DOWN 3
/* A tree channel's connectors: [UP_SEND], [UP_RECV], then [DOWN + 2i] send to child i and
 * [DOWN + 2i + 1] receive from child i. */
enum { WEFT_TREE_UP_SEND = 0, WEFT_TREE_UP_RECV = 1, WEFT_TREE_DOWN = 2, WEFT_TREE_CONNS = 8 };
#define WEFT_CUDA_ALGO_TREE 1 /* weft_cuda_work.algo: WEFT_PLAN_TREE (collectives/plan.h) */

/* One side of a connector as the kernel sees it: device addresses of the receiver-owned
 * memory, and this side's step count, which persists from one launch to the next. */
struct weft_cuda_conn {
  struct weft_conn_ctrl* ctrl;
  char* simple;
  struct weft_ll_line* ll;
  uint64_t simple_slot, ll_slot;
  uint64_t step;
  /* A connector whose FIFO a proxy thread drives over the network: the sender notes what each step
   * carries (step_info) and fences LL lines ahead of the tail it then publishes; the receiver says
   * when it waits even outside a checked collective (weft_wait_say), for the proxy to tell a wait
   * from a peer that left. */
  uint32_t proxied;
  /* A receive connector whose FIFO the NIC writes directly (GPUDirect RDMA): LL lines may land
   * before the proxy has written their step's tag, which comes before its tail. */
  uint32_t tag_late;
};

/* Kernel errors reported back to the host (devcomm.error). */
enum {
  WEFT_CUDA_ERR_NONE = 0,
  WEFT_CUDA_ERR_TIMEOUT = 1,
  WEFT_CUDA_ERR_MISMATCH = 3, /* 2 was an abort code no kernel ever wrote */
  /* A ring neighbour on this host wrote on a connector the two share that it gave up on a
   * mismatched call (err_peer: the neighbour; err_finder: the rank that found it). */
  WEFT_CUDA_ERR_TOLD = 4
};

/* The only state host and kernels share while kernels run, in host-mapped memory: kernels read
 * it only every WEFT_SPINS_PER_CHECK spins of a wait and write the flags only when they give up;
 * progress is the flight recorder's, which kernels write (a store per step) and never read. */
struct weft_cuda_hostcomm {
  volatile uint32_t abort; /* set by the host (abort, destroy) or by a kernel that timed out */
  /* The first kernel error, WEFT_CUDA_ERR_*: the block that claims err_claim fills the fields
   * below, then publishes the code (release); the host reads the code (acquire), then them. */
  volatile uint32_t error;
  volatile int32_t err_channel, err_peer;
  volatile int32_t err_coll; /* enum weft_coll of the operation that gave up */
  volatile uint32_t err_claim;
  /* MISMATCH, TOLD: the rank that found the mismatch; stored and read atomically, since blocks
   * that see the abort read it while the kernels run (prims_dev.cuh, weft_pass_on_cause). */
  volatile int32_t err_finder;
  volatile uint64_t err_theirs, err_mine; /* MISMATCH: the peer's step tag and ours */
  struct weft_progress progress;
};

/* Per-communicator device state, in device memory. The host writes a connector only before any
 * kernel uses it (setup, lazy p2p connect); kernels own the step counters from then on. */
struct weft_cuda_devcomm {
  struct weft_cuda_hostcomm* flags; /* device address of the host-mapped flags */
  uint64_t timeout_ns;              /* a wait longer than this fails the launch (0: never) */
  int32_t rank, nranks;
  uint32_t blocks_ended; /* blocks of the running launch that ended (the last one resets it) */
  uint32_t pad;
  struct weft_cuda_conn ring_send[WEFT_CUDA_MAX_CHANNELS]; /* to rank + 1 */
  struct weft_cuda_conn ring_recv[WEFT_CUDA_MAX_CHANNELS]; /* from rank - 1 */
  struct weft_cuda_conn* p2p_send;                         /* [nranks], device addresses */
  struct weft_cuda_conn* p2p_recv;
  /* Tree channels (collectives/tree.c's links; channel c uses tree c % 2), connected at the
   * first tree all-reduce: parent (-1 at the root) and children (-1 where none). */
  int32_t tree_up[WEFT_CUDA_TREE_CHANNELS];
  int32_t tree_down[WEFT_CUDA_TREE_CHANNELS][WEFT_CUDA_TREE_DOWN];
  struct weft_cuda_conn tree[WEFT_CUDA_TREE_CHANNELS][WEFT_TREE_CONNS];
};

/* One task of a launch. Collectives run on blocks [0, nchannels) (channel = block); a send or
 * receive runs on block `block`, which owns that peer and direction for the whole launch. */
struct weft_cuda_work {
  uint8_t coll; /* enum weft_coll */
  uint8_t dtype;
  uint8_t proto;
  uint8_t op_kind;
  int32_t root; /* root, or peer of a send/recv */
  int16_t nchannels;
  uint8_t algo; /* 0 Ring, WEFT_CUDA_ALGO_TREE (all-reduce only) */
  uint8_t pad;
  int32_t block;
  uint64_t count; /* NCCL's count */
  /* Collectives: the step tag (collectives/fingerprint.h) the first step on each connector
   * carries and is checked against; 0: not checked (WEFT_CHECK_CALLS=0, send/recv). */
  uint64_t step_tag;
  uint32_t chunk; /* elements per step */
  uint32_t seq;   /* the task's seq (low 32 bits), for the flight recorder */
  uint64_t scalar, divisor;
  const void* scalar_ptr; /* PreMulSum scalar in device memory, read at run time; else NULL */
  const void* sendbuff;
  void* recvbuff;
};

struct weft_cuda_kargs {
  struct weft_cuda_devcomm* comm;    /* device address */
  const struct weft_cuda_work* list; /* device memory holding all nworks works, or NULL: works[] */
  int32_t nworks;
  uint32_t launch; /* the flight recorder's number for it (collectives/trace.h); 0: none */
  struct weft_cuda_work works[WEFT_CUDA_MAX_WORKS];
};

#ifdef __cplusplus
extern "C" {
#endif
/* Launch the kernel on nblocks blocks of nthreads threads; returns a cudaError_t as int. */
int weft_cuda_kernel_launch(const struct weft_cuda_kargs* args, int nblocks, int nthreads, void* stream);
/* Blocks of nthreads threads of the kernel one SM holds at once; returns a cudaError_t as int. */
int weft_cuda_kernel_occupancy(int nthreads, int* blocks_per_sm);
#ifdef __cplusplus
}
#endif

#endif
