/* The CUDA backend's host side, as engine.c and mem.c call it: communicator setup (ring
 * connectors in GPU memory), launch of a group's tasks as one kernel on the caller's stream,
 * teardown, and ncclMemAlloc in device memory. Every function exists in builds without CUDA
 * (they then report that the backend is missing). */
#ifndef WEFT_COLLECTIVES_CUDA_ENGINE_CUDA_H
#define WEFT_COLLECTIVES_CUDA_ENGINE_CUDA_H

#include <stddef.h>

#include "collectives/task.h"
#include "nccl.h"

struct ncclComm;

ncclResult_t weft_cuda_comm_init(struct ncclComm* comm);
/* Waits for the comm's kernels (raising the device abort flag first when the comm is aborted)
 * and frees its device state. NULL-safe, works on a half-built comm. */
void weft_cuda_comm_fini(struct ncclComm* comm);
/* Launch tasks (the group's, in call order) on their stream; returns once enqueued. */
ncclResult_t weft_cuda_launch(struct ncclComm* comm, struct weft_task* tasks);

/* The first error a kernel of this comm reported (a wait that timed out), as the comm's async
 * error, with a WARN (once) naming the operation, peer and channel; ncclSuccess when none. */
ncclResult_t weft_cuda_check_error(struct ncclComm* comm);
/* Wait for the comm's launched work to end, then report a kernel error as above (Finalize). */
ncclResult_t weft_cuda_flush(struct ncclComm* comm);

/* ncclMemAlloc / ncclMemFree on the CUDA backend (device memory of the current device). */
int weft_cuda_mem_wanted(void);
ncclResult_t weft_cuda_mem_alloc(void** ptr, size_t size);
/* 1 when ptr came from weft_cuda_mem_alloc and is not freed yet. */
int weft_cuda_mem_owns(const void* ptr);
ncclResult_t weft_cuda_mem_free(void* ptr);

#endif
