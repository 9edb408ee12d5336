/* ncclCommSplit: ranks exchange (color, key) over the parent's bootstrap; ranks of one color
 * form a new communicator ordered by key, then parent rank. The exchange itself is part of the
 * (possibly grouped or background) job, since all parent ranks must reach it together. The
 * child's allocation, setup and job start are shared with shrink and grow (split.h). */
#include <stdlib.h>

#include "bootstrap/bootstrap.h"
#include "core/api.h"
#include "core/group.h"
#include "core/init.h"
#include "core/peers.h"
#include "core/split.h"
#include "util/check.h"

struct split_job {
  struct weft_async_job base;
  struct ncclComm* parent;
  ncclComm_t* user_newcomm;
  int color;
  int key;
  int split_index;
};

struct color_key {
  int color;
  int key;
};

/* New rank order among ranks of our color; returns the parent rank table and our new rank. */
static ncclResult_t assign_ranks(const struct color_key* all, int nranks, int me, int** parent_ranks,
                                 int* new_rank, int* new_nranks) {
  int* table = malloc(sizeof(int) * nranks);
  if (table == NULL) return ncclSystemError;
  int n = 0;
  for (int r = 0; r < nranks; r++) {
    if (all[r].color != all[me].color) continue;
    int pos = n++;
    /* insertion sort by (key, parent rank): r ascends, so ties keep parent order */
    while (pos > 0 && all[table[pos - 1]].key > all[r].key) {
      table[pos] = table[pos - 1];
      pos--;
    }
    table[pos] = r;
  }
  for (int i = 0; i < n; i++)
    if (table[i] == me) *new_rank = i;
  *parent_ranks = table;
  *new_nranks = n;
  return ncclSuccess;
}

ncclResult_t weft_child_setup(struct ncclComm* child, struct ncclComm* parent, const int* parent_ranks,
                              int index, uint64_t tag) {
  uint64_t salt[3] = {parent->ctx.comm_hash, (uint64_t)index, tag};
  child->ctx.comm_hash = weft_hash_bytes(salt, sizeof(salt), 0x5b1d);
  return weft_comm_setup(child, NULL, 0, parent, parent_ranks);
}

static ncclResult_t split_run(struct weft_async_job* base) {
  struct split_job* job = (struct split_job*)base;
  struct ncclComm* parent = job->parent;
  struct ncclComm* comm = base->comm;
  struct color_key* all = calloc(parent->ctx.nranks, sizeof(*all));
  if (all == NULL) return ncclSystemError;
  all[parent->ctx.rank] = (struct color_key){job->color, job->key};
  ncclResult_t res = weft_bootstrap_allgather(parent->ctx.bootstrap, all, sizeof(*all));
  int* parent_ranks = NULL;
  if (res == ncclSuccess && job->color != NCCL_SPLIT_NOCOLOR)
    res = assign_ranks(all, parent->ctx.nranks, parent->ctx.rank, &parent_ranks, &comm->ctx.rank,
                       &comm->ctx.nranks);
  free(all);
  if (res != ncclSuccess || job->color == NCCL_SPLIT_NOCOLOR) return res;
  WEFT_INFO(WEFT_INIT, "comm %p split from comm %p rank %d color %d key %d -> rank %d of %d", (void*)comm,
            (void*)parent, parent->ctx.rank, job->color, job->key, comm->ctx.rank, comm->ctx.nranks);
  res = weft_child_setup(comm, parent, parent_ranks, job->split_index, (uint64_t)(uint32_t)job->color);
  free(parent_ranks);
  return res;
}

static void split_done(struct weft_async_job* base, ncclResult_t res) {
  struct split_job* job = (struct split_job*)base;
  struct ncclComm* comm = base->comm;
  if (job->color == NCCL_SPLIT_NOCOLOR && !WEFT_FAILED(res)) {
    /* This rank takes part in the exchange only: it gets no communicator. */
    *job->user_newcomm = NULL;
    weft_comm_free(comm);
  } else {
    __atomic_store_n(&comm->ctx.async_result, res, __ATOMIC_RELEASE);
  }
  free(job);
}

ncclResult_t weft_child_alloc(struct ncclComm* parent, int rank, int nranks, ncclConfig_t* config,
                              struct ncclComm** out) {
  return weft_comm_alloc(rank, nranks, parent->ctx.cuda_dev, config ? config : &parent->ctx.config, out);
}

void weft_child_done(struct weft_async_job* job, ncclResult_t res) {
  __atomic_store_n(&job->comm->ctx.async_result, res, __ATOMIC_RELEASE);
  free(job);
}

ncclResult_t weft_child_start(struct weft_async_job* job, ncclComm_t* newcomm) {
  struct ncclComm* child = job->comm;
  *newcomm = child;
  if (weft_group_depth() > 0) {
    weft_group_add_job(job);
    return ncclSuccess;
  }
  ncclResult_t res = job->run(job);
  job->done(job, res);
  if (WEFT_FAILED(res)) {
    *newcomm = NULL;
    weft_comm_free(child);
  }
  return res;
}

WEFT_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  WEFT_CHECK(weft_comm_check_parent(comm, "ncclCommSplit"));
  WEFT_ARG_CHECK(newcomm != NULL, "newcomm is NULL");
  WEFT_ARG_CHECK(color >= 0 || color == NCCL_SPLIT_NOCOLOR, "color %d must be >= 0 or NCCL_SPLIT_NOCOLOR",
                 color);
  *newcomm = NULL;
  struct ncclComm* child = NULL;
  WEFT_CHECK(weft_child_alloc(comm, 0, 1, config, &child));
  struct split_job* job = calloc(1, sizeof(*job));
  if (job == NULL) {
    weft_comm_free(child);
    return ncclSystemError;
  }
  *job = (struct split_job){.base = {.run = split_run, .done = split_done, .comm = child},
                            .parent = comm,
                            .user_newcomm = newcomm,
                            .color = color,
                            .key = key,
                            .split_index = comm->split_count++};
  return weft_child_start(&job->base, newcomm);
}
