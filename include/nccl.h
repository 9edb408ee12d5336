/* Weft: public API, written for Weft with the names, values and layouts of NCCL 2.32.3.
 * Programs built against NVIDIA's nccl.h (2.28 onwards) run unchanged against Weft's
 * libnccl.so.2: versioned structs are read by their size and version. The host side of the
 * device API lives in nccl_device.h, as in NVIDIA's layout. */
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
typedef struct CUevent_st* cudaEvent_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 23203
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
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
/* The magic of every versioned struct (configs, properties, requirements). */
#define NCCL_API_MAGIC 0xcafebeef

/* Window registration flags (ncclCommWindowRegister). */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_GIN_ONLY 0x04
#define NCCL_WIN_CFT_COUNTED 0x08
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

/* ncclConfig_t.hostCftMode values. */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;

/* ncclConfig_t.nvlsHostMode values (a bit mask between the two ends). */
typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* Versioned by size/magic/version: a caller built against an older header passes a smaller
 * struct, and the library reads only the fields that header knew. */
typedef struct ncclConfig_v23100 {
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
  int nvlinkCentricSched; /* 2.28 ends here */
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                            \
  {                                                                                                        \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT                                                                              \
  }

/* A vendor extension: a linked list of keyed values hung off a per-collective config. */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* Per-collective settings for the nccl*Config variants of the collectives (2.32). */
typedef struct ncclCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection; /* NULL or "" means automatic */
  int forceAlgSelection;    /* 1: a selection that cannot be met is an error */
  int CTAPolicy;            /* undefined: the communicator's */
  uint64_t userProfilerTag;
  cudaEvent_t launchCompletionEvent;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                                 \
  {                                                                                                 \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_PTR,             \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_PTR, 1, NCCL_CONFIG_UNDEF_INT, 0, NCCL_CONFIG_UNDEF_PTR                   \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

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

/* ncclCommSuspend flags. */
#define NCCL_SUSPEND_MEM 0x01

/* What ncclCommMemStats reports. */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes a suspend releases (while suspended: those it released) */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes held whether suspended or not */
  ncclStatGpuMemTotal = 3      /* all bytes the communicator holds */
} ncclCommMemStat_t;

/* One entry of ncclWaitSignal: wait for opCnt signals from peer on (sigIdx, ctx). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

typedef enum { NCCL_ENCRYPTION_MODE_NONE = 0, NCCL_ENCRYPTION_MODE_PSK = 1 } ncclEncryptionMode_t;

typedef struct ncclEncryptionConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int mode;
  const char* psk;
} ncclEncryptionConfig_t;

#define NCCL_ENCRYPTION_CONFIG_INITIALIZER                                                        \
  {                                                                                               \
    sizeof(ncclEncryptionConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_ENCRYPTION_MODE_NONE, \
        NCCL_CONFIG_UNDEF_PTR                                                                     \
  }

/* A handle on one entry of the parameter table (ncclParamBind). */
typedef struct ncclParamHandle* ncclParamHandle_t;

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
WEFT_DECLARE(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId);
WEFT_DECLARE(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
             ncclComm_t* newcomm, ncclConfig_t* config);
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
WEFT_DECLARE(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
WEFT_DECLARE(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags);
WEFT_DECLARE(ncclResult_t, ncclCommResume, ncclComm_t comm);
WEFT_DECLARE(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
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

WEFT_DECLARE(ncclResult_t, ncclAllReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclBroadcastConfig, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclAllGatherConfig, const void* sendbuff, void* recvbuff, size_t sendcount,
             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclReduceScatterConfig, const void* sendbuff, void* recvbuff, size_t recvcount,
             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclAlltoAllConfig, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclGatherConfig, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t* config);
WEFT_DECLARE(ncclResult_t, ncclScatterConfig, const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
             const ncclCollConfig_t* config);

/* One-sided operations over windows. */
WEFT_DECLARE(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype,
             int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
             ncclComm_t comm, cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
             cudaStream_t stream);
WEFT_DECLARE(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
             cudaStream_t stream);

WEFT_DECLARE(ncclResult_t, ncclGroupStart, void);
WEFT_DECLARE(ncclResult_t, ncclGroupEnd, void);
WEFT_DECLARE(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo);

WEFT_DECLARE(ncclResult_t, ncclSetEncryption, const ncclEncryptionConfig_t* config);

/* The parameter table: every NCCL_* / WEFT_* setting, by key. */
WEFT_DECLARE(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key);
WEFT_DECLARE(ncclResult_t, ncclParamGetI8, ncclParamHandle_t h, int8_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetI16, ncclParamHandle_t h, int16_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetI32, ncclParamHandle_t h, int32_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetI64, ncclParamHandle_t h, int64_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetU8, ncclParamHandle_t h, uint8_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetU16, ncclParamHandle_t h, uint16_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetU32, ncclParamHandle_t h, uint32_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetU64, ncclParamHandle_t h, uint64_t* out);
WEFT_DECLARE(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out);
WEFT_DECLARE(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len);
WEFT_DECLARE(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen);
WEFT_DECLARE(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen);
WEFT_DECLARE(void, ncclParamDumpAll, void);

/* Kept for NCCL's ABI; it has no p-twin there either. */
void ncclResetDebugInitInternal(void);

#undef WEFT_DECLARE

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
