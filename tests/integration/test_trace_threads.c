/* Flight recorder with ranks as threads of one process: a rank that skips a collective, calls
 * a different one (another collective, count, datatype or root), or leaves out a send of a ring
 * exchange, on 2-8 ranks over rings and trees,
 * is named by weft-trace from the dumps (written on failure and by weftCommDumpTrace). Also: no
 * file without WEFT_TRACE_DIR, weftCommDumpTrace's errors, and SIGUSR1. */
#include <sys/resource.h>

#include "trace_util.h"

#define COUNT (1 << 14)

static void* thread_main(void* p) {
  struct trace_thread* t = p;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, t->c->nranks, t->id, t->rank) != ncclSuccess) {
    t->problems++;
    pthread_barrier_wait(t->bar);
    pthread_barrier_wait(t->bar);
    return NULL;
  }
  trace_rank_ops(comm, t->c, t->rank, COUNT, -1);
  /* Every rank has returned (failed or not): a rank that skipped may now dump on request. */
  pthread_barrier_wait(t->bar);
  if (weftCommDumpTrace(comm, NULL) != ncclSuccess) t->problems++;
  pthread_barrier_wait(t->bar);
  ncclCommAbort(comm);
  return NULL;
}

static int run_threads(const struct tcase* c, const char* dir) {
  (void)dir;
  return trace_run_threads(c, thread_main);
}

/* A healthy job with WEFT_TRACE_DIR unset writes nothing; weftCommDumpTrace then needs a
 * directory, and with WEFT_TRACE_BUFFER=0 there is nothing to dump. */
static int run_no_dir(const struct tcase* c, const char* dir) {
  test_failures = 0; /* this child's own checks, not the earlier cases' */
  unsetenv("WEFT_TRACE_DIR");
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) return 1;
  ncclGroupStart();
  static float a[2][64];
  for (int r = 0; r < 2; r++) ncclAllReduce(a[r], a[r], 64, ncclFloat32, ncclSum, comms[r], NULL);
  int problems = 0;
  EXPECT(ncclGroupEnd() == ncclSuccess);
  EXPECT(count_dumps(dir) == 0);
  EXPECT(weftCommDumpTrace(comms[0], NULL) == ncclInvalidArgument);
  EXPECT(weftCommDumpTrace(NULL, dir) == ncclInvalidArgument);
  EXPECT(weftCommDumpTrace(comms[1], dir) == ncclSuccess); /* an explicit directory: written */
  for (int r = 0; r < 2; r++) ncclCommAbort(comms[r]);     /* no WEFT_TRACE_DIR: no dump */
  EXPECT(count_dumps(dir) == 1);
  setenv("WEFT_TRACE_BUFFER", "0", 1);
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) return problems + 1;
  EXPECT(weftCommDumpTrace(comms[0], dir) == ncclInvalidUsage);
  problems += test_failures;
  for (int r = 0; r < 2; r++) ncclCommDestroy(comms[r]);
  (void)c;
  return problems;
}

/* SIGUSR1 dumps every live communicator of the process (WEFT_TRACE_DIR set). */
static int run_sigusr1(const struct tcase* c, const char* dir) {
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) return 1;
  kill(getpid(), SIGUSR1);
  int problems = 1;
  for (int i = 0; i < 200 && problems; i++) {
    usleep(10000);
    problems = count_dumps(dir) != 2;
  }
  for (int r = 0; r < 2; r++) ncclCommDestroy(comms[r]);
  (void)c;
  return problems;
}

/* A fatal signal dumps every live communicator before the process dies of it. Exit 77 where
 * SIGABRT has a handler already (a sanitizer's): the library leaves such handlers alone. */
static int run_fatal(const struct tcase* c, const char* dir) {
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction old;
  if (sigaction(SIGABRT, NULL, &old) != 0 || old.sa_handler != SIG_DFL) _exit(77);
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) return 1;
  raise(SIGABRT);
  (void)c, (void)dir;
  return 1; /* not reached: the signal ends the process */
}

/* Runs fn(c, dir) in a child with the case's environment; returns its wait status. */
static int in_child(int (*fn)(const struct tcase*, const char*), const struct tcase* c, const char* dir) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    trace_set_env(c, dir);
    _exit(fn(c, dir) ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

int main(int argc, char** argv) {
  static const struct tcase cases[] = {
      {SKIP, 2, "Ring", 1},           {SKIP, 4, "Tree", 2},           {SKIP, 8, "Ring", 5},
      {MISMATCH_COLL, 3, "Ring", 1},  {MISMATCH_COUNT, 5, "Tree", 4}, {MISMATCH_ROOT, 4, "Ring", 3},
      {MISMATCH_DTYPE, 8, "Tree", 6}, {MISMATCH_COLL, 2, "Tree", 1},  {P2P_SKIP, 3, "Ring", 0},
      {P2P_SKIP, 5, "Tree", 3},
  };
  int only = argc > 1 ? atoi(argv[1]) : -1; /* test_trace_threads N: case N alone */
  for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++)
    if (only < 0 || only == i) test_failures += trace_run_case(&cases[i], run_threads, cases[i].nranks);
  if (only < 0) {
    static const struct tcase quiet = {SKIP, 2, "Ring", -1};
    char dir[] = "/tmp/weft-trace-test-XXXXXX";
    EXPECT(mkdtemp(dir) != NULL);
    int status = in_child(run_no_dir, &quiet, dir);
    EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "WEFT_TRACE_DIR unset / weftCommDumpTrace errors (status %d)", status);
    remove_dir(dir);
    strcpy(dir, "/tmp/weft-trace-test-XXXXXX");
    EXPECT(mkdtemp(dir) != NULL);
    status = in_child(run_sigusr1, &quiet, dir);
    EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "SIGUSR1 did not dump both ranks (status %d)",
               status);
    remove_dir(dir);
    strcpy(dir, "/tmp/weft-trace-test-XXXXXX");
    EXPECT(mkdtemp(dir) != NULL);
    status = in_child(run_fatal, &quiet, dir);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
      printf("fatal signal: not checked, SIGABRT has a handler here (sanitizer)\n");
    } else {
      EXPECT_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                 "SIGABRT did not end the process (status %d)", status);
      EXPECT_MSG(count_dumps(dir) == 2 && trace_dump_says(dir, "\"reason\": \"fatal-signal\""),
                 "SIGABRT left %d dumps, not 2 saying fatal-signal", count_dumps(dir));
    }
    remove_dir(dir);
  }
  return test_finish("test_trace_threads");
}
