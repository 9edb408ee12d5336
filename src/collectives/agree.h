/* Planner settings every rank of a communicator must share, agreed once at init. */
#ifndef WEFT_COLLECTIVES_AGREE_H
#define WEFT_COLLECTIVES_AGREE_H

#include <stddef.h>

#include "collectives/plan.h"
#include "nccl.h"

struct weft_comm_ctx;

/* pp holds this rank's channel count and environment (weft_plan_read_env); simple_bytes and
 * ll_bytes are the FIFO sizes this rank gives its connectors. Sets pp's step sizes and channel
 * count to the smallest any rank can take, and its algorithm, protocol and channel bounds to
 * rank 0's (WARN on ranks whose own differ). A bootstrap all-gather: every rank must call it. */
ncclResult_t weft_plan_agree(struct weft_comm_ctx* comm, struct weft_plan_params* pp, size_t simple_bytes,
                             size_t ll_bytes);

/* Per-call selections (nccl*Config, weft_call_opts.sig) of a launch's collectives, before they
 * run: when one differs from what the ranks last agreed on, every rank's sequence is compared
 * (a bootstrap all-gather) and a difference is ncclInvalidUsage on every rank, with nothing run. */
struct weft_task;
ncclResult_t weft_plan_agree_calls(struct weft_comm_ctx* comm, const struct weft_task* tasks);

#endif
