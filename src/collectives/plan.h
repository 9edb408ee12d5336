/* Planning: algorithm, protocol and channel count for a task, and its split over channels and
 * into chunks. Depends only on the task, the communicator size, the environment and the tuner
 * plugin all ranks agreed on at init, so every rank decides the same. */
#ifndef WEFT_COLLECTIVES_PLAN_H
#define WEFT_COLLECTIVES_PLAN_H

#include "collectives/dev_types.h"
#include "collectives/task.h"
#include "nccl.h"

#define WEFT_PLAN_MAX_CHANNELS 4
enum weft_plan_algo { WEFT_PLAN_RING = 0, WEFT_PLAN_TREE = 1 };

/* What the comm offers the planner: set up once at comm init. */
struct weft_comm_ctx;
struct weft_tune_log;
struct weft_tuner;
struct weft_plan_params {
  const struct weft_comm_ctx* comm; /* its tuning model decides when present (NULL: defaults below) */
  int nranks, rank;
  int nchannels;      /* channels with connectors */
  size_t simple_slot; /* bytes one Simple step carries: the slot size, or less across hosts */
  size_t ll_slot;     /* bytes per LL slot (lines) */
  int nnodes;         /* hosts */
  /* NCCL_ALGO / NCCL_PROTO / NCCL_MIN,MAX_NCHANNELS as read once by weft_plan_read_env, for the
   * planner's own choice when the comm has no tuning model (0 channel bounds: unset). */
  int ring_ok, tree_ok, ll_ok, simple_ok;
  int min_channels, max_channels;
  int deterministic;              /* WEFT_DETERMINISTIC, the same on every rank (weft_plan_agree) */
  struct weft_tune_log* tune_log; /* explains choices under NCCL_DEBUG_SUBSYS=TUNING (NULL: off) */
  struct weft_tuner* tuner;       /* external tuner plugin, agreed by every rank (NULL: none) */
  /* What the executor runs, set by its backend at init (0: the host executor's values). */
  unsigned impl_algos;      /* collectives/tuned.h algorithm bits; Ring is always run (0: Ring and Tree) */
  size_t bytes_per_channel; /* the defaults add a channel per this many bytes (0: 1 MiB) */
  int tree_channels;        /* channels with tree connectors, at most (0: nchannels) */
};

struct weft_plan {
  int algo, proto, nchannels;
  struct weft_dev_work work[WEFT_PLAN_MAX_CHANNELS];
};

/* Channels to set up at init: NCCL_MIN/MAX_NCHANNELS within 1..WEFT_PLAN_MAX_CHANNELS. */
int weft_plan_channels_to_connect(void);
/* The one decision point, for both backends: algorithm, protocol and channels for coll moving
 * bytes, from the comm's tuning model when it has one (else the defaults), among what the executor
 * runs, narrowed by the call's selection (opts: NULL or zero for a plain call), then repriced by
 * the tuner plugin when there is one. */
ncclResult_t weft_plan_choose(const struct weft_plan_params* pp, int coll, size_t bytes,
                              const struct weft_call_opts* opts, int* algo, int* proto, int* nchannels);
/* Whether the planner can meet a selection of algorithms and protocols (collectives/tuned.h bits) for
 * coll on this comm: what its tuning model or NCCL_ALGO / NCCL_PROTO enable, and what the
 * executor implements (pp->impl_algos). Send/receive have nothing to choose. */
int weft_plan_can_meet(const struct weft_plan_params* pp, int coll, unsigned algos, unsigned protos);
/* pp's algorithm and protocol switches narrowed to a call's selection (both planners use it). */
void weft_plan_narrow(struct weft_plan_params* pp, const struct weft_call_opts* opts);
/* n channels bounded by a call's minCTAs/maxCTAs, then by the connected ones (both planners). */
int weft_plan_bound_channels(const struct weft_call_opts* opts, int n, int connected);
/* Bytes of a collective task as NCCL sizes it for tuning: the buffer, or the gathered size for
 * all-gather and reduce-scatter. */
static inline size_t weft_plan_task_bytes(const struct weft_task* task, int nranks) {
  size_t bytes = task->count * weft_dt_size(task->dtype);
  if (task->coll == WEFT_COLL_ALLGATHER || task->coll == WEFT_COLL_REDUCESCATTER) bytes *= (size_t)nranks;
  return bytes;
}
/* 1 with *time_us set to the tuning model's predicted time (µs) of the algorithm and protocol the
 * planner picks for task; 0 when the comm has no tuning model (the planner's defaults predict
 * nothing). For ncclGroupSimulateEnd: nothing is planned into work or run. */
int weft_plan_predict(const struct weft_plan_params* pp, const struct weft_task* task, float* time_us);
/* The last choice of a comm's planner and what it was asked: a call asking the same again (a
 * training loop's small all-reduces) takes it without asking the tuning model, which costs as
 * much as the rest of a small call. Only without a tuner plugin (NCCL asks it on every call) and
 * without the tuning log (which explains every call). The planner's inputs do not change after
 * init. */
struct weft_plan_memo {
  int valid, coll;
  size_t bytes;
  unsigned algos, protos;
  int min_channels, max_channels;
  int algo, proto, nchannels;
};
/* Plans task into plan: weft_plan_choose (through memo; NULL: none), then each channel's work. */
ncclResult_t weft_plan_coll(const struct weft_plan_params* pp, struct weft_plan_memo* memo,
                            const struct weft_task* task, struct weft_plan* plan);
/* Elements one step carries for proto: a Simple slot, or the data half of an LL slot's lines.
 * Every connector of every rank has the slot sizes the ranks agreed on (weft_plan_agree). */
size_t weft_plan_chunk_elems(const struct weft_plan_params* pp, int proto, size_t elem_size);
/* Reads the planner's environment into pp (once per communicator, off the per-call path). */
void weft_plan_read_env(struct weft_plan_params* pp);

#endif
