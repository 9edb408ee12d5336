/* ncclCommShrink and ncclCommRevoke: a 4-rank comm shrunk to 3 (and to 2) runs a checked
 * all-reduce; NCCL_SHRINK_ABORT with the excluded rank a thread that never calls and a process
 * that was killed completes (no hang); a revoked comm refuses operations, reports ncclSuccess
 * once quiet, and still splits and shrinks; bad arguments are refused without harming the comm. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "uid.h"

#define N 4
#define COUNT 1000
/* WEFT_TIMEOUT: far beyond what stopping an operation may take, so an operation that ends only by
 * timing out (nothing stopped it) is told apart from one that was stopped. */
#define TIMEOUT_S 100
#define STOPPED_WITHIN_S 50

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every rank adds rank+1+j at element j: the sum of n ranks is checked exactly. */
static int check_allreduce_on(ncclComm_t* comms, int n, const char* what) {
  int* buf[N];
  ncclResult_t res = ncclGroupStart();
  for (int r = 0; r < n; r++) {
    buf[r] = malloc(COUNT * sizeof(int));
    for (int j = 0; j < COUNT; j++) buf[r][j] = r + 1 + j;
    if (res == ncclSuccess) res = ncclAllReduce(buf[r], buf[r], COUNT, ncclInt32, ncclSum, comms[r], NULL);
  }
  ncclResult_t end = ncclGroupEnd();
  int bad = 0;
  EXPECT_MSG(res == ncclSuccess && end == ncclSuccess, "%s: all-reduce gave %s / %s: %s", what,
             ncclGetErrorString(res), ncclGetErrorString(end), ncclGetLastError(NULL));
  for (int r = 0; r < n; r++) {
    for (int j = 0; j < COUNT && bad < 3; j++) {
      int want = n * (n + 1) / 2 + n * j;
      if (buf[r][j] != want) {
        fprintf(stderr, "FAILED %s: rank %d element %d is %d, want %d\n", what, r, j, buf[r][j], want);
        bad++;
      }
    }
    free(buf[r]);
  }
  if (bad) test_failures++;
  return bad == 0;
}

static void expect_rank(ncclComm_t comm, int rank, int count, const char* what) {
  int got_rank = -1, got_count = -1;
  EXPECT_EQ_INT(ncclCommUserRank(comm, &got_rank), ncclSuccess);
  EXPECT_EQ_INT(ncclCommCount(comm, &got_count), ncclSuccess);
  EXPECT_MSG(got_rank == rank && got_count == count, "%s: rank %d of %d, want %d of %d", what, got_rank,
             got_count, rank, count);
}

/* Survivors of comms[] minus excluded[] shrink in one group; out[i] is survivor i's new comm. */
static void shrink_group(ncclComm_t* comms, int* excluded, int nexcluded, int flags, ncclComm_t* out) {
  int is_out[N] = {0}, n = 0;
  for (int i = 0; i < nexcluded; i++) is_out[excluded[i]] = 1;
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++)
    if (!is_out[r])
      EXPECT_EQ_INT(ncclCommShrink(comms[r], excluded, nexcluded, &out[n++], NULL, flags), ncclSuccess);
  EXPECT_MSG(ncclGroupEnd() == ncclSuccess, "shrink group: %s", ncclGetLastError(NULL));
}

