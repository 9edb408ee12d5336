/* An executor runs what the planner planned: host threads over host memory (the engine in
 * collectives/engine.c and host/), or one CUDA kernel per launch on the caller's stream
 * (collectives/cuda/). Each communicator has one, chosen by its backend; the engine calls it only
 * through this table, so a launch, a prediction or a teardown has one path whatever runs it. */
#ifndef WEFT_COLLECTIVES_EXECUTOR_H
#define WEFT_COLLECTIVES_EXECUTOR_H

#include "collectives/task.h"
#include "nccl.h"

struct weft_comm_ctx;
struct weft_plan_params;
struct weft_link_peer;

struct weft_executor {
  const char* name; /* "host" or "cuda" */
  /* Collective over the comm's ranks, at the end of communicator init. */
  ncclResult_t (*comm_init)(struct weft_comm_ctx* comm);
  void (*comm_fini)(struct weft_comm_ctx* comm); /* half-built and aborted comms too */
  /* Runs (host) or enqueues (CUDA) the launch's tasks, agreed across ranks already; frees them. */
  ncclResult_t (*launch)(struct weft_comm_ctx* comm, struct weft_task* tasks);
  ncclResult_t (*predict)(const struct weft_comm_ctx* comm, const struct weft_task* t, float* time_us);
  /* What the planner plans this executor's collectives with; NULL before comm_init. */
  const struct weft_plan_params* (*plan_params)(const struct weft_comm_ctx* comm);
  ncclResult_t (*suspend)(struct weft_comm_ctx* comm); /* after drain, and a barrier of every rank */
  ncclResult_t (*resume)(struct weft_comm_ctx* comm);
  /* Work that outlives its launch (CUDA); NULL where every launch ends before it returns. */
  ncclResult_t (*drain)(struct weft_comm_ctx* comm);       /* wait for the comm's work */
  ncclResult_t (*check_error)(struct weft_comm_ctx* comm); /* an error the running work reported */
  ncclResult_t (*flush)(struct weft_comm_ctx* comm);       /* ncclCommFinalize: wait, report */
  void (*stop)(struct weft_comm_ctx* comm);                /* abort flag raised: stop and wait */
  /* What this executor's connectors to peer need beyond the peer itself (transport/transport.h:
   * device numbers, where losses are raised); NULL: nothing. */
  void (*link_peer)(struct weft_comm_ctx* comm, int peer, struct weft_link_peer* lp);
};

extern const struct weft_executor weft_executor_host, weft_executor_cuda;
const struct weft_executor* weft_executor_of(const struct weft_comm_ctx* comm);

#endif
