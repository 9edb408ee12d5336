/* Collective entry points: AllReduce, Broadcast (and the in-place Bcast), Reduce, AllGather,
 * ReduceScatter, each also as its nccl*Config variant (the plain call is the variant with a NULL
 * config). Each checks its buffers the way NCCL defines them and queues one task. */
#include <stdint.h>

#include "collectives/coll.h"
#include "collectives/coll_config.h"
#include "collectives/engine.h"
#include "collectives/enqueue.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/suspend.h"
#include "util/check.h"

static size_t call_bytes(const struct weft_call* call) { return call->count * weft_dtype_size(call->dtype); }

static ncclResult_t build_one(const struct weft_call* call, const struct weft_redop* op,
                              enum weft_coll coll) {
  return weft_enqueue_append(call, coll, call->sendbuff, call->recvbuff, op, call->root);
}

/* Same-size buffers, in place when they are equal (AllReduce; the root of Broadcast/Reduce). */
static ncclResult_t check_same_size(const struct weft_call* call) {
  WEFT_CHECK(weft_enqueue_check_buf(call, "sendbuff", call->sendbuff));
  WEFT_CHECK(weft_enqueue_check_buf(call, "recvbuff", call->recvbuff));
  size_t n = call_bytes(call);
  return weft_enqueue_check_overlap(call, call->sendbuff, n, call->recvbuff, n, call->recvbuff);
}

static ncclResult_t check_allreduce(const struct weft_call* call) { return check_same_size(call); }

/* WEFT_DETERMINISTIC: Reduce to the last rank along the rank-order ring (graph/connect.c) folds
 * every element as op(...op(op(x0, x1), x2)..., x(n-1)), whatever channel or protocol carries
 * it; Broadcast then hands that result to every rank. The call's algorithm selection is set
 * aside: both halves are Ring, the one algorithm with a fixed order. */
static ncclResult_t build_deterministic_allreduce(const struct weft_call* call, const struct weft_redop* op) {
  struct weft_call_opts opts = call->opts ? *call->opts : (struct weft_call_opts){0};
  opts.algos = 0;
  struct weft_call reduce = *call, bcast = *call;
  reduce.opts = bcast.opts = &opts;
  reduce.root = bcast.root = call->comm->nranks - 1;
  bcast.sendbuff = call->recvbuff;
  WEFT_CHECK(build_one(&reduce, op, WEFT_COLL_REDUCE));
  return build_one(&bcast, op, WEFT_COLL_BROADCAST);
}

static ncclResult_t build_allreduce(const struct weft_call* call, const struct weft_redop* op) {
  const struct weft_plan_params* pp = weft_engine_plan_params(call->comm);
  if (pp != NULL && pp->deterministic) return build_deterministic_allreduce(call, op);
  return build_one(call, op, WEFT_COLL_ALLREDUCE);
}

ncclResult_t weft_api_enqueue(struct ncclComm* comm, struct weft_call* call, int coll,
                              const ncclCollConfig_t* config, weft_call_check_fn check,
                              weft_call_build_fn build) {
  struct weft_call_opts opts;
  call->alone = weft_group_depth() == 0;
  if (config != NULL) {
    WEFT_CHECK(weft_comm_check(comm, call->name));
    call->comm = &comm->ctx;
    WEFT_CHECK(weft_enqueue_config(call, coll, config, &opts));
    call->opts = &opts;
  }
  weft_group_enter();
  ncclResult_t res = weft_comm_check_active(comm, call->name);
  if (res != ncclSuccess) {
    if (weft_comm_has_failed(comm)) weft_coll_publish_cause(&comm->ctx);
    return weft_group_call_end(NULL, res);
  }
  call->comm = &comm->ctx;
  return weft_group_call_end(comm, weft_enqueue(call, check, build));
}

static ncclResult_t all_reduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                               const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "AllReduce",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = count,
                           .dtype = datatype,
                           .op = op,
                           .has_op = 1,
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_ALLREDUCE, config, check_allreduce, build_allreduce);
}

WEFT_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclAllReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream, config);
}

