/* Placeholder until suspend lands: each returns ncclInvalidUsage, "not supported by Weft yet". */
#include "core/api.h"
#include "nccl_device/host.h"

WEFT_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  (void)comm;
  (void)flags;
  return weft_unsupported("ncclCommSuspend");
}

WEFT_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  (void)comm;
  return weft_unsupported("ncclCommResume");
}

WEFT_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  (void)comm;
  (void)stat;
  (void)value;
  return weft_unsupported("ncclCommMemStats");
}

WEFT_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties_t* props) {
  (void)comm;
  (void)props;
  return weft_unsupported("ncclCommQueryProperties");
}
