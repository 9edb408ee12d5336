/* ncclGroupSimulateEnd on the host backend, 2 to 4 ranks as threads: the estimate is the tuning
 * model's prediction for the planner's pick (compared with weft_comm_tuned_choice, the function
 * the planner asks), grows with the size and adds up over a group; nothing runs and the comm works
 * afterwards; bad arguments and a missing ncclGroupStart give NCCL's errors. Linked against the
 * static library to reach the model. */
#include <math.h>
#include <string.h>

#include "../integration/coll_util.h"
#include "check.h"
#include "collectives/task.h"
#include "collectives/tuned.h"
#include "core/comm.h"
#include "nccl.h"

#define SMALL 1024          /* floats: 4 KiB */
#define LARGE (1024 * 1024) /* floats: 4 MiB */

static float model_us(ncclComm_t comm, int coll, size_t bytes) {
  struct weft_tuned t;
  if (!weft_comm_tuned_choice(&comm->ctx, coll, bytes, WEFT_TUNED_ALGO_ALL, WEFT_TUNED_PROTO_ALL, &t))
    return -1;
  return t.time_us;
}

static int near(float a, float b) { return fabsf(a - b) <= 1e-4f * fmaxf(fabsf(a), fabsf(b)); }

/* Bytes of buf still all POISON: the simulated operation wrote nothing. */
static int untouched(const unsigned char* buf, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != POISON) return 0;
  return 1;
}

/* Simulates one all-reduce of count floats (and a second one of count2 when non-zero). */
static ncclResult_t simulate(ncclComm_t comm, const float* send, float* recv, size_t count, size_t count2,
                             ncclSimInfo_t* sim) {
  ncclGroupStart();
  ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL);
  if (count2) ncclAllReduce(send, recv, count2, ncclFloat, ncclSum, comm, NULL);
  return ncclGroupSimulateEnd(sim);
}

static int check_estimates(ncclComm_t comm, int rank, const float* send, float* recv) {
  int before = test_failures;
  ncclSimInfo_t small = NCCL_SIM_INFO_INITIALIZER, large = NCCL_SIM_INFO_INITIALIZER,
                both = NCCL_SIM_INFO_INITIALIZER, gather = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ_INT(simulate(comm, send, recv, SMALL, 0, &small), ncclSuccess);
  EXPECT_EQ_INT(simulate(comm, send, recv, LARGE, 0, &large), ncclSuccess);
  EXPECT_EQ_INT(simulate(comm, send, recv, SMALL, LARGE, &both), ncclSuccess);
  float want_small = model_us(comm, WEFT_COLL_ALLREDUCE, SMALL * sizeof(float));
  float want_large = model_us(comm, WEFT_COLL_ALLREDUCE, LARGE * sizeof(float));
  EXPECT_MSG(want_small > 0 && want_large > 0, "rank %d: no tuning model (%g, %g)", rank, want_small,
             want_large);
  EXPECT_MSG(small.estimatedTime > 0 && near(small.estimatedTime, want_small), "rank %d: %g us, model %g us",
             rank, small.estimatedTime, want_small);
  EXPECT_MSG(near(large.estimatedTime, want_large), "rank %d: %g us, model %g us", rank, large.estimatedTime,
             want_large);
  EXPECT_MSG(large.estimatedTime > small.estimatedTime, "rank %d: 4 MiB %g us <= 4 KiB %g us", rank,
             large.estimatedTime, small.estimatedTime);
  EXPECT_MSG(near(both.estimatedTime, small.estimatedTime + large.estimatedTime), "rank %d: %g us != %g + %g",
             rank, both.estimatedTime, small.estimatedTime, large.estimatedTime);
  /* All-gather is sized as NCCL's tuner sizes it: the gathered buffer. */
  ncclGroupStart();
  ncclAllGather(send, recv, SMALL, ncclFloat, comm, NULL);
  EXPECT_EQ_INT(ncclGroupSimulateEnd(&gather), ncclSuccess);
  int n = 0;
  ncclCommCount(comm, &n);
  float want_gather = model_us(comm, WEFT_COLL_ALLGATHER, (size_t)n * SMALL * sizeof(float));
  EXPECT_MSG(near(gather.estimatedTime, want_gather), "rank %d: all-gather %g us, model %g us", rank,
             gather.estimatedTime, want_gather);
  return test_failures - before;
}

