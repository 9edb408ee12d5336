/* A peer's call told from the tag its steps carry (weft_call_fp_guess): every call that differs
 * from this rank's in one field is found, with the field's value, a count with one other field,
 * and two fields other than the count; three are never mistaken for another call. */
#include <string.h>

#include "check.h"
#include "collectives/fingerprint.h"

#define NRANKS 8

static uint64_t tag_of(const struct weft_call_fp* fp) {
  return weft_step_tag_make(1, weft_call_fp_hash(fp), fp->count);
}

static struct weft_call_fp call(int coll, int dtype, int user_op, int root, size_t count) {
  struct weft_task t;
  memset(&t, 0, sizeof(t));
  t.coll = coll;
  t.dtype = dtype;
  t.op.user_op = user_op;
  t.root = root;
  t.count = count;
  return weft_call_fp_of(&t);
}

static void expect_found(const struct weft_call_fp* mine, const struct weft_call_fp* theirs,
                         const char* what) {
  struct weft_call_fp got;
  int found = weft_call_fp_guess(mine, tag_of(theirs), NRANKS, &got);
  EXPECT_MSG(found && weft_call_fp_equal(&got, theirs), "%s: %s", what,
             found ? "a different call" : "not found");
}

static void expect_none(const struct weft_call_fp* mine, const struct weft_call_fp* theirs,
                        const char* what) {
  struct weft_call_fp got;
  EXPECT_MSG(!weft_call_fp_guess(mine, tag_of(theirs), NRANKS, &got), "%s: a call was claimed", what);
}

static void one_field_changes(int coll, int root) {
  struct weft_call_fp mine = call(coll, ncclFloat32, ncclSum, root, 1000);
  for (int dt = 0; dt < ncclNumTypes; dt++) {
    struct weft_call_fp theirs = call(coll, dt, ncclSum, root, 1000);
    if (dt != ncclFloat32) expect_found(&mine, &theirs, "datatype");
  }
  for (int op = 0; op < ncclNumOps && coll != WEFT_COLL_BROADCAST && coll != WEFT_COLL_ALLGATHER; op++) {
    struct weft_call_fp theirs = call(coll, ncclFloat32, op, root, 1000);
    if (op != ncclSum) expect_found(&mine, &theirs, "op");
  }
  for (int r = 0; r < NRANKS && (coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE); r++) {
    struct weft_call_fp theirs = call(coll, ncclFloat32, ncclSum, r, 1000);
    if (r != root) expect_found(&mine, &theirs, "root");
  }
  for (int other = 0; other < WEFT_COLL_SEND; other++) {
    for (int r = 0; r < NRANKS; r++) {
      struct weft_call_fp theirs = call(other, ncclFloat32, ncclMax, r, 1000);
      struct weft_call_fp same_op = call(other, ncclFloat32, ncclSum, r, 1000);
      if (other == coll) continue;
      /* Another collective with what this rank passed where both take it, anything else where not. */
      int both_op = coll != WEFT_COLL_BROADCAST && coll != WEFT_COLL_ALLGATHER &&
                    other != WEFT_COLL_BROADCAST && other != WEFT_COLL_ALLGATHER;
      int both_root = (coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE) &&
                      (other == WEFT_COLL_BROADCAST || other == WEFT_COLL_REDUCE);
      if (both_root && r != root) continue;
      expect_found(&mine, both_op ? &same_op : &theirs, "collective");
    }
  }
  /* Counts near and far (within 2^32 elements), below and above, small and large. */
  static const size_t counts[] = {999,       1001,       0, 1, 65536 + 1000, 65535, 1000 + 7 * 65536,
                                  123456789, 4000000000u};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
    struct weft_call_fp counted = call(coll, ncclFloat32, ncclSum, root, counts[i]);
    expect_found(&mine, &counted, "count");
  }
  struct weft_call_fp far = call(coll, ncclFloat32, ncclSum, root, 1000 + ((size_t)1 << 33));
  expect_none(&mine, &far, "a count 2^33 away");
  struct weft_call_fp two = call(coll, ncclFloat64, ncclSum, root, 2000);
  expect_found(&mine, &two, "datatype and count");
  int has_op = coll != WEFT_COLL_BROADCAST && coll != WEFT_COLL_ALLGATHER;
  int has_root = coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE;
  if (has_op) {
    struct weft_call_fp dt_op = call(coll, ncclFloat64, ncclMax, root, 1000);
    expect_found(&mine, &dt_op, "datatype and op");
  }
  if (has_root) {
    struct weft_call_fp dt_root = call(coll, ncclInt8, ncclSum, NRANKS - 1, 1000);
    expect_found(&mine, &dt_root, "datatype and root");
  }
  if (has_op && has_root) {
    struct weft_call_fp op_root = call(coll, ncclFloat32, ncclProd, NRANKS - 1, 1000);
    expect_found(&mine, &op_root, "op and root");
    struct weft_call_fp three = call(coll, ncclFloat64, ncclMax, NRANKS - 1, 1000);
    expect_none(&mine, &three, "datatype, op and root");
  }
  for (int other = 0; other < WEFT_COLL_SEND; other++) {
    if (other == coll) continue;
    struct weft_call_fp coll_dt = call(other, ncclUint8, ncclSum, root, 1000);
    if (other != WEFT_COLL_BROADCAST && other != WEFT_COLL_ALLGATHER && !has_op) continue;
    if ((other == WEFT_COLL_BROADCAST || other == WEFT_COLL_REDUCE) && !has_root) continue;
    expect_found(&mine, &coll_dt, "collective and datatype");
  }
  if (has_op) {
    struct weft_call_fp dt_op_far = call(coll, ncclFloat64, ncclMax, root, 1000 + 3 * 65536);
    expect_none(&mine, &dt_op_far, "datatype and op with a count 3 x 2^16 away");
  }
}

