/* The CUDA backend's host side, as engine.c and mem.c call it: communicator setup (ring
 * connectors in GPU memory), launch of a group's tasks as one kernel on the caller's stream,
 * teardown, and ncclMemAlloc in device memory. Every function exists in builds without CUDA
 * (they then report that the backend is missing). */
#ifndef WEFT_COLLECTIVES_CUDA_ENGINE_CUDA_H
#define WEFT_COLLECTIVES_CUDA_ENGINE_CUDA_H

#include <stddef.h>

#include "collectives/task.h"
#include "nccl.h"

struct weft_comm_ctx;

ncclResult_t weft_cuda_comm_init(struct weft_comm_ctx* comm);
/* Waits for the comm's kernels (raising the device abort flag first when the comm is aborted)
 * and frees its device state. NULL-safe, works on a half-built comm. */
void weft_cuda_comm_fini(struct weft_comm_ctx* comm);
/* Stop the comm's kernels (raise the device abort flag) and wait until its launched work has
 * ended; the comm keeps its device state for a later destroy (ncclCommRevoke). */
void weft_cuda_stop(struct weft_comm_ctx* comm);
/* Suspend and resume (collectives/coll.h): drain waits for every kernel of the comm (graph
 * replays included); suspend then frees the connectors and idle work lists, keeping the device
 * state at its address so captured graphs replay after resume; resume reconnects. */
ncclResult_t weft_cuda_comm_drain(struct weft_comm_ctx* comm);
ncclResult_t weft_cuda_comm_suspend(struct weft_comm_ctx* comm);
ncclResult_t weft_cuda_comm_resume(struct weft_comm_ctx* comm);
/* A connector to peer is for this comm's kernels (transport/transport.h): device numbers, the
 * setup stream, and the kernels' abort flag for the proxy to raise. */
struct weft_link_peer;
void weft_cuda_link_peer(struct weft_comm_ctx* comm, int peer, struct weft_link_peer* lp);
/* Launch tasks (the group's, in call order) on their stream; returns once enqueued. */
ncclResult_t weft_cuda_launch(struct weft_comm_ctx* comm, struct weft_task* tasks);
/* ncclGroupSimulateEnd: the tuning model's predicted time (µs) of collective task t as this
 * backend would run it; nothing is launched. */
ncclResult_t weft_cuda_predict(const struct weft_comm_ctx* comm, const struct weft_task* t, float* time_us);
/* The planner settings of the CUDA launch (NCCL_PROTO, channel bounds, channels connected);
 * NULL without CUDA state. */
struct weft_plan_params;
const struct weft_plan_params* weft_cuda_plan_params(const struct weft_comm_ctx* comm);

/* The first error a kernel of this comm reported (a wait that timed out), as the comm's async
 * error, with a WARN (once) naming the operation, peer and channel; ncclSuccess when none. */
ncclResult_t weft_cuda_check_error(struct weft_comm_ctx* comm);
/* Wait for the comm's launched work to end, then report a kernel error as above (Finalize). */
ncclResult_t weft_cuda_flush(struct weft_comm_ctx* comm);

/* ncclMemAlloc / ncclMemFree on the CUDA backend (device memory of the current device). */
int weft_cuda_mem_wanted(void);
ncclResult_t weft_cuda_mem_alloc(void** ptr, size_t size);
/* 1 when ptr came from weft_cuda_mem_alloc and is not freed yet. */
int weft_cuda_mem_owns(const void* ptr);
ncclResult_t weft_cuda_mem_free(void* ptr);

#endif
