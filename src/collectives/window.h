/* Windows of ncclCommWindowRegister on the host backend: each rank's buffer and, per peer, where
 * that peer's buffer is mapped in this process (its address when the peer is a thread of this
 * process, a mapping of its ncclMemAlloc segment when it is another process of this host), or
 * why it is not reachable. One-sided operations (collectives/rma.c) write through these. */
#ifndef WEFT_COLLECTIVES_WINDOW_H
#define WEFT_COLLECTIVES_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct weft_comm_ctx;

/* Why a peer's buffer has no pointer here. */
enum weft_win_reach {
  WEFT_WIN_MAPPED = 0, /* peer_ptr is valid */
  WEFT_WIN_OTHER_HOST, /* the peer runs on another host: no load/store access at all */
  WEFT_WIN_NOT_SHARED, /* another process whose buffer is not ncclMemAlloc memory */
  WEFT_WIN_MAP_FAILED, /* its segment could not be mapped (WARNed at registration) */
};

/* The object an ncclWindow_t points at. Every rank holds its own for one registration; they
 * share seq, the registration's position in the communicator's order. */
struct weft_window {
  struct weft_comm_ctx* comm;
  void* buff;
  size_t size;
  int flags;
  uint64_t seq;
  void** peer_ptr;   /* [nranks] the peer's buffer as this process sees it, NULL if unreachable */
  size_t* peer_size; /* [nranks] bytes of the peer's window */
  uint8_t* reach;    /* [nranks] enum weft_win_reach */
  void** maps;       /* [nranks] mappings of peers' segments this window made (to unmap) */
  size_t* map_sizes; /* [nranks] */
  struct weft_window* next;
};

/* ncclCommWindowRegister on a comm core/ checked (entry points in core/api_mem.c): the checks
 * made at call time, then the registration, collective over comm; inside a group it is deferred
 * (*first: comm's first deferral of the group, which core/ runs with weft_window_run_deferred
 * at the group's end, in call order). */
ncclResult_t weft_window_check_register(const struct weft_comm_ctx* comm, int flags);
ncclResult_t weft_window_register(struct weft_comm_ctx* comm, void* buff, size_t size, int flags,
                                  ncclWindow_t* out);
ncclResult_t weft_window_defer(struct weft_comm_ctx* comm, void* buff, size_t size, int flags,
                               ncclWindow_t* out, int* first);
ncclResult_t weft_window_run_deferred(struct weft_comm_ctx* comm);
/* ncclCommWindowDeregister: local, and allowed on a comm that failed. */
ncclResult_t weft_window_deregister(struct weft_comm_ctx* comm, ncclWindow_t win);
/* ncclGetPeerDevicePointer / ncclGetLsaDevicePointer. */
ncclResult_t weft_window_peer_pointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
ncclResult_t weft_window_lsa_pointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
/* The live window win of comm, or NULL (WARN naming caller and argument) when win is not one. */
struct weft_window* weft_window_find(const struct weft_comm_ctx* comm, ncclWindow_t win, const char* caller,
                                     const char* arg);
/* Text for a reach value ("runs on another host", ...), for WARNs. */
const char* weft_window_reach_text(int reach);
/* Drop every window of comm locally (communicator teardown). NULL-safe. */
void weft_window_comm_fini(struct weft_comm_ctx* comm);

#endif
