/* Defines a public entry point: pncclX is the strong definition, ncclX a weak alias of it,
 * so profilers can interpose on ncclX and still reach the library through pncclX. */
#ifndef WEFT_CORE_API_H
#define WEFT_CORE_API_H

#include "nccl.h"

#define WEFT_API(ret, name, ...)                                                        \
  __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);                      \
  __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  ret p##name(__VA_ARGS__)

struct ncclComm;
struct weft_call;
struct weft_redop;
/* Queues a collective or point-to-point call (core/api_coll.c): checks comm, then inside the
 * call's implicit group validates the call and builds its tasks (collectives/enqueue.h). A
 * config (nccl*Config; NULL: none) is read and checked first, outside that group, so a refused
 * config is an error of this call alone (as in NCCL, the rest of an enclosing group still runs).
 * coll: the enum weft_coll the call is planned as (see weft_enqueue_config). */
ncclResult_t weft_api_enqueue(struct ncclComm* comm, struct weft_call* call, int coll,
                              const ncclCollConfig_t* config,
                              ncclResult_t (*check)(const struct weft_call* call),
                              ncclResult_t (*build)(const struct weft_call* call,
                                                    const struct weft_redop* op));

/* Reports a function Weft does not implement yet: ncclInvalidUsage and a WARN that becomes
 * the last-error text. */
ncclResult_t weft_unsupported(const char* function);

#endif
