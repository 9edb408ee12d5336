/* Prints the ABI facts of whichever nccl.h it is compiled with (sizes, offsets, field types, enum
 * values, macros, initializers), one ABI_STATIC/ABI_RUNTIME line each. Built once with NVIDIA's
 * header and once with Weft's; the outputs must be identical, and Weft's output is compiled
 * against NVIDIA's header as static assertions (test_abi_static). */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "abi_common.h"

/* Compile-time facts: the expression text is printed unexpanded so both dumps share it. */
#define S(e) printf("ABI_STATIC(%s, %lld)\n", #e, (long long)(e))
/* Facts that need an object (initializers, pointers): checked at run time. */
#define R(e) printf("ABI_RUNTIME(%s, %lld)\n", #e, (long long)(e))
#define FIELD(type, f)              \
  do {                              \
    S(offsetof(type, f));           \
    S(sizeof(((type*)0)->f));       \
    S(ABI_TYPECODE(((type*)0)->f)); \
  } while (0)

static void types(void) {
  S(sizeof(ncclComm_t));
  S(_Generic((ncclComm_t)0, struct ncclComm * : 1, default : 0));
  S(sizeof(ncclWindow_t));
  S(_Generic((ncclWindow_t)0, struct ncclWindow_vidmem * : 1, default : 0));
  S(sizeof(cudaStream_t));
  S(_Generic((cudaStream_t)0, struct CUstream_st * : 1, default : 0));
  S(sizeof(ncclUniqueId));
  S(_Alignof(ncclUniqueId));
  FIELD(ncclUniqueId, internal);
  S(sizeof(((ncclUniqueId*)0)->internal[0]));
  S(sizeof(ncclResult_t));
  S(sizeof(ncclRedOp_t));
  S(sizeof(ncclRedOp_dummy_t));
  S(sizeof(ncclDataType_t));
  S(sizeof(ncclScalarResidence_t));
  S(ABI_TYPECODE((ncclResult_t)0));
  S(ABI_TYPECODE((ncclRedOp_t)0));
  S(ABI_TYPECODE((ncclDataType_t)0));
  S(ABI_TYPECODE((ncclScalarResidence_t)0));
}

static void config(void) {
  S(sizeof(ncclConfig_t));
  S(_Alignof(ncclConfig_t));
  S(sizeof(struct ncclConfig_v23100));
  S(_Generic((ncclConfig_t*)0, struct ncclConfig_v23100 * : 1, default : 0));
  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);
  FIELD(ncclConfig_t, graphUsageMode);
  FIELD(ncclConfig_t, numRmaCtx);
  FIELD(ncclConfig_t, maxP2pPeers);
  FIELD(ncclConfig_t, graphStreamOrdering);
  FIELD(ncclConfig_t, launchOrderImplicit);
  FIELD(ncclConfig_t, numRmaSig);
  FIELD(ncclConfig_t, rmaEagerInit);
  FIELD(ncclConfig_t, hostCftMode);
  FIELD(ncclConfig_t, nvlsHostMode);
  S(sizeof(ncclSimInfo_t));
  S(_Alignof(ncclSimInfo_t));
  S(sizeof(struct ncclSimInfo_v22200));
  S(_Generic((ncclSimInfo_t*)0, struct ncclSimInfo_v22200 * : 1, default : 0));
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);
}

