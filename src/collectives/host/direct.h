/* Direct paths of the host executor for communicators whose ranks all share one host: a
 * per-rank "board" in shared memory that every peer maps carries arrival/done counters, the
 * buffer descriptors of the current operation, and copies of small inputs. Small all-reduces
 * exchange their inputs through it in one step; larger collectives whose buffers all come from
 * ncclMemAlloc (or whose ranks are threads of one process) read and write the peers' buffers
 * in place (zero-copy, the host analogue of NCCL's P2P direct mode). Everything else runs on
 * the ring connectors. */
#ifndef WEFT_COLLECTIVES_HOST_DIRECT_H
#define WEFT_COLLECTIVES_HOST_DIRECT_H

#include "collectives/host/wait.h"
#include "collectives/task.h"
#include "nccl.h"

struct weft_comm_ctx;
struct weft_direct;

/* Set up the boards of comm (collective over its ranks). *out stays NULL when the boards do not
 * apply (several hosts, one rank, WEFT_DIRECT=0 with WEFT_CHECK_CALLS=0) or when any rank could
 * not map every board: all ranks then agree to use the ring only. With WEFT_DIRECT=0 the boards
 * only carry the fingerprints of collective calls. */
ncclResult_t weft_host_direct_init(struct weft_comm_ctx* comm, struct weft_direct** out);
/* NULL-safe. */
void weft_host_direct_fini(struct weft_direct* d);
/* Run t, the comm's collective number call_seq, through a direct path when one applies
 * (*handled = 1), comparing every rank's call on the boards (WEFT_CHECK_CALLS); otherwise leave
 * it to the ring (*handled = 0), whose steps carry the check (step_tag.h). Every rank decides
 * the same for the same task; ranks whose calls differ get ncclInvalidUsage. */
ncclResult_t weft_host_direct_run(struct weft_direct* d, const struct weft_task* t, struct weft_waiter* w,
                                  uint64_t call_seq, int* handled);
/* Let w's waits end when another rank found a mismatched call, and name a mismatch this rank
 * finds from a step (wait.h: poll, bad_step). NULL d: nothing to do. */
void weft_host_direct_hooks(struct weft_direct* d, struct weft_waiter* w);
/* Where rank p says on its board why it gave up, or that it left: p = d's own rank to say it,
 * another to read it. NULL when d is NULL. */
struct weft_cause* weft_host_direct_cause(struct weft_direct* d, int p);

#endif
