/* Signal boards of the one-sided operations (signals.h). A board lives in ncclMemAlloc-style
 * shared memory; every peer of the host, threads of this process included, maps it itself, so
 * a board stays readable by peers after its owner tore its communicator down. */
#include "collectives/host/signals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "collectives/context.h"
#include "collectives/host/wait.h"
#include "collectives/mem.h"
#include "util/check.h"
#include "util/log.h"

#define BOARD_MAGIC 0x5745465453494731ull /* "WEFTSIG1": the all-gather is the one we expect */

/* Counters are written by one sender each (a rank's counters on a peer's board are written by
 * that rank's communicator only), so a sender publishes count+1 with a plain release store. */
struct sig_board {
  uint32_t sleepers; /* the owner's waits asleep on one of its counters */
  uint32_t closed;   /* the owner tore its communicator down: waits for its signals give up */
  char pad[56];
  uint64_t count[]; /* [source rank][sig][ctx]: signals received */
};

struct board_info {
  uint64_t magic;
  int32_t nsig, nctx;
  int32_t pid, fd;
  int32_t ok; /* allocated (first all-gather); mapped every peer's board (second) */
  int32_t pad;
  uint64_t size;
};

struct weft_signals {
  int rank, nranks, nsig, nctx;
  size_t bytes;
  struct sig_board* mine;
  struct sig_board** boards; /* [nranks] mapped here; boards[rank] == mine; NULL: other host */
  uint64_t* consumed;        /* [source][sig][ctx] signals earlier waits took */
};

static const uint32_t never_closed = 0;

static size_t slot(const struct weft_signals* s, int rank, int sig, int ctx) {
  return ((size_t)rank * (size_t)s->nsig + (size_t)sig) * (size_t)s->nctx + (size_t)ctx;
}

static ncclResult_t alloc_state(const struct weft_comm_ctx* comm, int nsig, int nctx,
                                struct weft_signals** out) {
  struct weft_signals* s = calloc(1, sizeof(*s));
  *out = s;
  if (s == NULL) return ncclSystemError;
  s->rank = comm->rank;
  s->nranks = comm->nranks;
  s->nsig = nsig;
  s->nctx = nctx;
  size_t counters = (size_t)comm->nranks * (size_t)nsig * (size_t)nctx;
  s->bytes = sizeof(struct sig_board) + counters * sizeof(uint64_t);
  s->boards = calloc((size_t)comm->nranks, sizeof(*s->boards));
  s->consumed = calloc(counters, sizeof(*s->consumed));
  if (s->boards == NULL || s->consumed == NULL) return ncclSystemError;
  return ncclSuccess;
}

/* This rank's board, zeroed, and what peers need to map it. */
static int make_board(struct weft_signals* s, struct board_info* me) {
  void* p = NULL;
  struct weft_mem_seg seg;
  if (weft_mem_alloc_shared(s->bytes, &p) != ncclSuccess) return 0;
  memset(p, 0, s->bytes);
  if (weft_mem_lookup(p, s->bytes, &seg) != ncclSuccess) {
    ncclMemFree(p);
    return 0;
  }
  s->mine = p;
  s->boards[s->rank] = p;
  me->pid = (int32_t)seg.pid;
  me->fd = seg.fd;
  me->size = seg.size;
  return 1;
}