/* The structs 2.29-2.32 added: per-collective config, its extension list, signals, encryption. */
static void config_232(void) {
  S(sizeof(ncclCollConfig_t));
  S(_Alignof(ncclCollConfig_t));
  S(_Generic((ncclCollConfig_t*)0, struct ncclCollConfig_v23200 * : 1, default : 0));
  FIELD(ncclCollConfig_t, size);
  FIELD(ncclCollConfig_t, magic);
  FIELD(ncclCollConfig_t, version);
  S(offsetof(ncclCollConfig_t, ext));
  S(sizeof(((ncclCollConfig_t*)0)->ext));
  FIELD(ncclCollConfig_t, minCTAs);
  FIELD(ncclCollConfig_t, maxCTAs);
  FIELD(ncclCollConfig_t, nvlsCTAs);
  FIELD(ncclCollConfig_t, cgaClusterSize);
  FIELD(ncclCollConfig_t, algSelection);
  FIELD(ncclCollConfig_t, forceAlgSelection);
  FIELD(ncclCollConfig_t, CTAPolicy);
  FIELD(ncclCollConfig_t, userProfilerTag);
  S(offsetof(ncclCollConfig_t, launchCompletionEvent));
  S(sizeof(((ncclCollConfig_t*)0)->launchCompletionEvent));
  S(sizeof(ncclConfigExt_t));
  S(offsetof(ncclConfigExt_t, next));
  S(offsetof(ncclConfigExt_t, key.vendorId));
  S(offsetof(ncclConfigExt_t, key.optionId));
  S(offsetof(ncclConfigExt_t, val));
  S(sizeof(((ncclConfigExt_t*)0)->val));
  S(sizeof(ncclWaitSignalDesc_t));
  FIELD(ncclWaitSignalDesc_t, opCnt);
  FIELD(ncclWaitSignalDesc_t, peer);
  FIELD(ncclWaitSignalDesc_t, sigIdx);
  FIELD(ncclWaitSignalDesc_t, ctx);
  S(sizeof(ncclEncryptionConfig_t));
  S(_Generic((ncclEncryptionConfig_t*)0, struct ncclEncryptionConfig_v23200 * : 1, default : 0));
  FIELD(ncclEncryptionConfig_t, size);
  FIELD(ncclEncryptionConfig_t, magic);
  FIELD(ncclEncryptionConfig_t, version);
  FIELD(ncclEncryptionConfig_t, mode);
  FIELD(ncclEncryptionConfig_t, psk);
  S(sizeof(ncclParamHandle_t));
  S(_Generic((ncclParamHandle_t)0, struct ncclParamHandle * : 1, default : 0));
  S(sizeof(ncclCommMemStat_t));
  S(sizeof(ncclHostCftMode_t));
  S(sizeof(ncclNvlsHostMode_t));
  S(sizeof(ncclEncryptionMode_t));
}

static void enums(void) {
  S(ncclSuccess);
  S(ncclUnhandledCudaError);
  S(ncclSystemError);
  S(ncclInternalError);
  S(ncclInvalidArgument);
  S(ncclInvalidUsage);
  S(ncclRemoteError);
  S(ncclInProgress);
  S(ncclTimeout);
  S(ncclNumResults);
  S(ncclNumOps_dummy);
  S(ncclSum);
  S(ncclProd);
  S(ncclMax);
  S(ncclMin);
  S(ncclAvg);
  S(ncclNumOps);
  S(ncclMaxRedOp);
  S(ncclInt8);
  S(ncclChar);
  S(ncclUint8);
  S(ncclInt32);
  S(ncclInt);
  S(ncclUint32);
  S(ncclInt64);
  S(ncclUint64);
  S(ncclFloat16);
  S(ncclHalf);
  S(ncclFloat32);
  S(ncclFloat);
  S(ncclFloat64);
  S(ncclDouble);
  S(ncclBfloat16);
  S(ncclFloat8e4m3);
  S(ncclFloat8e5m2);
  S(ncclNumTypes);
  S(ncclScalarDevice);
  S(ncclScalarHostImmediate);
  S(ncclHostCftDefault);
  S(ncclHostCftEnable);
  S(ncclHostCftDisable);
  S(ncclHostCftFallback);
  S(ncclNvlsHostModeDefault);
  S(ncclNvlsHostModeEnable);
  S(ncclNvlsHostModeDisableTransport);
  S(ncclNvlsHostModeDisableSymmetricMultimem);
  S(ncclNvlsHostModeDisable);
  S(ncclStatGpuMemSuspend);
  S(ncclStatGpuMemSuspended);
  S(ncclStatGpuMemPersist);
  S(ncclStatGpuMemTotal);
  S(NCCL_ENCRYPTION_MODE_NONE);
  S(NCCL_ENCRYPTION_MODE_PSK);
}

