/* Fingerprints of collective calls and the WARN that names how two ranks' calls differ. */
#include "collectives/fingerprint.h"

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

/* "count 1024", "datatype 7", ...: the first field that differs, as the value fp has. */
static void field_text(const struct weft_call_fp* fp, const struct weft_call_fp* other, char* buf, size_t n) {
  if (fp->count != other->count)
    snprintf(buf, n, "count %llu", (unsigned long long)fp->count);
  else if (fp->dtype != other->dtype)
    snprintf(buf, n, "datatype %d", (int)fp->dtype);
  else if (fp->op != other->op)
    snprintf(buf, n, "op %s", op_name(fp->op));
  else
    snprintf(buf, n, "root %d", (int)fp->root);
}

void weft_call_fp_warn(int me, const struct weft_call_fp* mine, int peer, const struct weft_call_fp* theirs,
                       uint64_t seq) {
  if (mine->coll != theirs->coll) {
    WEFT_WARN(
        "Rank %d: mismatched collective (seq %llu): rank %d called nccl%s, rank %d called nccl%s; every rank "
        "must "
        "call the same collectives in the same order; nothing of it was moved and the communicator is "
        "unusable",
        me, (unsigned long long)seq, peer, weft_coll_name(theirs->coll), me, weft_coll_name(mine->coll));
    return;
  }
  char a[48], b[48];
  field_text(theirs, mine, a, sizeof(a));
  field_text(mine, theirs, b, sizeof(b));
  WEFT_WARN(
      "Rank %d: mismatched collective (seq %llu): rank %d called nccl%s with %s, rank %d with %s; every rank "
      "must pass the same arguments; the communicator is unusable",
      me, (unsigned long long)seq, peer, weft_coll_name(mine->coll), a, me, b);
}
