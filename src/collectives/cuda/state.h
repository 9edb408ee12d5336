/* Per-communicator state of the CUDA backend (host side). CUDA builds only. */
#ifndef WEFT_COLLECTIVES_CUDA_STATE_H
#define WEFT_COLLECTIVES_CUDA_STATE_H

#include <cuda_runtime_api.h>

#include "collectives/cuda/kernel.h"
#include "collectives/fingerprint.h"
#include "collectives/plan.h"
#include "collectives/tune_log.h"
#include "transport/transport.h"

struct weft_comm_ctx;

/* Device memory for the work list of a group larger than the kernel arguments. It is reused once
 * the kernel that read it has ended (done); one filled under graph capture is that graph's for
 * every replay, so it is only freed with the communicator. */
struct weft_cuda_wlist {
  struct weft_cuda_work* dev;
  int cap; /* works */
  int busy, captured;
  cudaEvent_t done; /* recorded after the kernel that reads the list */
  struct weft_cuda_wlist* next;
};

/* A pair of timing events around one kernel, for the tuning log (tune_time.c). */
#define WEFT_CUDA_TIMERS 16 /* in flight at once: enough for a few size classes x 5 samples */
struct weft_cuda_timer {
  int busy; /* recorded, not yet read */
  cudaEvent_t start, end;
  struct weft_tune_pending pending; /* the choice the time belongs to */
};

struct weft_cuda_state {
  int dev;
  int nchannels; /* ring channels connected */
  int nthreads;  /* threads per block */
  size_t simple_bytes, ll_bytes;
  int64_t p2p_ll_threshold;    /* NCCL_P2P_LL_THRESHOLD */
  struct weft_plan_params env; /* the planner's inputs (plan.c), filled and agreed at init */
  cudaStream_t setup_stream;   /* private, non-blocking: setup never waits for user work */
  /* The end of the comm's last launch, eager or a graph replay's (an external record node): every
   * launch waits for it, so no two of the comm's kernels share its connectors at once. */
  cudaEvent_t last_event;
  cudaStream_t last_stream; /* of the last eager launch; meaningless once a launch was captured */
  int have_last;
  int error_reported;                /* the kernel error's WARN was logged */
  int captured;                      /* a launch was captured into a graph */
  int max_blocks;                    /* per launch: this rank's share of what the device holds at once */
  int device_shared_in_process;      /* another rank of this process uses this device */
  struct weft_cuda_hostcomm* host;   /* host-mapped flags: abort, kernel errors */
  struct weft_cuda_devcomm* devcomm; /* device address of the device state (p2p arrays after it) */
  struct weft_cuda_devcomm mirror;   /* host copy of the device state as set up (steps at start) */
  uint64_t step_base;                /* WEFT_CUDA_STEP_BASE: every connector's first step */
  struct weft_cuda_wlist* wlists;    /* device work lists of groups over WEFT_CUDA_MAX_WORKS */
  struct weft_link_mem *ring_send_mem[WEFT_CUDA_MAX_CHANNELS], *ring_recv_mem[WEFT_CUDA_MAX_CHANNELS];
  struct weft_link_mem **p2p_send_mem, **p2p_recv_mem; /* [nranks] */
  int tree_connected;                                  /* tree_mem made (at the first tree all-reduce) */
  struct weft_link_mem* tree_mem[WEFT_CUDA_TREE_CHANNELS][WEFT_TREE_CONNS];
  uint8_t* restore_p2p; /* suspended: the p2p pairs to reconnect at resume ([nranks] sends, receives) */
  int check_calls;      /* collectives' first steps carry and check their call's tag (WEFT_CHECK_CALLS) */
  uint64_t coll_seq;    /* collectives launched so far: numbered alike on every rank */
  struct weft_call_fp recent_fp[WEFT_RECENT_CALLS]; /* the last ones' fingerprints, by number */
  struct weft_cuda_timer timers[WEFT_CUDA_TIMERS];  /* kernels timed for the tuning log */
};

/* Connect the p2p connectors this launch needs (both sides of each pair call it). */
ncclResult_t weft_cuda_p2p_connect(struct weft_comm_ctx* comm, const uint8_t* send_to,
                                   const uint8_t* recv_from);
/* Connect every tree channel's parent and children (all ranks together, at one launch). */
ncclResult_t weft_cuda_tree_connect(struct weft_comm_ctx* comm);
/* Copy host memory to device memory now, on the private setup stream (never captured, never
 * behind user work), in relaxed capture mode so a capture in progress is not invalidated. */
ncclResult_t weft_cuda_copy_now(struct weft_cuda_state* s, void* dev_dst, const void* src, size_t bytes);
/* The tuning log's kernel times (rank 0 with NCCL_DEBUG_SUBSYS=TUNING; tune_time.c): begin
 * before the launch of tasks (NULL: not timed), end after it; collect reads the finished ones. */
struct weft_task;
struct weft_cuda_timer* weft_cuda_timer_begin(struct weft_cuda_state* s, const struct weft_task* tasks,
                                              cudaStream_t stream, int capturing);
void weft_cuda_timer_end(struct weft_cuda_timer* t, cudaStream_t stream, int launched);
void weft_cuda_timers_collect(struct weft_cuda_state* s);
void weft_cuda_timers_free(struct weft_cuda_state* s);
/* Free the device state and the work lists (after the comm's kernels have ended). NULL-safe. */
void weft_cuda_devcomm_free(struct weft_cuda_state* s);

#endif
