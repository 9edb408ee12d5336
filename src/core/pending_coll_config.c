/* Placeholder until coll_config lands: each returns ncclInvalidUsage, "not supported by Weft yet". */
#include "core/api.h"
#include "nccl_device/host.h"

WEFT_API(ncclResult_t, ncclAllReduceConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)op;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclAllReduceConfig");
}

WEFT_API(ncclResult_t, ncclBroadcastConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)root;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclBroadcastConfig");
}

WEFT_API(ncclResult_t, ncclReduceConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)op;
  (void)root;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclReduceConfig");
}

WEFT_API(ncclResult_t, ncclAllGatherConfig, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)sendcount;
  (void)datatype;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclAllGatherConfig");
}

WEFT_API(ncclResult_t, ncclReduceScatterConfig, const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)recvcount;
  (void)datatype;
  (void)op;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclReduceScatterConfig");
}

WEFT_API(ncclResult_t, ncclAlltoAllConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclAlltoAllConfig");
}

WEFT_API(ncclResult_t, ncclGatherConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)root;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclGatherConfig");
}

WEFT_API(ncclResult_t, ncclScatterConfig, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  (void)sendbuff;
  (void)recvbuff;
  (void)count;
  (void)datatype;
  (void)root;
  (void)comm;
  (void)stream;
  (void)config;
  return weft_unsupported("ncclScatterConfig");
}
