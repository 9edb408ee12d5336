/* Building a communicator from an existing one, shared by split, shrink and grow: allocate the
 * child, set it up over the parent's bootstrap, run the job inline or at the end of the group. */
#ifndef WEFT_CORE_SPLIT_H
#define WEFT_CORE_SPLIT_H

#include <stdint.h>

#include "core/comm.h"
#include "core/group.h"

/* The child of parent with rank of nranks; config NULL inherits the parent's (as NCCL does). */
ncclResult_t weft_child_alloc(struct ncclComm* parent, int rank, int nranks, ncclConfig_t* config,
                              struct ncclComm** out);
/* Setup of child (rank, nranks set) over the parent's bootstrap, parent_ranks[new rank] = parent
 * rank; no root and no rank outside the table is involved. index (the parent's split_count when
 * the call was made, the same on every member) and tag (a split's color, a shrink's mark) keep
 * the hashes of one parent's children apart. */
ncclResult_t weft_child_setup(struct ncclComm* child, struct ncclComm* parent, const int* parent_ranks,
                              int index, uint64_t tag);
/* Runs job, whose comm is the new child, inline or at the end of the current group; *newcomm is
 * the child from now on. job->done records the result in the child and frees the job. An inline
 * failure frees the child and sets *newcomm to NULL. */
ncclResult_t weft_child_start(struct weft_async_job* job, ncclComm_t* newcomm);
/* The plain job->done: records res in the child and frees the job (nothing else it owns). */
void weft_child_done(struct weft_async_job* job, ncclResult_t res);

#endif
