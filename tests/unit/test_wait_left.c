/* A wait whose peer has left (wait.c, peer_left): the peer writes that it destroyed its
 * communicator after its last step, so a wait that sees the mark may have looked for that step
 * just before it landed. It must look once more before giving up:
 * - the step turns up on the second look, the mark already there: the wait succeeds;
 * - the step never comes: ncclRemoteError within a sleep slice, the cause set to the peer;
 * - the mark says another rank left (a neighbour passing it on): ncclRemoteError at once;
 * - a mark of a peer this wait is not for changes nothing. */
#include <string.h>
#include <time.h>

#include "check.h"
#include "collectives/host/wait.h"
#include "transport/connector.h"

#define NRANKS 3

static volatile uint32_t abort_flag;
static struct weft_cause causes[NRANKS];
static struct weft_cause* cause_of[NRANKS];
static struct weft_cause mine;

/* Ready on the ready_at-th look (0: never). */
struct looks {
  int n, ready_at;
};
static int ready(void* arg) {
  struct looks* l = arg;
  return ++l->n == l->ready_at;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank 0 waits for peer, whose page holds kind/rank (rank < 0: nothing). */
static ncclResult_t wait_with_mark(int peer, int mark_rank, int ready_at, double* took) {
  memset(causes, 0, sizeof(causes));
  memset(&mine, 0, sizeof(mine));
  for (int p = 0; p < NRANKS; p++) cause_of[p] = &causes[p];
  if (mark_rank >= 0) weft_cause_set_kind(&causes[peer], WEFT_CAUSE_LEFT, mark_rank, "host-x", NULL);
  struct weft_waiter w;
  weft_waiter_init(&w, &abort_flag, 0, NRANKS);
  w.spin_ns = 0; /* straight to the sleeping checks */
  w.peer_cause = cause_of;
  w.cause = &mine;
  struct looks l = {0, ready_at};
  uint64_t doorbell = 0;
  uint32_t waiting = 0;
  double t0 = now_s();
  ncclResult_t res = weft_host_wait(&w, ready, &l, &doorbell, &waiting, peer, 0, "test");
  *took = now_s() - t0;
  return res;
}

int main(void) {
  double took;
  /* Looks: the fast check, then one per pass of the sleeping loop. The step lands on the third:
   * the mark was seen on the second pass's checks. */
  EXPECT_EQ_INT(wait_with_mark(1, 1, 3, &took), ncclSuccess);
  EXPECT_MSG(took < 1.0, "the step that came before the goodbye took %.2f s", took);

  EXPECT_EQ_INT(wait_with_mark(1, 1, 0, &took), ncclRemoteError);
  EXPECT_MSG(took < 1.0, "the wait for a peer that left ended after %.2f s", took);
  struct weft_cause c;
  EXPECT(weft_cause_get(&mine, &c) && c.kind == WEFT_CAUSE_LEFT && c.rank == 1);

  /* Rank 1 passes on that rank 2 left: no second look needed, it gave up. */
  EXPECT_EQ_INT(wait_with_mark(1, 2, 0, &took), ncclRemoteError);
  EXPECT(weft_cause_get(&mine, &c) && c.kind == WEFT_CAUSE_LEFT && c.rank == 2);

  /* Rank 2 left, but this wait is for rank 1, whose step comes later. */
  memset(causes, 0, sizeof(causes));
  EXPECT_EQ_INT(wait_with_mark(1, -1, 5, &took), ncclSuccess);
  weft_cause_set_kind(&causes[2], WEFT_CAUSE_LEFT, 2, "host-y", NULL);
  struct weft_waiter w;
  weft_waiter_init(&w, &abort_flag, 0, NRANKS);
  w.spin_ns = 0;
  w.peer_cause = cause_of;
  struct looks l = {0, 5};
  uint64_t doorbell = 0;
  uint32_t waiting = 0;
  EXPECT_EQ_INT(weft_host_wait(&w, ready, &l, &doorbell, &waiting, 1, 0, "test"), ncclSuccess);
  return test_finish("test_wait_left");
}
