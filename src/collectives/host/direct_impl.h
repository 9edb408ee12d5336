/* Internals shared by direct.c (setup, protocol) and direct_ops.c (data movement): the board
 * layout and the per-communicator state. */
#ifndef WEFT_COLLECTIVES_HOST_DIRECT_IMPL_H
#define WEFT_COLLECTIVES_HOST_DIRECT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/dev_types.h"
#include "collectives/fingerprint.h"
#include "collectives/host/wait.h"
#include "collectives/task.h"
#include "nccl.h"
#include "transport/connector.h"

/* All-reduce up to this size: inputs through the boards, in one step. At 2 KiB that took 0.37-0.39
 * us per call against the zero-copy path's 0.44-0.47 (2 processes, once a rank read its own input
 * from sendbuff); at 4 KiB zero-copy is ahead (0.50-0.55 against 0.50-0.64). */
#define WEFT_DIRECT_EXCHANGE_MAX 2048
#define WEFT_DIRECT_SMALL_MAX (16 * 1024) /* up to this size too when some buffer cannot be shared */
#define WEFT_DIRECT_LINED_MAX 256         /* all-reduce inputs up to this size: in marked lines */
#define WEFT_LINE_DATA 56                 /* input bytes in a marked line (weft_line) */
#define WEFT_DIRECT_LINES ((WEFT_DIRECT_LINED_MAX + WEFT_LINE_DATA - 1) / WEFT_LINE_DATA)
#define WEFT_DIRECT_CHUNK (16 * 1024) /* zero-copy works through L1-sized pieces */
#define WEFT_DIRECT_CACHE_WAYS 8      /* mapped segments kept per peer */
/* From this size of a call's largest buffer on, outputs are written with streaming stores: they
 * do not fit in the caches anyway, and skipping the read-for-ownership saves memory traffic. */
#define WEFT_DIRECT_NT_MIN (4u << 20)

/* A buffer as a peer sees it: the address (usable by ranks of the same process) and, when it is
 * inside ncclMemAlloc memory, the segment to map and the offset in it. */
struct weft_dbuf {
  uint64_t addr, seg_id, seg_size, off;
  int32_t pid, fd;
};

/* The buffers of one rank's direct operation seq. The call's shape (collective, count in bytes,
 * root) is compared on every rank before any peer's buffer is touched, whatever
 * WEFT_CHECK_CALLS says: equal shapes give every rank the same buffer sizes of every peer
 * (weft_direct_extent_of), and when shapes differ every rank sees some peer differ, so none
 * touches a buffer. seq tells a descriptor of this operation from a stale one. */
struct weft_desc {
  uint32_t capable; /* every peer may read in and write out directly */
  uint32_t coll;
  struct weft_dbuf in, out;
  uint64_t bytes; /* count x datatype size */
  uint64_t seq;
  int32_t root; /* Broadcast/Reduce, else -1 */
  char pad1[128 - 28 - 2 * sizeof(struct weft_dbuf)];
};
_Static_assert(sizeof(struct weft_desc) == 128, "a descriptor is two cache lines");

/* What rank `rank` reads of its input and writes of its output in call t (0: the buffer is not
 * used, e.g. a broadcast's sendbuff on a non-root: not described, never mapped). */
struct weft_direct_extent {
  size_t in_bytes, out_bytes;
};
void weft_direct_extent_of(const struct weft_task* t, int nranks, int rank, struct weft_direct_extent* e);

/* One cache line of a small all-reduce's input (up to WEFT_DIRECT_LINED_MAX bytes): the data with
 * the mark of the operation (and call) that wrote it, stored after the data. A peer that sees
 * every line marked reads the input without the arrival line: data and mark come in one
 * transfer, where the board's slot came only after the arrival line that published it, a second
 * transfer (2 processes, 32-256 B: 0.18-0.22 against 0.21-0.24 us per call). Inputs up to 16 B
 * rode in the arrival line itself before; lines are faster there too (0.18-0.19 against 0.20-0.22
 * us at 8 B), since the peer no longer pulls the arrival line from under its owner's next post.
 * Past 256 B the slot is faster again (the lines' copies cost more than the transfer they save). */
