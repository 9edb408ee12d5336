/* A rank that destroys its communicator while the others still call a collective or send/recv
 * that needs it (the ranks' calls do not match) must not leave them waiting until WEFT_TIMEOUT:
 * every other rank fails within seconds with ncclRemoteError, naming the rank that left. Ranks
 * as threads of one process (no process dies, so no liveness check can tell) and as processes
 * whose leaver stays alive after ncclCommDestroy. Rank 2 of 4 leaves after two calls. The
 * survivors' flight-recorder dumps then let weft-trace name rank 2 as the one that left. */
#include <string.h>
#include <sys/mman.h>

#include "coll_util.h"

#define NRANKS 4
#define LEAVER 2
#define TIMEOUT_S 60 /* WEFT_TIMEOUT: far beyond LIMIT_S, so only the fix ends the wait in time */
#define LIMIT_S 8.0  /* a survivor's third call must fail within this */
#define BIG 262144   /* floats of a ring all-reduce (WEFT_DIRECT=0) */

enum mode { SMALL_ALLREDUCE, RING_ALLREDUCE, SEND_RECV };
struct lcase {
  const char* name;
  enum mode mode;
  int direct; /* WEFT_DIRECT */
};
static const struct lcase cases[] = {
    {"small all-reduce on the boards", SMALL_ALLREDUCE, 1},
    {"all-reduce on the ring", RING_ALLREDUCE, 0},
    {"send/recv ring", SEND_RECV, 1},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

/* Shared by the ranks of one case (threads, or forked processes: MAP_SHARED). */
struct shared {
  int survivors_done;
  int third_failed[NRANKS]; /* a survivor's third call failed */
};
static struct shared* sh;

static ncclResult_t one_call(const struct lcase* c, ncclComm_t comm, int rank, float* buf, float* out) {
  switch (c->mode) {
    case SMALL_ALLREDUCE:
      return ncclAllReduce(buf, out, 8, ncclFloat32, ncclSum, comm, NULL);
    case RING_ALLREDUCE:
      return ncclAllReduce(buf, out, BIG, ncclFloat32, ncclSum, comm, NULL);
    case SEND_RECV: {
      ncclResult_t res = ncclGroupStart();
      if (res == ncclSuccess) res = ncclSend(buf, 64, ncclFloat32, (rank + 1) % NRANKS, comm, NULL);
      if (res == ncclSuccess) res = ncclRecv(out, 64, ncclFloat32, (rank + NRANKS - 1) % NRANKS, comm, NULL);
      ncclResult_t end = ncclGroupEnd();
      return res != ncclSuccess ? res : end;
    }
  }
  return ncclInternalError;
}

/* Two matching calls; then the leaver returns (its caller destroys the communicator) and the
 * others make a third, which must fail in time. */
static int body(ncclComm_t comm, int rank, int nranks, void* arg) {
  const struct lcase* c = arg;
  int bad = 0;
  float* buf = malloc(sizeof(float) * BIG);
  float* out = malloc(sizeof(float) * BIG);
  for (int i = 0; i < BIG; i++) buf[i] = 1;
  for (int call = 0; call < 2; call++) {
    WANT_RES(one_call(c, comm, rank, buf, out), ncclSuccess);
    float want = c->mode == SEND_RECV ? 1.0f : (float)nranks;
    WANT(out[0] == want, "%s: call %d gave %g, want %g", c->name, call, out[0], want);
  }
  if (rank != LEAVER) {
    double t0 = now_s();
    ncclResult_t res = one_call(c, comm, rank, buf, out);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    double took = now_s() - t0;
    printf("  %s: rank %d's third call returned %s (async %s) after %.2f s\n", c->name, rank,
           ncclGetErrorString(res), ncclGetErrorString(async), took);
    /* A send fits in the connector's buffer: only the receiver from the leaver must fail there. */
    int must_fail = c->mode != SEND_RECV || rank == (LEAVER + 1) % nranks;
    WANT(res == ncclRemoteError || async == ncclRemoteError || (!must_fail && res == ncclSuccess),
         "%s: the call after rank %d left returned %s, want ncclRemoteError", c->name, LEAVER,
         ncclGetErrorString(res));
    sh->third_failed[rank] = res != ncclSuccess;
    WANT(took < LIMIT_S, "%s: the call failed after %.1f s (limit %.0f s, WEFT_TIMEOUT %d)", c->name, took,
         LIMIT_S, TIMEOUT_S);
    __atomic_add_fetch(&sh->survivors_done, 1, __ATOMIC_ACQ_REL);
  }
  free(buf);
  free(out);
  return bad;
}

/* The last error (one per process) must name the rank that left and say what it did. */
static int names_leaver(const char* text) {
  char want[32];
  snprintf(want, sizeof(want), "rank %d", LEAVER);
  return strstr(text, want) != NULL && strstr(text, "destroyed its communicator") != NULL;
}

static int run_case_threads(const struct lcase* c) {
  setenv("WEFT_DIRECT", c->direct ? "1" : "0", 1);
  memset(sh, 0, sizeof(*sh));
  int failures = run_threads(NRANKS, body, (void*)c);
  const char* text = ncclGetLastError(NULL);
  if (!names_leaver(text)) {
    fprintf(stderr, "FAILED %s (threads): the last error does not name rank %d leaving: \"%s\"\n", c->name,
            LEAVER, text);
    failures++;
  }
  return failures;
}

/* One process per rank; the leaver destroys its communicator and stays alive until every
 * survivor has failed (so only the goodbye, not its death, can tell them). */
static int run_case_procs(const struct lcase* c) {
  setenv("WEFT_DIRECT", c->direct ? "1" : "0", 1);
  memset(sh, 0, sizeof(*sh));
  ncclUniqueId id;
  struct test_uid_holder holder;
  fflush(stdout);
  if (test_uid_from_child(&id, &holder) != ncclSuccess) return 1;
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    fflush(stdout);
    pids[r] = fork();
    if (pids[r] != 0) continue;
    alarm(TIMEOUT_S + 30);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, NRANKS, id, r) != ncclSuccess) _exit(2);
    int rank = r, bad = body(comm, r, NRANKS, (void*)c);
    WANT(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy failed");
    if (r == LEAVER)
      for (int i = 0;
           i < 1000 * TIMEOUT_S && __atomic_load_n(&sh->survivors_done, __ATOMIC_ACQUIRE) < NRANKS - 1; i++)
        usleep(1000);
    else if (sh->third_failed[r])
      WANT(names_leaver(ncclGetLastError(NULL)), "%s: the last error does not name rank %d leaving: \"%s\"",
           c->name, LEAVER, ncclGetLastError(NULL));
    fflush(stdout);
    _exit(bad ? 1 : 0);
  }
  int failures = 0;
  for (int r = 0; r < NRANKS; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  test_uid_release(&holder);
  return failures;
}

