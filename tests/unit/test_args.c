/* Argument validation of the collective and point-to-point entry points, and the tasks they
 * queue, on a stand-in communicator (no engine runs: tasks are inspected inside a group and
 * dropped before it ends). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "collectives/task.h"
#include "core/comm.h"
#include "nccl.h"

/* Buffers are only compared, never touched: no engine runs here. */
static char b[4096];
static float buf_f[256];

static struct ncclComm* fake_comm(int rank, int nranks) {
  struct ncclComm* c = calloc(1, sizeof(*c));
  c->magic = WEFT_COMM_MAGIC;
  c->ctx.rank = rank;
  c->ctx.nranks = nranks;
  return c;
}

static void drop_tasks(struct ncclComm* c) {
  for (struct weft_task* t = c->ctx.tasks.head; t;) {
    struct weft_task* next = t->next;
    free(t);
    t = next;
  }
  memset(&c->ctx.tasks, 0, sizeof(c->ctx.tasks));
}

/* Ends a group without launching: a latched error makes ncclGroupEnd drop instead of run. */
static void end_group_without_launch(struct ncclComm* c) {
  drop_tasks(c);
  EXPECT_EQ_INT(ncclAllReduce(NULL, NULL, 1, ncclInt8, ncclSum, c, NULL), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
}

#define EXPECT_INVALID(call, text)                                                                          \
  do {                                                                                                      \
    ncclResult_t r_ = (call);                                                                               \
    EXPECT_MSG(r_ == ncclInvalidArgument, "%s returned %d", #call, (int)r_);                                \
    EXPECT_MSG(strstr(ncclGetLastError(NULL), (text)) != NULL, "%s: last error \"%s\" lacks \"%s\"", #call, \
               ncclGetLastError(NULL), (text));                                                             \
  } while (0)

static void test_invalid_comm(void) {
  EXPECT_INVALID(ncclAllReduce(b, b, 1, ncclInt8, ncclSum, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclAllReduce(b, b, 0, ncclInt8, ncclSum, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclBroadcast(b, b, 1, ncclInt8, 0, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclBcast(b, 1, ncclInt8, 0, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclReduce(b, b, 1, ncclInt8, ncclSum, 0, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclAllGather(b, b, 1, ncclInt8, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclReduceScatter(b, b, 1, ncclInt8, ncclSum, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclSend(b, 1, ncclInt8, 0, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclRecv(b, 1, ncclInt8, 0, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclAlltoAll(b, b + 32, 1, ncclInt8, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclGather(b, b + 32, 1, ncclInt8, 0, NULL, NULL), "comm is NULL");
  EXPECT_INVALID(ncclScatter(b, b + 32, 1, ncclInt8, 0, NULL, NULL), "comm is NULL");
  struct ncclComm* dead = fake_comm(0, 2);
  dead->magic = 0;
  EXPECT_INVALID(ncclAllReduce(b, b, 1, ncclInt8, ncclSum, dead, NULL), "not a live communicator");
  free(dead);
}

static void test_scalars(struct ncclComm* c) {
  char *s = b, *r = b + 2048;
  EXPECT_INVALID(ncclAllReduce(s, r, 1, (ncclDataType_t)ncclNumTypes, ncclSum, c, NULL),
                 "invalid datatype 12");
  EXPECT_INVALID(ncclAllGather(s, r, 1, (ncclDataType_t)-1, c, NULL), "invalid datatype -1");
  EXPECT_INVALID(ncclSend(s, 1, (ncclDataType_t)99, 1, c, NULL), "invalid datatype 99");
  EXPECT_INVALID(ncclAllReduce(s, r, 1, ncclFloat, (ncclRedOp_t)-1, c, NULL), "reduction operation -1");
  EXPECT_INVALID(ncclAllReduce(s, r, 1, ncclFloat, (ncclRedOp_t)ncclNumOps, c, NULL),
                 "reduction operation 5");
  EXPECT_INVALID(ncclReduceScatter(s, r, 1, ncclFloat, ncclMaxRedOp, c, NULL), "unknown to comm");
  EXPECT_INVALID(ncclReduce(s, r, 1, ncclFloat, (ncclRedOp_t)77, 0, c, NULL), "reduction operation 77");
  EXPECT_INVALID(ncclBroadcast(s, r, 1, ncclFloat, 4, c, NULL), "invalid root 4");
  EXPECT_INVALID(ncclBroadcast(s, r, 1, ncclFloat, -1, c, NULL), "invalid root -1");
  EXPECT_INVALID(ncclReduce(s, r, 1, ncclFloat, ncclSum, 9, c, NULL), "invalid root 9");
  EXPECT_INVALID(ncclGather(s, r, 1, ncclInt8, 4, c, NULL), "invalid root 4");
  EXPECT_INVALID(ncclScatter(s, r, 1, ncclInt8, -2, c, NULL), "invalid root -2");
  EXPECT_INVALID(ncclSend(s, 1, ncclInt8, 4, c, NULL), "invalid peer 4");
  EXPECT_INVALID(ncclRecv(r, 1, ncclInt8, -1, c, NULL), "invalid peer -1");
  /* count 0 still validates everything but the buffers */
  EXPECT_INVALID(ncclRecv(r, 0, ncclInt8, 7, c, NULL), "invalid peer 7");
  EXPECT_INVALID(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclNumOps, c, NULL), "reduction operation 5");
  EXPECT_INVALID(ncclAllReduce(s, r, SIZE_MAX / 2, ncclFloat, ncclSum, c, NULL), "overflows");
  EXPECT_INVALID(ncclAllGather(s, r, SIZE_MAX / 8, ncclFloat, c, NULL), "overflows");
}

static void test_buffers(struct ncclComm* c) {
  EXPECT_INVALID(ncclAllReduce(NULL, b, 3, ncclFloat, ncclSum, c, NULL), "sendbuff is NULL with count 3");
  EXPECT_INVALID(ncclAllReduce(b, NULL, 3, ncclFloat, ncclSum, c, NULL), "recvbuff is NULL with count 3");
  EXPECT_INVALID(ncclAllGather(NULL, b, 3, ncclFloat, c, NULL), "sendbuff is NULL");
  EXPECT_INVALID(ncclReduceScatter(b, NULL, 3, ncclFloat, ncclSum, c, NULL), "recvbuff is NULL");
  EXPECT_INVALID(ncclSend(NULL, 3, ncclFloat, 0, c, NULL), "sendbuff is NULL");
  EXPECT_INVALID(ncclRecv(NULL, 3, ncclFloat, 0, c, NULL), "recvbuff is NULL");
  EXPECT_INVALID(ncclAlltoAll(b, NULL, 3, ncclFloat, c, NULL), "recvbuff is NULL");
  /* c is rank 2: Broadcast/Scatter with root 2 need its sendbuff, root 0 does not. */
  EXPECT_INVALID(ncclBroadcast(NULL, b, 3, ncclFloat, 2, c, NULL), "sendbuff is NULL");
  /* ncclBcast's one argument is buff, at the root (2) and elsewhere alike. */
  EXPECT_INVALID(ncclBcast(NULL, 3, ncclFloat, 0, c, NULL), "Broadcast: buff is NULL");
  EXPECT_INVALID(ncclBcast(NULL, 3, ncclFloat, 2, c, NULL), "Broadcast: buff is NULL");
  EXPECT_INVALID(ncclReduce(b, NULL, 3, ncclFloat, ncclSum, 2, c, NULL), "recvbuff is NULL");
  EXPECT_INVALID(ncclReduce(NULL, b, 3, ncclFloat, ncclSum, 0, c, NULL), "sendbuff is NULL");
  EXPECT_INVALID(ncclGather(b, NULL, 3, ncclFloat, 2, c, NULL), "recvbuff is NULL");
  EXPECT_INVALID(ncclScatter(NULL, b, 3, ncclFloat, 2, c, NULL), "sendbuff is NULL");
  EXPECT_INVALID(ncclScatter(b, NULL, 3, ncclFloat, 0, c, NULL), "recvbuff is NULL");
}

/* Buffer shapes that are valid and must queue tasks; checked inside a group. */
static void test_valid_shapes(struct ncclComm* c) {
  size_t n = 8; /* floats: 32 bytes per rank slice; c is rank 2 of 4 */
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ_INT(ncclAllReduce(b, b, n, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclAllReduce(b, b + 32, n, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclAllGather(b + 64, b, n, ncclFloat, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclAllGather(b + 128, b, n, ncclFloat, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclReduceScatter(b, b + 64, n, ncclFloat, ncclMax, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclReduceScatter(b, b + 128, n, ncclFloat, ncclMax, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclBroadcast(NULL, b, n, ncclFloat, 0, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclBcast(b, n, ncclFloat, 2, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclReduce(b, NULL, n, ncclFloat, ncclSum, 1, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclReduce(b, b, n, ncclFloat, ncclSum, 2, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclGather(b + 64, b, n, ncclFloat, 2, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclScatter(b, b + 64, n, ncclFloat, 2, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclSend(b, n, ncclFloat, 2, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclRecv(b + 32, n, ncclFloat, 2, c, NULL), ncclSuccess);
  /* count 0: valid with NULL buffers, queues nothing */
  int before = c->ctx.tasks.count;
  EXPECT_EQ_INT(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclAlltoAll(NULL, NULL, 0, ncclFloat, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclSend(NULL, 0, ncclFloat, 1, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(c->ctx.tasks.count, before);
  EXPECT_EQ_INT(before, 2 + 2 + 2 + 2 + 2 + (1 + 4) + (4 + 1) + 2);
  end_group_without_launch(c);
}

static void test_aliasing(struct ncclComm* c) {
  size_t n = 8;
  EXPECT_INVALID(ncclAllReduce(b, b + 4, n, ncclFloat, ncclSum, c, NULL), "overlaps recvbuff");
  EXPECT_INVALID(ncclAllReduce(b + 31, b, n, ncclFloat, ncclSum, c, NULL), "overlaps recvbuff");
  EXPECT_INVALID(ncclAllGather(b, b, n, ncclFloat, c, NULL), "in-place");
  EXPECT_INVALID(ncclAllGather(b + 68, b, n, ncclFloat, c, NULL), "overlaps");
  EXPECT_INVALID(ncclAllGather(b + 100, b, n, ncclFloat, c, NULL), "overlaps");
  EXPECT_INVALID(ncclReduceScatter(b, b, n, ncclFloat, ncclSum, c, NULL), "overlaps");
  EXPECT_INVALID(ncclReduceScatter(b, b + 96, n, ncclFloat, ncclSum, c, NULL), "overlaps");
  EXPECT_INVALID(ncclBroadcast(b, b + 8, n, ncclFloat, 2, c, NULL), "overlaps");
  EXPECT_INVALID(ncclReduce(b + 8, b, n, ncclFloat, ncclSum, 2, c, NULL), "overlaps");
  EXPECT_INVALID(ncclAlltoAll(b, b + 96, n, ncclFloat, c, NULL), "overlaps");
  EXPECT_INVALID(ncclGather(b, b, n, ncclFloat, 2, c, NULL), "overlaps");
  EXPECT_INVALID(ncclScatter(b, b, n, ncclFloat, 2, c, NULL), "overlaps");
  /* The same shapes are fine on ranks whose second buffer is unused. */
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ_INT(ncclBroadcast(b, b + 8, n, ncclFloat, 1, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclReduce(b + 8, b, n, ncclFloat, ncclSum, 1, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclGather(b, b, n, ncclFloat, 1, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclScatter(b, b, n, ncclFloat, 1, c, NULL), ncclSuccess);
  /* NCCL accepts an alltoall with sendbuff == recvbuff (nccl-tests times it as its in-place row). */
  EXPECT_EQ_INT(ncclAlltoAll(b, b, n, ncclFloat, c, NULL), ncclSuccess);
  end_group_without_launch(c);
}

static void test_tasks(struct ncclComm* c) {
  float* b = (float*)buf_f;
  uint64_t seq0 = c->ctx.next_seq;
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ_INT(ncclAllReduce(b, b + 128, 7, ncclFloat, ncclAvg, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclReduceScatter(b, b + 128, 3, ncclInt32, ncclAvg, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclAlltoAll(b, b + 128, 5, ncclFloat, c, NULL), ncclSuccess);
  EXPECT_EQ_INT(c->ctx.tasks.count, 2 + 8);
  struct weft_task* t = c->ctx.tasks.head;
  EXPECT_EQ_INT(t->coll, WEFT_COLL_ALLREDUCE);
  EXPECT(t->sendbuff == b && t->recvbuff == b + 128);
  EXPECT_EQ_INT(t->count, 7);
  EXPECT_EQ_INT(t->op.kind, WEFT_OP_PREMULSUM);
  float quarter = 0.25f;
  uint32_t qbits;
  memcpy(&qbits, &quarter, 4);
  EXPECT_EQ_INT(t->op.scalar, qbits);
  EXPECT_EQ_INT(t->seq, seq0);
  t = t->next;
  EXPECT_EQ_INT(t->coll, WEFT_COLL_REDUCESCATTER);
  EXPECT_EQ_INT(t->op.kind, WEFT_OP_SUMPOSTDIV);
  EXPECT_EQ_INT(t->op.divisor, 4);
  EXPECT_EQ_INT(t->seq, seq0 + 1);
  for (int p = 0; p < 4; p++) {
    t = t->next;
    EXPECT_EQ_INT(t->coll, WEFT_COLL_SEND);
    EXPECT_EQ_INT(t->root, p);
    EXPECT(t->sendbuff == b + 5 * p);
    EXPECT_EQ_INT(t->count, 5);
    t = t->next;
    EXPECT_EQ_INT(t->coll, WEFT_COLL_RECV);
    EXPECT_EQ_INT(t->root, p);
    EXPECT(t->recvbuff == b + 128 + 5 * p);
  }
  EXPECT(t->next == NULL && c->ctx.tasks.tail == t);
  EXPECT_EQ_INT(c->ctx.next_seq, seq0 + 10);
  end_group_without_launch(c);
}

/* An error inside a group is reported by the call and again by ncclGroupEnd. */
static void test_group_latch(struct ncclComm* c) {
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ_INT(ncclAllReduce(b, b, 1, ncclInt8, ncclSum, c, NULL), ncclSuccess);
  EXPECT_INVALID(ncclSend(b, 1, ncclInt8, 5, c, NULL), "invalid peer 5");
  EXPECT_EQ_INT(c->ctx.tasks.count, 1);
  drop_tasks(c); /* the engine is not part of this test */
  EXPECT_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
}

/* Each call is logged at INFO/COLL in NCCL's shape. */
static void test_log_line(struct ncclComm* c, const char* path) {
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ_INT(ncclReduce(b, b + 1024, 9, ncclFloat64, ncclMin, 3, c, NULL), ncclSuccess);
  end_group_without_launch(c);
  FILE* f = fopen(path, "r");
  char line[1024], want[512];
  snprintf(want, sizeof(want),
           "NCCL INFO Reduce: opCount %lx sendbuff %p recvbuff %p count 9 datatype 8 op 3 root 3 comm %p "
           "[nranks=4] stream (nil)",
           (unsigned long)(c->ctx.next_seq - 1), (void*)b, (void*)(b + 1024), (void*)c);
  int found = 0;
  while (f && fgets(line, sizeof(line), f)) found |= strstr(line, want) != NULL;
  if (f) fclose(f);
  EXPECT_MSG(found, "no line \"%s\" in the log", want);
}

int main(void) {
  char log_path[] = "/tmp/weft-test-args-XXXXXX";
  int fd = mkstemp(log_path);
  if (fd >= 0) close(fd);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "COLL", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  struct ncclComm* c = fake_comm(2, 4);
  test_invalid_comm();
  test_scalars(c);
  test_buffers(c);
  test_valid_shapes(c);
  test_aliasing(c);
  test_tasks(c);
  test_group_latch(c);
  test_log_line(c, log_path);
  unlink(log_path);
  EXPECT_EQ_INT(c->ctx.tasks.count, 0);
  free(c);
  return test_finish("test_args");
}
