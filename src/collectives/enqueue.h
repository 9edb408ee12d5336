/* Argument checks and task queueing shared by the collective and point-to-point entry points
 * (core/api_coll.c, core/api_p2p.c): validate, log the call, append tasks. The entry points
 * check the comm and hold the call's implicit group. */
#ifndef WEFT_COLLECTIVES_ENQUEUE_H
#define WEFT_COLLECTIVES_ENQUEUE_H

#include <stddef.h>

#include "collectives/task.h"
#include "nccl.h"

struct weft_comm_ctx;

/* One API call as the caller gave it. */
struct weft_call {
  const char* name; /* "AllReduce", ... for logs and WARNs */
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t op; /* validated only when has_op */
  int has_op;
  int root;              /* root or peer; 0 for calls that have neither */
  const char* root_name; /* "root", "peer" or NULL when the call has neither */
  struct weft_comm_ctx* comm;
  cudaStream_t stream;
  const struct weft_call_opts* opts; /* nccl*Config: what the config adds to the tasks; NULL: plain */
  int alone;                         /* made outside any group: launched as soon as it is queued */
};

/* Checks the buffers of a call whose comm, datatype, op and root are already valid. */
typedef ncclResult_t (*weft_call_check_fn)(const struct weft_call* call);
/* Appends the call's tasks with weft_enqueue_append; only called for count > 0. */
typedef ncclResult_t (*weft_call_build_fn)(const struct weft_call* call, const struct weft_redop* op);

/* Bytes of one element; 0 for an invalid datatype. */
size_t weft_dtype_size(ncclDataType_t dtype);
/* Buffer needed when count > 0; WARNs naming the call and the argument otherwise. */
ncclResult_t weft_enqueue_check_buf(const struct weft_call* call, const char* arg, const void* buf);
/* The two byte ranges of one call may overlap only in the in-place layout, where the send
 * range starts at in_place_send (NULL: no in-place form). Any other overlap is rejected:
 * NCCL defines no result for it. */
ncclResult_t weft_enqueue_check_overlap(const struct weft_call* call, const void* send, size_t send_bytes,
                                        const void* recv, size_t recv_bytes, const void* in_place_send);

/* Log the call at INFO/COLL, validate it (datatype, op, root, then check) and, when count > 0,
 * build its tasks. call->comm is active (the entry point checked it). */
ncclResult_t weft_enqueue(const struct weft_call* call, weft_call_check_fn check, weft_call_build_fn build);
/* Append a task of call (its comm, count, datatype, stream and options) to comm->tasks with the
 * next sequence number: collective coll on these buffers, with op (NULL: none) and root (the
 * root or peer). */
ncclResult_t weft_enqueue_append(const struct weft_call* call, enum weft_coll coll, const void* sendbuff,
                                 void* recvbuff, const struct weft_redop* op, int root);
/* Frees a list of tasks (NULL-safe), keeping one as comm's spare for the next append. */
void weft_enqueue_free_tasks(struct weft_comm_ctx* comm, struct weft_task* t);
/* Frees comm's spare task (communicator destruction). */
void weft_enqueue_drop_spare(struct weft_comm_ctx* comm);

#endif
