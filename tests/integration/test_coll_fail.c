/* Failures: ncclCommAbort from another thread ends a rank blocked in a collective (ranks as
 * threads and as processes); a rank killed with SIGKILL in the middle of an all-reduce makes
 * every other rank return an error naming it within WEFT_TIMEOUT; afterwards /dev/shm holds no
 * segment of the job. */
#include <regex.h>
#include <sys/mman.h>

#include "check.h"
#include "coll_util.h"

#define KILL_TIMEOUT_S 5    /* WEFT_TIMEOUT of the kill test */
#define ABORT_TIMEOUT_S 100 /* WEFT_TIMEOUT of the abort tests: far beyond what an abort may take */
#define BIG_COUNT (4 << 20) /* floats per all-reduce of the kill test */

static int wait_ok(pid_t pid, const char* what) {
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  fprintf(stderr, "FAILED %s (pid %d): %s %d\n", what, (int)pid,
          WIFSIGNALED(status) ? "signal" : "exit status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  return 0;
}

/* ---- abort ---- */

struct aborter {
  ncclComm_t comm;
  ncclResult_t res;
};

static void* abort_main(void* p) {
  struct aborter* a = p;
  sleep(1);
  a->res = ncclCommAbort(a->comm);
  return NULL;
}

/* Rank 0 enters an all-reduce its peer never joins; a second thread aborts the comm. */
static int blocked_rank(ncclComm_t comm, const char* how) {
  static float buf[1024];
  struct aborter a = {comm, ncclInternalError};
  pthread_t th;
  pthread_create(&th, NULL, abort_main, &a);
  double t0 = now_s();
  ncclResult_t res = ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL);
  double took = now_s() - t0;
  pthread_join(th, NULL);
  int problems = 0;
  printf("%s: aborted all-reduce returned \"%s\" after %.2f s\n", how, ncclGetErrorString(res), took);
  if (res != ncclInvalidUsage) { /* cut short by this process's own ncclCommAbort */
    fprintf(stderr, "FAILED %s: aborted all-reduce returned \"%s\", not invalid usage\n", how,
            ncclGetErrorString(res));
    problems++;
  }
  if (took > 20) {
    fprintf(stderr, "FAILED %s: all-reduce ended %.1f s after it started; ncclCommAbort came at 1 s\n", how,
            took);
    problems++;
  }
  if (a.res != ncclSuccess) {
    fprintf(stderr, "FAILED %s: ncclCommAbort returned %d\n", how, a.res);
    problems++;
  }
  return problems;
}

struct abort_thread_rank {
  ncclUniqueId id;
  int rank, problems;
  volatile int* rank0_done;
};

static void* abort_thread_main(void* p) {
  struct abort_thread_rank* t = p;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, t->id, t->rank) != ncclSuccess) {
    t->problems = 1;
    __atomic_store_n(t->rank0_done, 1, __ATOMIC_RELEASE);
    return NULL;
  }
  if (t->rank == 0) {
    t->problems = blocked_rank(comm, "abort, ranks as threads");
    __atomic_store_n(t->rank0_done, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(t->rank0_done, __ATOMIC_ACQUIRE)) usleep(10000);
    t->problems = ncclCommAbort(comm) != ncclSuccess;
  }
  return NULL;
}

static int abort_threads(void) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  volatile int done = 0;
  struct abort_thread_rank t[2] = {{id, 0, 0, &done}, {id, 1, 0, &done}};
  pthread_t th[2];
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, abort_thread_main, &t[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  return t[0].problems + t[1].problems;
}

static int abort_procs(void) {
  ncclUniqueId id;
  struct test_uid_holder holder;
  int fds[2];
  if (test_uid_from_child(&id, &holder) != ncclSuccess || pipe(fds) != 0) {
    test_uid_release(&holder);
    return 1;
  }
  fflush(stdout);
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    if (pids[r] != 0) continue;
    alarm(60);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) _exit(2);
    int problems = 0;
    if (r == 0) {
      problems = blocked_rank(comm, "abort, ranks as processes");
      if (write(fds[1], "x", 1) != 1) problems++;
    } else {
      char c;
      if (read(fds[0], &c, 1) != 1) problems++;
      problems += ncclCommAbort(comm) != ncclSuccess;
    }
    fflush(stdout);
    _exit(problems ? 1 : 0);
  }
  int problems = 0;
  for (int r = 0; r < 2; r++)
    problems += !wait_ok(pids[r], r ? "abort test, peer" : "abort test, blocked rank");
  test_uid_release(&holder);
  for (int r = 0; r < 2; r++) problems += shm_leftovers(pids[r], 1);
  problems += shm_leftovers(getpid(), 1);
  close(fds[0]);
  close(fds[1]);
  return problems;
}

/* ---- kill ---- */

