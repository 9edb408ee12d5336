/* The host executor: run one channel's work of a collective with the ring bodies. */
#ifndef WEFT_COLLECTIVES_HOST_EXEC_H
#define WEFT_COLLECTIVES_HOST_EXEC_H

#include "collectives/dev_types.h"
#include "collectives/host/wait.h"
#include "nccl.h"
#include "transport/connector.h"

/* send: connector to the next rank, recv: from the previous one (both NULL with one rank). */
ncclResult_t weft_host_run_work(const struct weft_dev_work* w, struct weft_conn* send, struct weft_conn* recv,
                                struct weft_waiter* waiter, int channel, const void* in, void* out);
/* The same inside an interleaved channel's coroutine (collectives/host/interleave.h); sched NULL:
 * waits block this thread. */
struct weft_host_sched;
ncclResult_t weft_host_run_work_sched(const struct weft_dev_work* w, struct weft_conn* send,
                                      struct weft_conn* recv, struct weft_waiter* waiter, int channel,
                                      const void* in, void* out, struct weft_host_sched* sched);

#endif
