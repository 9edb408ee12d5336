/* Shared by the flight recorder fault tests (test_trace_threads.c, test_trace_procs.c, and
 * tests/gpu/test_gpu_trace.c on CUDA ranks): each case
 * runs a job of OPS collectives in which one rank misbehaves at operation FAULT_OP, in a child
 * process of its own (fresh environment and library state), then runs build/bin/weft-trace --json
 * on the dumps and checks that the culprit it names is that rank, for the right reason. */
#ifndef WEFT_TESTS_TRACE_UTIL_H
#define WEFT_TESTS_TRACE_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
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
#include "weft.h"

#define OPS 6
#define FAULT_OP 3

/* P2P_SKIP: at operation 1 and FAULT_OP every rank sends to the next and receives from the
 * previous; the culprit leaves its send out at FAULT_OP. (Operation 1 connects the pairs: a pair
 * first used with one side missing waits in its connection setup, WEFT_BOOTSTRAP_TIMEOUT.) */
enum fault {
  SKIP,
  MISMATCH_COLL,
  MISMATCH_COUNT,
  MISMATCH_ROOT,
  MISMATCH_DTYPE,
  KILL,
  STALL,
  LOST_HOST,
  P2P_SKIP
};
static const char* const fault_names[] = {"skip",          "mismatch-coll",  "mismatch-count",
                                          "mismatch-root", "mismatch-dtype", "kill",
                                          "stall",         "lost-host",      "p2p-skip"};

struct tcase {
  enum fault fault;
  int nranks;
  const char* algo; /* NCCL_ALGO */
  int culprit;
};

/* What weft-trace must say: the kind of its verdict (a second one allowed for stalls, which may
 * land just before the rank entered the operation). */
static inline const char* expected_kind(enum fault f) {
  switch (f) {
    case SKIP:
      return "not-entered";
    case KILL:
    case LOST_HOST:
      return "missing";
    case STALL:
      return "stalled";
    case P2P_SKIP:
      return "p2p-unmatched";
    default:
      return "mismatch";
  }
}

/* Operation op (1-based) of rank as the case has it: an all-reduce, except the fault. */
static inline ncclResult_t trace_call(ncclComm_t comm, const struct tcase* c, int rank, int op, float* buf,
                                      size_t count) {
  int bad = rank == c->culprit && op == FAULT_OP;
  if (c->fault == P2P_SKIP && (op == 1 || op == FAULT_OP)) {
    int n = c->nranks, half = (int)(count / 2);
    ncclGroupStart();
    if (!bad) ncclSend(buf, half, ncclFloat32, (rank + 1) % n, comm, NULL);
    ncclRecv(buf + half, half, ncclFloat32, (rank + n - 1) % n, comm, NULL);
    return ncclGroupEnd();
  }
  if (c->fault == MISMATCH_ROOT && op == FAULT_OP)
    return ncclBroadcast(buf, buf, count, ncclFloat32, bad ? 1 : 0, comm, NULL);
  if (bad && c->fault == MISMATCH_COLL) return ncclBroadcast(buf, buf, count, ncclFloat32, 0, comm, NULL);
  if (bad && c->fault == MISMATCH_COUNT)
    return ncclAllReduce(buf, buf, count / 2, ncclFloat32, ncclSum, comm, NULL);
  if (bad && c->fault == MISMATCH_DTYPE)
    return ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL);
  return ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
}

/* The job's operations on one rank; ready_fd: written just before the culprit's FAULT_OP. */
static inline ncclResult_t trace_rank_ops(ncclComm_t comm, const struct tcase* c, int rank, size_t count,
                                          int ready_fd) {
  float* buf = calloc(count, sizeof(float));
  ncclResult_t res = buf ? ncclSuccess : ncclSystemError;
  for (int op = 1; op <= OPS && res == ncclSuccess; op++) {
    if (rank == c->culprit && op == FAULT_OP) {
      if (ready_fd >= 0 && write(ready_fd, "x", 1) != 1) perror("write");
      if (c->fault == SKIP) continue;
    }
    res = trace_call(comm, c, rank, op, buf, count);
  }
  free(buf);
  return res;
}

static inline void trace_set_env(const struct tcase* c, const char* dir) {
  setenv("WEFT_TRACE_DIR", dir, 1);
  setenv("WEFT_TIMEOUT", "1", 1);
  setenv("NCCL_ALGO", c->algo, 1);
  setenv("WEFT_DIRECT", "0", 1); /* the ring and tree executors, not the shared boards */
  if (getenv("TRACE_TEST_DEBUG") == NULL) setenv("NCCL_DEBUG", "NONE", 1);
}

