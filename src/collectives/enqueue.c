/* Shared path of every collective and point-to-point call: validate the arguments, log the
 * call, and queue its tasks on the communicator inside an implicit group of depth one. */
#include "collectives/enqueue.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/profiler.h"
#include "collectives/redop.h"
#include "collectives/rma.h"
#include "collectives/trace.h"
#include "util/check.h"
#include "util/log.h"

size_t weft_dtype_size(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

ncclResult_t weft_enqueue_check_buf(const struct weft_call* call, const char* arg, const void* buf) {
  WEFT_ARG_CHECK(buf != NULL || call->count == 0, "%s: %s is NULL with count %zu (comm %p rank %d)",
                 call->name, arg, call->count, (void*)call->comm, call->comm->rank);
  return ncclSuccess;
}

ncclResult_t weft_enqueue_check_overlap(const struct weft_call* call, const void* send, size_t send_bytes,
                                        const void* recv, size_t recv_bytes, const void* in_place_send) {
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  if (send_bytes == 0 || recv_bytes == 0) return ncclSuccess;
  if (in_place_send != NULL && send == in_place_send) return ncclSuccess;
  int overlap = s < r + recv_bytes && r < s + send_bytes;
  WEFT_ARG_CHECK(!overlap,
                 "%s: sendbuff %p (%zu bytes) overlaps recvbuff %p (%zu bytes) and is not the in-place "
                 "layout (sendbuff %p) (comm %p rank %d)",
                 call->name, send, send_bytes, recv, recv_bytes, in_place_send, (void*)call->comm,
                 call->comm->rank);
  return ncclSuccess;
}

void weft_enqueue_free_tasks(struct weft_comm_ctx* comm, struct weft_task* t) {
  if (t == NULL) return;
  struct weft_task* rest = t->next;
  free(__atomic_exchange_n(&comm->task_spare, t, __ATOMIC_ACQ_REL));
  while (rest) {
    struct weft_task* next = rest->next;
    free(rest);
    rest = next;
  }
}

void weft_enqueue_drop_spare(struct weft_comm_ctx* comm) {
  free(__atomic_exchange_n(&comm->task_spare, NULL, __ATOMIC_ACQ_REL));
}

/* Every field of a task is set here, one by one: a task built whole on the stack and copied was
 * zeroed and copied by string instructions that cost a tenth of a small call. */
_Static_assert(sizeof(struct weft_task) == 184, "weft_enqueue_append sets every field of struct weft_task");

ncclResult_t weft_enqueue_append(const struct weft_call* call, enum weft_coll coll, const void* sendbuff,
                                 void* recvbuff, const struct weft_redop* op, int root) {
  struct weft_comm_ctx* comm = call->comm;
  struct weft_task* t = __atomic_exchange_n(&comm->task_spare, NULL, __ATOMIC_ACQ_REL);
  if (t == NULL) t = malloc(sizeof(*t));
  if (t == NULL) {
    WEFT_WARN("Failed to allocate a task (%zu bytes) on comm %p rank %d", sizeof(*t), (void*)comm,
              comm->rank);
    return ncclSystemError;
  }
  t->coll = coll;
  t->sendbuff = sendbuff;
  t->recvbuff = recvbuff;
  t->count = call->count;
  t->dtype = call->dtype;
  t->op = op != NULL ? *op : (struct weft_redop){.kind = WEFT_OP_SUM, .user_op = ncclSum};
  t->root = root;
  t->alone = call->alone && comm->tasks.head == NULL; /* the call's later tasks wait for it */
  t->seq = comm->next_seq++;
  t->stream = call->stream;
  if (call->opts != NULL)
    t->opts = *call->opts;
  else
    memset(&t->opts, 0, sizeof(t->opts));
  t->prof_ev = t->prof_api = t->prof_gapi = NULL;
  t->next = NULL;
  if (comm->tasks.tail) {
    comm->tasks.tail->next = t;
  } else {
    comm->tasks.head = t;
  }
  comm->tasks.tail = t;
  comm->tasks.count++;
  weft_prof_api_tag(comm->prof, t);
  if (comm->trace) weft_trace_enqueue(comm->trace, t);
  return ncclSuccess;
}

/* Everything but the buffers: datatype, op, root/peer. */
static ncclResult_t check_scalars(const struct weft_call* call, struct weft_redop* op) {
  struct weft_comm_ctx* comm = call->comm;
  size_t size = weft_dtype_size(call->dtype);
  WEFT_ARG_CHECK(size != 0, "%s: invalid datatype %d (comm %p rank %d)", call->name, (int)call->dtype,
                 (void*)comm, comm->rank);
  /* Buffers span up to count * size * nranks bytes: that must fit in the address space (checked
   * without a division: two of those were a twentieth of a small call). */
  size_t span;
  WEFT_ARG_CHECK(!__builtin_mul_overflow(call->count, size, &span) &&
                     !__builtin_mul_overflow(span, (size_t)comm->nranks, &span),
                 "%s: count %zu of datatype %d times %d ranks overflows the address space (comm %p rank %d)",
                 call->name, call->count, (int)call->dtype, comm->nranks, (void*)comm, comm->rank);
  if (call->has_op) WEFT_CHECK(weft_redop_resolve(comm, call->name, call->op, call->dtype, op));
  if (call->root_name) {
    WEFT_ARG_CHECK(call->root >= 0 && call->root < comm->nranks,
                   "%s: invalid %s %d (should be in the 0..%d range) (comm %p rank %d)", call->name,
                   call->root_name, call->root, comm->nranks - 1, (void*)comm, comm->rank);
  }
  return ncclSuccess;
}

ncclResult_t weft_enqueue(const struct weft_call* call, weft_call_check_fn check, weft_call_build_fn build) {
  struct weft_comm_ctx* comm = call->comm;
  struct weft_redop op = {.kind = WEFT_OP_SUM, .user_op = ncclSum};
  WEFT_INFO(WEFT_COLL,
            "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] "
            "stream %p",
            call->name, (unsigned long)comm->next_seq, call->sendbuff, (void*)call->recvbuff, call->count,
            (int)call->dtype, (int)call->op, call->root, (void*)comm, comm->nranks, (void*)call->stream);
  WEFT_CHECK(check_scalars(call, &op));
  WEFT_CHECK(check(call));
  if (call->count == 0) return ncclSuccess;
  weft_prof_api_call_begin(comm->prof, call->root_name, call->name, call->count, call->dtype, call->root,
                           (void*)call->stream);
  ncclResult_t res = build(call, &op);
  weft_prof_api_call_end(comm->prof);
  return res;
}

int weft_comm_has_queued(const struct weft_comm_ctx* comm) {
  return comm->tasks.head != NULL || weft_rma_queued(comm);
}