/* Call numbers widened from the tag's 16 bits next to this rank's, ahead or behind. */
static void call_numbers(void) {
  struct weft_call_fp fp = call(WEFT_COLL_ALLREDUCE, ncclFloat32, ncclSum, 0, 1000);
  static const uint64_t seqs[] = {1, 65535, 65536, 65537, 1000000};
  for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
    for (int d = -3; d <= 3; d++) {
      uint64_t theirs = seqs[i] + (uint64_t)(int64_t)d;
      uint64_t tag = weft_step_tag_make(theirs, weft_call_fp_hash(&fp), fp.count);
      EXPECT_MSG(weft_step_tag_seq(tag, seqs[i]) == theirs, "call %llu read next to %llu as %llu",
                 (unsigned long long)theirs, (unsigned long long)seqs[i],
                 (unsigned long long)weft_step_tag_seq(tag, seqs[i]));
      EXPECT_MSG(weft_step_tag_same_call(tag, weft_step_tag_make(seqs[i], 7, 9)) == (d == 0),
                 "call %llu and %llu: same_call wrong", (unsigned long long)theirs,
                 (unsigned long long)seqs[i]);
    }
}

int main(void) {
  for (int coll = 0; coll < WEFT_COLL_SEND; coll++)
    one_field_changes(coll, coll == WEFT_COLL_BROADCAST ? 3 : 0);
  call_numbers();
  /* The WARN's words for a datatype told from a hash. */
  char text[WEFT_CALL_FP_TEXT];
  struct weft_call_fp a = call(WEFT_COLL_ALLREDUCE, ncclFloat64, ncclSum, 0, 512);
  struct weft_call_fp b = call(WEFT_COLL_ALLREDUCE, ncclFloat32, ncclSum, 0, 512);
  weft_call_fp_describe(1, &a, 0, &b, text, sizeof(text));
  EXPECT_MSG(strcmp(text, "rank 1 called ncclAllReduce with datatype 8, rank 0 with datatype 7") == 0, "%s",
             text);
  /* Every field that differs, not only the first. */
  struct weft_call_fp c = call(WEFT_COLL_REDUCE, ncclFloat64, ncclMax, 2, 512);
  struct weft_call_fp d = call(WEFT_COLL_REDUCE, ncclFloat32, ncclSum, 0, 256);
  weft_call_fp_describe(3, &c, 0, &d, text, sizeof(text));
  EXPECT_MSG(strcmp(text,
                    "rank 3 called ncclReduce with count 512 and datatype 8 and op ncclMax and root 2, "
                    "rank 0 with count 256 and datatype 7 and op ncclSum and root 0") == 0,
             "%s", text);
  return test_finish("fingerprint");
}
