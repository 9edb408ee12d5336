/* Bootstrap failure paths: ranks that never arrive (the error names them, within the timeout),
 * abort from another thread, p2p timeouts, ranks that disagree, and a rank that leaves and
 * comes back. Each case runs in its own process so timeouts and last errors do not mix. */
#include "bootstrap/internal.h"
#include "test_bootstrap_common.h"
#include "uid.h"

#define TIMEOUT_S 2

static double since(int64_t t0) { return (weft_socket_now_ns() - t0) / 1e9; }

/* Runs fn in a forked child; the child's failed checks fail the parent. */
static void isolated(const char* name, void (*fn)(void)) {
  fflush(NULL);
  int64_t t0 = weft_socket_now_ns();
  pid_t pid = fork();
  if (pid == 0) {
    test_failures = 0; /* count only this case's checks */
    alarm(60);
    setenv("WEFT_BOOTSTRAP_TIMEOUT", "2", 1);
    fn();
    fflush(NULL);
    _exit(test_failures ? 1 : 0);
  }
  int status;
  waitpid(pid, &status, 0);
  int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  EXPECT_MSG(ok, "%s (status 0x%x)", name, status);
  printf("%-28s %s in %.2f s\n", name, ok ? "ok" : "FAILED", since(t0));
  fflush(stdout);
}

/* Launch the ranks not in skip as threads; each must fail within the timeout (plus the time to
 * ask the root) with a remote or system error, and the last WARN must contain want. */
static void expect_missing(int nranks, int nids, const char* skip, const char* want) {
  ncclUniqueId ids[3];
  for (int k = 0; k < nids; k++) EXPECT(weft_bootstrap_get_unique_id(&ids[k]) == ncclSuccess);
  struct rank_job* jobs = calloc(nranks, sizeof(*jobs));
  int64_t t0 = weft_socket_now_ns();
  run_threads_skip(ids, nids, nranks, 0, skip, jobs);
  for (int r = 0; r < nranks; r++) {
    if (skip[r]) continue;
    EXPECT_MSG(jobs[r].res == ncclRemoteError || jobs[r].res == ncclSystemError, "rank %d gave %d", r,
               jobs[r].res);
    EXPECT_MSG(jobs[r].secs >= TIMEOUT_S - 0.1 && jobs[r].secs < TIMEOUT_S + 1.5,
               "rank %d failed after %.2f s", r, jobs[r].secs);
  }
  EXPECT(since(t0) < TIMEOUT_S + 2.0);
  EXPECT_MSG(strstr(weft_log_last_error(), want) != NULL, "last error \"%s\" lacks \"%s\"",
             weft_log_last_error(), want);
  free(jobs);
}

static void missing_one_thread(void) {
  char skip[4] = {0, 0, 1, 0};
  expect_missing(4, 1, skip, "missing ranks 2");
}

static void missing_two_threads(void) {
  char skip[6] = {0, 1, 0, 0, 1, 0};
  expect_missing(6, 1, skip, "missing ranks 1,4");
}

static void missing_rank0_comm_id(void) {
  char value[64], skip[3] = {1, 0, 0};
  snprintf(value, sizeof(value), "127.0.0.1:%d", test_free_port());
  setenv("NCCL_COMM_ID", value, 1);
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  struct rank_job jobs[3];
  run_threads_skip(&id, 1, 3, 0, skip, jobs);
  for (int r = 1; r < 3; r++) {
    EXPECT_MSG(jobs[r].res == ncclRemoteError || jobs[r].res == ncclSystemError, "rank %d gave %d", r,
               jobs[r].res);
    EXPECT_MSG(jobs[r].secs < TIMEOUT_S + 1.5, "rank %d failed after %.2f s", r, jobs[r].secs);
  }
  EXPECT_MSG(strstr(weft_log_last_error(), "hosted by rank 0") != NULL, "last error \"%s\"",
             weft_log_last_error());
}

/* Several roots: the ranks of the root whose block lacks a rank name it; the others still fail
 * within the timeout (they wait on a ring neighbour). */
