/* Point-to-point entry points: Send and Recv, and AlltoAll, Gather and Scatter, which NCCL
 * defines as grouped sends and receives (one per peer, self included), with their nccl*Config
 * variants (nothing to select for them: the config's other settings still apply). */
#include <stdint.h>

#include "collectives/coll_config.h"
#include "collectives/enqueue.h"
#include "core/api.h"
#include "core/comm.h"
#include "util/check.h"

static size_t call_bytes(const struct weft_call* call) { return call->count * weft_dtype_size(call->dtype); }

static ncclResult_t append_p2p(const struct weft_call* call, enum weft_coll coll, const void* buff,
                               int peer) {
  return weft_enqueue_append(call, coll, coll == WEFT_COLL_SEND ? buff : NULL,
                             coll == WEFT_COLL_RECV ? (void*)buff : NULL, NULL, peer);
}

/* Address of peer's slice of a buffer of nranks slices. */
static const void* slice(const void* buff, const struct weft_call* call, int peer) {
  return (const void*)((uintptr_t)buff + (size_t)peer * call_bytes(call));
}

static ncclResult_t check_send(const struct weft_call* call) {
  return weft_enqueue_check_buf(call, "sendbuff", call->sendbuff);
}
static ncclResult_t build_send(const struct weft_call* call, const struct weft_redop* op) {
  (void)op;
  return append_p2p(call, WEFT_COLL_SEND, call->sendbuff, call->root);
}

WEFT_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  struct weft_call call = {.name = "Send",
                           .sendbuff = sendbuff,
                           .count = count,
                           .dtype = datatype,
                           .root = peer,
                           .root_name = "peer",
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_SEND, NULL, check_send, build_send);
}

static ncclResult_t check_recv(const struct weft_call* call) {
  return weft_enqueue_check_buf(call, "recvbuff", call->recvbuff);
}
static ncclResult_t build_recv(const struct weft_call* call, const struct weft_redop* op) {
  (void)op;
  return append_p2p(call, WEFT_COLL_RECV, call->recvbuff, call->root);
}

WEFT_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  struct weft_call call = {.name = "Recv",
                           .recvbuff = recvbuff,
                           .count = count,
                           .dtype = datatype,
                           .root = peer,
                           .root_name = "peer",
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_RECV, NULL, check_recv, build_recv);
}

/* Every slice of sendbuff goes out while slices of recvbuff come in, in no defined order:
 * the buffers must not partly overlap. sendbuff == recvbuff is accepted (with an undefined
 * result) because NCCL accepts it and nccl-tests' alltoall_perf times that in-place row. */
static ncclResult_t check_alltoall(const struct weft_call* call) {
  WEFT_CHECK(weft_enqueue_check_buf(call, "sendbuff", call->sendbuff));
  WEFT_CHECK(weft_enqueue_check_buf(call, "recvbuff", call->recvbuff));
  size_t n = call_bytes(call) * call->comm->nranks;
  return weft_enqueue_check_overlap(call, call->sendbuff, n, call->recvbuff, n, call->recvbuff);
}
static ncclResult_t build_alltoall(const struct weft_call* call, const struct weft_redop* op) {
  (void)op;
  for (int r = 0; r < call->comm->nranks; r++) {
    WEFT_CHECK(append_p2p(call, WEFT_COLL_SEND, slice(call->sendbuff, call, r), r));
    WEFT_CHECK(append_p2p(call, WEFT_COLL_RECV, slice(call->recvbuff, call, r), r));
  }
  return ncclSuccess;
}

static ncclResult_t all_to_all(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "AlltoAll",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = count,
                           .dtype = datatype,
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_SEND, config, check_alltoall, build_alltoall);
}

WEFT_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return all_to_all(sendbuff, recvbuff, count, datatype, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclAlltoAllConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return all_to_all(sendbuff, recvbuff, count, datatype, comm, stream, config);
}

/* Everyone sends count elements to root; the root receives nranks slices, in place when its
 * sendbuff is its own slice of recvbuff. */
static ncclResult_t check_gather(const struct weft_call* call) {
  WEFT_CHECK(weft_enqueue_check_buf(call, "sendbuff", call->sendbuff));
  if (call->comm->rank != call->root) return ncclSuccess;
  WEFT_CHECK(weft_enqueue_check_buf(call, "recvbuff", call->recvbuff));
  size_t n = call_bytes(call);
  return weft_enqueue_check_overlap(call, call->sendbuff, n, call->recvbuff, n * call->comm->nranks,
                                    slice(call->recvbuff, call, call->root));
}
static ncclResult_t build_gather(const struct weft_call* call, const struct weft_redop* op) {
  (void)op;
  WEFT_CHECK(append_p2p(call, WEFT_COLL_SEND, call->sendbuff, call->root));
  if (call->comm->rank != call->root) return ncclSuccess;
  for (int r = 0; r < call->comm->nranks; r++) {
    WEFT_CHECK(append_p2p(call, WEFT_COLL_RECV, slice(call->recvbuff, call, r), r));
  }
  return ncclSuccess;
}

static ncclResult_t gather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "Gather",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = count,
                           .dtype = datatype,
                           .root = root,
                           .root_name = "root",
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_SEND, config, check_gather, build_gather);
}

WEFT_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return gather(sendbuff, recvbuff, count, datatype, root, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclGatherConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return gather(sendbuff, recvbuff, count, datatype, root, comm, stream, config);
}

/* The root sends one slice of sendbuff to each rank; everyone receives count elements, the
 * root in place when its recvbuff is its own slice of sendbuff. */
static ncclResult_t check_scatter(const struct weft_call* call) {
  WEFT_CHECK(weft_enqueue_check_buf(call, "recvbuff", call->recvbuff));
  if (call->comm->rank != call->root) return ncclSuccess;
  WEFT_CHECK(weft_enqueue_check_buf(call, "sendbuff", call->sendbuff));
  size_t n = call_bytes(call);
  const void* in_place = (const void*)((uintptr_t)call->recvbuff - (size_t)call->root * n);
  return weft_enqueue_check_overlap(call, call->sendbuff, n * call->comm->nranks, call->recvbuff, n,
                                    in_place);
}
static ncclResult_t build_scatter(const struct weft_call* call, const struct weft_redop* op) {
  (void)op;
  if (call->comm->rank == call->root) {
    for (int r = 0; r < call->comm->nranks; r++) {
      WEFT_CHECK(append_p2p(call, WEFT_COLL_SEND, slice(call->sendbuff, call, r), r));
    }
  }
  return append_p2p(call, WEFT_COLL_RECV, call->recvbuff, call->root);
}

static ncclResult_t scatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  struct weft_call call = {.name = "Scatter",
                           .sendbuff = sendbuff,
                           .recvbuff = recvbuff,
                           .count = count,
                           .dtype = datatype,
                           .root = root,
                           .root_name = "root",
                           .stream = stream};
  return weft_api_enqueue(comm, &call, WEFT_COLL_SEND, config, check_scatter, build_scatter);
}

WEFT_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return scatter(sendbuff, recvbuff, count, datatype, root, comm, stream, NULL);
}

WEFT_API(ncclResult_t, ncclScatterConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return scatter(sendbuff, recvbuff, count, datatype, root, comm, stream, config);
}