struct weft_line {
  uint64_t mark; /* line_mark(seq, tag) (direct_ops.c) of the operation whose data this holds */
  unsigned char data[WEFT_LINE_DATA];
};
_Static_assert(sizeof(struct weft_line) == 64, "a marked line is one cache line");

/* A mismatch this rank found: in its collective number seq, peer's step (or board) said it was
 * in its collective their_seq with fingerprint theirs (known: theirs could be read). */
struct weft_found {
  uint64_t seq, their_seq;
  int32_t peer;
  uint32_t known;
  struct weft_call_fp mine, theirs;
};

/* One rank's board: written only by its owner (except the sleeper counts and poison), read by
 * every peer. Counters count direct operations (seq); parity-indexed parts of operation seq are
 * rewritten at seq+2 at the earliest, which needs every peer to have arrived at seq+1, i.e.
 * finished seq. Collectives the ring runs do not arrive: they take no part in that count. */
struct weft_board {
  uint64_t arrive; /* operations this rank has entered (inputs readable, outputs writable) */
  uint32_t arrive_sleepers;
  uint32_t failed; /* this rank gave up: peers stop waiting */
  /* The operation's call as its step tag (step_tag.h; 0: calls not checked), by parity of the
   * direct operation's number: a small all-reduce that waited for the arrival compares it in the
   * line it read anyway and reads fp and op_seq, a cache line more from another core, only when
   * the tags differ (its marked lines carry the tag's low half). */
  uint64_t tag[2];
  char pad_arrive[32];
  struct weft_call_fp fp[2]; /* the operation's call, for peers to compare */
  uint64_t op_seq[2];        /* its collective number (all collectives, counted alike on every rank) */
  char pad0[128 - 32 - 16 - 32 - 2 * sizeof(struct weft_call_fp)];
  uint64_t done; /* operations whose writes into peers' buffers this rank has finished */
  uint32_t done_sleepers;
  char pad1[128 - 12];
  uint32_t poison; /* written by peers: 1 + the rank that found a mismatched call (0: none) */
  uint32_t refs;   /* ranks of the owner's process still using the board (the last frees it) */
  int32_t cpu;     /* the CPU this rank last waited on (-1: not yet): peers yield when it is theirs */
  char pad2[128 - 12];
  /* The last two collectives the ring ran for this rank, by parity of their number n:
   * ring_ver = 2n once ring_fp holds its fingerprint, odd while being rewritten. Read by a peer
   * that got a step it did not expect or sleeps in the same collective. */
  uint64_t ring_ver[2], ring_fp[2][2];
  struct weft_found found; /* written before this rank poisons its peers */
  char pad3[128 - 48 - sizeof(struct weft_found)];
  struct weft_desc desc[2];
  struct weft_line lines[2][WEFT_DIRECT_LINES] __attribute__((aligned(64)));
  unsigned char slot[2][WEFT_DIRECT_SMALL_MAX] __attribute__((aligned(64)));
  /* Why this rank gave up, or that it left (destroyed its communicator): every peer's waits read
   * it (collectives/host/wait.c), where ring neighbours also read their shared connector pages. */
  struct weft_cause cause;
  /* The CPUs the owner may run on (a cpu_set_t), written before the boards are exchanged: with
   * its peers', what tells whether the ranks outnumber their CPUs (weft_direct.oversub). */
  uint64_t cpus[16];
};

_Static_assert(offsetof(struct weft_board, fp) == 64, "arrive and tag have a cache line of their own");

struct weft_seg_map {
  void* base;
  size_t size;
  uint64_t id, used;
  int pid;
};