static void test_shrink(void) {
  ncclComm_t comms[N], sub[N] = {0}, sub2[N] = {0};
  EXPECT_EQ_INT(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  int ex1[] = {1};
  shrink_group(comms, ex1, 1, NCCL_SHRINK_DEFAULT, sub);
  /* parent ranks 0, 2, 3 become 0, 1, 2 */
  for (int i = 0; i < 3; i++) expect_rank(sub[i], i, 3, "shrink {1}");
  check_allreduce_on(sub, 3, "shrink of 4 ranks to 3");
  int ex2[] = {3, 0}; /* any order */
  shrink_group(comms, ex2, 2, NCCL_SHRINK_DEFAULT, sub2);
  for (int i = 0; i < 2; i++) expect_rank(sub2[i], i, 2, "shrink {3,0}");
  check_allreduce_on(sub2, 2, "shrink of 4 ranks to 2");
  check_allreduce_on(comms, N, "the parent after two shrinks");
  for (int i = 0; i < 3; i++) EXPECT_EQ_INT(ncclCommDestroy(sub[i]), ncclSuccess);
  for (int i = 0; i < 2; i++) EXPECT_EQ_INT(ncclCommDestroy(sub2[i]), ncclSuccess);
  for (int r = 0; r < N; r++) EXPECT_EQ_INT(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---- NCCL_SHRINK_ABORT, the excluded rank a thread that never calls ---- */

struct hung_rank {
  ncclUniqueId id;
  int rank;
  ncclComm_t comm, sub;
  ncclResult_t stuck_res, shrink_res;
  double stuck_s; /* from the shrink call until the stuck all-reduce returned */
  volatile int* survivors_done;
};

static void* stuck_allreduce(void* p) {
  struct hung_rank* h = p;
  static int buf[N][COUNT];
  h->stuck_res = ncclAllReduce(buf[h->rank], buf[h->rank], COUNT, ncclInt32, ncclSum, h->comm, NULL);
  return NULL;
}

static void* hung_rank_main(void* p) {
  struct hung_rank* h = p;
  if (ncclCommInitRank(&h->comm, N, h->id, h->rank) != ncclSuccess) return NULL;
  if (h->rank == N - 1) { /* alive, but never joins the all-reduce nor the shrink */
    while (!__atomic_load_n(h->survivors_done, __ATOMIC_ACQUIRE)) usleep(10000);
    ncclCommAbort(h->comm);
    return NULL;
  }
  pthread_t th;
  pthread_create(&th, NULL, stuck_allreduce, h);
  usleep(100000); /* let it block on rank 3 (if it has not, it is refused: either way it fails) */
  int excluded[] = {N - 1};
  double t0 = now_s();
  h->shrink_res = ncclCommShrink(h->comm, excluded, 1, &h->sub, NULL, NCCL_SHRINK_ABORT);
  pthread_join(th, NULL);
  h->stuck_s = now_s() - t0;
  return NULL;
}

static void test_shrink_abort_hung_thread(void) {
  struct hung_rank h[N];
  pthread_t th[N];
  volatile int done = 0;
  ncclUniqueId id;
  EXPECT_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  for (int r = 0; r < N; r++) {
    h[r] = (struct hung_rank){.id = id, .rank = r, .survivors_done = &done};
    pthread_create(&th[r], NULL, hung_rank_main, &h[r]);
  }
  for (int r = 0; r < N - 1; r++) pthread_join(th[r], NULL);
  ncclComm_t sub[N] = {0};
  for (int r = 0; r < N - 1; r++) {
    EXPECT_MSG(h[r].comm != NULL, "rank %d did not init", r);
    EXPECT_MSG(h[r].stuck_res != ncclSuccess, "rank %d: the all-reduce rank 3 never joined succeeded", r);
    EXPECT_MSG(h[r].stuck_s < STOPPED_WITHIN_S,
               "rank %d: the stuck all-reduce ended %.1f s after the shrink "
               "began: it timed out (WEFT_TIMEOUT %d) instead of being stopped",
               r, h[r].stuck_s, TIMEOUT_S);
    EXPECT_MSG(h[r].shrink_res == ncclSuccess, "rank %d: NCCL_SHRINK_ABORT gave %s: %s", r,
               ncclGetErrorString(h[r].shrink_res), ncclGetLastError(NULL));
    sub[r] = h[r].sub;
    if (sub[r]) expect_rank(sub[r], r, N - 1, "shrink abort");
  }
  if (test_failures == 0) check_allreduce_on(sub, N - 1, "after NCCL_SHRINK_ABORT of a hung thread");
  /* The aborted parent was revoked: operations are refused, destroy is local. */
  static int one = 1;
  EXPECT_EQ_INT(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, h[0].comm, NULL), ncclInvalidUsage);
  for (int r = 0; r < N - 1; r++) {
    if (sub[r]) EXPECT_EQ_INT(ncclCommDestroy(sub[r]), ncclSuccess);
    EXPECT_EQ_INT(ncclCommDestroy(h[r].comm), ncclSuccess);
  }
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  pthread_join(th[N - 1], NULL);
}

/* ---- NCCL_SHRINK_ABORT, the excluded rank a killed process ---- */

static int killed_peer_rank(ncclUniqueId id, int r) {
  ncclComm_t comm, sub = NULL;
  if (ncclCommInitRank(&comm, N, id, r) != ncclSuccess) return 10;
  static int buf[COUNT];
  if (ncclAllReduce(buf, buf, COUNT, ncclInt32, ncclSum, comm, NULL) != ncclSuccess) return 11;
  if (r == N - 1) kill(getpid(), SIGKILL);
  ncclResult_t res = ncclAllReduce(buf, buf, COUNT, ncclInt32, ncclSum, comm, NULL);
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  fprintf(stderr, "rank %d: all-reduce after rank 3 died: %s (async %s): %s\n", r, ncclGetErrorString(res),
          ncclGetErrorString(async), ncclGetLastError(comm));
  if (res == ncclSuccess || async == ncclSuccess) return 12;
  int excluded[] = {N - 1};
  res = ncclCommShrink(comm, excluded, 1, &sub, NULL, NCCL_SHRINK_ABORT);
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: NCCL_SHRINK_ABORT gave %s: %s\n", r, ncclGetErrorString(res),
            ncclGetLastError(NULL));
    return 13;
  }
  int rank = -1, count = -1;
  ncclCommUserRank(sub, &rank);
  ncclCommCount(sub, &count);
  if (rank != r || count != N - 1) return 14;
  for (int j = 0; j < COUNT; j++) buf[j] = r + 1 + j;
  if (ncclAllReduce(buf, buf, COUNT, ncclInt32, ncclSum, sub, NULL) != ncclSuccess) return 15;
  for (int j = 0; j < COUNT; j++)
    if (buf[j] != (N - 1) * N / 2 + (N - 1) * j) return 16; /* survivors 0..2 add rank+1+j */
  if (ncclCommDestroy(sub) != ncclSuccess || ncclCommDestroy(comm) != ncclSuccess) return 17;
  return 0;
}

