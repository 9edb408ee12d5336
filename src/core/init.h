/* Communicator lifecycle shared by init, split and destroy. */
#ifndef WEFT_CORE_INIT_H
#define WEFT_CORE_INIT_H

#include "core/comm.h"

ncclResult_t weft_comm_alloc(int rank, int nranks, int cuda_dev, const ncclConfig_t* config,
                             struct ncclComm** out);
/* Setup on the calling thread: bootstrap, peer exchange, collective state. */
ncclResult_t weft_comm_setup(struct ncclComm* comm, const ncclUniqueId* ids, int nids,
                             struct ncclComm* parent, const int* parent_ranks);
/* Start setup: bootstrap from ids (nids roots) or, with parent set, split from the parent's
 * bootstrap with parent_ranks[new rank] = parent rank. Inline, grouped or in the background. */
ncclResult_t weft_comm_start(struct ncclComm* comm, const ncclUniqueId* ids, int nids,
                             struct ncclComm* parent, const int* parent_ranks);
/* ncclCommInitRankConfig on the calling thread's device, for entry points that join a job by id
 * (a new rank of ncclCommGrow): blocking, nonblocking or grouped as the config and group say. */
ncclResult_t weft_comm_init_rank(ncclComm_t* newcomm, int nranks, const ncclUniqueId* id, int rank,
                                 ncclConfig_t* config);
/* Whoever claims the comm first frees it; a second claimer must leave it alone. */
int weft_comm_claim(struct ncclComm* comm);
/* Release everything the comm holds; waits for a background init. NULL-safe. */
void weft_comm_free(struct ncclComm* comm);
/* The device the calling thread works on (0 without a CUDA backend). */
int weft_current_device(void);
void weft_print_version(void);

#endif
