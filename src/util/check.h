/* Error propagation macros: log once where an error is detected, callers only propagate. */
#ifndef WEFT_UTIL_CHECK_H
#define WEFT_UTIL_CHECK_H

#include "nccl.h"
#include "util/log.h"

/* ncclInProgress is not a failure: nonblocking steps report it upwards unchanged. */
#define WEFT_FAILED(res) ((res) != ncclSuccess && (res) != ncclInProgress)

#define WEFT_CHECK(call)                          \
  do {                                            \
    ncclResult_t weft_res_ = (call);              \
    if (WEFT_FAILED(weft_res_)) return weft_res_; \
  } while (0)

#define WEFT_CHECK_GOTO(call, res, label) \
  do {                                    \
    (res) = (call);                       \
    if (WEFT_FAILED(res)) goto label;     \
  } while (0)

/* System calls: on failure WARN with errno text and return ncclSystemError. */
#define WEFT_SYSCHECK(call, what)                          \
  do {                                                     \
    if ((call) < 0) {                                      \
      WEFT_WARN("%s failed: %s", (what), strerror(errno)); \
      return ncclSystemError;                              \
    }                                                      \
  } while (0)

/* Argument checks at the API boundary: WARN naming the argument and its value. */
#define WEFT_ARG_CHECK(cond, fmt, ...)                    \
  do {                                                    \
    if (!(cond)) {                                        \
      WEFT_WARN("Invalid argument: " fmt, ##__VA_ARGS__); \
      return ncclInvalidArgument;                         \
    }                                                     \
  } while (0)

#endif
