/* Flight recorder with ranks as processes: a rank that skips a collective, one that calls a
 * different one, one killed (SIGKILL) mid-job, one stalled mid-transfer (SIGSTOP until the others
 * gave up), and a lost host (two hosts by WEFT_HOSTID over the socket network, every rank of one
 * killed), on 2-8 ranks over rings and trees, must be named by weft-trace from the dumps the
 * ranks write on failure and on ncclCommAbort. */
#include "trace_util.h"

#define COUNT (1 << 20) /* floats: operations long enough to stop a rank in the middle of one */

static void rank_main(const struct tcase* c, const ncclUniqueId* id, int rank, int ready_fd) {
  if (c->fault == LOST_HOST) setenv("WEFT_HOSTID", trace_lost(c, rank) ? "trace-host-b" : "trace-host-a", 1);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, c->nranks, *id, rank) != ncclSuccess) _exit(3);
  trace_rank_ops(comm, c, rank, COUNT, rank == c->culprit ? ready_fd : -1);
  ncclCommAbort(comm); /* a program's answer to a failed collective; it dumps the recorder */
  _exit(0);
}

static int run_procs(const struct tcase* c, const char* dir) {
  (void)dir;
  return trace_run_procs(c, rank_main);
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