/* Bad arguments with operations queued on every rank: each failure closes its group and drops
 * its operation (the buffer check in body sees that). The WARN texts are checked in main, on one
 * thread, since the last-error text is process-wide. */
static int check_bad_args(ncclComm_t comm, const float* send, float* recv) {
  int before = test_failures;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ_INT(ncclGroupSimulateEnd(&sim), ncclInvalidUsage); /* no open group */
  EXPECT_EQ_INT(simulate(comm, send, recv, SMALL, 0, NULL), ncclInvalidArgument);
  sim.magic = 0x1234;
  EXPECT_EQ_INT(simulate(comm, send, recv, SMALL, 0, &sim), ncclInvalidArgument);
  sim = (ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER;
  sim.size = 8;
  EXPECT_EQ_INT(simulate(comm, send, recv, SMALL, 0, &sim), ncclInvalidArgument);
  EXPECT(sim.estimatedTime == NCCL_UNDEF_FLOAT);
  EXPECT_EQ_INT(ncclGroupEnd(), ncclInvalidUsage); /* the failures left no group open */
  return test_failures - before;
}

static void expect_warn(ncclSimInfo_t* sim, ncclResult_t want, const char* text) {
  if (want != ncclInvalidUsage) ncclGroupStart();
  EXPECT_EQ_INT(ncclGroupSimulateEnd(sim), want);
  EXPECT_MSG(strstr(ncclGetLastError(NULL), text) != NULL, "want \"%s\" in \"%s\"", text,
             ncclGetLastError(NULL));
}

static void check_warnings(void) {
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  expect_warn(&sim, ncclInvalidUsage, "without a matching ncclGroupStart");
  expect_warn(NULL, ncclInvalidArgument, "simInfo is NULL");
  sim.magic = 0x1234;
  expect_warn(&sim, ncclInvalidArgument, "magic is 0x1234");
  sim = (ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER;
  sim.size = 8;
  expect_warn(&sim, ncclInvalidArgument, "size is 8");
  EXPECT_EQ_INT(ncclGroupEnd(), ncclInvalidUsage);
}

/* A real all-reduce of count floats, every rank giving rank + 1. */
static int check_runs(ncclComm_t comm, int rank, int n, const float* send, float* recv, size_t count) {
  int before = test_failures;
  EXPECT_EQ_INT(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL), ncclSuccess);
  float want = n * (n + 1) / 2.0f;
  for (size_t i = 0; i < count; i++)
    if (recv[i] != want) {
      EXPECT_MSG(0, "rank %d: recv[%zu] = %g, want %g", rank, i, recv[i], want);
      break;
    }
  return test_failures - before;
}

/* An inner level only closes itself, as in NCCL: the outer ncclGroupEnd runs the operation. */
static int check_nested(ncclComm_t comm, int rank, int n, const float* send, float* recv) {
  int before = test_failures;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  memset(recv, POISON, SMALL * sizeof(float));
  ncclGroupStart();
  EXPECT_EQ_INT(simulate(comm, send, recv, SMALL, 0, &sim), ncclSuccess);
  EXPECT(sim.estimatedTime == NCCL_UNDEF_FLOAT);
  EXPECT_EQ_INT(ncclGroupEnd(), ncclSuccess);
  float want = n * (n + 1) / 2.0f;
  EXPECT_MSG(recv[0] == want && recv[SMALL - 1] == want, "rank %d: %g, want %g", rank, recv[0], want);
  return test_failures - before;
}

static int body(ncclComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  size_t bytes = LARGE * sizeof(float);
  float* send = malloc(bytes);
  float* recv = malloc(bytes);
  for (size_t i = 0; i < LARGE; i++) send[i] = (float)(rank + 1);
  memset(recv, POISON, bytes);
  int problems = check_estimates(comm, rank, send, recv);
  problems += check_bad_args(comm, send, recv);
  EXPECT_MSG(untouched((unsigned char*)recv, bytes), "rank %d: a simulated operation wrote its buffer", rank);
  problems += check_runs(comm, rank, n, send, recv, LARGE);
  problems += check_nested(comm, rank, n, send, recv);
  free(send);
  free(recv);
  return problems;
}

int main(void) {
  setenv("WEFT_BACKEND", "host", 0);
  check_warnings();
  for (int n = 2; n <= 4; n++) EXPECT_MSG(run_threads(n, body, NULL) == 0, "%d ranks", n);
  return test_finish("test_group_simulate");
}
