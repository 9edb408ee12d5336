/* Fingerprints of collective calls and the WARN that names how two ranks' calls differ. */
#include "collectives/fingerprint.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

static int has_root(int coll) { return coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE; }
static int has_op(int coll) { return coll != WEFT_COLL_BROADCAST && coll != WEFT_COLL_ALLGATHER; }

struct weft_call_fp weft_call_fp_of(const struct weft_task* t) {
  struct weft_call_fp fp;
  memset(&fp, 0, sizeof(fp));
  fp.coll = (uint8_t)t->coll;
  fp.dtype = (uint8_t)t->dtype;
  /* The op as the caller named it; every ncclRedOpCreatePreMulSum op is one kind, since each rank
   * may pass its own scalar and handle. 0: a collective without an op. */
  int user = (int)t->op.user_op;
  fp.op = !has_op(t->coll) ? 0 : (uint8_t)(user >= 0 && user < (int)ncclNumOps ? user + 1 : ncclNumOps + 1);
  fp.root = has_root(t->coll) ? t->root : -1;
  fp.count = t->count;
  return fp;
}

int weft_call_fp_equal(const struct weft_call_fp* a, const struct weft_call_fp* b) {
  return a->coll == b->coll && a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
         a->count == b->count;
}

static const char* op_name(int op) {
  static const char* const names[] = {
      "(none)", "ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg", "a ncclRedOpCreatePreMulSum op"};
  return op >= 0 && op < (int)(sizeof(names) / sizeof(names[0])) ? names[op] : "?";
}

/* Append one field's text to buf, after " and " when it holds one already. */
static void add_field(char* buf, size_t n, const char* fmt, ...) {
  size_t used = strlen(buf);
  if (used > 0 && used < n) used += (size_t)snprintf(buf + used, n - used, " and ");
  if (used >= n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, n - used, fmt, ap);
  va_end(ap);
}

/* "count 1024", "datatype 7 and op ncclMax", ...: every field in which fp differs from other,
 * with fp's values. */
static void field_text(const struct weft_call_fp* fp, const struct weft_call_fp* other, char* buf, size_t n) {
  buf[0] = '\0';
  if (fp->count != other->count) add_field(buf, n, "count %llu", (unsigned long long)fp->count);
  if (fp->dtype != other->dtype) add_field(buf, n, "datatype %d", (int)fp->dtype);
  if (fp->op != other->op) add_field(buf, n, "op %s", op_name(fp->op));
  if (fp->root != other->root) add_field(buf, n, "root %d", (int)fp->root);
}

uint32_t weft_call_fp_hash(const struct weft_call_fp* fp) {
  /* FNV-1a over the fields: any single-field difference changes it. */
  uint64_t words[2];
  memcpy(words, fp, sizeof(words));
  uint32_t h = 2166136261u;
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < 8; i++) h = (h ^ (uint8_t)(words[w] >> (8 * i))) * 16777619u;
  return h;
}

/* Whether fp has the hash a step tag carries (weft_step_tag_make); if so it is the answer. */
static int matches(const struct weft_call_fp* fp, uint32_t theirs, struct weft_call_fp* out) {
  uint32_t h = weft_call_fp_hash(fp);
  if ((h ? h : 1) != theirs) return 0;
  *out = *fp;
  return 1;
}

/* mine as collective coll: op and root kept where both collectives take them, else each value
 * in turn (ops 1..ncclNumOps+1, roots 0..nranks-1), or the neutral one where coll takes none. */
static int guess_coll(const struct weft_call_fp* mine, int coll, uint32_t theirs, int nranks,
                      struct weft_call_fp* out) {
  int op_lo = 0, op_hi = 0, root_lo = -1, root_hi = -1;
  if (has_op(coll) && has_op(mine->coll)) {
    op_lo = op_hi = mine->op;
  } else if (has_op(coll)) {
    op_lo = 1;
    op_hi = (int)ncclNumOps + 1;
  }
  if (has_root(coll) && has_root(mine->coll)) {
    root_lo = root_hi = mine->root;
  } else if (has_root(coll)) {
    root_lo = 0;
    root_hi = nranks - 1;
  }
  struct weft_call_fp fp = *mine;
  fp.coll = (uint8_t)coll;
  for (int op = op_lo; op <= op_hi; op++)
    for (int root = root_lo; root <= root_hi; root++) {
      fp.op = (uint8_t)op;
      fp.root = root;
      if (matches(&fp, theirs, out)) return 1;
    }
  return 0;
}

/* mine (its count already the peer's) with one other field changed, or none (any = 0). */
static int guess_one_field(const struct weft_call_fp* mine, const struct weft_call_fp* orig, uint32_t theirs,
                           int nranks, struct weft_call_fp* out) {
  if (!weft_call_fp_equal(mine, orig) && matches(mine, theirs, out)) return 1;
  struct weft_call_fp fp = *mine;
  for (int dt = 0; dt < (int)ncclNumTypes; dt++) {
    fp.dtype = (uint8_t)dt;
    if (dt != mine->dtype && matches(&fp, theirs, out)) return 1;
  }
  fp = *mine;
  for (int op = 1; has_op(mine->coll) && op <= (int)ncclNumOps + 1; op++) {
    fp.op = (uint8_t)op;
    if (op != mine->op && matches(&fp, theirs, out)) return 1;
  }
  fp = *mine;
  for (int root = 0; has_root(mine->coll) && root < nranks; root++) {
    fp.root = root;
    if (root != mine->root && matches(&fp, theirs, out)) return 1;
  }
  for (int coll = 0; coll < WEFT_COLL_SEND; coll++)
    if (coll != mine->coll && guess_coll(mine, coll, theirs, nranks, out)) return 1;
  return 0;
}