/* Every rank must have asked for the same counters, or signals would land in the wrong slots. */
static ncclResult_t check_infos(const struct weft_comm_ctx* comm, const struct board_info* infos) {
  const struct board_info* me = &infos[comm->rank];
  for (int p = 0; p < comm->nranks; p++) {
    if (infos[p].magic != BOARD_MAGIC) {
      WEFT_WARN(
          "Rank %d: rank %d is in another collective call than the signal setup of the first window "
          "registration or one-sided operation (calls out of order?)",
          comm->rank, p);
      return ncclInvalidUsage;
    }
    if (infos[p].nsig != me->nsig || infos[p].nctx != me->nctx) {
      WEFT_WARN(
          "Rank %d: rank %d asks for %d signal indices x %d contexts, this rank for %d x %d (config "
          "numRmaSig / numRmaCtx must be the same on every rank)",
          comm->rank, p, infos[p].nsig, infos[p].nctx, me->nsig, me->nctx);
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

static int all_ok(const struct board_info* infos, int n, int* bad) {
  for (int p = 0; p < n; p++)
    if (!infos[p].ok) {
      *bad = p;
      return 0;
    }
  return 1;
}

/* Map the boards of the peers of this host; peers on other hosts have none. */
static int map_boards(const struct weft_comm_ctx* comm, struct weft_signals* s,
                      const struct board_info* infos) {
  for (int p = 0; p < s->nranks; p++) {
    if (p == s->rank || comm->peers[p].host_hash != comm->peers[s->rank].host_hash) continue;
    void* base;
    if (weft_mem_map_peer(infos[p].pid, infos[p].fd, infos[p].size, &base) != ncclSuccess) {
      WEFT_WARN("Rank %d could not map the signal board of rank %d (pid %d)", s->rank, p, infos[p].pid);
      return 0;
    }
    s->boards[p] = base;
  }
  return 1;
}

ncclResult_t weft_signals_create(struct weft_comm_ctx* comm, int nsig, int nctx, struct weft_signals** out) {
  struct weft_signals* s = NULL;
  struct board_info* infos = calloc((size_t)comm->nranks, sizeof(*infos));
  ncclResult_t res = infos ? alloc_state(comm, nsig, nctx, &s) : ncclSystemError;
  if (res != ncclSuccess) WEFT_WARN("Rank %d: out of memory for the signal boards", comm->rank);
  WEFT_CHECK_GOTO(res, res, fail);
  struct board_info* me = &infos[comm->rank];
  *me = (struct board_info){.magic = BOARD_MAGIC, .nsig = nsig, .nctx = nctx};
  me->ok = make_board(s, me);
  /* Two rounds, as for the direct paths' boards: all ranks allocate, then all map, and every
   * rank learns whether every other one succeeded, so they fail or succeed together. */
  WEFT_CHECK_GOTO(weft_bootstrap_allgather(comm->bootstrap, infos, sizeof(*infos)), res, fail);
  WEFT_CHECK_GOTO(check_infos(comm, infos), res, fail);
  int bad = -1;
  me->ok = all_ok(infos, comm->nranks, &bad) && map_boards(comm, s, infos);
  WEFT_CHECK_GOTO(weft_bootstrap_allgather(comm->bootstrap, infos, sizeof(*infos)), res, fail);
  if (!all_ok(infos, comm->nranks, &bad)) {
    WEFT_WARN("Rank %d: rank %d could not set up its signal board (see its WARN)", comm->rank, bad);
    res = ncclSystemError;
    goto fail;
  }
  free(infos);
  WEFT_INFO(WEFT_INIT,
            "comm %p rank %d: signal boards ready (%d signal indices x %d contexts per rank, %zu bytes)",
            (void*)comm, comm->rank, nsig, nctx, s->bytes);
  *out = s;
  return ncclSuccess;
fail:
  free(infos);
  weft_signals_destroy(s);
  return res;
}

void weft_signals_destroy(struct weft_signals* s) {
  if (s == NULL) return;
  if (s->mine) __atomic_store_n(&s->mine->closed, 1, __ATOMIC_RELEASE);
  for (int p = 0; s->boards && p < s->nranks; p++)
    if (p != s->rank && s->boards[p]) weft_mem_unmap(s->boards[p], s->bytes);
  if (s->mine) ncclMemFree(s->mine);
  free(s->boards);
  free(s->consumed);
  free(s);
}

ncclResult_t weft_signals_post(struct weft_signals* s, int peer, int sig, int ctx) {
  struct sig_board* b = s->boards[peer];
  if (b == NULL) {
    WEFT_WARN("Rank %d: no signal board of rank %d (another host)", s->rank, peer);
    return ncclInvalidUsage;
  }
  uint64_t* c = &b->count[slot(s, s->rank, sig, ctx)];
  weft_host_post_counter(c, &b->sleepers, __atomic_load_n(c, __ATOMIC_RELAXED) + 1);
  return ncclSuccess;
}

ncclResult_t weft_signals_wait(struct weft_signals* s, struct weft_waiter* w, int peer, int sig, int ctx,
                               uint64_t count) {
  size_t i = slot(s, peer, sig, ctx);
  uint64_t target = s->consumed[i] + count;
  char what[128];
  snprintf(what, sizeof(what), "%llu signal(s) on sigIdx %d ctx %d, %llu taken by earlier waits",
           (unsigned long long)count, sig, ctx, (unsigned long long)s->consumed[i]);
  const uint32_t* closed = s->boards[peer] ? &s->boards[peer]->closed : &never_closed;
  WEFT_CHECK(
      weft_host_wait_counter(w, &s->mine->count[i], target, &s->mine->sleepers, closed, NULL, peer, what));
  s->consumed[i] = target;
  return ncclSuccess;
}
