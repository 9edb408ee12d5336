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
  /* Two multiply-xorshift rounds over the two words: each step is invertible in either word, so
   * fingerprints that differ in one word differ in all 64 bits, and may meet only in the 32 kept
   * (chance 2^-32). A few cycles: every collective hashes its fingerprint, and a guess up to
   * hundreds of thousands. */
  uint64_t words[2];
  memcpy(words, fp, sizeof(words));
  uint64_t h = words[0] * 0x9e3779b97f4a7c15ull ^ words[1];
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return (uint32_t)h;
}

/* What a guess looks for: the call with the hash a step tag carries (weft_step_tag_make). */
struct guess {
  uint32_t theirs;
  int nranks;
  struct weft_call_fp* out;
};

/* Whether fp has the tag's hash; if so it is the answer. */
static int matches(const struct weft_call_fp* fp, void* arg) {
  struct guess* g = arg;
  uint32_t h = weft_call_fp_hash(fp);
  if ((h ? h : 1) != g->theirs) return 0;
  *g->out = *fp;
  return 1;
}

typedef int (*fp_try)(const struct weft_call_fp* fp, void* arg);

/* base as collective coll: op and root kept where both collectives take them, else each value
 * in turn (ops 1..ncclNumOps+1, roots 0..nranks-1), or the neutral one where coll takes none. */
static int each_as_coll(const struct weft_call_fp* base, int coll, int nranks, fp_try try, void* arg) {
  int op_lo = 0, op_hi = 0, root_lo = -1, root_hi = -1;
  if (has_op(coll) && has_op(base->coll)) {
    op_lo = op_hi = base->op;
  } else if (has_op(coll)) {
    op_lo = 1;
    op_hi = (int)ncclNumOps + 1;
  }
  if (has_root(coll) && has_root(base->coll)) {
    root_lo = root_hi = base->root;
  } else if (has_root(coll)) {
    root_lo = 0;
    root_hi = nranks - 1;
  }
  struct weft_call_fp fp = *base;
  fp.coll = (uint8_t)coll;
  for (int op = op_lo; op <= op_hi; op++)
    for (int root = root_lo; root <= root_hi; root++) {
      fp.op = (uint8_t)op;
      fp.root = root;
      if (try(&fp, arg)) return 1;
    }
  return 0;
}

/* The fields a guess changes, in the order it changes them. */
enum { F_DTYPE, F_OP, F_ROOT, F_COLL, F_NONE };

static int coll_takes(int coll, int field) {
  return field == F_OP ? has_op(coll) : field == F_ROOT ? has_root(coll) : 1;
}

/* try on base with field changed to each other value it takes (none where base's collective
 * takes no such field); F_COLL: each other collective (each_as_coll) that also takes field
 * `keep`, so a change already made to it stays. Stops at the first try that accepts. */
static int vary(const struct weft_call_fp* base, int field, int keep, int nranks, fp_try try, void* arg) {
  struct weft_call_fp fp = *base;
  if (field == F_COLL) {
    for (int coll = 0; coll < WEFT_COLL_SEND; coll++)
      if (coll != base->coll && coll_takes(coll, keep) && each_as_coll(base, coll, nranks, try, arg))
        return 1;
    return 0;
  }
  if (!coll_takes(base->coll, field)) return 0;
  int lo = field == F_OP ? 1 : 0;
  int hi = field == F_DTYPE ? (int)ncclNumTypes - 1 : field == F_OP ? (int)ncclNumOps + 1 : nranks - 1;
  for (int v = lo; v <= hi; v++) {
    if (field == F_DTYPE) fp.dtype = (uint8_t)v;
    if (field == F_OP) fp.op = (uint8_t)v;
    if (field == F_ROOT) fp.root = v;
    if (!weft_call_fp_equal(&fp, base) && try(&fp, arg)) return 1;
  }
  return 0;
}

/* try on every call that differs from base in one field from `from` on (datatype, op, root,
 * collective), keeping `keep` (see vary). */
static int each_change_from(const struct weft_call_fp* base, int from, int keep, int nranks, fp_try try,
                            void* arg) {
  for (int f = from; f <= F_COLL; f++)
    if (vary(base, f, keep, nranks, try, arg)) return 1;
  return 0;
}

/* Two fields other than the count: a first change, then a second to a later field. */
struct second {
  struct guess* g;
  int first;
};

static int second_change(const struct weft_call_fp* fp, void* arg) {
  struct second* s = arg;
  return each_change_from(fp, s->first + 1, s->first, s->g->nranks, matches, s->g);
}

static int each_two_field_change(const struct weft_call_fp* base, struct guess* g) {
  for (int f = F_DTYPE; f < F_COLL; f++) {
    struct second s = {g, f};
    if (vary(base, f, F_NONE, g->nranks, second_change, &s)) return 1;
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
  struct guess g = {weft_step_tag_hash(theirs), nranks, out};
  uint16_t low = (uint16_t)(theirs >> 32);
  struct weft_call_fp fp = *mine;
  /* The nearest counts with the tag's low bits: alone (not mine itself), or with one other field. */
  for (uint64_t k = 0; k < 4; k++) {
    if (!count_candidate(mine->count, low, k, &fp.count)) continue;
    if ((fp.count != mine->count && matches(&fp, &g)) ||
        each_change_from(&fp, F_DTYPE, F_NONE, nranks, matches, &g))
      return 1;
  }
  /* Farther counts, the count alone (2^16 each way: 2^32 elements). */
  for (uint64_t k = 4; k < 2 * 0x10000; k++)
    if (count_candidate(mine->count, low, k, &fp.count) && matches(&fp, &g)) return 1;
  /* Two other fields, with the nearest counts (mine, where the low bits agree). */
  for (uint64_t k = 0; k < 2; k++)
    if (count_candidate(mine->count, low, k, &fp.count) && each_two_field_change(&fp, &g)) return 1;
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
