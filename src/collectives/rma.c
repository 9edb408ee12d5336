/* ncclPutSignal, ncclSignal and ncclWaitSignal on the host backend (their entry points are in
 * core/api_rma.c). Arguments are checked when called; the operation is queued on its
 * communicator inside an implicit group and runs at the group's end, before the group's collectives and in
 * call order, as NCCL plans one-sided work. A put copies into the peer's window as mapped in this process,
 * then releases one signal (sigIdx, ctx) on the peer's board, so the data is visible before the signal is; a
 * wait returns once the described numbers of new signals arrived (each wait consumes them). Peers must be on
 * this host: between hosts these calls are refused (not supported by Weft yet). */
#include "collectives/rma.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/engine.h"
#include "collectives/enqueue.h"
#include "collectives/host/signals.h"
#include "collectives/host/wait.h"
#include "collectives/window.h"
#include "util/check.h"
#include "util/log.h"

enum rma_kind { RMA_PUT, RMA_SIGNAL, RMA_WAIT };

struct weft_rma_task {
  enum rma_kind kind;
  int peer, sig, ctx;
  const void* src; /* put */
  size_t bytes;
  struct weft_window* win; /* put: the window, checked again when the group runs */
  uint64_t win_seq;
  size_t offset;
  int ndesc; /* wait */
  ncclWaitSignalDesc_t* descs;
  uint64_t seq;
  struct weft_rma_task* next;
};

static const char* kind_name(enum rma_kind k) {
  return k == RMA_PUT ? "PutSignal" : k == RMA_SIGNAL ? "Signal" : "WaitSignal";
}

/* sigIdx and ctx ranges from the config: NCCL's default of one context (numRmaCtx 0 turns
 * one-sided operations off) and one signal index; more when the config asks, up to our cap. */
static void limits(const struct weft_comm_ctx* comm, int* nsig, int* nctx) {
  int ctx = comm->config.numRmaCtx, sig = comm->config.numRmaSig;
  *nctx = ctx == NCCL_CONFIG_UNDEF_INT || ctx < 0 ? 1 : ctx;
  *nsig = sig == NCCL_CONFIG_UNDEF_INT || sig < 1 ? 1 : sig;
  if (*nctx > WEFT_RMA_MAX_CTX || *nsig > WEFT_RMA_MAX_SIG)
    WEFT_INFO(WEFT_INIT, "comm %p rank %d: numRmaCtx %d / numRmaSig %d capped at %d / %d", (const void*)comm,
              comm->rank, *nctx, *nsig, WEFT_RMA_MAX_CTX, WEFT_RMA_MAX_SIG);
  if (*nctx > WEFT_RMA_MAX_CTX) *nctx = WEFT_RMA_MAX_CTX;
  if (*nsig > WEFT_RMA_MAX_SIG) *nsig = WEFT_RMA_MAX_SIG;
}

struct weft_rma_state* weft_rma_state(struct weft_comm_ctx* comm) {
  if (comm->rma != NULL) return comm->rma;
  struct weft_rma_state* st = calloc(1, sizeof(*st));
  if (st == NULL) {
    WEFT_WARN("Out of memory for the one-sided state of comm %p rank %d", (void*)comm, comm->rank);
    return NULL;
  }
  limits(comm, &st->nsig, &st->nctx);
  comm->rma = st;
  return st;
}

ncclResult_t weft_rma_ensure_signals(struct weft_comm_ctx* comm) {
  struct weft_rma_state* st = weft_rma_state(comm);
  if (st == NULL) return ncclSystemError;
  if (st->signals != NULL) return ncclSuccess;
  return weft_signals_create(comm, st->nsig, st->nctx > 0 ? st->nctx : 1, &st->signals);
}

static void free_tasks(struct weft_rma_task* t) {
  while (t) {
    struct weft_rma_task* next = t->next;
    free(t->descs);
    free(t);
    t = next;
  }
}

void weft_rma_discard(struct weft_comm_ctx* comm) {
  if (comm == NULL || comm->rma == NULL) return;
  free_tasks(comm->rma->head);
  comm->rma->head = comm->rma->tail = NULL;
}

