/* Checked CUDA runtime calls, for files compiled only with the CUDA backend (WEFT_CUDA=1). */
#ifndef WEFT_UTIL_CUDA_CHECK_H
#define WEFT_UTIL_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "nccl.h"
#include "util/log.h"

/* A failed runtime call: WARN with its text and return ncclUnhandledCudaError. The runtime's last
 * error is cleared: it is reported here, not by the application's next cudaGetLastError. */
#define WEFT_CUDACHECK(call)                                                                             \
  do {                                                                                                   \
    cudaError_t weft_cerr_ = (call);                                                                     \
    if (weft_cerr_ != cudaSuccess) {                                                                     \
      WEFT_WARN("Cuda failure '%s' (%d) in %s", cudaGetErrorString(weft_cerr_), (int)weft_cerr_, #call); \
      cudaGetLastError();                                                                                \
      return ncclUnhandledCudaError;                                                                     \
    }                                                                                                    \
  } while (0)

/* Same, jumping to a cleanup label with res set. */
#define WEFT_CUDACHECK_GOTO(call, res, label)                                                            \
  do {                                                                                                   \
    cudaError_t weft_cerr_ = (call);                                                                     \
    if (weft_cerr_ != cudaSuccess) {                                                                     \
      WEFT_WARN("Cuda failure '%s' (%d) in %s", cudaGetErrorString(weft_cerr_), (int)weft_cerr_, #call); \
      cudaGetLastError();                                                                                \
      (res) = ncclUnhandledCudaError;                                                                    \
      goto label;                                                                                        \
    }                                                                                                    \
  } while (0)

#endif
