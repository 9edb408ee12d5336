/* Out-of-band setup network: unique id, the root that pairs ring neighbours, ring all-gather,
 * tagged point-to-point messages and a barrier. Every blocking step polls the abort flag and
 * gives up after WEFT_BOOTSTRAP_TIMEOUT seconds naming the ranks it waited for. */
#ifndef WEFT_BOOTSTRAP_H
#define WEFT_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct weft_bootstrap;
struct weft_auth_key;

/* Bytes at the start of an ncclUniqueId that the bootstrap fills and reads; the rest is zero and
 * free for the caller (ncclCommGetUniqueId describes the parent communicator there). */
#define WEFT_BOOTSTRAP_ID_BYTES 96

/* Fill id with a random 64-bit magic, a random 32-byte job key and the address of a root listener
 * that runs in a thread of this process. With NCCL_COMM_ID=host:port set, every rank derives the
 * same id (fixed magic, key from WEFT_JOB_SECRET) and rank 0 starts the root at that address
 * during weft_bootstrap_init. */
ncclResult_t weft_bootstrap_get_unique_id(ncclUniqueId* id);

/* Join the job: rank of nranks. abort_flag (may be NULL) is polled by every wait; when it
 * becomes non-zero the call returns ncclInternalError (or ncclRemoteError for a lost peer). */
ncclResult_t weft_bootstrap_init(const ncclUniqueId* id, int rank, int nranks, volatile uint32_t* abort_flag,
                                 struct weft_bootstrap** out);
/* Several roots (ncclCommInitRankScalable): ranks split into contiguous blocks, one per id. */
ncclResult_t weft_bootstrap_init_scalable(const ncclUniqueId* ids, int nids, int rank, int nranks,
                                          volatile uint32_t* abort_flag, struct weft_bootstrap** out);
/* Build the bootstrap of a sub-communicator over the parent's: parent_ranks[i] is the parent
 * rank of new rank i; every member calls it with the same table. No root is involved. */
ncclResult_t weft_bootstrap_split(struct weft_bootstrap* parent, int new_rank, int new_nranks,
                                  const int* parent_ranks, volatile uint32_t* abort_flag,
                                  struct weft_bootstrap** out);

int weft_bootstrap_rank(const struct weft_bootstrap* bs);
/* The key this job's connections prove (transports authenticate their own sockets with it). */
const struct weft_auth_key* weft_bootstrap_key(const struct weft_bootstrap* bs);
int weft_bootstrap_nranks(const struct weft_bootstrap* bs);

/* data holds nranks slots of size bytes; slot [rank] is ours on entry, all are filled on return. */
ncclResult_t weft_bootstrap_allgather(struct weft_bootstrap* bs, void* data, size_t size);
/* Tagged messages between any two ranks; messages with the same (peer, tag) arrive in order.
 * recv fails if the message is larger than size. */
ncclResult_t weft_bootstrap_send(struct weft_bootstrap* bs, int peer, int tag, const void* data, size_t size);
ncclResult_t weft_bootstrap_recv(struct weft_bootstrap* bs, int peer, int tag, void* data, size_t size);
/* recv that gives up after `seconds` (teardown handshakes, which must not hang on a peer that
 * went away or tears down in another order). */
ncclResult_t weft_bootstrap_recv_within(struct weft_bootstrap* bs, int peer, int tag, void* data, size_t size,
                                        int64_t seconds);
/* Notes: small messages a rank leaves for another that is not waiting for them (a stalled
 * collective asks a peer on another host which call it is in). note gives up after within_ms (a
 * peer that cannot take it by then does not get it). take_note reads what has arrived, without
 * waiting, and hands over a note of exactly size bytes from any rank (*from): 1, or 0 when none
 * is there; notes of another size are dropped. */
ncclResult_t weft_bootstrap_note(struct weft_bootstrap* bs, int peer, const void* data, size_t size,
                                 int64_t within_ms);
int weft_bootstrap_take_note(struct weft_bootstrap* bs, void* data, size_t size, int* from);
ncclResult_t weft_bootstrap_barrier(struct weft_bootstrap* bs);
/* Close sockets and stop any root thread this rank started. NULL-safe. */
void weft_bootstrap_destroy(struct weft_bootstrap* bs);

#endif