struct kill_shared {
  volatile int ready;      /* ranks inside the all-reduce loop */
  volatile double kill_at; /* when the victim was killed (CLOCK_MONOTONIC) */
};

/* Loops large all-reduces until one fails; checks the failure came in time and names the
 * victim. */
static int kill_survivor(ncclComm_t comm, int rank, int victim, struct kill_shared* sh) {
  float* buf = malloc(sizeof(float) * BIG_COUNT);
  if (!buf) return 1;
  for (size_t i = 0; i < BIG_COUNT; i++) buf[i] = 0;
  __atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
  ncclResult_t res = ncclSuccess;
  int iters = 0;
  for (; iters < 100000 && res == ncclSuccess; iters++)
    res = ncclAllReduce(buf, buf, BIG_COUNT, ncclFloat32, ncclSum, comm, NULL);
  double after = now_s() - sh->kill_at;
  const char* text = ncclGetLastError(comm);
  int problems = 0;
  printf("rank %d: all-reduce %d returned \"%s\" %.2f s after the kill: %s\n", rank, iters,
         ncclGetErrorString(res), after, text);
  if (res == ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: every all-reduce succeeded although rank %d was killed\n", rank, victim);
    problems++;
  }
  if (sh->kill_at <= 0 || after > KILL_TIMEOUT_S + 10) {
    fprintf(stderr, "FAILED rank %d: the error came %.1f s after the kill (WEFT_TIMEOUT=%d)\n", rank, after,
            KILL_TIMEOUT_S);
    problems++;
  }
  char pattern[64];
  snprintf(pattern, sizeof(pattern), "(rank|peer)[^0-9]{0,3}%d([^0-9]|$)", victim);
  regex_t re;
  regcomp(&re, pattern, REG_EXTENDED | REG_ICASE | REG_NOSUB);
  if (regexec(&re, text, 0, NULL, 0) != 0) {
    fprintf(stderr, "FAILED rank %d: the error text does not name the dead rank %d: \"%s\"\n", rank, victim,
            text);
    problems++;
  }
  regfree(&re);
  free(buf);
  ncclCommAbort(comm);
  return problems;
}

static int kill_test(int nranks, int victim) {
  struct kill_shared* sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ncclUniqueId id;
  struct test_uid_holder holder;
  if (sh == MAP_FAILED) return 1;
  if (test_uid_from_child(&id, &holder) != ncclSuccess) {
    test_uid_release(&holder);
    return 1;
  }
  memset((void*)sh, 0, sizeof(*sh));
  fflush(stdout);
  pid_t pids[8];
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] != 0) continue;
    alarm(KILL_TIMEOUT_S + 60);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, r) != ncclSuccess) _exit(2);
    if (r == victim) { /* all-reduces until killed */
      float* buf = calloc(BIG_COUNT, sizeof(float));
      __atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
      for (;;) ncclAllReduce(buf, buf, BIG_COUNT, ncclFloat32, ncclSum, comm, NULL);
    }
    int problems = kill_survivor(comm, r, victim, sh);
    fflush(stdout);
    _exit(problems ? 1 : 0);
  }
  int problems = 0;
  double t0 = now_s();
  while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < nranks && now_s() - t0 < 60) usleep(10000);
  usleep(300000); /* well inside the loop of all-reduces, each several ms long */
  sh->kill_at = now_s();
  kill(pids[victim], SIGKILL);
  for (int r = 0; r < nranks; r++) {
    if (r == victim) {
      waitpid(pids[r], NULL, 0);
      continue;
    }
    char what[64];
    snprintf(what, sizeof(what), "kill test, surviving rank %d", r);
    problems += !wait_ok(pids[r], what);
  }
  test_uid_release(&holder);
  for (int r = 0; r < nranks; r++) problems += shm_leftovers(pids[r], 1);
  problems += shm_leftovers(getpid(), 1);
  munmap((void*)sh, sizeof(*sh));
  return problems;
}

int main(void) {
  alarm(300);
  /* The abort tests run in a child with a long timeout (so only the abort can end the wait);
   * forked before this process uses the library. */
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    char t[16];
    snprintf(t, sizeof(t), "%d", ABORT_TIMEOUT_S);
    setenv("WEFT_TIMEOUT", t, 1);
    int problems = abort_procs();
    problems += abort_threads();
    fflush(stdout);
    _exit(problems ? 1 : 0);
  }
  EXPECT_MSG(wait_ok(child, "abort tests"), "ncclCommAbort from another thread");
  char t[16];
  snprintf(t, sizeof(t), "%d", KILL_TIMEOUT_S);
  setenv("WEFT_TIMEOUT", t, 1);
  EXPECT_MSG(kill_test(4, 2) == 0, "rank 2 of 4 killed in an all-reduce");
  EXPECT_MSG(kill_test(3, 0) == 0, "rank 0 of 3 killed in an all-reduce");
  return test_finish("test_coll_fail");
}
