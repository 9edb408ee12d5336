/* Placeholder until membership lands: each returns ncclInvalidUsage, "not supported by Weft yet". */
#include "core/api.h"
#include "nccl_device/host.h"

WEFT_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  (void)comm;
  (void)uniqueId;
  return weft_unsupported("ncclCommGetUniqueId");
}

WEFT_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)comm;
  (void)nRanks;
  (void)uniqueId;
  (void)rank;
  (void)newcomm;
  (void)config;
  return weft_unsupported("ncclCommGrow");
}
