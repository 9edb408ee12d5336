/* Defines a public entry point: pncclX is the strong definition, ncclX a weak alias of it,
 * so profilers can interpose on ncclX and still reach the library through pncclX. */
#ifndef WEFT_CORE_API_H
#define WEFT_CORE_API_H

#include "nccl.h"

#define WEFT_API(ret, name, ...)                                                        \
  __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);                      \
  __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  ret p##name(__VA_ARGS__)

/* Reports a function Weft does not implement yet: ncclInvalidUsage and a WARN that becomes
 * the last-error text. */
ncclResult_t weft_unsupported(const char* function);

#endif