static void missing_scalable(void) {
  char skip[6] = {0, 0, 0, 0, 1, 0};
  ncclUniqueId ids[2];
  for (int k = 0; k < 2; k++) EXPECT(weft_bootstrap_get_unique_id(&ids[k]) == ncclSuccess);
  struct rank_job jobs[6];
  run_threads_skip(ids, 2, 6, 0, skip, jobs);
  for (int r = 0; r < 6; r++) {
    if (skip[r]) continue;
    EXPECT_MSG(jobs[r].res == ncclRemoteError || jobs[r].res == ncclSystemError, "rank %d gave %d", r,
               jobs[r].res);
    EXPECT_MSG(jobs[r].secs < TIMEOUT_S + 1.5, "rank %d failed after %.2f s", r, jobs[r].secs);
  }
}

/* Ranks as processes, one missing: every process checks its own last error. */
static void missing_processes(void) {
  enum { N = 5, MISSING = 3 };
  ncclUniqueId id;
  /* The root runs in a helper process: no thread of ours exists when the ranks fork. */
  struct test_uid_holder root;
  EXPECT(test_uid_from_child(&id, &root) == ncclSuccess);
  pid_t pids[N];
  fflush(NULL);
  for (int r = 0; r < N; r++) {
    if (r == MISSING) continue;
    pids[r] = fork();
    if (pids[r] == 0) {
      struct rank_job j = {&id, 1, r, N, 0, NULL, NULL, ncclSuccess, 0, 0};
      rank_main(&j);
      int ok = (j.res == ncclRemoteError || j.res == ncclSystemError) && j.secs < TIMEOUT_S + 1.5 &&
               strstr(weft_log_last_error(), "missing ranks 3") != NULL;
      if (!ok)
        fprintf(stderr, "rank %d: res %d after %.2f s, last error \"%s\"\n", r, j.res, j.secs,
                weft_log_last_error());
      _exit(ok ? 0 : 1);
    }
  }
  for (int r = 0; r < N; r++) {
    if (r == MISSING) continue;
    int status;
    waitpid(pids[r], &status, 0);
    EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process of rank %d", r);
  }
  test_uid_release(&root);
}

struct setter {
  volatile uint32_t* flag;
  int delay_ms;
  int64_t set_at;
};

static void* set_later(void* p) {
  struct setter* s = p;
  usleep(s->delay_ms * 1000);
  s->set_at = weft_socket_now_ns();
  __atomic_store_n(s->flag, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* The call ended at `end`: it must have been the abort, noticed within 150 ms. */
static void expect_prompt(pthread_t t, const struct setter* s, int64_t end) {
  pthread_join(t, NULL);
  double late = (end - s->set_at) / 1e9;
  EXPECT_MSG(late >= 0 && late < 0.15, "abort noticed after %.3f s", late);
}

/* Init blocked at the root (the other ranks never come): the abort flag ends it quickly. */
static void abort_init(void) {
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "300", 1);
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  volatile uint32_t flag = 0;
  struct setter s = {&flag, 300, 0};
  pthread_t t;
  pthread_create(&t, NULL, set_later, &s);
  struct weft_bootstrap* bs = NULL;
  EXPECT(weft_bootstrap_init(&id, 0, 3, &flag, &bs) == ncclInvalidUsage);
  expect_prompt(t, &s, weft_socket_now_ns());
  EXPECT(bs == NULL);
  /* Same with NCCL_COMM_ID while rank 0 (the root's host) is absent: the connect retries stop. */
  char value[64];
  snprintf(value, sizeof(value), "127.0.0.1:%d", test_free_port());
  setenv("NCCL_COMM_ID", value, 1);
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  flag = 0;
  pthread_create(&t, NULL, set_later, &s);
  EXPECT(weft_bootstrap_init(&id, 1, 2, &flag, &bs) == ncclInvalidUsage);
  expect_prompt(t, &s, weft_socket_now_ns());
  unsetenv("NCCL_COMM_ID");
}

struct pair_job {
  const ncclUniqueId* id;
  int rank;
  struct weft_bootstrap* bs;
  volatile uint32_t* flag;
};

static void* pair_init(void* p) {
  struct pair_job* j = p;
  EXPECT(weft_bootstrap_init(j->id, j->rank, 2, j->flag, &j->bs) == ncclSuccess);
  return NULL;
}

/* Two ranks joined; rank 0 waits for a message that never comes. */
static void p2p_abort_and_timeout(void) {
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "1", 1);
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  volatile uint32_t flag = 0;
  struct pair_job jobs[2] = {{&id, 0, NULL, &flag}, {&id, 1, NULL, NULL}};
  pthread_t t[2];
  for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, pair_init, &jobs[r]);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  if (jobs[0].bs == NULL || jobs[1].bs == NULL) return;
  char buf[8];
  int64_t t0 = weft_socket_now_ns();
  EXPECT(weft_bootstrap_recv(jobs[0].bs, 1, 9, buf, sizeof(buf)) == ncclRemoteError);
  EXPECT(since(t0) >= 0.95 && since(t0) < 2.0);
  EXPECT_MSG(strstr(weft_log_last_error(), "from rank 1") != NULL, "last error \"%s\"",
             weft_log_last_error());
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "300", 1);
  struct setter s = {&flag, 200, 0};
  pthread_t setter;
  pthread_create(&setter, NULL, set_later, &s);
  t0 = weft_socket_now_ns();
  EXPECT(weft_bootstrap_recv(jobs[0].bs, 1, 9, buf, sizeof(buf)) == ncclInvalidUsage);
  expect_prompt(setter, &s, weft_socket_now_ns());
  EXPECT(weft_bootstrap_barrier(jobs[0].bs) == ncclInvalidUsage); /* the flag stays set */
  /* The peer leaves: a receive from it fails at once instead of waiting for the timeout. */
  flag = 0;
  weft_bootstrap_destroy(jobs[1].bs);
  t0 = weft_socket_now_ns();
  EXPECT(weft_bootstrap_allgather(jobs[0].bs, buf, 4) == ncclRemoteError);
  EXPECT(since(t0) < 1.0);
  weft_bootstrap_destroy(jobs[0].bs);
}