/* mine (its count already the peer's) with two fields other than the count changed: datatype,
 * op or root with a second of them or with the collective. At most a few hundred thousand
 * hashes at 1,024 ranks (a few ms, only once a mismatch is found). */
static int guess_two_fields(const struct weft_call_fp* mine, uint32_t theirs, int nranks,
                            struct weft_call_fp* out) {
  struct weft_call_fp fp = *mine;
  for (int dt = 0; dt < (int)ncclNumTypes; dt++) {
    if (dt == mine->dtype) continue;
    fp = *mine;
    fp.dtype = (uint8_t)dt;
    for (int op = 1; has_op(mine->coll) && op <= (int)ncclNumOps + 1; op++) {
      fp.op = (uint8_t)op;
      if (op != mine->op && matches(&fp, theirs, out)) return 1;
    }
    fp.op = mine->op;
    for (int root = 0; has_root(mine->coll) && root < nranks; root++) {
      fp.root = root;
      if (root != mine->root && matches(&fp, theirs, out)) return 1;
    }
    fp.root = mine->root;
    for (int coll = 0; coll < WEFT_COLL_SEND; coll++)
      if (coll != mine->coll && guess_coll(&fp, coll, theirs, nranks, out)) return 1;
  }
  for (int op = 1; has_op(mine->coll) && op <= (int)ncclNumOps + 1; op++) {
    if (op == mine->op) continue;
    fp = *mine;
    fp.op = (uint8_t)op;
    for (int root = 0; has_root(mine->coll) && root < nranks; root++) {
      fp.root = root;
      if (root != mine->root && matches(&fp, theirs, out)) return 1;
    }
    fp.root = mine->root;
    for (int coll = 0; coll < WEFT_COLL_SEND; coll++)
      if (coll != mine->coll && has_op(coll) && guess_coll(&fp, coll, theirs, nranks, out)) return 1;
  }
  for (int root = 0; has_root(mine->coll) && root < nranks; root++) {
    if (root == mine->root) continue;
    fp = *mine;
    fp.root = root;
    for (int coll = 0; coll < WEFT_COLL_SEND; coll++)
      if (coll != mine->coll && has_root(coll) && guess_coll(&fp, coll, theirs, nranks, out)) return 1;
  }
  return 0;
}

/* The k-th count (k = 0, 1, 2, ...) with the tag's low 16 bits, by distance from mine: the nearest
 * below or equal, the nearest above, then alternating outwards. Returns 0 past the range. */
static int count_candidate(uint64_t mine, uint16_t low, uint64_t k, uint64_t* out) {
  uint64_t below = (mine & ~0xffffull) | low;
  if (below > mine) below -= 0x10000; /* may wrap when mine is small: skipped below */
  uint64_t step = (k + 1) / 2 * 0x10000;
  if (k % 2 == 0) {
    if (below > mine || below < step) return 0; /* wrapped, or below 0 */
    *out = below - step;
  } else {
    *out = below + step;
  }
  return 1;
}

int weft_call_fp_guess(const struct weft_call_fp* mine, uint64_t theirs, int nranks,
                       struct weft_call_fp* out) {
  uint32_t hash = weft_step_tag_hash(theirs);
  uint16_t low = (uint16_t)(theirs >> 32);
  struct weft_call_fp fp = *mine;
  /* The nearest counts with the tag's low bits: alone, or with one other field. */
  for (uint64_t k = 0; k < 4; k++) {
    if (!count_candidate(mine->count, low, k, &fp.count)) continue;
    if (guess_one_field(&fp, mine, hash, nranks, out)) return 1;
  }
  /* Farther counts, the count alone (2^16 each way: 2^32 elements). */
  for (uint64_t k = 4; k < 2 * 0x10000; k++)
    if (count_candidate(mine->count, low, k, &fp.count) && matches(&fp, hash, out)) return 1;
  /* Two other fields, with the nearest counts (mine, where the low bits agree). */
  for (uint64_t k = 0; k < 2; k++) {
    if (!count_candidate(mine->count, low, k, &fp.count)) continue;
    if (guess_two_fields(&fp, hash, nranks, out)) return 1;
  }
  return 0;
}

void weft_call_fp_describe(int a, const struct weft_call_fp* fa, int b, const struct weft_call_fp* fb,
                           char* buf, size_t n) {
  if (fa->coll != fb->coll) {
    snprintf(buf, n, "rank %d called nccl%s, rank %d called nccl%s", a, weft_coll_name(fa->coll), b,
             weft_coll_name(fb->coll));
    return;
  }
  char ta[112], tb[112];
  field_text(fa, fb, ta, sizeof(ta));
  field_text(fb, fa, tb, sizeof(tb));
  snprintf(buf, n, "rank %d called nccl%s with %s, rank %d with %s", a, weft_coll_name(fb->coll), ta, b, tb);
}

void weft_call_fp_warn_ranks(int me, int a, const struct weft_call_fp* fa, int b,
                             const struct weft_call_fp* fb, uint64_t seq, const char* note) {
  char what[WEFT_CALL_FP_TEXT];
  weft_call_fp_describe(a, fa, b, fb, what, sizeof(what));
  WEFT_WARN(
      "Rank %d: mismatched collective (seq %llu): %s; every rank must %s; the communicator is unusable%s", me,
      (unsigned long long)seq, what,
      fa->coll != fb->coll ? "call the same collectives in the same order" : "pass the same arguments", note);
}

void weft_call_fp_warn(int me, const struct weft_call_fp* mine, int peer, const struct weft_call_fp* theirs,
                       uint64_t seq) {
  weft_call_fp_warn_ranks(me, peer, theirs, me, mine, seq, "");
}
