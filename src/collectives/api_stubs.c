/* Placeholder entry points of the collectives layer until the host engine lands: each reports
 * itself unsupported. collectives/ replaces this file. */
#include "core/api.h"

WEFT_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  (void)ptr;
  (void)size;
  return weft_unsupported("ncclMemAlloc");
}

WEFT_API(ncclResult_t, ncclMemFree, void* ptr) {
  (void)ptr;
  return weft_unsupported("ncclMemFree");
}

WEFT_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  (void)comm;
  (void)buff;
  (void)size;
  (void)handle;
  return weft_unsupported("ncclCommRegister");
}

WEFT_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  (void)comm;
  (void)handle;
  return weft_unsupported("ncclCommDeregister");
}

WEFT_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  (void)op;
  (void)scalar;
  (void)datatype;
  (void)residence;
  (void)comm;
  return weft_unsupported("ncclRedOpCreatePreMulSum");
}

WEFT_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  (void)op;
  (void)comm;
  return weft_unsupported("ncclRedOpDestroy");
}

WEFT_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)op;
  (void)root;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclReduce");
}

WEFT_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)buff;
  (void)count;
  (void)datatype;
  (void)root;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclBcast");
}

WEFT_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)root;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclBroadcast");
}

WEFT_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)op;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclAllReduce");
}

WEFT_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)recvcount;
  (void)datatype;
  (void)op;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclReduceScatter");
}

WEFT_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)sendcount;
  (void)datatype;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclAllGather");
}

WEFT_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclAlltoAll");
}

WEFT_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)root;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclGather");
}

WEFT_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)root;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclScatter");
}

WEFT_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff;
  (void)count;
  (void)datatype;
  (void)peer;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclSend");
}

WEFT_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)peer;
  (void)comm;
  (void)stream;
  return weft_unsupported("ncclRecv");
}

