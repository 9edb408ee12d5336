/* Channels of one ring collective interleaved step by step in the calling thread (network
 * connectors): each channel's body runs as a coroutine that gives the thread back whenever its
 * next step is not ready, so one channel reduces or copies while another's step is on the wire. */
#ifndef WEFT_COLLECTIVES_HOST_INTERLEAVE_H
#define WEFT_COLLECTIVES_HOST_INTERLEAVE_H

#include "collectives/dev_types.h"
#include "collectives/host/wait.h"
#include "nccl.h"
#include "transport/connector.h"

/* Coroutine stack per channel: ring bodies are shallow; WARN formatting is the deepest. */
#define WEFT_HOST_STACK_BYTES (256 * 1024)

struct weft_host_sched;

/* Run works[0..n) (channel c on send[c]/recv[c]) interleaved; returns the first error.
 * stacks[0..n) keeps the coroutine stacks between calls (NULL entries are allocated here), so
 * a collective touches no fresh pages; weft_host_interleave_free releases them. */
ncclResult_t weft_host_run_interleaved(const struct weft_dev_work* works, int n, struct weft_conn* send,
                                       struct weft_conn* recv, struct weft_waiter* waiter, const void* in,
                                       void* out, void** stacks);
void weft_host_interleave_free(void** stacks, int n);
/* Inside a channel's coroutine: wait until ready(arg), letting other channels run meanwhile. */
ncclResult_t weft_host_sched_wait(struct weft_host_sched* s, weft_ready_fn ready, void* arg,
                                  uint64_t* doorbell, uint32_t* waiting, int peer, const char* what);

#endif