/* weft-trace beside the test binary: build/tests/integration/ -> build/bin/. */
static inline void trace_tool(char* out, size_t size) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n > 0 ? n : 0] = 0;
  snprintf(out, size, "%s/../../bin/weft-trace", dirname(self));
}

static inline int count_dumps(const char* dir) {
  DIR* d = opendir(dir);
  int n = 0;
  for (struct dirent* e; d && (e = readdir(d));) n += strncmp(e->d_name, "weft-trace-", 11) == 0;
  if (d) closedir(d);
  return n;
}

/* A dump of dir holds text. */
static inline int trace_dump_says(const char* dir, const char* text) {
  DIR* d = opendir(dir);
  int found = 0;
  for (struct dirent* e; d && (e = readdir(d)) && !found;) {
    char path[4200], buf[1 << 15];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE* f = strncmp(e->d_name, "weft-trace-", 11) == 0 ? fopen(path, "r") : NULL;
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    found = strstr(buf, text) != NULL;
  }
  if (d) closedir(d);
  return found;
}

static inline void remove_dir(const char* dir) {
  DIR* d = opendir(dir);
  char path[4200];
  for (struct dirent* e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' && (e->d_name[1] == 0 || (e->d_name[1] == '.' && e->d_name[2] == 0))) continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* Runs weft-trace --json on dir and checks its verdict; returns problems found. */
static inline int trace_check_verdict(const struct tcase* c, const char* dir, int dumps_expected) {
  char tool[4200], cmd[8600], out[1 << 16];
  trace_tool(tool, sizeof(tool));
  snprintf(cmd, sizeof(cmd), "'%s' --json '%s' 2>&1", tool, dir);
  FILE* p = popen(cmd, "r");
  size_t n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
  out[n] = 0;
  int rc = p ? pclose(p) : -1;
  char want_kind[64], want_ranks[64];
  snprintf(want_kind, sizeof(want_kind), "\"kind\": \"%s\"", expected_kind(c->fault));
  /* Two ranks that disagree: no majority says which is wrong, so both are named. */
  if (c->fault >= MISMATCH_COLL && c->fault <= MISMATCH_DTYPE && c->nranks == 2)
    snprintf(want_ranks, sizeof(want_ranks), "\"ranks\": [0, 1]");
  else if (c->fault == LOST_HOST)
    snprintf(want_ranks, sizeof(want_ranks), "\"ranks\": [%d, %d]", c->nranks / 2, c->nranks / 2 + 1);
  else
    snprintf(want_ranks, sizeof(want_ranks), "\"ranks\": [%d]", c->culprit);
  int kind_ok =
      strstr(out, want_kind) != NULL || (c->fault == STALL && strstr(out, "\"kind\": \"not-entered\""));
  int problems = 0, dumps = count_dumps(dir);
  if (rc != 0 || !kind_ok || strstr(out, want_ranks) == NULL || dumps != dumps_expected) {
    fprintf(
        stderr,
        "FAILED %s on %d ranks (%s), culprit rank %d: want %s %s and %d dumps, got %d dumps, rc %d:\n%s\n",
        fault_names[c->fault], c->nranks, c->algo, c->culprit, want_kind, want_ranks, dumps_expected, dumps,
        rc, out);
    problems = 1;
  }
  return problems;
}

static inline double trace_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs one case in a child process (run_case(c, dir) there, its exit status the problems), then
 * the verdict check; returns problems. */
static inline int trace_run_case(const struct tcase* c, int (*run_case)(const struct tcase*, const char*),
                                 int dumps_expected) {
  char dir[] = "/tmp/weft-trace-test-XXXXXX";
  if (mkdtemp(dir) == NULL) return perror("mkdtemp"), 1;
  double t0 = trace_now_s();
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60); /* a hang of the case is a failure, not a stuck test run */
    trace_set_env(c, dir);
    _exit(run_case(c, dir) ? 1 : 0);
  }
  int status = 0, problems = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "FAILED %s on %d ranks (%s): the job's runner ended with status %d\n",
            fault_names[c->fault], c->nranks, c->algo, status);
    problems++;
  }
  problems += trace_check_verdict(c, dir, dumps_expected);
  printf("%-15s %d ranks %-4s culprit %d: %s (%.1f s)\n", fault_names[c->fault], c->nranks, c->algo,
         c->culprit, problems ? "WRONG" : "named", trace_now_s() - t0);
  fflush(stdout);
  if (problems == 0 && getenv("TRACE_TEST_KEEP") == NULL)
    remove_dir(dir);
  else
    fprintf(stderr, "  dumps kept in %s\n", dir);
  return problems;
}

