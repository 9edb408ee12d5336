/* weftCommDumpTrace (include/weft.h): a dump of the flight recorder on the caller's request. */
#include "collectives/trace.h"
#include "core/comm.h"
#include "util/check.h"
#include "util/log.h"
#include "weft.h"

__attribute__((visibility("default"))) ncclResult_t weftCommDumpTrace(ncclComm_t comm, const char* dir) {
  if (comm == NULL || comm->magic != WEFT_COMM_MAGIC) {
    WEFT_WARN("weftCommDumpTrace: comm %p is not a live communicator", (void*)comm);
    return ncclInvalidArgument;
  }
  if (comm->ctx.peers == NULL) {
    WEFT_WARN("weftCommDumpTrace: comm %p rank %d has not finished its init", (void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  return weft_trace_dump(&comm->ctx, dir, WEFT_TRACE_ON_REQUEST, 1);
}
