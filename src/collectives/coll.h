/* What core/ needs from collectives/: per-communicator setup and teardown. */
#ifndef WEFT_COLLECTIVES_COLL_H
#define WEFT_COLLECTIVES_COLL_H

#include "nccl.h"

struct weft_comm_ctx;

/* Called at the end of communicator init, after peers are known (comm->peers, local ranks,
 * bootstrap ready) and before init completes; every rank calls it collectively. */
ncclResult_t weft_coll_comm_init(struct weft_comm_ctx* comm);
/* Called by ncclCommDestroy/Abort; must work on a half-built or aborted comm. */
void weft_coll_comm_fini(struct weft_comm_ctx* comm);
/* The comm failed (its cause is known) and a call of this rank will not run: tell the ring
 * neighbours on this host (shared connector pages) and the network peers (notices) why, so that
 * those waiting for this rank's steps give up at once naming the same cause, instead of naming
 * this rank when its process exits. Harmless when already told or nothing failed. */
void weft_coll_publish_cause(struct weft_comm_ctx* comm);
/* ncclCommSuspend: wait for the comm's work, then (after a barrier: collective) release its
 * buffers; the comm stays valid. ncclCommResume (collective): build them again, reconnecting
 * every connector that existed, so operations after it run as before. */
ncclResult_t weft_coll_comm_suspend(struct weft_comm_ctx* comm);
ncclResult_t weft_coll_comm_resume(struct weft_comm_ctx* comm);
/* Run (host) or launch (CUDA) the comm's queued tasks, and drop them without running (after an
 * error in the group). */
ncclResult_t weft_enqueue_launch(struct weft_comm_ctx* comm);
void weft_enqueue_discard(struct weft_comm_ctx* comm);
/* ncclGroupSimulateEnd: the summed predicted time (µs) of the comm's queued collectives, then
 * the queue is dropped as by weft_enqueue_discard (nothing runs, on any backend). */
ncclResult_t weft_enqueue_simulate(struct weft_comm_ctx* comm, float* time_us);
/* Work that outlives its launch (the CUDA kernels); nothing to do on the host backend. */
ncclResult_t weft_coll_check_error(struct weft_comm_ctx* comm); /* an error the running work reported */
ncclResult_t weft_coll_flush(struct weft_comm_ctx* comm);       /* wait for the comm's work, then check */
void weft_coll_stop(struct weft_comm_ctx* comm);                /* abort flag raised: stop it and wait */

#endif
