/* A collective call's fingerprint: what every rank must pass alike (collective, count, datatype,
 * reduction, root). Ranks compare fingerprints through data they already exchange, so a call
 * whose ranks disagree fails on every rank instead of reading past a peer's buffer. */
#ifndef WEFT_COLLECTIVES_FINGERPRINT_H
#define WEFT_COLLECTIVES_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/task.h"

/* 16 bytes, so two (one per parity) fit in a board's arrival line. */
struct weft_call_fp {
  uint8_t coll, dtype, op, pad;
  int32_t root; /* Broadcast/Reduce only, else -1 */
  uint64_t count;
};

/* The fingerprint of collective t; fields a collective does not use are neutral. */
struct weft_call_fp weft_call_fp_of(const struct weft_task* t);
int weft_call_fp_equal(const struct weft_call_fp* a, const struct weft_call_fp* b);
/* A 32-bit hash of fp, for connector step tags (collectives/host/step_tag.h). */
uint32_t weft_call_fp_hash(const struct weft_call_fp* fp);

/* The step tag of collective number seq (counted alike on every rank) with fingerprint hash
 * fp_hash: never 0, which means "not checked" (WEFT_CHECK_CALLS=0, or a step a network proxy
 * stored). Both backends' senders put it beside each step; receivers compare it with theirs. */
static inline uint64_t weft_step_tag_make(uint64_t seq, uint32_t fp_hash) {
  return (seq << 32) | (fp_hash ? fp_hash : 1);
}
/* Fingerprints of a rank's last calls are kept (by call number modulo this), so that a peer's
 * step of an earlier call (a rank that returned early from a mismatched call) is told too. */
#define WEFT_RECENT_CALLS 4

/* A peer's call told from its step tag's hash (theirs) and this rank's call (mine): the call that
 * differs from mine in one field other than the count (collective, datatype, op or root, few
 * enough to try them all) and has that hash. Returns whether one was found; a count, or several
 * fields, cannot be told from a hash. A wrong answer needs a 32-bit hash collision among the
 * (at most a few hundred) calls tried. */
int weft_call_fp_guess(const struct weft_call_fp* mine, uint32_t theirs, int nranks,
                       struct weft_call_fp* out);
/* WARN on rank `me` (seq: the call) naming the first field in which peer's call differs from its
 * own, e.g. "rank 1 called ncclAllReduce with count 1024, rank 0 with count 2048". */
void weft_call_fp_warn(int me, const struct weft_call_fp* mine, int peer, const struct weft_call_fp* theirs,
                       uint64_t seq);
/* How a's call differs from b's, e.g. "rank 1 called ncclAllReduce with count 1024, rank 0 with
 * count 2048", in buf (WEFT_CALL_FP_TEXT bytes are enough). */
#define WEFT_CALL_FP_TEXT 160
void weft_call_fp_describe(int a, const struct weft_call_fp* fa, int b, const struct weft_call_fp* fb,
                           char* buf, size_t n);
/* The same WARN on rank me about two other ranks' calls (b's fingerprint the reference), with
 * note appended (e.g. who found it). */
void weft_call_fp_warn_ranks(int me, int a, const struct weft_call_fp* fa, int b,
                             const struct weft_call_fp* fb, uint64_t seq, const char* note);

#endif
