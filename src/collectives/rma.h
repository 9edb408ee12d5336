/* One-sided operations (ncclPutSignal, ncclSignal, ncclWaitSignal) and the per-communicator
 * state they share with windows (collectives/window.c): the signal boards, the registration
 * count, and the operations and window (de)registrations a group has queued. Host backend only:
 * the CUDA backend refuses them with "not supported by Weft yet". */
#ifndef WEFT_COLLECTIVES_RMA_H
#define WEFT_COLLECTIVES_RMA_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct weft_comm_ctx;
struct weft_signals;
struct weft_rma_task;
struct weft_win_op;

#define WEFT_RMA_MAX_SIG 64 /* signal indices and contexts a communicator may ask for (config) */
#define WEFT_RMA_MAX_CTX 64

struct weft_rma_state {
  struct weft_signals* signals;       /* NULL until the first registration or one-sided operation */
  int nsig, nctx;                     /* valid sigIdx and ctx ranges, from numRmaSig / numRmaCtx */
  uint64_t windows_registered;        /* registrations so far: the next window's seq */
  struct weft_rma_task *head, *tail;  /* one-sided operations of the current group, call order */
  struct weft_win_op *ops, *ops_tail; /* window (de)registrations deferred to the group's end */
};

/* The state of comm, created on first use; NULL (WARNed) when out of memory. */
struct weft_rma_state* weft_rma_state(struct weft_comm_ctx* comm);
/* Set up the signal boards unless done already: collective over comm, so every rank reaches
 * it at its first registration or first one-sided operation, whichever comes first. */
ncclResult_t weft_rma_ensure_signals(struct weft_comm_ctx* comm);
/* Check and queue one operation (the calls' arguments, on a comm core/ checked is active); its
 * group's end runs it. */
ncclResult_t weft_rma_put(struct weft_comm_ctx* comm, const void* localbuff, size_t count,
                          ncclDataType_t datatype, int peer, ncclWindow_t peerWin, size_t peerWinOffset,
                          int sigIdx, int ctx, unsigned int flags);
ncclResult_t weft_rma_signal(struct weft_comm_ctx* comm, int peer, int sigIdx, int ctx, unsigned int flags);
ncclResult_t weft_rma_wait(struct weft_comm_ctx* comm, int nDesc, const ncclWaitSignalDesc_t* signalDescs);
/* Whether one-sided operations are queued on comm. */
int weft_rma_queued(const struct weft_comm_ctx* comm);
/* Run the one-sided operations the group queued on comm, in call order (before its
 * collectives, as NCCL plans them); drop them without running. */
ncclResult_t weft_rma_launch(struct weft_comm_ctx* comm);
void weft_rma_discard(struct weft_comm_ctx* comm);
/* Communicator teardown: close the signal board (peers waiting on it give up), drop queued
 * work. NULL-safe. */
void weft_rma_comm_fini(struct weft_comm_ctx* comm);

#endif
