/* A peer's call told from the hash its steps carry (weft_call_fp_guess): every call that differs
 * from this rank's in one field other than the count is found, with the field's value; a count,
 * or two fields, is never mistaken for another call. */
#include <string.h>

#include "check.h"
#include "collectives/fingerprint.h"

#define NRANKS 8

static uint32_t tag_hash(const struct weft_call_fp* fp) {
  return (uint32_t)weft_step_tag_make(1, weft_call_fp_hash(fp));
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
  int found = weft_call_fp_guess(mine, tag_hash(theirs), NRANKS, &got);
  EXPECT_MSG(found && weft_call_fp_equal(&got, theirs), "%s: %s", what,
             found ? "a different call" : "not found");
}

static void expect_none(const struct weft_call_fp* mine, const struct weft_call_fp* theirs,
                        const char* what) {
  struct weft_call_fp got;
  EXPECT_MSG(!weft_call_fp_guess(mine, tag_hash(theirs), NRANKS, &got), "%s: a call was claimed", what);
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
  struct weft_call_fp counted = call(coll, ncclFloat32, ncclSum, root, 999);
  expect_none(&mine, &counted, "count");
  struct weft_call_fp two = call(coll, ncclFloat64, ncclSum, root, 2000);
  expect_none(&mine, &two, "datatype and count");
}

int main(void) {
  for (int coll = 0; coll < WEFT_COLL_SEND; coll++)
    one_field_changes(coll, coll == WEFT_COLL_BROADCAST ? 3 : 0);
  /* The WARN's words for a datatype told from a hash. */
  char text[WEFT_CALL_FP_TEXT];
  struct weft_call_fp a = call(WEFT_COLL_ALLREDUCE, ncclFloat64, ncclSum, 0, 512);
  struct weft_call_fp b = call(WEFT_COLL_ALLREDUCE, ncclFloat32, ncclSum, 0, 512);
  weft_call_fp_describe(1, &a, 0, &b, text, sizeof(text));
  EXPECT_MSG(strcmp(text, "rank 1 called ncclAllReduce with datatype 8, rank 0 with datatype 7") == 0, "%s",
             text);
  return test_finish("fingerprint");
}
