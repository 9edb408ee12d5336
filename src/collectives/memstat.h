/* What a communicator's buffers take, by kind: the one account that ncclCommMemStats reports and
 * the NCCL_DEBUG=INFO (ALLOC) breakdown prints. It is computed by walking the comm's state, so it
 * cannot drift from what is really allocated. */
#ifndef WEFT_COLLECTIVES_MEMSTAT_H
#define WEFT_COLLECTIVES_MEMSTAT_H

#include <stddef.h>
#include <stdint.h>

struct weft_comm_ctx;

enum weft_mem_kind {
  WEFT_MEM_CONNECTORS, /* connector FIFOs in process memory: peers that are threads, network peers */
  WEFT_MEM_SHM,        /* shared memory segments it created: connectors to processes, direct boards */
  WEFT_MEM_STAGING,    /* scratch: direct-path bounce buffer, coroutine stacks, CUDA work lists */
  WEFT_MEM_DEVICE,     /* CUDA device memory: connectors in GPU memory, the device state */
  WEFT_MEM_STATE,      /* per-comm bookkeeping that lives as long as the comm */
  WEFT_MEM_KINDS
};

/* Bytes this rank allocated for the comm. Memory a peer owns and this rank only maps is the
 * peer's (counted once, by its owner); the user's buffers are never counted. */
struct weft_mem_usage {
  uint64_t suspendable[WEFT_MEM_KINDS]; /* released by ncclCommSuspend, re-created by Resume */
  uint64_t persist[WEFT_MEM_KINDS];     /* held from init to destroy */
  uint64_t nregs, reg_bytes;            /* ncclCommRegister records and the user memory they cover */
};

const char* weft_mem_kind_name(enum weft_mem_kind k);
uint64_t weft_mem_usage_suspendable(const struct weft_mem_usage* u);
uint64_t weft_mem_usage_persist(const struct weft_mem_usage* u);

/* One side of a connector (either backend; NULL-safe): what this side allocated. */
struct weft_link_mem;
void weft_mem_usage_add_link(struct weft_mem_usage* u, const struct weft_link_mem* lm);
/* The comm's usage now (either backend), registrations included. */
void weft_coll_mem_usage(const struct weft_comm_ctx* comm, struct weft_mem_usage* u);
/* The CUDA backend's part (collectives/cuda/engine_cuda.c); adds nothing without CUDA. */
void weft_cuda_mem_usage(const struct weft_comm_ctx* comm, struct weft_mem_usage* u);

#endif