struct weft_direct {
  int nranks, rank;
  int oversub;                         /* more ranks than the CPUs they may run on together */
  struct weft_wait_memory wait_memory; /* this rank's counter waits' (wait.h) */
  int forced;                          /* NCCL_ALGO/NCCL_PROTO set: the user asked for the ring's protocols */
  int all_same_proc;                   /* every rank is a thread of this process: addresses are shared */
  int enabled;            /* the data paths may run (WEFT_DIRECT on every rank); else boards compare only */
  int check;              /* every collective's fingerprint is compared (WEFT_CHECK_CALLS, agreed) */
  struct weft_call_fp fp; /* this rank's current operation */
  uint64_t tag;           /* its step tag (the waiter's), posted beside fp */
  uint64_t cur_seq;       /* its collective number (every collective, alike on every rank) */
  struct weft_call_fp hist[2]; /* this rank's last two calls, by parity of their number */
  int in_ring;                 /* it runs on the ring: a peer in a direct operation of that number differs */
  uint8_t* same_proc;
  uint64_t seq;
  struct weft_board* mine;
  struct weft_board** boards; /* [nranks], boards[rank] == mine */
  size_t* board_sizes;
  struct weft_seg_map* cache; /* [nranks][WEFT_DIRECT_CACHE_WAYS] */
  uint64_t clock;
  const void** in; /* this operation's buffers of every rank, as mapped here */
  void** out;
  void* tmp; /* WEFT_DIRECT_CHUNK bytes */
};

/* Wait until every peer's arrive (done = 0) or done (done = 1) counter reaches seq. */
ncclResult_t weft_direct_wait_all(struct weft_direct* d, struct weft_waiter* w, int done, uint64_t seq);
/* Whether peer p's call of operation seq (p has arrived) is this rank's; else WARN, ncclInvalidUsage. */
ncclResult_t weft_direct_check_peer(struct weft_direct* d, int p, uint64_t seq);
/* The call checks' side (direct_check.c). Another rank found a mismatch (poisoned this board):
 * WARN naming it and return ncclInvalidUsage; ncclSuccess when none was found. */
ncclResult_t weft_direct_poisoned(struct weft_direct* d);
/* This rank found that peer's call differs: in collective number seq this rank called mine, and
 * peer was in its number their_seq, theirs (NULL: unknown). Record it, poison every board, fail
 * this rank; ncclInvalidUsage. */
ncclResult_t weft_direct_found(struct weft_direct* d, int peer, uint64_t seq, const struct weft_call_fp* mine,
                               uint64_t their_seq, const struct weft_call_fp* theirs);
/* Mark this rank failed so peers waiting on its board give up instead of hanging; returns res. */
ncclResult_t weft_direct_fail(struct weft_direct* d, ncclResult_t res);
/* Copy this rank's input of a small all-reduce into its board (published by the next arrive). */
void weft_direct_small_post(struct weft_direct* d, const struct weft_task* t, uint64_t seq);
/* Reduce every rank's posted input, in rank order, into recvbuff. */
ncclResult_t weft_direct_small_reduce(struct weft_direct* d, const struct weft_task* t,
                                      const struct weft_dev_redop* op, struct weft_waiter* w, uint64_t seq);
/* The zero-copy collectives (direct_colls.c), after every rank arrived with shareable buffers
 * (d->in/out filled, NULL where the extent is 0): t's collective, then the done counters. */
ncclResult_t weft_direct_run_coll(struct weft_direct* d, const struct weft_task* t,
                                  const struct weft_dev_redop* op, struct weft_waiter* w, uint64_t seq);
/* Data movement helpers of direct_ops.c. Copy n bytes, with streaming stores when nt. */
void weft_direct_copy(void* dst, const void* src, size_t n, int nt);
/* Order streaming stores before the release that says they are done. */
void weft_direct_store_fence(void);
/* Rank r's share [lo, hi) of count elements split over k ranks (blocks never share a line). */
void weft_direct_slice(size_t count, size_t es, int k, int r, size_t* lo, size_t* hi);
/* Reduce elements [lo, hi) over src[0..k-1] (starting with src[first], wrapping) and write the
 * result into each dst[0..ndst-1] at the same elements, through L1-sized pieces. dst[ndst-1] may
 * be a source (in place); no other destination may overlap one. */
void weft_direct_reduce_into(struct weft_direct* d, int dt, const struct weft_dev_redop* op,
                             const void* const* src, int first, void* const* dst, int ndst, size_t lo,
                             size_t hi, int nt);
/* The zero-copy all-reduce's data movement (weft_direct_run_coll posts and waits): this rank's
 * slice of every input, reduced into every output. */
void weft_direct_allreduce(struct weft_direct* d, const struct weft_task* t, const struct weft_dev_redop* op,
                           int nt);

#endif
