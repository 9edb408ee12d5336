/* The tuning model's answer for one collective, in terms the planner uses (no graph/ types, so
 * collectives/ can include it next to its own enums). */
#ifndef WEFT_CORE_TUNED_H
#define WEFT_CORE_TUNED_H

#include <stddef.h>

struct ncclComm;

struct weft_tuned {
  int tree;      /* 1: tree, 0: ring */
  int ll;        /* 1: LL, 0: Simple */
  int nchannels; /* as the model sizes it, within NCCL_MIN/MAX_NCHANNELS */
  float time_us; /* predicted */
};

/* 1 with *out filled when the communicator has a tuning model and it offers a choice for coll
 * (enum weft_coll) moving nbytes (NCCL's per-rank size), 0 when the caller must decide itself. */
int weft_comm_tuned_choice(const struct ncclComm* comm, int coll, size_t nbytes, struct weft_tuned* out);

#endif