void weft_rma_comm_fini(struct weft_comm_ctx* comm) {
  if (comm == NULL || comm->rma == NULL) return;
  weft_rma_discard(comm);
  weft_signals_destroy(comm->rma->signals);
  free(comm->rma);
  comm->rma = NULL;
}

/* ---- argument checks (at call time, so a bad call fails before anything runs) ---- */

static ncclResult_t check_comm(struct weft_comm_ctx* comm, const char* name) {
  if (comm->backend == WEFT_BACKEND_CUDA) {
    WEFT_WARN(
        "%s: one-sided operations on the CUDA backend are not supported by Weft yet (comm %p rank %d); "
        "the host backend (WEFT_BACKEND=host) has them",
        name, (void*)comm, comm->rank);
    return ncclInvalidUsage;
  }
  struct weft_rma_state* st = weft_rma_state(comm);
  if (st == NULL) return ncclSystemError;
  if (st->nctx == 0) {
    WEFT_WARN("%s: one-sided operations are off on comm %p rank %d (config numRmaCtx is 0)", name,
              (void*)comm, comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

/* peer, sigIdx and ctx of one signal; the peer must share this host. */
static ncclResult_t check_target(const struct weft_comm_ctx* comm, const char* name, const char* what,
                                 int peer, int sig, int ctx) {
  const struct weft_rma_state* st = comm->rma;
  WEFT_ARG_CHECK(peer >= 0 && peer < comm->nranks,
                 "%s: %speer %d is not in the 0..%d range (comm %p rank %d)", name, what, peer,
                 comm->nranks - 1, (const void*)comm, comm->rank);
  WEFT_ARG_CHECK(sig >= 0 && sig < st->nsig,
                 "%s: %ssigIdx %d is not in the 0..%d range (config numRmaSig) (comm %p rank %d)", name, what,
                 sig, st->nsig - 1, (const void*)comm, comm->rank);
  WEFT_ARG_CHECK(ctx >= 0 && ctx < st->nctx,
                 "%s: %sctx %d is not in the 0..%d range (config numRmaCtx) (comm %p rank %d)", name, what,
                 ctx, st->nctx - 1, (const void*)comm, comm->rank);
  if (comm->peers[peer].host_hash != comm->peers[comm->rank].host_hash) {
    WEFT_WARN(
        "%s: peer rank %d runs on host %s, not on this rank's (%d, host %s): one-sided operations "
        "between hosts are not supported by Weft yet (comm %p)",
        name, peer, comm->peers[peer].host_name, comm->rank, comm->peers[comm->rank].host_name,
        (const void*)comm);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

/* The destination: inside peer's part of the window, and mapped in this process. */
static ncclResult_t check_destination(const struct weft_comm_ctx* comm, struct weft_rma_task* t,
                                      ncclWindow_t peerWin) {
  WEFT_ARG_CHECK(peerWin != NULL, "ncclPutSignal: peerWin is NULL (peer %d comm %p rank %d)", t->peer,
                 (const void*)comm, comm->rank);
  struct weft_window* w = weft_window_find(comm, peerWin, "ncclPutSignal", "peerWin");
  if (w == NULL) return ncclInvalidArgument;
  size_t size = w->peer_size[t->peer];
  WEFT_ARG_CHECK(
      t->offset <= size && t->bytes <= size - t->offset,
      "ncclPutSignal: %zu bytes at peerWinOffset %zu do not fit in rank %d's %zu-byte part of window "
      "%p (comm %p rank %d)",
      t->bytes, t->offset, t->peer, size, (void*)peerWin, (const void*)comm, comm->rank);
  if (w->reach[t->peer] != WEFT_WIN_MAPPED) {
    WEFT_WARN("ncclPutSignal: rank %d's part of window %p cannot be written from rank %d: %s (comm %p)",
              t->peer, (void*)peerWin, comm->rank, weft_window_reach_text(w->reach[t->peer]),
              (const void*)comm);
    return ncclInvalidUsage;
  }
  t->win = w;
  t->win_seq = w->seq;
  return ncclSuccess;
}

static ncclResult_t check_put(struct weft_comm_ctx* comm, const void* localbuff, size_t count,
                              ncclDataType_t datatype, ncclWindow_t peerWin, unsigned int flags,
                              struct weft_rma_task* t) {
  WEFT_CHECK(check_comm(comm, "ncclPutSignal"));
  WEFT_ARG_CHECK(flags == 0, "ncclPutSignal: flags 0x%x must be 0 (comm %p rank %d)", flags, (void*)comm,
                 comm->rank);
  WEFT_CHECK(check_target(comm, "ncclPutSignal", "", t->peer, t->sig, t->ctx));
  size_t es = weft_dtype_size(datatype);
  WEFT_ARG_CHECK(es != 0, "ncclPutSignal: invalid datatype %d (comm %p rank %d)", (int)datatype, (void*)comm,
                 comm->rank);
  WEFT_ARG_CHECK(count <= SIZE_MAX / es,
                 "ncclPutSignal: count %zu of datatype %d overflows (comm %p rank %d)", count, (int)datatype,
                 (void*)comm, comm->rank);
  t->bytes = count * es;
  WEFT_ARG_CHECK(localbuff != NULL || t->bytes == 0,
                 "ncclPutSignal: localbuff is NULL with count %zu (comm %p rank %d)", count, (void*)comm,
                 comm->rank);
  WEFT_ARG_CHECK((uintptr_t)localbuff <= UINTPTR_MAX - t->bytes,
                 "ncclPutSignal: localbuff %p + %zu bytes wraps around (comm %p rank %d)", localbuff,
                 t->bytes, (void*)comm, comm->rank);
  t->src = localbuff;
  return check_destination(comm, t, peerWin);
}

static ncclResult_t check_wait(struct weft_comm_ctx* comm, int nDesc, const ncclWaitSignalDesc_t* descs) {
  WEFT_CHECK(check_comm(comm, "ncclWaitSignal"));
  WEFT_ARG_CHECK(nDesc > 0 && descs != NULL, "ncclWaitSignal: nDesc %d signalDescs %p (comm %p rank %d)",
                 nDesc, (const void*)descs, (void*)comm, comm->rank);
  for (int i = 0; i < nDesc; i++) {
    char what[40];
    snprintf(what, sizeof(what), "signalDescs[%d].", i);
    WEFT_ARG_CHECK(descs[i].opCnt > 0,
                   "ncclWaitSignal: signalDescs[%d].opCnt %d must be positive (comm %p rank %d)", i,
                   descs[i].opCnt, (void*)comm, comm->rank);
    WEFT_CHECK(check_target(comm, "ncclWaitSignal", what, descs[i].peer, descs[i].sigIdx, descs[i].ctx));
  }
  return ncclSuccess;
}

/* ---- queueing ---- */

static ncclResult_t append(struct weft_comm_ctx* comm, const struct weft_rma_task* proto,
                           const ncclWaitSignalDesc_t* descs) {
  struct weft_rma_task* t = calloc(1, sizeof(*t));
  if (t != NULL) *t = *proto;
  if (t != NULL && descs != NULL) {
    t->descs = malloc((size_t)t->ndesc * sizeof(*descs));
    if (t->descs != NULL) memcpy(t->descs, descs, (size_t)t->ndesc * sizeof(*descs));
  }
  if (t == NULL || (descs != NULL && t->descs == NULL)) {
    free(t);
    WEFT_WARN("Out of memory queueing a one-sided operation on comm %p rank %d", (void*)comm, comm->rank);
    return ncclSystemError;
  }
  WEFT_INFO(WEFT_COLL,
            "%s: opCount %lx localbuff %p bytes %zu peer %d peerWin %p offset %zu sigIdx %d ctx %d nDesc %d "
            "comm %p "
            "[nranks=%d]",
            kind_name(t->kind), (unsigned long)comm->next_seq, t->src, t->bytes, t->peer, (void*)t->win,
            t->offset, t->sig, t->ctx, t->ndesc, (void*)comm, comm->nranks);
  t->seq = comm->next_seq++;
  t->next = NULL;
  struct weft_rma_state* st = comm->rma;
  if (st->tail)
    st->tail->next = t;
  else
    st->head = t;
  st->tail = t;
  return ncclSuccess;
}

ncclResult_t weft_rma_put(struct weft_comm_ctx* comm, const void* localbuff, size_t count,
                          ncclDataType_t datatype, int peer, ncclWindow_t peerWin, size_t peerWinOffset,
                          int sigIdx, int ctx, unsigned int flags) {
  struct weft_rma_task t = {
      .kind = RMA_PUT, .peer = peer, .sig = sigIdx, .ctx = ctx, .offset = peerWinOffset};
  WEFT_CHECK(check_put(comm, localbuff, count, datatype, peerWin, flags, &t));
  return append(comm, &t, NULL);
}

ncclResult_t weft_rma_signal(struct weft_comm_ctx* comm, int peer, int sigIdx, int ctx, unsigned int flags) {
  struct weft_rma_task t = {.kind = RMA_SIGNAL, .peer = peer, .sig = sigIdx, .ctx = ctx};
  WEFT_CHECK(check_comm(comm, "ncclSignal"));
  WEFT_ARG_CHECK(flags == 0, "ncclSignal: flags 0x%x must be 0 (comm %p rank %d)", flags, (void*)comm,
                 comm->rank);
  WEFT_CHECK(check_target(comm, "ncclSignal", "", peer, sigIdx, ctx));
  return append(comm, &t, NULL);
}

ncclResult_t weft_rma_wait(struct weft_comm_ctx* comm, int nDesc, const ncclWaitSignalDesc_t* signalDescs) {
  struct weft_rma_task t = {.kind = RMA_WAIT, .ndesc = nDesc};
  WEFT_CHECK(check_wait(comm, nDesc, signalDescs));
  return append(comm, &t, signalDescs);
}

int weft_rma_queued(const struct weft_comm_ctx* comm) { return comm->rma != NULL && comm->rma->head != NULL; }

/* ---- running a group's queue ---- */

static ncclResult_t run_put(struct weft_comm_ctx* comm, struct weft_rma_state* st,
                            const struct weft_rma_task* t) {
  struct weft_window* w = weft_window_find(comm, (ncclWindow_t)t->win, "ncclPutSignal", "peerWin");
  if (w == NULL || w->seq != t->win_seq) {
    WEFT_WARN(
        "ncclPutSignal (seq %llu): its window was deregistered before the group ended (comm %p rank %d)",
        (unsigned long long)t->seq, (void*)comm, comm->rank);
    return ncclInvalidUsage;
  }
  if (t->bytes > 0) memmove((char*)w->peer_ptr[t->peer] + t->offset, t->src, t->bytes);
  return weft_signals_post(st->signals, t->peer, t->sig, t->ctx);
}

/* Descriptors are waited for one after the other, each for at most WEFT_TIMEOUT; the WARN of a
 * wait that gives up names the descriptor's peer. */
static ncclResult_t run_wait(struct weft_rma_state* st, const struct weft_rma_task* t,
                             struct weft_waiter* w) {
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < t->ndesc && res == ncclSuccess; i++) {
    const ncclWaitSignalDesc_t* d = &t->descs[i];
    res = weft_signals_wait(st->signals, w, d->peer, d->sigIdx, d->ctx, (uint64_t)d->opCnt);
  }
  return res;
}

static ncclResult_t run_task(struct weft_comm_ctx* comm, struct weft_rma_state* st,
                             const struct weft_rma_task* t, struct weft_waiter* w) {
  w->opname = kind_name(t->kind);
  w->seq = t->seq;
  w->warned = 0;
  switch (t->kind) {
    case RMA_PUT:
      return run_put(comm, st, t);
    case RMA_SIGNAL:
      return weft_signals_post(st->signals, t->peer, t->sig, t->ctx);
    default:
      return run_wait(st, t, w);
  }
}

ncclResult_t weft_rma_launch(struct weft_comm_ctx* comm) {
  struct weft_rma_state* st = comm->rma;
  if (st == NULL || st->head == NULL) return ncclSuccess;
  struct weft_rma_task* tasks = st->head;
  st->head = st->tail = NULL;
  struct weft_waiter* w = weft_engine_waiter(comm);
  /* A comm that never registered a window sets its signals up now: collective, as in NCCL. */
  ncclResult_t res = weft_rma_ensure_signals(comm);
  for (struct weft_rma_task* t = tasks; t && res == ncclSuccess; t = t->next) res = run_task(comm, st, t, w);
  free_tasks(tasks);
  return res;
}
