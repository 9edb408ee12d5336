/* ncclCommWindowRegister / ncclCommWindowDeregister, ncclWinGetUserPtr and the host-side peer
 * pointer queries (ncclGetPeerDevicePointer, ncclGetLsaDevicePointer) on the host backend.
 * Registration is collective: every rank exchanges its part over the bootstrap, so all ranks
 * succeed or fail together; inside a group it runs at the group's end. Deregistration is local,
 * as in NCCL (nccl-tests deregisters the windows of several ranks from one thread, one after the
 * other): the application makes sure no peer still puts into a window it deregisters. What a
 * peer's buffer is here:
 *  - a thread of this process: its own address (any buffer, malloc included);
 *  - another process of this host: a mapping of its ncclMemAlloc segment; a malloc buffer of
 *    another process cannot be mapped, so only its owner has a pointer;
 *  - a rank on another host: nothing (NULL, as NCCL answers for peers outside the LSA team). */
#include "collectives/window.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "collectives/context.h"
#include "collectives/mem.h"
#include "collectives/rma.h"
#include "nccl_device/host.h"
#include "util/check.h"
#include "util/log.h"

#define XCHG_MAGIC 0x57454654574e5831ull /* "WEFTWNX1": the all-gather is a window exchange */
#define ACCEPTED_FLAGS (NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING)
#define REFUSED_FLAGS (NCCL_WIN_GIN_ONLY | NCCL_WIN_CFT_COUNTED)

/* One rank's part of a registration, as every other rank receives it. */
struct win_xchg {
  uint64_t magic;
  int32_t status; /* ncclSuccess, or why this rank refused its own arguments */
  int32_t pad;
  uint64_t seq;
  uint64_t addr, size;
  int32_t flags, shared;
  uint64_t seg_size, off;
  int32_t pid, fd;
};

/* A registration called inside a group, run at the group's end in call order. */
struct weft_win_op {
  void* buff;
  size_t size;
  int flags;
  ncclWindow_t* out; /* where the handle goes */
  struct weft_win_op* next;
};

static pthread_mutex_t win_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_window* windows;

const char* weft_window_reach_text(int reach) {
  switch (reach) {
    case WEFT_WIN_MAPPED:
      return "mapped";
    case WEFT_WIN_OTHER_HOST:
      return "it runs on another host (one-sided access stays within a host)";
    case WEFT_WIN_NOT_SHARED:
      return "it is another process and its buffer is not ncclMemAlloc memory, which this process "
             "cannot map";
    default:
      return "its ncclMemAlloc segment could not be mapped here (see the WARN at registration)";
  }
}

static struct weft_window* lookup(const struct weft_comm_ctx* comm, const void* handle) {
  struct weft_window* found = NULL;
  pthread_mutex_lock(&win_lock);
  for (struct weft_window* w = windows; w && !found; w = w->next)
    if ((const void*)w == handle && (comm == NULL || w->comm == comm)) found = w;
  pthread_mutex_unlock(&win_lock);
  return found;
}

struct weft_window* weft_window_find(const struct weft_comm_ctx* comm, ncclWindow_t win, const char* caller,
                                     const char* arg) {
  struct weft_window* w = lookup(comm, win);
  if (w == NULL && comm != NULL && lookup(NULL, win) != NULL)
    WEFT_WARN("Invalid argument: %s: %s %p is a window of another communicator, not of comm %p rank %d",
              caller, arg, (void*)win, (const void*)comm, comm->rank);
  else if (w == NULL)
    WEFT_WARN("Invalid argument: %s: %s %p is not a registered window (never registered, or deregistered)",
              caller, arg, (void*)win);
  return w;
}

static void window_free(struct weft_window* w) {
  if (w == NULL) return;
  for (int p = 0; w->maps && p < w->comm->nranks; p++) weft_mem_unmap(w->maps[p], w->map_sizes[p]);
  free(w->peer_ptr);
  free(w->peer_size);
  free(w->reach);
  free(w->maps);
  free(w->map_sizes);
  free(w);
}

static void unlink_window(struct weft_window* w) {
  pthread_mutex_lock(&win_lock);
  struct weft_window** at = &windows;
  while (*at && *at != w) at = &(*at)->next;
  if (*at) *at = w->next;
  pthread_mutex_unlock(&win_lock);
}

void weft_window_comm_fini(struct weft_comm_ctx* comm) {
  if (comm == NULL) return;
  for (;;) {
    struct weft_window* mine = NULL;
    pthread_mutex_lock(&win_lock);
    for (struct weft_window** at = &windows; *at; at = &(*at)->next)
      if ((*at)->comm == comm) {
        mine = *at;
        *at = mine->next;
        break;
      }
    pthread_mutex_unlock(&win_lock);
    if (mine == NULL) return;
    window_free(mine);
  }
}