struct solo_job {
  const ncclUniqueId* id;
  int rank, nranks;
  volatile uint32_t* flag;
  ncclResult_t res;
};

static void* solo_main(void* p) {
  struct solo_job* j = p;
  struct weft_bootstrap* bs = NULL;
  j->res = weft_bootstrap_init(j->id, j->rank, j->nranks, j->flag, &bs);
  if (j->res == ncclSuccess) j->res = weft_bootstrap_barrier(bs);
  weft_bootstrap_destroy(bs);
  return NULL;
}

/* A rank with another nranks, and a rank used twice, are turned away; the job still completes.
 * A rank that aborts while waiting at the root can join again. */
static void disagreeing_ranks(void) {
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "20", 1);
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  volatile uint32_t flag = 0;
  struct solo_job j0 = {&id, 0, 3, NULL, ncclInternalError}, j1 = {&id, 1, 3, &flag, ncclInternalError};
  pthread_t t0, t1;
  pthread_create(&t0, NULL, solo_main, &j0);
  usleep(100000);
  struct weft_bootstrap* bs = NULL;
  EXPECT(weft_bootstrap_init(&id, 2, 4, NULL, &bs) == ncclInvalidUsage); /* other nranks */
  EXPECT_MSG(strstr(weft_log_last_error(), "rejected") != NULL, "last error \"%s\"", weft_log_last_error());
  EXPECT(weft_bootstrap_init(&id, 0, 3, NULL, &bs) == ncclInvalidUsage); /* rank 0 twice */
  pthread_create(&t1, NULL, solo_main, &j1);
  usleep(100000);
  __atomic_store_n(&flag, 1, __ATOMIC_RELEASE); /* rank 1 gives up while waiting at the root */
  pthread_join(t1, NULL);
  EXPECT(j1.res == ncclInvalidUsage);
  usleep(50000);
  j1 = (struct solo_job){&id, 1, 3, NULL, ncclInternalError};
  struct solo_job j2 = {&id, 2, 3, NULL, ncclInternalError};
  pthread_t t2;
  pthread_create(&t1, NULL, solo_main, &j1);
  pthread_create(&t2, NULL, solo_main, &j2);
  pthread_join(t0, NULL);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  EXPECT(j0.res == ncclSuccess && j1.res == ncclSuccess && j2.res == ncclSuccess);
}

int main(void) {
  int64_t t0 = weft_socket_now_ns();
  isolated("one missing rank (threads)", missing_one_thread);
  isolated("two missing ranks (threads)", missing_two_threads);
  isolated("missing rank (processes)", missing_processes);
  isolated("missing NCCL_COMM_ID host", missing_rank0_comm_id);
  isolated("missing rank, 2 roots", missing_scalable);
  isolated("abort during init", abort_init);
  isolated("p2p timeout and abort", p2p_abort_and_timeout);
  isolated("disagreeing ranks", disagreeing_ranks);
  printf("total %.2f s\n", since(t0));
  return test_finish("test_bootstrap_fail");
}