static void macros(void) {
  S(NCCL_MAJOR);
  S(NCCL_MINOR);
  S(NCCL_PATCH);
  S(sizeof(NCCL_SUFFIX));
  S(NCCL_VERSION_CODE);
  S(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  S(NCCL_VERSION(2, 8, 4));
  S(NCCL_VERSION(2, 9, 6));
  S(NCCL_VERSION(1, 9, 0));
  S(NCCL_VERSION(3, 1, 2));
  S(NCCL_UNIQUE_ID_BYTES);
  S(NCCL_CONFIG_UNDEF_INT);
  S(NCCL_SPLIT_NOCOLOR);
  S(ABI_TYPECODE(NCCL_UNDEF_FLOAT));
  S((long long)(NCCL_UNDEF_FLOAT * 1000.0f));
  S(NCCL_WIN_DEFAULT);
  S(NCCL_WIN_COLL_SYMMETRIC);
  S(NCCL_WIN_STRICT_ORDERING);
  S(NCCL_WIN_GIN_ONLY);
  S(NCCL_WIN_CFT_COUNTED);
  S(NCCL_API_MAGIC);
  S(NCCL_SUSPEND_MEM);
  S(NCCL_WIN_REQUIRED_ALIGNMENT);
  S(NCCL_CTA_POLICY_DEFAULT);
  S(NCCL_CTA_POLICY_EFFICIENCY);
  S(NCCL_CTA_POLICY_ZERO);
  S(NCCL_SHRINK_DEFAULT);
  S(NCCL_SHRINK_ABORT);
  S(NCCL_REVOKE_DEFAULT);
  R(NCCL_COMM_NULL == NULL);
  R(NCCL_CONFIG_UNDEF_PTR == NULL);
  R(strcmp(NCCL_SUFFIX, "") == 0);
}

/* Initializer values; cfg, sim, coll and enc are declared with the same names in
 * test_abi_static.c. */
static void initializers(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclCollConfig_t coll = NCCL_COLLCONFIG_INITIALIZER;
  ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  R(cfg.size);
  R(cfg.magic);
  R(cfg.version);
  R(cfg.blocking);
  R(cfg.cgaClusterSize);
  R(cfg.minCTAs);
  R(cfg.maxCTAs);
  R(cfg.netName == NULL);
  R(cfg.splitShare);
  R(cfg.trafficClass);
  R(cfg.commName == NULL);
  R(cfg.collnetEnable);
  R(cfg.CTAPolicy);
  R(cfg.shrinkShare);
  R(cfg.nvlsCTAs);
  R(cfg.nChannelsPerNetPeer);
  R(cfg.nvlinkCentricSched);
  R(cfg.graphUsageMode);
  R(cfg.numRmaCtx);
  R(cfg.maxP2pPeers);
  R(cfg.graphStreamOrdering);
  R(cfg.launchOrderImplicit);
  R(cfg.numRmaSig);
  R(cfg.rmaEagerInit);
  R(cfg.hostCftMode);
  R(cfg.nvlsHostMode);
  R(coll.size);
  R(coll.magic);
  R(coll.version);
  R(coll.ext == NULL);
  R(coll.minCTAs);
  R(coll.maxCTAs);
  R(coll.nvlsCTAs);
  R(coll.cgaClusterSize);
  R(coll.algSelection == NULL);
  R(coll.forceAlgSelection);
  R(coll.CTAPolicy);
  R(coll.userProfilerTag);
  R(coll.launchCompletionEvent == NULL);
  R(enc.size);
  R(enc.magic);
  R(enc.version);
  R(enc.mode);
  R(enc.psk == NULL);
  R(sim.size);
  R(sim.magic);
  R(sim.version);
  R(sim.estimatedTime * 1000.0f);
}

int main(void) {
  /* Not an ABI fact: tells the test which header this dump was built with. */
#ifdef WEFT_VERSION_STRING
  printf("/* header: weft */\n");
#else
  printf("/* header: other */\n");
#endif
  types();
  config();
  config_232();
  enums();
  macros();
  initializers();
  return 0;
}
