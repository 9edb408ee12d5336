/* The small all-reduce's marked lines (collectives/host/direct_ops.c): an input of up to 256
 * bytes travels in cache lines that carry the mark of the operation and call that wrote them, so
 * a rank reads a peer's input once every line is marked, without the peer's arrival line:
 * - lines marked for this operation are taken while the peer's arrival is not yet posted;
 * - lines of the operation before last (the same lines, by parity) are not: the rank waits for
 *   the arrival (here it never comes: ncclTimeout), never reducing stale data;
 * - nor are lines of another call (another tag) of this operation's number;
 * - an input of several lines is only taken when its last line is marked too. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives/host/direct_impl.h"

#define COUNT 50 /* floats: 200 bytes, 4 lines */

static volatile uint32_t abort_flag;
static struct weft_board* boards[2];
static struct weft_direct ranks[2];

static void setup(void) {
  for (int r = 0; r < 2; r++) {
    boards[r] = aligned_alloc(64, sizeof(struct weft_board));
    memset(boards[r], 0, sizeof(struct weft_board));
    boards[r]->cpu = -1;
  }
  for (int r = 0; r < 2; r++) {
    struct weft_direct* d = &ranks[r];
    memset(d, 0, sizeof(*d));
    d->nranks = 2;
    d->rank = r;
    d->enabled = d->check = 1;
    d->mine = boards[r];
    d->boards = boards;
    d->tmp = aligned_alloc(4096, WEFT_DIRECT_CHUNK);
  }
}

static struct weft_task task_of(const float* in, float* out, size_t count) {
  return (struct weft_task){
      .coll = WEFT_COLL_ALLREDUCE, .sendbuff = in, .recvbuff = out, .count = count, .dtype = ncclFloat};
}

/* Rank r posts its input of operation seq under tag (its lines only: no arrival). */
static void post(int r, uint64_t seq, uint64_t tag, const float* in, size_t count) {
  struct weft_task t = task_of(in, NULL, count);
  ranks[r].tag = tag;
  weft_direct_small_post(&ranks[r], &t, seq);
}

/* Rank 0 posts its own input and reduces both inputs of operation seq into out. */
static ncclResult_t reduce0(uint64_t seq, uint64_t tag, const float* in, float* out, size_t count) {
  post(0, seq, tag, in, count);
  struct weft_task t = task_of(in, out, count);
  struct weft_dev_redop op = {.kind = WEFT_RED_SUM};
  struct weft_waiter w;
  weft_waiter_init(&w, &abort_flag, 0, 2);
  w.spin_ns = w.busy_spin_ns = 1000;
  w.timeout_ns = 50 * 1000 * 1000ull; /* the arrival never comes: give up soon */
  return weft_direct_small_reduce(&ranks[0], &t, &op, &w, seq);
}

static void fill(float* v, float base) {
  for (int i = 0; i < COUNT; i++) v[i] = base + (float)i;
}

static int sums_to(const float* out, float a, float b) {
  for (int i = 0; i < COUNT; i++)
    if (out[i] != a + b + 2.0f * (float)i) return 0;
  return 1;
}

int main(void) {
  setup();
  float in0[COUNT], in1[COUNT], out[COUNT];
  const uint64_t tag = 0x1234000000abcdefull;

  /* Operation 1: the peer's lines alone publish its input. */
  fill(in0, 1000.0f), fill(in1, 2000.0f);
  post(1, 1, tag, in1, COUNT);
  memset(out, 0, sizeof(out));
  EXPECT_EQ_INT(reduce0(1, tag, in0, out, COUNT), ncclSuccess);
  EXPECT_MSG(sums_to(out, 1000.0f, 2000.0f), "operation 1: out[0] %g, want %g", out[0], 3000.0f);

  /* Operation 3 (the lines of operation 1 again): the peer has not posted, its lines still hold
   * operation 1's input and mark. */
  fill(in0, 10.0f);
  memset(out, 0, sizeof(out));
  EXPECT_EQ_INT(reduce0(3, tag, in0, out, COUNT), ncclTimeout);
  EXPECT_MSG(out[0] == 0.0f, "stale lines were reduced: out[0] %g", out[0]);

  /* Operation 3 posted by a peer in another call (another tag): not taken either. */
  post(1, 3, tag ^ 0x55, in1, COUNT);
  EXPECT_EQ_INT(reduce0(3, tag, in0, out, COUNT), ncclTimeout);
  EXPECT_MSG(out[0] == 0.0f, "another call's lines were reduced: out[0] %g", out[0]);

  /* Operation 3 with the peer's last line still of operation 1: not taken. */
  post(1, 3, tag, in1, COUNT);
  struct weft_line* last = &boards[1]->lines[1][(COUNT * sizeof(float) - 1) / WEFT_LINE_DATA];
  uint64_t mark = last->mark;
  last->mark = 1ull << 32 | (uint32_t)tag;
  EXPECT_EQ_INT(reduce0(3, tag, in0, out, COUNT), ncclTimeout);
  /* ... and taken once it is marked. */
  last->mark = mark;
  EXPECT_EQ_INT(reduce0(3, tag, in0, out, COUNT), ncclSuccess);
  EXPECT_MSG(sums_to(out, 10.0f, 2000.0f), "operation 3: out[0] %g, want %g", out[0], 2010.0f);

  /* Part of a line (8 B), one line (32 B) and the largest lined input (256 B, 5 lines), in
   * operations 5 to 7. */
  float big0[64], big1[64], big_out[64];
  for (int i = 0; i < 64; i++) big0[i] = (float)i, big1[i] = (float)(3 * i);
  const size_t counts[] = {2, 8, 64};
  for (uint64_t seq = 5; seq <= 7; seq++) {
    size_t count = counts[seq - 5];
    post(1, seq, tag, big1, count);
    memset(big_out, 0, sizeof(big_out));
    EXPECT_EQ_INT(reduce0(seq, tag, big0, big_out, count), ncclSuccess);
    for (size_t i = 0; i < count; i++)
      EXPECT_MSG(big_out[i] == (float)(4 * i), "operation %llu element %zu: %g", (unsigned long long)seq, i,
                 big_out[i]);
  }
  return test_finish("test_direct_lines");
}
