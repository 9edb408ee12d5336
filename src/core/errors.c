/* Version, error strings and the last-error text. */
#include "core/api.h"
#include "util/log.h"
#include "util/param.h"

WEFT_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == NULL) {
    WEFT_WARN("Invalid argument: version is NULL");
    return ncclInvalidArgument;
  }
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

WEFT_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

WEFT_API(const char*, ncclGetLastError, ncclComm_t comm) {
  (void)comm; /* NCCL keeps one text per process too */
  return weft_log_last_error();
}

WEFT_API(void, ncclResetDebugInit, void) { weft_log_reset(); }

__attribute__((visibility("default"))) void ncclResetDebugInitInternal(void) { weft_log_reset(); }

ncclResult_t weft_unsupported(const char* function) {
  WEFT_WARN("%s is not supported by Weft yet", function);
  return ncclInvalidUsage;
}
