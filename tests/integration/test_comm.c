/* Communicator lifecycle through the public API: init as threads and processes, NCCL_COMM_ID,
 * InitAll, scalable init, split, nonblocking init, abort of a blocked init, missing ranks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "uid.h"

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct rank_arg {
  int rank, nranks, nids;
  ncclUniqueId* ids;
  ncclResult_t res;
  ncclComm_t comm;
};

static void* init_thread(void* p) {
  struct rank_arg* a = p;
  if (a->nids > 1)
    a->res = ncclCommInitRankScalable(&a->comm, a->nranks, a->rank, a->nids, a->ids, NULL);
  else
    a->res = ncclCommInitRank(&a->comm, a->nranks, a->ids[0], a->rank);
  return NULL;
}

/* Init n ranks as threads, check what each reports, destroy. */
static void init_as_threads(int n, int nids) {
  ncclUniqueId ids[4];
  for (int i = 0; i < nids; i++) EXPECT_EQ_INT(ncclGetUniqueId(&ids[i]), ncclSuccess);
  struct rank_arg* args = calloc(n, sizeof(*args));
  pthread_t* th = calloc(n, sizeof(*th));
  for (int r = 0; r < n; r++) {
    args[r] = (struct rank_arg){.rank = r, .nranks = n, .nids = nids, .ids = ids};
    pthread_create(&th[r], NULL, init_thread, &args[r]);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) {
    EXPECT_MSG(args[r].res == ncclSuccess, "n=%d rank %d: %s / %s", n, r, ncclGetErrorString(args[r].res),
               ncclGetLastError(NULL));
    if (args[r].res != ncclSuccess) continue;
    int count = -1, rank = -1;
    EXPECT_EQ_INT(ncclCommCount(args[r].comm, &count), ncclSuccess);
    EXPECT_EQ_INT(ncclCommUserRank(args[r].comm, &rank), ncclSuccess);
    EXPECT_EQ_INT(count, n);
    EXPECT_EQ_INT(rank, r);
  }
  for (int r = 0; r < n; r++)
    if (args[r].comm) EXPECT_EQ_INT(ncclCommDestroy(args[r].comm), ncclSuccess);
  free(args);
  free(th);
}

/* Each child process inits with rank r; exit status tells the parent the outcome. */
static int child_init(ncclUniqueId id, int n, int r, int use_comm_id) {
  if (use_comm_id) EXPECT_EQ_INT(ncclGetUniqueId(&id), ncclSuccess); /* derived from NCCL_COMM_ID */
  ncclComm_t comm;
  ncclResult_t res = ncclCommInitRank(&comm, n, id, r);
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", r, ncclGetLastError(NULL));
    return 1;
  }
  int count = -1, rank = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &rank);
  ncclCommFinalize(comm);
  ncclCommDestroy(comm);
  return (count == n && rank == r && test_failures == 0) ? 0 : 2;
}

static void init_as_processes(int n, int use_comm_id) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  struct test_uid_holder root = {.pid = -1, .fd = -1};
  if (use_comm_id) {
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", test_free_port());
    setenv("NCCL_COMM_ID", addr, 1);
  } else {
    /* The root in a helper process: no thread of ours may exist when the ranks fork. */
    EXPECT_EQ_INT(test_uid_from_child(&id, &root), ncclSuccess);
  }
  pid_t* pids = calloc(n, sizeof(pid_t));
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(child_init(id, n, r, use_comm_id));
  }
  for (int r = 0; r < n; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "process rank %d of %d (comm id %d) status 0x%x", r, n, use_comm_id, status);
  }
  test_uid_release(&root);
  unsetenv("NCCL_COMM_ID");
  free(pids);
}

static void test_init_all(int n) {
  ncclComm_t comms[16];
  EXPECT_EQ_INT(ncclCommInitAll(comms, n, NULL), ncclSuccess);
  for (int i = 0; i < n; i++) {
    int rank = -1, dev = -1;
    EXPECT_EQ_INT(ncclCommUserRank(comms[i], &rank), ncclSuccess);
    EXPECT_EQ_INT(ncclCommCuDevice(comms[i], &dev), ncclSuccess);
    EXPECT_EQ_INT(rank, i);
    EXPECT_EQ_INT(dev, i);
  }
  for (int i = 0; i < n; i++) EXPECT_EQ_INT(ncclCommDestroy(comms[i]), ncclSuccess);
}

