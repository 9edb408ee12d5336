/* Temporary: communicator entry points until core/init.c lands. */
#include "core/api.h"

WEFT_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  (void)comm;
  return weft_unsupported("ncclCommAbort");
}

WEFT_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  (void)comm;
  (void)count;
  return weft_unsupported("ncclCommCount");
}

WEFT_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  (void)comm;
  (void)device;
  return weft_unsupported("ncclCommCuDevice");
}

WEFT_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  (void)comm;
  return weft_unsupported("ncclCommDestroy");
}

WEFT_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  (void)comm;
  return weft_unsupported("ncclCommFinalize");
}

WEFT_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  (void)comm;
  (void)asyncError;
  return weft_unsupported("ncclCommGetAsyncError");
}

WEFT_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  (void)comm;
  (void)ndev;
  (void)devlist;
  return weft_unsupported("ncclCommInitAll");
}

WEFT_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  (void)comm;
  (void)nranks;
  (void)commId;
  (void)rank;
  return weft_unsupported("ncclCommInitRank");
}

WEFT_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  (void)comm;
  (void)nranks;
  (void)commId;
  (void)rank;
  (void)config;
  return weft_unsupported("ncclCommInitRankConfig");
}

WEFT_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  (void)newcomm;
  (void)nranks;
  (void)myrank;
  (void)nId;
  (void)commIds;
  (void)config;
  return weft_unsupported("ncclCommInitRankScalable");
}

WEFT_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)comm;
  (void)color;
  (void)key;
  (void)newcomm;
  (void)config;
  return weft_unsupported("ncclCommSplit");
}

WEFT_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  (void)comm;
  (void)rank;
  return weft_unsupported("ncclCommUserRank");
}

WEFT_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  (void)uniqueId;
  return weft_unsupported("ncclGetUniqueId");
}

WEFT_API(ncclResult_t, ncclGroupEnd, void) {
  return weft_unsupported("ncclGroupEnd");
}

WEFT_API(ncclResult_t, ncclGroupStart, void) {
  return weft_unsupported("ncclGroupStart");
}

