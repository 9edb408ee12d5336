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

/* The step tag of collective number seq with fingerprint fp, never 0 (0 means "not checked":
 * WEFT_CHECK_CALLS=0, or a step a network proxy stored). Both backends' senders put it beside
 * each step; receivers compare it with theirs. 64 bits: the call's number (low 16 bits), the
 * count (low 16 bits, so that a peer on another host, which has no board to read, can tell a
 * count that differs) and a 32-bit hash of the whole fingerprint. */
static inline uint64_t weft_step_tag_make(uint64_t seq, uint32_t fp_hash, uint64_t count) {
  return ((seq & 0xffffull) << 48) | ((count & 0xffffull) << 32) | (fp_hash ? fp_hash : 1);
}
static inline uint32_t weft_step_tag_hash(uint64_t tag) { return (uint32_t)tag; }
static inline int weft_step_tag_same_call(uint64_t a, uint64_t b) { return a >> 48 == b >> 48; }
/* The full number of the call a tag belongs to, next to a call number near it (this rank's):
 * the tag keeps 16 bits, enough for calls fewer than 32,768 apart. */
static inline uint64_t weft_step_tag_seq(uint64_t tag, uint64_t near) {
  return near + (uint64_t)(int64_t)(int16_t)(uint16_t)((tag >> 48) - near);
}
#define WEFT_RECENT_CALLS 4

/* A peer's call told from its step tag (theirs) and this rank's call of that number (mine): the
 * call whose count has the tag's low 16 bits (the nearest to mine first, within 2^32 elements)
 * and that differs from mine in the count alone, or also in one other field (collective,
 * datatype, op or root; with the nearest counts only), or in two of those (with the count nearest
 * to mine), and has the tag's hash. Returns whether one was found; three fields other than the
 * count cannot be told. A wrong answer needs a 32-bit hash collision among the calls tried
 * (about 130,000 counts, up to a few hundred thousand others at 1,024 ranks). */
int weft_call_fp_guess(const struct weft_call_fp* mine, uint64_t theirs, int nranks,
                       struct weft_call_fp* out);
/* WARN on rank `me` (seq: the call) naming the fields in which peer's call differs from its
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
