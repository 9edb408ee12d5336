/* Signals of the one-sided operations on the host backend: every rank owns a board in shared
 * memory holding one counter per (source rank, signal index, context); senders on the same host
 * map it and publish a new count with a release store after their data, the owner waits on it
 * with the host executor's spin-then-futex waits (timeout, abort and peer liveness included). */
#ifndef WEFT_COLLECTIVES_HOST_SIGNALS_H
#define WEFT_COLLECTIVES_HOST_SIGNALS_H

#include <stdint.h>

#include "nccl.h"

struct weft_comm_ctx;
struct weft_waiter;
struct weft_signals;

/* Set up the boards of comm: collective over its ranks (bootstrap all-gathers). Peers on other
 * hosts get no board (signals to or from them are refused before they are queued). nsig and
 * nctx must be the same on every rank; a mismatch is an error naming the rank. */
ncclResult_t weft_signals_create(struct weft_comm_ctx* comm, int nsig, int nctx, struct weft_signals** out);
/* Marks this rank's board closed (waiters on it give up) and unmaps everything. NULL-safe. */
void weft_signals_destroy(struct weft_signals* s);
/* One more signal (sig, ctx) to peer, visible after every write this thread made before. */
ncclResult_t weft_signals_post(struct weft_signals* s, int peer, int sig, int ctx);
/* Wait until count more signals (sig, ctx) from peer than this rank consumed so far have
 * arrived, then consume them. */
ncclResult_t weft_signals_wait(struct weft_signals* s, struct weft_waiter* w, int peer, int sig, int ctx,
                               uint64_t count);

#endif