/* ---- registration ---- */

static ncclResult_t check_flags(const struct weft_comm_ctx* comm, int flags) {
  if (flags & REFUSED_FLAGS) {
    WEFT_WARN("ncclCommWindowRegister: winFlags 0x%x (%s) is not supported by Weft yet (comm %p rank %d)",
              flags, (flags & NCCL_WIN_GIN_ONLY) ? "NCCL_WIN_GIN_ONLY" : "NCCL_WIN_CFT_COUNTED",
              (const void*)comm, comm->rank);
    return ncclInvalidUsage;
  }
  WEFT_ARG_CHECK((flags & ~ACCEPTED_FLAGS) == 0,
                 "ncclCommWindowRegister: winFlags 0x%x has unknown bits 0x%x (comm %p rank %d)", flags,
                 flags & ~ACCEPTED_FLAGS, (const void*)comm, comm->rank);
  return ncclSuccess;
}

/* What this rank tells the others about its buffer. Arguments refused here still take part in
 * the exchange (status), so the other ranks fail at once instead of waiting for this one. */
static void describe(const struct weft_comm_ctx* comm, void* buff, size_t size, int flags, uint64_t seq,
                     struct win_xchg* x) {
  *x = (struct win_xchg){.magic = XCHG_MAGIC, .seq = seq, .flags = flags};
  x->addr = (uint64_t)(uintptr_t)buff;
  x->size = size;
  if (buff == NULL || size == 0) {
    WEFT_WARN("Invalid argument: ncclCommWindowRegister: buff %p size %zu (comm %p rank %d)", buff, size,
              (const void*)comm, comm->rank);
    x->status = ncclInvalidArgument;
  } else if ((uintptr_t)buff > UINTPTR_MAX - size) {
    WEFT_WARN("Invalid argument: ncclCommWindowRegister: buff %p + size %zu wraps around (comm %p rank %d)",
              buff, size, (const void*)comm, comm->rank);
    x->status = ncclInvalidArgument;
  }
  struct weft_mem_seg seg;
  if (x->status == ncclSuccess && weft_mem_lookup(buff, size, &seg) == ncclSuccess) {
    x->shared = 1;
    x->seg_size = seg.size;
    x->off = (uint64_t)((char*)buff - (char*)seg.base);
    x->pid = (int32_t)seg.pid;
    x->fd = seg.fd;
  }
}

