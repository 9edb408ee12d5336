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
  S(sizeof(struct ncclConfig_v22800));
  S(_Generic((ncclConfig_t*)0, struct ncclConfig_v22800 * : 1, default : 0));
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
  S(sizeof(ncclSimInfo_t));
  S(_Alignof(ncclSimInfo_t));
  S(sizeof(struct ncclSimInfo_v22200));
  S(_Generic((ncclSimInfo_t*)0, struct ncclSimInfo_v22200 * : 1, default : 0));
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);
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

/* Initializer values; cfg and sim are declared with the same names in test_abi_static.c. */
static void initializers(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
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
  enums();
  macros();
  initializers();
  return 0;
}
