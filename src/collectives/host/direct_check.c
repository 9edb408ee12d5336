/* Mismatched calls on communicators with shared boards: what a rank that finds one publishes
 * (its finding, then a poison mark on every board), how the others learn of it in the waits they
 * already make (the poll hook of wait.h), and how a ring step's tag that is not this rank's
 * call is named from the sender's board. */
#include <stdio.h>
#include <string.h>

#include "collectives/host/direct.h"
#include "collectives/host/direct_impl.h"
#include "util/check.h"
#include "util/log.h"

/* Whether board b holds the fingerprint of its ring collective number seq (read whole). */
static int read_ring(const struct weft_board* b, uint64_t seq, struct weft_call_fp* fp) {
  int par = (int)(seq & 1);
  uint64_t v1 = __atomic_load_n(&b->ring_ver[par], __ATOMIC_ACQUIRE);
  uint64_t words[2] = {__atomic_load_n(&b->ring_fp[par][0], __ATOMIC_RELAXED),
                       __atomic_load_n(&b->ring_fp[par][1], __ATOMIC_RELAXED)};
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (v1 != 2 * seq || __atomic_load_n(&b->ring_ver[par], __ATOMIC_RELAXED) != v1) return 0;
  memcpy(fp, words, sizeof(words));
  return 1;
}

/* WARN on this rank about finding f of rank `by` (by == d->rank: this rank found it). */
static void warn_found(const struct weft_direct* d, int by, const struct weft_found* f) {
  char note[64] = "";
  if (by != d->rank) snprintf(note, sizeof(note), " (found by rank %d)", by);
  if (f->known && f->their_seq == f->seq && !weft_call_fp_equal(&f->mine, &f->theirs)) {
    weft_call_fp_warn_ranks(d->rank, f->peer, &f->theirs, by, &f->mine, f->seq, note);
    return;
  }
  WEFT_WARN(
      "Rank %d: mismatched collective (collective #%llu): rank %d was in its collective #%llu%s%s while "
      "rank %d ran nccl%s; every rank must call the same collectives in the same order; the communicator "
      "is unusable%s",
      d->rank, (unsigned long long)f->seq, f->peer, (unsigned long long)f->their_seq,
      f->known ? ", nccl" : "", f->known ? weft_coll_name(f->theirs.coll) : "", by,
      weft_coll_name(f->mine.coll), note);
}

ncclResult_t weft_direct_found(struct weft_direct* d, int peer, uint64_t seq, const struct weft_call_fp* mine,
                               uint64_t their_seq, const struct weft_call_fp* theirs) {
  struct weft_found* f = &d->mine->found;
  f->seq = seq;
  f->their_seq = their_seq;
  f->peer = peer;
  f->known = theirs != NULL;
  f->mine = *mine;
  if (theirs) f->theirs = *theirs;
  warn_found(d, d->rank, f);
  /* The poison mark is released after the finding, so a rank that sees it reads it whole. */
  for (int p = 0; p < d->nranks; p++)
    if (p != d->rank) {
      uint32_t none = 0;
      __atomic_compare_exchange_n(&d->boards[p]->poison, &none, (uint32_t)d->rank + 1, 0, __ATOMIC_RELEASE,
                                  __ATOMIC_RELAXED);
    }
  return weft_direct_fail(d, ncclInvalidUsage); /* wakes peers asleep on this board */
}

ncclResult_t weft_direct_poisoned(struct weft_direct* d) {
  uint32_t mark = __atomic_load_n(&d->mine->poison, __ATOMIC_ACQUIRE);
  if (__builtin_expect(mark == 0, 1)) return ncclSuccess;
  int by = (int)mark - 1;
  struct weft_found f = d->boards[by]->found;
  warn_found(d, by, &f);
  return weft_direct_fail(d, ncclInvalidUsage);
}

/* Runs in sleeping waits: another rank's finding, or (this rank on the ring) a peer that is in
 * this very collective number with another call: one the boards run (a direct all-reduce), or
 * another ring call (as when two ranks both wait to receive as the reduce root). */
static ncclResult_t poll(void* arg, struct weft_waiter* w) {
  (void)w;
  struct weft_direct* d = arg;
  WEFT_CHECK(weft_direct_poisoned(d));
  if (!d->in_ring || !d->check) return ncclSuccess;
  for (int p = 0; p < d->nranks; p++) {
    if (p == d->rank) continue;
    const struct weft_board* b = d->boards[p];
    uint64_t a = __atomic_load_n(&b->arrive, __ATOMIC_ACQUIRE);
    struct weft_call_fp theirs;
    if (a > 0 && b->op_seq[a & 1] == d->cur_seq) {
      theirs = b->fp[a & 1];
      return weft_direct_found(d, p, d->cur_seq, &d->fp, d->cur_seq, &theirs);
    }
    if (read_ring(b, d->cur_seq, &theirs) && !weft_call_fp_equal(&theirs, &d->fp))
      return weft_direct_found(d, p, d->cur_seq, &d->fp, d->cur_seq, &theirs);
  }
  return ncclSuccess;
}

/* A step from peer tagged with another call: name that call from the peer's board when it
 * still describes the collective the step came from, against this rank's call of that number. */
static ncclResult_t bad_step(void* arg, struct weft_waiter* w, int peer, uint64_t theirs) {
  (void)w;
  struct weft_direct* d = arg;
  WEFT_CHECK(weft_direct_poisoned(d)); /* another rank's finding came first: name that one */
  uint64_t their_seq = weft_step_tag_seq(theirs, d->cur_seq);
  struct weft_call_fp fp;
  int known = read_ring(d->boards[peer], their_seq, &fp);
  /* This rank's own call of that number, when it is one of its last two. */
  int recent = their_seq + 1 >= d->cur_seq && their_seq <= d->cur_seq;
  uint64_t seq = recent && known ? their_seq : d->cur_seq;
  return weft_direct_found(d, peer, seq, &d->hist[seq & 1], their_seq, known ? &fp : NULL);
}
void weft_host_direct_hooks(struct weft_direct* d, struct weft_waiter* w) {
  if (d == NULL) return;
  w->poll = poll;
  w->bad_step = bad_step;
  w->hook_arg = d;
}
