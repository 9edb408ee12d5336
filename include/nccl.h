/* Weft: public API, written for Weft with the names, values and layouts of NCCL 2.28.9.
 * Programs built against NVIDIA's nccl.h run unchanged against libnccl.so.2 from Weft. */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* cudaStream_t is the same pointer type cuda_runtime.h declares, so either header may come first. */
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
/* Versions up to 2.8 were encoded with a factor 1000 for the major number, later ones 10000. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

#define WEFT_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* Window registration flags (ncclCommWindowRegister). */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags. */
#define NCCL_REVOKE_DEFAULT 0x00

/* Versioned by size/magic/version: a caller built against an older header passes a smaller
 * struct, and the library reads only the fields that header knew. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                     \
  {                                                                                                 \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),             \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                                \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* The enum below must stay 4 bytes wide; ncclMaxRedOp is the largest value that keeps it so. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* first id handed out by ncclRedOpCreate* */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
  ncclScalarDevice = 0,       /* read from device memory while the collective runs */
  ncclScalarHostImmediate = 1 /* read from host memory before ncclRedOpCreate* returns */
} ncclScalarResidence_t;

/* Device-API handle types (host side of NCCL's device API; the handles stay opaque here). */
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

/* Each function exists as ncclX and as the profiling twin pncclX. */
#define WEFT_DECLARE(ret, name, ...) \
  ret name(__VA_ARGS__);             \
  ret p##name(__VA_ARGS__)

WEFT_DECLARE(ncclResult_t, ncclMemAlloc, void** ptr, size_t size);
WEFT_DECLARE(ncclResult_t, ncclMemFree, void* ptr);
WEFT_DECLARE(ncclResult_t, ncclGetVersion, int* version);
WEFT_DECLARE(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId);
WEFT_DECLARE(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
             int rank, ncclConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
WEFT_DECLARE(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist);
WEFT_DECLARE(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
             ncclUniqueId* commIds, ncclConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclCommFinalize, ncclComm_t comm);
WEFT_DECLARE(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
WEFT_DECLARE(ncclResult_t, ncclCommAbort, ncclComm_t comm);
WEFT_DECLARE(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags);
WEFT_DECLARE(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
             ncclConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
WEFT_DECLARE(const char*, ncclGetErrorString, ncclResult_t result);
WEFT_DECLARE(const char*, ncclGetLastError, ncclComm_t comm);
WEFT_DECLARE(void, ncclResetDebugInit, void);
WEFT_DECLARE(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError);
WEFT_DECLARE(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count);
WEFT_DECLARE(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device);
WEFT_DECLARE(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank);
WEFT_DECLARE(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle);
WEFT_DECLARE(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle);
WEFT_DECLARE(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size,
             ncclWindow_t* win, int winFlags);
WEFT_DECLARE(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win);
WEFT_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
             ncclScalarResidence_t residence, ncclComm_t comm);
WEFT_DECLARE(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm);

WEFT_DECLARE(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
             ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
             ncclComm_t comm, cudaStream_t stream);

WEFT_DECLARE(ncclResult_t, ncclGroupStart, void);
WEFT_DECLARE(ncclResult_t, ncclGroupEnd, void);
WEFT_DECLARE(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo);

/* Host side of the device API. */
WEFT_DECLARE(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
             ncclDevComm_t* outDevComm);
WEFT_DECLARE(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm_t* devComm);
WEFT_DECLARE(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
             ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
WEFT_DECLARE(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team, int nBarriers,
             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
WEFT_DECLARE(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize);
WEFT_DECLARE(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
             ncclDevResourceRequirements_t* outReq);
WEFT_DECLARE(ncclTeam_t, ncclTeamWorld, ncclComm_t comm);
WEFT_DECLARE(ncclTeam_t, ncclTeamLsa, ncclComm_t comm);
WEFT_DECLARE(ncclTeam_t, ncclTeamRail, ncclComm_t comm);
WEFT_DECLARE(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank);
WEFT_DECLARE(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank);

/* Kept for NCCL's ABI; it has no p-twin there either. */
void ncclResetDebugInitInternal(void);

#undef WEFT_DECLARE

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