static void test_shrink_abort_killed_process(void) {
  ncclUniqueId id;
  struct test_uid_holder holder; /* the root runs in a helper: no thread here when we fork */
  EXPECT_EQ_INT(test_uid_from_child(&id, &holder), ncclSuccess);
  fflush(stdout);
  fflush(stderr);
  pid_t pids[N];
  for (int r = 0; r < N; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(120);
      _exit(killed_peer_rank(id, r));
    }
  }
  for (int r = 0; r < N; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (r == N - 1)
      EXPECT_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "rank 3 status 0x%x", status);
    else
      EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "survivor rank %d: %s %d", r,
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  test_uid_release(&holder);
}

/* ---- revoke ---- */

struct blocked {
  ncclComm_t comm;
  ncclResult_t res;
};

static void* lonely_allreduce(void* p) {
  struct blocked* b = p;
  static int buf[COUNT];
  b->res = ncclAllReduce(buf, buf, COUNT, ncclInt32, ncclSum, b->comm, NULL);
  return NULL;
}

static void test_revoke(void) {
  ncclComm_t comms[N], sub[N] = {0}, split[N] = {0};
  EXPECT_EQ_INT(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  /* Rank 0's all-reduce waits for ranks that never join it, until rank 0 is revoked. */
  struct blocked b = {comms[0], ncclSuccess};
  pthread_t th;
  pthread_create(&th, NULL, lonely_allreduce, &b);
  usleep(100000);
  EXPECT_EQ_INT(ncclCommRevoke(comms[0], 1), ncclInvalidArgument);
  EXPECT_MSG(strstr(ncclGetLastError(NULL), "revokeFlags 1") != NULL, "last error: %s",
             ncclGetLastError(NULL));
  double t0 = now_s();
  for (int r = 0; r < N; r++) EXPECT_EQ_INT(ncclCommRevoke(comms[r], NCCL_REVOKE_DEFAULT), ncclSuccess);
  pthread_join(th, NULL);
  EXPECT_MSG(b.res != ncclSuccess, "the revoked all-reduce returned success");
  EXPECT_MSG(now_s() - t0 < STOPPED_WITHIN_S,
             "the revoked all-reduce ended %.1f s after ncclCommRevoke: it "
             "timed out (WEFT_TIMEOUT %d) instead of being stopped",
             now_s() - t0, TIMEOUT_S);
  for (int r = 0; r < N; r++) {
    ncclResult_t state = ncclInternalError;
    EXPECT_EQ_INT(ncclCommGetAsyncError(comms[r], &state), ncclSuccess);
    EXPECT_EQ_INT(state, ncclSuccess); /* quiet again: ready for destroy, split or shrink */
  }
  static int one = 1;
  EXPECT_EQ_INT(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comms[1], NULL), ncclInvalidUsage);
  EXPECT_MSG(strstr(ncclGetLastError(NULL), "revoked") != NULL, "last error: %s", ncclGetLastError(NULL));
  EXPECT_EQ_INT(ncclCommFinalize(comms[1]), ncclInvalidUsage);
  /* A revoked comm still splits and shrinks. */
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) EXPECT_EQ_INT(ncclCommSplit(comms[r], 0, r, &split[r], NULL), ncclSuccess);
  EXPECT_EQ_INT(ncclGroupEnd(), ncclSuccess);
  check_allreduce_on(split, N, "split of a revoked comm");
  int ex[] = {2};
  shrink_group(comms, ex, 1, NCCL_SHRINK_DEFAULT, sub);
  for (int i = 0; i < 3; i++) expect_rank(sub[i], i, 3, "shrink after revoke");
  check_allreduce_on(sub, 3, "shrink after revoke");
  for (int i = 0; i < 3; i++) EXPECT_EQ_INT(ncclCommDestroy(sub[i]), ncclSuccess);
  for (int r = 0; r < N; r++) {
    EXPECT_EQ_INT(ncclCommDestroy(split[r]), ncclSuccess);
    EXPECT_EQ_INT(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

/* ---- bad arguments ---- */

static void expect_refused(ncclComm_t comm, int* list, int count, int flags, const char* text) {
  ncclComm_t out = (ncclComm_t)0x1;
  EXPECT_EQ_INT(ncclCommShrink(comm, list, count, &out, NULL, flags), ncclInvalidArgument);
  const char* err = ncclGetLastError(NULL);
  EXPECT_MSG(strstr(err, text) != NULL, "expected \"%s\" in the last error: %s", text, err);
  EXPECT_MSG(out == NULL || out == (ncclComm_t)0x1, "a refused shrink left a comm");
}

static void test_bad_args(void) {
  ncclComm_t comms[N];
  EXPECT_EQ_INT(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  int out_of_range[] = {4}, negative[] = {-1}, dup[] = {1, 1}, self[] = {0}, all[] = {0, 1, 2, 3};
  for (int flags = NCCL_SHRINK_DEFAULT; flags <= NCCL_SHRINK_ABORT; flags++) {
    expect_refused(comms[0], out_of_range, 1, flags, "excludeRanksList[0] = 4");
    expect_refused(comms[0], negative, 1, flags, "excludeRanksList[0] = -1");
    expect_refused(comms[0], dup, 2, flags, "excludeRanksList[1] = 1 is listed twice");
    expect_refused(comms[0], self, 1, flags, "excludeRanksList[0] = 0 is the calling rank");
    expect_refused(comms[0], all, 4, flags, "excludeRanksCount 4 excludes every rank");
    expect_refused(comms[0], NULL, 1, flags, "excludeRanksList is NULL");
    expect_refused(comms[0], self, -1, flags, "excludeRanksCount -1");
  }
  expect_refused(comms[0], dup, 1, 2, "shrinkFlags 2");
  expect_refused(NULL, dup, 1, NCCL_SHRINK_DEFAULT, "comm is NULL");
  EXPECT_EQ_INT(ncclCommShrink(comms[0], dup, 1, NULL, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclCommRevoke(NULL, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  /* None of it harmed the comm (a refused NCCL_SHRINK_ABORT does not revoke). */
  check_allreduce_on(comms, N, "after refused shrinks");
  for (int r = 0; r < N; r++) EXPECT_EQ_INT(ncclCommDestroy(comms[r]), ncclSuccess);
}

int main(void) {
  char t[16];
  snprintf(t, sizeof(t), "%d", TIMEOUT_S);
  setenv("WEFT_TIMEOUT", t, 1);
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "30", 0); /* a broken setup fails in seconds, not minutes */
  alarm(500);
  test_shrink();
  test_bad_args();
  test_revoke();
  test_shrink_abort_hung_thread();
  test_shrink_abort_killed_process();
  return test_finish("test_comm_shrink");
}