/* Split 6 ranks into colors r % 3 with keys that reverse the order; rank 5 opts out. */
static void test_split(void) {
  enum { N = 6 };
  ncclComm_t comms[N], subs[N];
  EXPECT_EQ_INT(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    int color = r == 5 ? NCCL_SPLIT_NOCOLOR : r % 3;
    EXPECT_EQ_INT(ncclCommSplit(comms[r], color, N - r, &subs[r], NULL), ncclSuccess);
  }
  EXPECT_EQ_INT(ncclGroupEnd(), ncclSuccess);
  /* color 0: ranks 0,3 -> keys 6,3 -> new order 3,0; color 1: 1,4 -> 4,1; color 2: only 2 */
  int expect_rank[N] = {1, 1, 0, 0, 0, -1};
  int expect_count[N] = {2, 2, 1, 2, 2, -1};
  for (int r = 0; r < N; r++) {
    if (r == 5) {
      EXPECT(subs[r] == NULL);
      continue;
    }
    int rank = -1, count = -1;
    EXPECT_EQ_INT(ncclCommUserRank(subs[r], &rank), ncclSuccess);
    EXPECT_EQ_INT(ncclCommCount(subs[r], &count), ncclSuccess);
    EXPECT_EQ_INT(rank, expect_rank[r]);
    EXPECT_EQ_INT(count, expect_count[r]);
  }
  for (int r = 0; r < N; r++) {
    if (subs[r]) ncclCommDestroy(subs[r]);
    ncclCommDestroy(comms[r]);
  }
}

static void test_nonblocking(void) {
  enum { N = 3 };
  ncclUniqueId id;
  EXPECT_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[N];
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  for (int r = 0; r < N; r++) {
    ncclResult_t res = ncclCommInitRankConfig(&comms[r], N, id, r, &cfg);
    EXPECT_MSG(res == ncclInProgress || res == ncclSuccess, "nonblocking init rank %d gave %d", r, res);
  }
  double deadline = now_sec() + 30;
  for (int r = 0; r < N; r++) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress && now_sec() < deadline) {
      EXPECT_EQ_INT(ncclCommGetAsyncError(comms[r], &state), ncclSuccess);
      if (state == ncclInProgress) usleep(1000);
    }
    EXPECT_EQ_INT(state, ncclSuccess);
  }
  for (int r = 0; r < N; r++) EXPECT_EQ_INT(ncclCommDestroy(comms[r]), ncclSuccess);
}

struct abort_arg {
  ncclComm_t volatile comm;
  ncclResult_t res;
  double returned_at;
};

static void* blocked_init(void* p) {
  struct abort_arg* a = p;
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm;
  a->res = ncclCommInitRank(&comm, 2, id, 0); /* rank 1 never comes */
  a->returned_at = now_sec();
  return NULL;
}

/* A nonblocking init whose peer never arrives is ended by ncclCommAbort from another thread. */
static void test_abort_blocked_init(void) {
  ncclUniqueId id;
  EXPECT_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t res = ncclCommInitRankConfig(&comm, 2, id, 0, &cfg);
  EXPECT_EQ_INT(res, ncclInProgress);
  usleep(300 * 1000);
  double t0 = now_sec();
  EXPECT_EQ_INT(ncclCommAbort(comm), ncclSuccess);
  EXPECT_MSG(now_sec() - t0 < 5, "abort took %.1f s", now_sec() - t0);
}

/* A rank that never arrives: the waiting rank fails within the bootstrap timeout, naming it. */
static void test_missing_rank(void) {
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "2", 1);
  struct abort_arg a = {0};
  double t0 = now_sec();
  pthread_t th;
  pthread_create(&th, NULL, blocked_init, &a);
  pthread_join(th, NULL);
  EXPECT(a.res != ncclSuccess && a.res != ncclInProgress);
  EXPECT_MSG(a.returned_at - t0 < 15, "missing rank noticed after %.1f s", a.returned_at - t0);
  const char* err = ncclGetLastError(NULL);
  EXPECT_MSG(strstr(err, "1") != NULL, "last error does not name rank 1: %s", err);
  unsetenv("WEFT_BOOTSTRAP_TIMEOUT");
}

static void test_bad_args(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  EXPECT_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ_INT(ncclCommInitRank(NULL, 2, id, 0), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclCommInitRank(&comm, 2, id, -1), ncclInvalidArgument);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  EXPECT_EQ_INT(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclCommCount(NULL, NULL), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclGroupEnd(), ncclInvalidUsage);
  setenv("WEFT_BACKEND", "bogus", 1);
  EXPECT_EQ_INT(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidArgument);
  unsetenv("WEFT_BACKEND");
}

int main(void) {
  int thread_counts[] = {1, 2, 3, 7, 13, 16};
  for (size_t i = 0; i < sizeof(thread_counts) / sizeof(thread_counts[0]); i++)
    init_as_threads(thread_counts[i], 1);
  init_as_threads(7, 3); /* several roots */
  int process_counts[] = {2, 7, 13};
  for (size_t i = 0; i < 3; i++) init_as_processes(process_counts[i], 0);
  init_as_processes(4, 1);
  test_init_all(4);
  test_split();
  test_nonblocking();
  test_abort_blocked_init();
  test_missing_rank();
  test_bad_args();
  return test_finish("test_comm");
}
