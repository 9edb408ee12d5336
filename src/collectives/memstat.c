/* The memory account of a communicator (collectives/memstat.h): the host engine's part is walked
 * here, the CUDA backend's in engine_cuda.c. On the host backend there is no GPU memory; what
 * ncclCommMemStats calls "GPU memory" is then the comm's buffers in host and shared memory. */
#include "collectives/memstat.h"

#include <string.h>

#include "collectives/context.h"
#include "collectives/engine.h"
#include "collectives/host/direct_impl.h"
#include "collectives/host/interleave.h"
#include "collectives/mem.h"
#include "collectives/tree.h"
#include "transport/transport.h"

const char* weft_mem_kind_name(enum weft_mem_kind k) {
  static const char* names[WEFT_MEM_KINDS] = {"connectors", "shm segments", "staging", "device buffers",
                                              "state"};
  return k >= 0 && k < WEFT_MEM_KINDS ? names[k] : "?";
}

uint64_t weft_mem_usage_suspendable(const struct weft_mem_usage* u) {
  uint64_t n = 0;
  for (int k = 0; k < WEFT_MEM_KINDS; k++) n += u->suspendable[k];
  return n;
}

uint64_t weft_mem_usage_persist(const struct weft_mem_usage* u) {
  uint64_t n = 0;
  for (int k = 0; k < WEFT_MEM_KINDS; k++) n += u->persist[k];
  return n;
}

/* A connector's memory belongs to its owner (the receiver: GPU memory for P2P, a segment for
 * SHM), except a network connector's FIFO, which each side allocates for itself. */
void weft_mem_usage_add_link(struct weft_mem_usage* u, const struct weft_link_mem* lm) {
  if (lm != NULL && lm->p2p != NULL && lm->p2p->owner) u->suspendable[WEFT_MEM_DEVICE] += lm->p2p->size;
  const struct weft_conn_mem* m = lm != NULL ? lm->host : NULL;
  if (m == NULL) return;
  if (m->transport != NULL)
    u->suspendable[WEFT_MEM_CONNECTORS] += m->size;
  else if (m->owner)
    u->suspendable[m->is_shm ? WEFT_MEM_SHM : WEFT_MEM_CONNECTORS] += m->size;
}

static void add_direct(struct weft_mem_usage* u, const struct weft_direct* d) {
  struct weft_mem_seg seg;
  if (d == NULL) return;
  if (d->mine != NULL && weft_mem_lookup(d->mine, sizeof(*d->mine), &seg) == ncclSuccess)
    u->suspendable[WEFT_MEM_SHM] += seg.size;
  if (d->tmp != NULL) u->suspendable[WEFT_MEM_STAGING] += WEFT_DIRECT_CHUNK;
}

static void host_usage(const struct weft_comm_ctx* comm, const struct weft_coll_state* s,
                       struct weft_mem_usage* u) {
  for (int c = 0; c < WEFT_PLAN_MAX_CHANNELS; c++) {
    weft_mem_usage_add_link(u, s->send_mem[c]);
    weft_mem_usage_add_link(u, s->recv_mem[c]);
    if (s->co_stacks[c] != NULL) u->suspendable[WEFT_MEM_STAGING] += WEFT_HOST_STACK_BYTES;
  }
  for (int p = 0; s->p2p && p < comm->nranks; p++) {
    weft_mem_usage_add_link(u, s->p2p[p].send_mem);
    weft_mem_usage_add_link(u, s->p2p[p].recv_mem);
  }
  for (int c = 0; s->tree && c < WEFT_PLAN_MAX_CHANNELS; c++)
    for (int i = 0; i < 2 * (1 + WEFT_TREE_MAX_DOWN); i++) weft_mem_usage_add_link(u, s->tree->ch[c].mem[i]);
  add_direct(u, s->direct);
  /* The engine's own record and its per-peer tables stay for the comm's life. */
  size_t per_peer = sizeof(*s->p2p) + sizeof(*s->watch) + sizeof(*s->peer_cause);
  u->persist[WEFT_MEM_STATE] += sizeof(*s) + (uint64_t)comm->nranks * per_peer;
}

void weft_coll_mem_usage(const struct weft_comm_ctx* comm, struct weft_mem_usage* u) {
  memset(u, 0, sizeof(*u));
  if (comm->coll != NULL) host_usage(comm, comm->coll, u);
  weft_cuda_mem_usage(comm, u);
  weft_mem_reg_usage(comm, &u->nregs, &u->reg_bytes);
}
