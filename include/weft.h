/* Weft's own extensions to the NCCL API. Not part of NCCL: programs that call these need Weft's
 * libnccl.so.2 (check with dlsym when they may run on NVIDIA's). */
#ifndef WEFT_H
#define WEFT_H

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write the flight recorder of comm (its last WEFT_TRACE_BUFFER operations, and the progress of
 * the one running) as one JSON file into directory dir, or into WEFT_TRACE_DIR when dir is NULL.
 * The file is weft-trace-<commHash>-r<rank>-<host>-<pid>.json; `weft-trace DIR` reads every
 * rank's file of a directory and names the rank that stopped the job. Returns
 * ncclInvalidArgument when dir is NULL and WEFT_TRACE_DIR unset, ncclInvalidUsage when the
 * recorder is off (WEFT_TRACE_BUFFER=0), ncclSystemError when the file cannot be written. */
ncclResult_t weftCommDumpTrace(ncclComm_t comm, const char* dir);

#ifdef __cplusplus
}
#endif

#endif