/* The survivors' flight-recorder dumps name the rank that left, and weft-trace (the build's, beside
 * this binary's directory) explains the hang from them: rank 2 left no dump, the others say it
 * destroyed its communicator. */
static int explained(const char* self, const char* dir) {
  char cmd[1024], line[512];
  snprintf(cmd, sizeof(cmd), "\"$(dirname '%s')/../../bin/weft-trace\" '%s' 2>&1", self, dir);
  FILE* p = popen(cmd, "r");
  if (p == NULL) return 0;
  int culprit = 0, evidence = 0;
  while (fgets(line, sizeof(line), p)) {
    culprit |= strstr(line, "culprit: rank 2") != NULL && strstr(line, "destroyed its communicator") != NULL;
    evidence |= strstr(line, "reports rank 2 as having destroyed its communicator") != NULL;
  }
  int rc = pclose(p);
  if (!culprit || !evidence)
    fprintf(stderr, "FAILED weft-trace did not name rank 2 leaving (%s, status %d)\n", cmd, rc);
  return culprit && evidence;
}

int main(int argc, char** argv) {
  (void)argc;
  alarm(600);
  char t[16];
  snprintf(t, sizeof(t), "%d", TIMEOUT_S);
  setenv("WEFT_TIMEOUT", t, 1);
  sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  int failures = 0;
  for (int i = 0; i < NCASES; i++) {
    int f = run_case_threads(&cases[i]);
    printf("%s %s, %d threads\n", f ? "FAIL" : "ok  ", cases[i].name, NRANKS);
    failures += f != 0;
    char dir[] = "/tmp/weft-left-XXXXXX";
    int traced = i == 0 && mkdtemp(dir) != NULL; /* the boards' case: dumps, then weft-trace */
    if (traced) setenv("WEFT_TRACE_DIR", dir, 1);
    f = run_case_procs(&cases[i]);
    if (traced) {
      unsetenv("WEFT_TRACE_DIR");
      f += !explained(argv[0], dir);
      char rm[128];
      snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
      if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    printf("%s %s, %d processes, the leaver alive\n", f ? "FAIL" : "ok  ", cases[i].name, NRANKS);
    failures += f != 0;
  }
  printf("%d cases failed\n", failures);
  return failures ? 1 : 0;
}
