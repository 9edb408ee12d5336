/* Flight recorder with ranks as processes: a rank that skips a collective, one that calls a
 * different one, one killed (SIGKILL) mid-job, one stalled mid-transfer (SIGSTOP until the others
 * gave up), and a lost host (two hosts by WEFT_HOSTID over the socket network, every rank of one
 * killed), on 2-8 ranks over rings and trees, must be named by weft-trace from the dumps the
 * ranks write on failure and on ncclCommAbort. */
#include "trace_util.h"
#include "uid.h"

#define COUNT (1 << 20) /* floats: operations long enough to stop a rank in the middle of one */

struct job {
  const struct tcase* c;
  pid_t pids[8];
  int ready[2]; /* the culprit writes a byte just before its FAULT_OP */
};

static int lost(const struct tcase* c, int rank) { return c->fault == LOST_HOST && rank >= c->nranks / 2; }

static void rank_main(const struct tcase* c, const ncclUniqueId* id, int rank, int ready_fd) {
  if (c->fault == LOST_HOST) setenv("WEFT_HOSTID", lost(c, rank) ? "trace-host-b" : "trace-host-a", 1);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, c->nranks, *id, rank) != ncclSuccess) _exit(3);
  trace_rank_ops(comm, c, rank, COUNT, rank == c->culprit ? ready_fd : -1);
  ncclCommAbort(comm); /* a program's answer to a failed collective; it dumps the recorder */
  _exit(0);
}

static int wait_ready(int fd) {
  char b;
  return read(fd, &b, 1) == 1;
}

/* What the test does to the job once the culprit is about to start FAULT_OP. */
static void inflict(struct job* j) {
  const struct tcase* c = j->c;
  if (c->fault != KILL && c->fault != STALL && c->fault != LOST_HOST) return;
  if (!wait_ready(j->ready[0])) return;
  /* A kill lands at once, before the culprit can finish FAULT_OP (a 2-rank one on shared memory
   * can take under the 3 ms a stall waits; CI once saw the culprit complete it): the others wait
   * in it for a rank that never comes, whether it died just before or inside. */
  if (c->fault == STALL) usleep(3000); /* inside the operation, mid-transfer */
  if (c->fault == KILL) kill(j->pids[c->culprit], SIGKILL);
  for (int r = 0; c->fault == LOST_HOST && r < c->nranks; r++)
    if (lost(c, r)) kill(j->pids[r], SIGKILL);
  if (c->fault != STALL) return;
  kill(j->pids[c->culprit], SIGSTOP);
  /* The others time out (WEFT_TIMEOUT), dump and exit; then the stalled rank resumes and fails. */
  for (int r = 0; r < c->nranks; r++)
    if (r != c->culprit) waitpid(j->pids[r], NULL, 0), j->pids[r] = 0;
  kill(j->pids[c->culprit], SIGCONT);
}

static int run_procs(const struct tcase* c, const char* dir) {
  (void)dir;
  struct job j = {.c = c};
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
  inflict(&j);
  int problems = 0;
  for (int r = 0; r < c->nranks; r++) {
    int status = 0;
    if (j.pids[r] == 0 || waitpid(j.pids[r], &status, 0) < 0) continue;
    int killed = (c->fault == KILL && r == c->culprit) || lost(c, r);
    if (!killed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      fprintf(stderr, "rank %d ended with status %d\n", r, status);
      problems++;
    }
  }
  test_uid_release(&holder);
  return problems;
}

int main(int argc, char** argv) {
  static const struct tcase cases[] = {
      {SKIP, 3, "Tree", 1},  {MISMATCH_COLL, 4, "Ring", 2}, {KILL, 2, "Ring", 1},      {KILL, 6, "Tree", 3},
      {STALL, 4, "Ring", 2}, {STALL, 3, "Tree", 0},         {LOST_HOST, 4, "Ring", 2},
  };
  int only = argc > 1 ? atoi(argv[1]) : -1; /* test_trace_procs N: case N alone */
  for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
    const struct tcase* c = &cases[i];
    int dumps = c->nranks - (c->fault == KILL) - (c->fault == LOST_HOST) * (c->nranks - c->nranks / 2);
    if (only < 0 || only == i) test_failures += trace_run_case(c, run_procs, dumps);
  }
  return test_finish("test_trace_procs");
}