/* Every rank must be in the same call for the same window; the first that is not is named. */
static ncclResult_t check_exchange(const struct weft_comm_ctx* comm, const struct win_xchg* x) {
  const struct win_xchg* me = &x[comm->rank];
  for (int p = 0; p < comm->nranks; p++) {
    if (x[p].magic != XCHG_MAGIC) {
      WEFT_WARN(
          "ncclCommWindowRegister: rank %d is in another collective call (rank %d is here); register "
          "windows in the same order on every rank",
          p, comm->rank);
      return ncclInvalidUsage;
    }
    if (x[p].seq != me->seq) {
      WEFT_WARN(
          "ncclCommWindowRegister: rank %d is at window #%llu, rank %d at window #%llu: ranks must "
          "register the same windows in the same order",
          p, (unsigned long long)x[p].seq, comm->rank, (unsigned long long)me->seq);
      return ncclInvalidUsage;
    }
  }
  for (int p = 0; p < comm->nranks; p++) {
    if (x[p].status == ncclSuccess) continue;
    if (p == comm->rank) return (ncclResult_t)me->status; /* WARNed when described */
    WEFT_WARN("ncclCommWindowRegister: rank %d refused its arguments, so rank %d fails too", p, comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

static ncclResult_t alloc_window(struct weft_comm_ctx* comm, struct weft_window** out) {
  struct weft_window* w = calloc(1, sizeof(*w));
  *out = w;
  if (w == NULL) return ncclSystemError;
  size_t n = (size_t)comm->nranks;
  w->comm = comm;
  w->peer_ptr = calloc(n, sizeof(*w->peer_ptr));
  w->peer_size = calloc(n, sizeof(*w->peer_size));
  w->reach = calloc(n, sizeof(*w->reach));
  w->maps = calloc(n, sizeof(*w->maps));
  w->map_sizes = calloc(n, sizeof(*w->map_sizes));
  if (!w->peer_ptr || !w->peer_size || !w->reach || !w->maps || !w->map_sizes) {
    WEFT_WARN("ncclCommWindowRegister: out of memory for the window of comm %p rank %d", (void*)comm,
              comm->rank);
    return ncclSystemError;
  }
  return ncclSuccess;
}

/* Where peer p's part of the window is in this process, or why it is nowhere. */
static void resolve_peer(struct weft_comm_ctx* comm, struct weft_window* w, int p, const struct win_xchg* x) {
  w->peer_size[p] = x->size;
  if (p == comm->rank) {
    w->peer_ptr[p] = w->buff;
  } else if (comm->peers[p].host_hash != comm->peers[comm->rank].host_hash) {
    w->reach[p] = WEFT_WIN_OTHER_HOST;
  } else if (weft_comm_same_process(comm, p)) {
    w->peer_ptr[p] = (void*)(uintptr_t)x->addr;
  } else if (!x->shared) {
    w->reach[p] = WEFT_WIN_NOT_SHARED;
  } else if (weft_mem_map_peer(x->pid, x->fd, x->seg_size, &w->maps[p]) != ncclSuccess) {
    w->maps[p] = NULL;
    w->reach[p] = WEFT_WIN_MAP_FAILED;
  } else {
    w->map_sizes[p] = x->seg_size;
    w->peer_ptr[p] = (char*)w->maps[p] + x->off;
  }
}

static ncclResult_t build_window(struct weft_comm_ctx* comm, const struct win_xchg* x, void* buff,
                                 struct weft_window** out) {
  struct weft_window* w;
  ncclResult_t res = alloc_window(comm, &w);
  if (res != ncclSuccess) {
    window_free(w);
    return res;
  }
  const struct win_xchg* me = &x[comm->rank];
  w->buff = buff;
  w->size = me->size;
  w->flags = me->flags;
  w->seq = me->seq;
  int reachable = 0;
  for (int p = 0; p < comm->nranks; p++) {
    resolve_peer(comm, w, p, &x[p]);
    reachable += w->peer_ptr[p] != NULL;
    if (x[p].size != me->size && (me->flags & NCCL_WIN_COLL_SYMMETRIC) && p != comm->rank)
      WEFT_INFO(WEFT_REG, "ncclCommWindowRegister: symmetric window #%llu is %llu bytes on rank %d, %zu here",
                (unsigned long long)w->seq, (unsigned long long)x[p].size, p, w->size);
  }
  pthread_mutex_lock(&win_lock);
  w->next = windows;
  windows = w;
  pthread_mutex_unlock(&win_lock);
  WEFT_INFO(WEFT_REG,
            "ncclCommWindowRegister: comm %p rank %d window #%llu %p buff %p size %zu flags 0x%x: %d of "
            "%d ranks' buffers reachable%s",
            (void*)comm, comm->rank, (unsigned long long)w->seq, (void*)w, buff, w->size, w->flags, reachable,
            comm->nranks, me->shared ? " (ncclMemAlloc memory)" : "");
  *out = w;
  return ncclSuccess;
}

ncclResult_t weft_window_register(struct weft_comm_ctx* comm, void* buff, size_t size, int flags,
                                  ncclWindow_t* out) {
  struct weft_rma_state* st = weft_rma_state(comm);
  if (st == NULL) return ncclSystemError;
  WEFT_CHECK(weft_rma_ensure_signals(comm));
  struct win_xchg* x = calloc((size_t)comm->nranks, sizeof(*x));
  if (x == NULL) {
    WEFT_WARN("ncclCommWindowRegister: out of memory (comm %p rank %d)", (void*)comm, comm->rank);
    return ncclSystemError;
  }
  describe(comm, buff, size, flags, st->windows_registered, &x[comm->rank]);
  ncclResult_t res = weft_bootstrap_allgather(comm->bootstrap, x, sizeof(*x));
  if (res == ncclSuccess) {
    st->windows_registered++; /* every rank saw the same exchange: all count it alike */
    res = check_exchange(comm, x);
  }
  struct weft_window* w = NULL;
  if (res == ncclSuccess) res = build_window(comm, x, buff, &w);
  free(x);
  if (res == ncclSuccess) *out = (ncclWindow_t)w;
  return res;
}

/* ---- group deferral: a comm's registrations run in call order at the group's end ---- */

ncclResult_t weft_window_run_deferred(struct weft_comm_ctx* comm) {
  struct weft_rma_state* st = comm->rma;
  struct weft_win_op* op = st->ops;
  st->ops = st->ops_tail = NULL;
  ncclResult_t first = ncclSuccess;
  while (op) {
    struct weft_win_op* next = op->next;
    /* After a failure the ranks may be out of step: later exchanges would pair wrongly. */
    if (first == ncclSuccess) first = weft_window_register(comm, op->buff, op->size, op->flags, op->out);
    free(op);
    op = next;
  }
  return first;
}

ncclResult_t weft_window_defer(struct weft_comm_ctx* comm, void* buff, size_t size, int flags,
                               ncclWindow_t* out, int* first) {
  struct weft_rma_state* st = weft_rma_state(comm);
  struct weft_win_op* op = st ? malloc(sizeof(*op)) : NULL;
  if (op == NULL) {
    WEFT_WARN("Out of memory queueing a window registration on comm %p rank %d", (void*)comm, comm->rank);
    return ncclSystemError;
  }
  *op = (struct weft_win_op){.buff = buff, .size = size, .flags = flags, .out = out};
  *first = st->ops == NULL;
  if (*first)
    st->ops = op;
  else
    st->ops_tail->next = op;
  st->ops_tail = op;
  return ncclSuccess;
}

ncclResult_t weft_window_check_register(const struct weft_comm_ctx* comm, int flags) {
  if (comm->backend == WEFT_BACKEND_CUDA) {
    WEFT_WARN(
        "ncclCommWindowRegister: windows on the CUDA backend are not supported by Weft yet (comm %p rank "
        "%d); the host backend (WEFT_BACKEND=host) has them",
        (const void*)comm, comm->rank);
    return ncclInvalidUsage;
  }
  return check_flags(comm, flags);
}

/* Local, and allowed on a comm that failed: cleanup paths deregister before they abort. */
ncclResult_t weft_window_deregister(struct weft_comm_ctx* comm, ncclWindow_t win) {
  if (win == NULL) return ncclSuccess; /* NCCL accepts a NULL window */
  struct weft_window* w = weft_window_find(comm, win, "ncclCommWindowDeregister", "win");
  if (w == NULL) return ncclInvalidArgument;
  WEFT_INFO(WEFT_REG, "ncclCommWindowDeregister: comm %p rank %d window #%llu %p buff %p", (void*)comm,
            comm->rank, (unsigned long long)w->seq, (void*)w, w->buff);
  unlink_window(w);
  window_free(w);
  return ncclSuccess;
}

/* ---- queries ---- */

/* The shared part of both pointer queries; lsa: peer was named as an LSA rank, which must be
 * load/store reachable, where a world peer on another host is answered with NULL, as NCCL does. */
static ncclResult_t peer_pointer(const char* caller, const struct weft_window* w, size_t offset, int peer,
                                 int lsa, void** out) {
  const struct weft_comm_ctx* comm = w->comm;
  WEFT_ARG_CHECK(offset < w->peer_size[peer],
                 "%s: offset %zu is outside the %zu-byte window %p of rank %d (comm %p rank %d)", caller,
                 offset, w->peer_size[peer], (const void*)w, peer, (const void*)comm, comm->rank);
  if (w->reach[peer] == WEFT_WIN_MAPPED) {
    *out = (char*)w->peer_ptr[peer] + offset;
    return ncclSuccess;
  }
  if (w->reach[peer] == WEFT_WIN_OTHER_HOST && !lsa) {
    WEFT_INFO(WEFT_REG, "%s: rank %d runs on another host: no pointer to its window %p", caller, peer,
              (const void*)w);
    return ncclSuccess;
  }
  WEFT_WARN("%s: rank %d's part of window %p has no pointer in this process: %s (comm %p rank %d)", caller,
            peer, (const void*)w, weft_window_reach_text(w->reach[peer]), (const void*)comm, comm->rank);
  return ncclInvalidUsage;
}

ncclResult_t weft_window_peer_pointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  WEFT_ARG_CHECK(outPtr != NULL, "ncclGetPeerDevicePointer: outPtr is NULL (window %p)", (void*)window);
  *outPtr = NULL;
  struct weft_window* w = weft_window_find(NULL, window, "ncclGetPeerDevicePointer", "window");
  if (w == NULL) return ncclInvalidArgument;
  WEFT_ARG_CHECK(peer >= 0 && peer < w->comm->nranks,
                 "ncclGetPeerDevicePointer: peer %d is not in the 0..%d range (window %p comm %p)", peer,
                 w->comm->nranks - 1, (void*)window, (void*)w->comm);
  return peer_pointer("ncclGetPeerDevicePointer", w, offset, peer, 0, outPtr);
}

/* Weft's LSA team is the ranks of this host, in rank order. */
ncclResult_t weft_window_lsa_pointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  WEFT_ARG_CHECK(outPtr != NULL, "ncclGetLsaDevicePointer: outPtr is NULL (window %p)", (void*)window);
  *outPtr = NULL;
  struct weft_window* w = weft_window_find(NULL, window, "ncclGetLsaDevicePointer", "window");
  if (w == NULL) return ncclInvalidArgument;
  const struct weft_comm_ctx* comm = w->comm;
  WEFT_ARG_CHECK(
      lsaRank >= 0 && lsaRank < comm->local_nranks,
      "ncclGetLsaDevicePointer: lsaRank %d is not in the 0..%d range of this host's ranks (window %p "
      "comm %p)",
      lsaRank, comm->local_nranks - 1, (void*)window, (const void*)comm);
  return peer_pointer("ncclGetLsaDevicePointer", w, offset, comm->local_ranks[lsaRank], 1, outPtr);
}
