/* The job the tuner plugin tests run: NRANKS thread ranks (ncclCommInitAll) do ITERS float sum
 * all-reduces of COUNT elements and check every result; with "split" each rank also runs them on
 * a child of ncclCommSplit; with "abort" the comms end by ncclCommAbort; with "procs" the ranks are processes
 * instead, and rank r takes NCCL_TUNER_PLUGIN from TUNER_JOB_PLUGIN_<r> when that is set. Exit 0 when all
 * results are right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"
#include "uid.h"

#define CHECK(call)                                                                          \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      exit(2);                                                                               \
    }                                                                                        \
  } while (0)

static int run(ncclComm_t* comms, int n, size_t count, int iters) {
  float** send = calloc(n, sizeof(float*));
  float** recv = calloc(n, sizeof(float*));
  int wrong = 0;
  for (int r = 0; r < n; r++) {
    send[r] = malloc(count * sizeof(float));
    recv[r] = malloc(count * sizeof(float));
  }
  for (int it = 0; it < iters; it++) {
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++) send[r][i] = (float)((r + 1) * (int)(i % 7) + it);
    CHECK(ncclGroupStart());
    for (int r = 0; r < n; r++)
      CHECK(ncclAllReduce(send[r], recv[r], count, ncclFloat, ncclSum, comms[r], NULL));
    CHECK(ncclGroupEnd());
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++) {
        float want = (float)((n * (n + 1) / 2) * (int)(i % 7) + n * it);
        if (recv[r][i] != want && wrong++ < 5)
          fprintf(stderr, "rank %d iter %d [%zu]: %g, expected %g\n", r, it, i, recv[r][i], want);
      }
  }
  for (int r = 0; r < n; r++) free(send[r]), free(recv[r]);
  free(send);
  free(recv);
  return wrong;
}

static int proc_rank(const ncclUniqueId* id, int r, int n, size_t count, int iters) {
  char var[64];
  snprintf(var, sizeof(var), "TUNER_JOB_PLUGIN_%d", r);
  if (getenv(var) != NULL) setenv("NCCL_TUNER_PLUGIN", getenv(var), 1);
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, n, *id, r));
  /* One rank's view of the all-reduce: run() checks all ranks' buffers; here each checks its own. */
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  int wrong = 0;
  for (int it = 0; it < iters; it++) {
    for (size_t i = 0; i < count; i++) send[i] = (float)((r + 1) * (int)(i % 7) + it);
    CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL));
    for (size_t i = 0; i < count; i++)
      if (recv[i] != (float)((n * (n + 1) / 2) * (int)(i % 7) + n * it)) wrong++;
  }
  CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  return wrong ? 1 : 0;
}

static int run_procs(int n, size_t count, int iters) {
  ncclUniqueId id;
  struct test_uid_holder holder;
  CHECK(test_uid_from_child(&id, &holder));
  pid_t pids[8];
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(proc_rank(&id, r, n, count, iters));
  }
  int bad = 0;
  for (int r = 0; r < n; r++) {
    int st;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
  }
  test_uid_release(&holder);
  printf("%s: %d process rank(s), %d all-reduce(s) of %zu floats, %d rank(s) failed\n", bad ? "FAILED" : "OK",
         n, iters, count, bad);
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s NRANKS COUNT ITERS [split]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), iters = atoi(argv[3]);
  size_t count = (size_t)atoll(argv[2]);
  ncclComm_t comms[8], kids[8];
  if (n < 1 || n > 8) return 2;
  if (argc > 4 && strcmp(argv[4], "procs") == 0) return run_procs(n, count, iters);
  CHECK(ncclCommInitAll(comms, n, NULL));
  int wrong = run(comms, n, count, iters);
  if (argc > 4 && strcmp(argv[4], "split") == 0) {
    CHECK(ncclGroupStart());
    for (int r = 0; r < n; r++) CHECK(ncclCommSplit(comms[r], 0, r, &kids[r], NULL));
    CHECK(ncclGroupEnd());
    wrong += run(kids, n, count, iters);
    for (int r = 0; r < n; r++) CHECK(ncclCommDestroy(kids[r]));
  }
  int abort_them = argc > 4 && strcmp(argv[4], "abort") == 0;
  for (int r = 0; r < n; r++) CHECK(abort_them ? ncclCommAbort(comms[r]) : ncclCommDestroy(comms[r]));
  printf("%s: %d rank(s), %d all-reduce(s) of %zu floats, %d wrong\n", wrong ? "FAILED" : "OK", n, iters,
         count, wrong);
  return wrong ? 1 : 0;
}