/* Ranks as threads of this process (test_trace_threads.c; tests/gpu/test_gpu_trace.c on CUDA
 * ranks): rank_main(&trace_thread) on each, which counts its problems there. */
struct trace_thread {
  const struct tcase* c;
  ncclUniqueId id;
  int rank;
  pthread_barrier_t* bar; /* all of the case's ranks */
  int problems;
};

static inline int trace_run_threads(const struct tcase* c, void* (*rank_main)(void*)) {
  struct trace_thread t[8];
  pthread_t th[8];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)c->nranks);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int r = 0; r < c->nranks; r++) {
    t[r] = (struct trace_thread){c, id, r, &bar, 0};
    pthread_create(&th[r], NULL, rank_main, &t[r]);
  }
  int problems = 0;
  for (int r = 0; r < c->nranks; r++) {
    pthread_join(th[r], NULL);
    problems += t[r].problems;
  }
  pthread_barrier_destroy(&bar);
  return problems;
}

/* Ranks as processes (test_trace_procs.c; tests/gpu/test_gpu_trace.c on CUDA ranks). */
struct trace_job {
  const struct tcase* c;
  pid_t pids[8];
  int ready[2]; /* the culprit writes a byte just before its FAULT_OP */
};

static inline int trace_lost(const struct tcase* c, int rank) {
  return c->fault == LOST_HOST && rank >= c->nranks / 2;
}

static inline int trace_wait_ready(int fd) {
  char b;
  return read(fd, &b, 1) == 1;
}

/* What the test does to the job once the culprit is about to start FAULT_OP. */
static inline void trace_inflict(struct trace_job* j) {
  const struct tcase* c = j->c;
  if (c->fault != KILL && c->fault != STALL && c->fault != LOST_HOST) return;
  if (!trace_wait_ready(j->ready[0])) return;
  /* A kill lands at once, before the culprit can finish FAULT_OP (a 2-rank one on shared memory
   * can take under the 3 ms a stall waits; CI once saw the culprit complete it): the others wait
   * in it for a rank that never comes, whether it died just before or inside. */
  if (c->fault == STALL) usleep(3000); /* inside the operation, mid-transfer */
  if (c->fault == KILL) kill(j->pids[c->culprit], SIGKILL);
  for (int r = 0; c->fault == LOST_HOST && r < c->nranks; r++)
    if (trace_lost(c, r)) kill(j->pids[r], SIGKILL);
  if (c->fault != STALL) return;
  kill(j->pids[c->culprit], SIGSTOP);
  /* The others time out (WEFT_TIMEOUT), dump and exit; then the stalled rank resumes and fails. */
  for (int r = 0; r < c->nranks; r++)
    if (r != c->culprit) waitpid(j->pids[r], NULL, 0), j->pids[r] = 0;
  kill(j->pids[c->culprit], SIGCONT);
}

/* Forks the case's ranks, each running rank_main (which exits, never returns), inflicts the
 * fault and reaps them; returns problems (a rank the test did not kill that failed to exit 0). */
static inline int trace_run_procs(const struct tcase* c,
                                  void (*rank_main)(const struct tcase* c, const ncclUniqueId* id, int rank,
                                                    int ready_fd)) {
  struct trace_job j = {.c = c};
  ncclUniqueId id;
  struct test_uid_holder holder;
  if (pipe(j.ready) != 0 || test_uid_from_child(&id, &holder) != ncclSuccess) return 1;
  for (int r = 0; r < c->nranks; r++) {
    j.pids[r] = fork();
    if (j.pids[r] == 0) {
      close(j.ready[0]);
      rank_main(c, &id, r, j.ready[1]);
    }
  }
  close(j.ready[1]);
  trace_inflict(&j);
  int problems = 0;
  for (int r = 0; r < c->nranks; r++) {
    int status = 0;
    if (j.pids[r] == 0 || waitpid(j.pids[r], &status, 0) < 0) continue;
    int killed = (c->fault == KILL && r == c->culprit) || trace_lost(c, r);
    if (!killed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      fprintf(stderr, "rank %d ended with status %d\n", r, status);
      problems++;
    }
  }
  test_uid_release(&holder);
  return problems;
}

#endif