/* Only the root's sendbuff is read; every rank receives. */
static ncclResult_t check_broadcast(const struct weft_call* call) {
  if (call->comm->rank == call->root) return check_same_size(call);
  return weft_enqueue_check_buf(call, "recvbuff", call->recvbuff);
}
static ncclResult_t build_broadcast(const struct weft_call* call, const struct weft_redop* op) {
  return build_one(call, op, WEFT_COLL_BROADCAST);
}

static ncclResult_t broadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              int root, ncclComm_t comm, cudaStream_t stream,
                              const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "Broadcast",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = count,
                           .dtype = datatype,
                           .root = root,
                           .root_name = "root",
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_BROADCAST, config, check_broadcast, build_broadcast);
}

WEFT_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclBroadcastConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, config);
}

/* ncclBcast has one buffer, read at the root and written everywhere: WARNs name it as the caller did. */
static ncclResult_t check_bcast(const struct weft_call* call) {
  return weft_enqueue_check_buf(call, "buff", call->recvbuff);
}

WEFT_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  struct weft_call call = {.name = "Broadcast",
                           .sendbuff = buff,
                           .recvbuff = buff,
                           .count = count,
                           .dtype = datatype,
                           .root = root,
                           .root_name = "root",
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_BROADCAST, NULL, check_bcast, build_broadcast);
}

/* Every rank sends; only the root's recvbuff is written. */
static ncclResult_t check_reduce(const struct weft_call* call) {
  if (call->comm->rank == call->root) return check_same_size(call);
  return weft_enqueue_check_buf(call, "sendbuff", call->sendbuff);
}
static ncclResult_t build_reduce(const struct weft_call* call, const struct weft_redop* op) {
  return build_one(call, op, WEFT_COLL_REDUCE);
}

static ncclResult_t reduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                           const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "Reduce",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = count,
                           .dtype = datatype,
                           .op = op,
                           .has_op = 1,
                           .root = root,
                           .root_name = "root",
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_REDUCE, config, check_reduce, build_reduce);
}

WEFT_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, config);
}

/* In place when sendbuff is this rank's slice of recvbuff. */
static ncclResult_t check_allgather(const struct weft_call* call) {
  WEFT_CHECK(weft_enqueue_check_buf(call, "sendbuff", call->sendbuff));
  WEFT_CHECK(weft_enqueue_check_buf(call, "recvbuff", call->recvbuff));
  size_t n = call_bytes(call);
  const void* slice = (const void*)((uintptr_t)call->recvbuff + (size_t)call->comm->rank * n);
  return weft_enqueue_check_overlap(call, call->sendbuff, n, call->recvbuff, n * call->comm->nranks, slice);
}
static ncclResult_t build_allgather(const struct weft_call* call, const struct weft_redop* op) {
  return build_one(call, op, WEFT_COLL_ALLGATHER);
}

static ncclResult_t all_gather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                               const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "AllGather",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = sendcount,
                           .dtype = datatype,
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_ALLGATHER, config, check_allgather, build_allgather);
}

WEFT_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclAllGatherConfig, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream, config);
}

/* In place when recvbuff is this rank's slice of sendbuff. */
static ncclResult_t check_reducescatter(const struct weft_call* call) {
  WEFT_CHECK(weft_enqueue_check_buf(call, "sendbuff", call->sendbuff));
  WEFT_CHECK(weft_enqueue_check_buf(call, "recvbuff", call->recvbuff));
  size_t n = call_bytes(call);
  const void* in_place = (const void*)((uintptr_t)call->recvbuff - (size_t)call->comm->rank * n);
  return weft_enqueue_check_overlap(call, call->sendbuff, n * call->comm->nranks, call->recvbuff, n,
                                    in_place);
}
static ncclResult_t build_reducescatter(const struct weft_call* call, const struct weft_redop* op) {
  return build_one(call, op, WEFT_COLL_REDUCESCATTER);
}

static ncclResult_t reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream, const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "ReduceScatter",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = recvcount,
                           .dtype = datatype,
                           .op = op,
                           .has_op = 1,
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_REDUCESCATTER, config, check_reducescatter,
                          build_reducescatter);
}

WEFT_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclReduceScatterConfig, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config);
}
