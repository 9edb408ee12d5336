/* Ranks of one communicator that disagree on a collective call (collective, count, datatype, op,
 * root) must all fail with ncclInvalidUsage and a WARN naming the difference, never succeed or
 * touch memory outside their own buffers (buffers are exact-size heap blocks, so an ASan build
 * sees any overrun). Each case runs on a fresh communicator of threads and of processes, 2 and
 * 4 ranks, and of 2 and 4 processes on two emulated hosts (the socket network); the last rank
 * makes the odd call. */
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "coll_util.h"

struct call {
  int coll; /* C_* of coll_util.h */
  size_t count;
  ncclDataType_t dt;
  ncclRedOp_t op;
  int root;
};

struct mcase {
  const char* name;
  const char* says; /* what every WARN must contain: the field and the odd rank's value */
  struct call base, odd;
  /* Root cases: a rank whose part needs nothing back (a broadcast root, a reduce leaf) may return
   * before anyone finds the mismatch; it must then fail its next call instead. */
  int late;
};

#define AR(n, t, o) \
  { C_ALLREDUCE, n, t, o, 0 }
static const struct mcase cases[] = {
    {"allreduce count, board exchange", "with count", AR(256, ncclFloat32, ncclSum),
     AR(128, ncclFloat32, ncclSum), 0},
    {"allreduce count, small vs large", "with count", AR(256, ncclFloat32, ncclSum),
     AR(4096, ncclFloat32, ncclSum), 0},
    {"allreduce count, zero-copy", "with count", AR(65536, ncclFloat32, ncclSum),
     AR(32768, ncclFloat32, ncclSum), 0},
    {"allreduce datatype float/double", "with datatype 8", AR(512, ncclFloat32, ncclSum),
     AR(512, ncclFloat64, ncclSum), 0},
    {"allreduce op sum/max", "with op ncclMax", AR(512, ncclFloat32, ncclSum), AR(512, ncclFloat32, ncclMax),
     0},
    {"allreduce datatype and op", "with datatype 8 and op ncclMax", AR(512, ncclFloat32, ncclSum),
     AR(512, ncclFloat64, ncclMax), 0},
    {"broadcast root",
     "with root",
     {C_BROADCAST, 1000, ncclInt32, ncclSum, 0},
     {C_BROADCAST, 1000, ncclInt32, ncclSum, 1},
     1},
    /* Two roots both wait to receive: on one host the boards tell them, across hosts the notes
     * they leave each other when stalled (collectives/host/call_note.h). */
    {"reduce root",
     "with root",
     {C_REDUCE, 1000, ncclInt32, ncclSum, 0},
     {C_REDUCE, 1000, ncclInt32, ncclSum, 1},
     1},
    {"allgather count",
     "with count",
     {C_ALLGATHER, 300, ncclInt8, ncclSum, 0},
     {C_ALLGATHER, 200, ncclInt8, ncclSum, 0},
     0},
    {"reducescatter op",
     "with op ncclProd",
     {C_REDUCESCATTER, 300, ncclInt32, ncclSum, 0},
     {C_REDUCESCATTER, 300, ncclInt32, ncclProd, 0},
     0},
    {"collective allreduce/broadcast",
     "called ncclBroadcast",
     AR(256, ncclFloat32, ncclSum),
     {C_BROADCAST, 256, ncclFloat32, ncclSum, 0},
     0},
    {"collective allgather/reducescatter",
     "called ncclReduceScatter",
     {C_ALLGATHER, 4096, ncclInt8, ncclSum, 0},
     {C_REDUCESCATTER, 4096, ncclInt8, ncclSum, 0},
     0},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

static ncclResult_t issue(const struct call* k, const void* s, void* r, ncclComm_t comm) {
  switch (k->coll) {
    case C_ALLREDUCE:
      return ncclAllReduce(s, r, k->count, k->dt, k->op, comm, NULL);
    case C_BROADCAST:
      return ncclBroadcast(s, r, k->count, k->dt, k->root, comm, NULL);
    case C_REDUCE:
      return ncclReduce(s, r, k->count, k->dt, k->op, k->root, comm, NULL);
    case C_ALLGATHER:
      return ncclAllGather(s, r, k->count, k->dt, comm, NULL);
    default:
      return ncclReduceScatter(s, r, k->count, k->dt, k->op, comm, NULL);
  }
}

static int as_procs;
/* Across hosts a step's tag carries the count's low bits and a hash of the call: the finder tells
 * the peer's call from it (a count and one other field, or two other fields) as boards tell it on
 * one host. */
static int across_hosts;

/* The process's last error names the mismatch, and the field that differs where it can be told. */
static int last_error_names(const struct mcase* c, int rank, const char* when) {
  int bad = 0;
  const char* text = ncclGetLastError(NULL);
  WANT(strstr(text, "mismatched collective") && strstr(text, c->says),
       "case \"%s\" (%s): last error \"%s\" does not name the difference (%s)", c->name, when, text, c->says);
  return bad;
}

/* A failed call's buffers may still be read by the proxy (steps sent from the caller's buffer)
 * until the communicator is destroyed or aborted, as a failed kernel's on a GPU (README): each
 * rank keeps them until its next case, whose communicator is a new one, or the process's end. */
static void* kept[8][2];
static void keep_buffers(int rank, void* s, void* r) {
  free(kept[rank][0]);
  free(kept[rank][1]);
  kept[rank][0] = s;
  kept[rank][1] = r;
}

/* Every rank stays (its communicator and connections open) until all have seen the failure: a
 * rank that destroys its communicator and exits while a peer upstream of it has not yet heard of
 * the mismatch makes that peer see it leave, a lost rank (true, but not what this test checks).
 * A counter in memory the forked ranks share (reset before each case). */
static int* ranks_done;
/* A rank that makes its call only after the others found the mismatch (-1: none): its call is
 * refused (the communicator failed already) with an error that says why, and it tells its ring
 * neighbour on its host, who waits for its steps, why it will send none. */
static int slow_rank = -1;
static void reset_done(void) {
  if (ranks_done == NULL) {
    ranks_done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ranks_done == MAP_FAILED) abort();
  }
  __atomic_store_n(ranks_done, 0, __ATOMIC_SEQ_CST);
}
static void wait_all_done(int nranks) {
  __atomic_add_fetch(ranks_done, 1, __ATOMIC_SEQ_CST);
  struct timespec nap = {0, 1000000};
  for (int i = 0; i < 30000 && __atomic_load_n(ranks_done, __ATOMIC_SEQ_CST) < nranks; i++)
    nanosleep(&nap, NULL);
}

static int body(ncclComm_t comm, int rank, int nranks, void* arg) {
  const struct mcase* c = arg;
  int bad = 0;
  float one = 1;
  /* A matching call first: the check must not refuse calls that agree. */
  WANT_RES(ncclAllReduce(&one, &one, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  WANT(one == (float)nranks, "%s: control all-reduce gave %g", c->name, one);
  const struct call* k = rank == nranks - 1 ? &c->odd : &c->base;
  size_t es = dt_table[k->dt].size, n = k->count * es;
  size_t sbytes = k->coll == C_REDUCESCATTER ? n * nranks : n,
         rbytes = k->coll == C_ALLGATHER ? n * nranks : n;
  char* s = malloc(sbytes);
  char* r = malloc(rbytes);
  memset(s, 1, sbytes);
  if (rank == slow_rank) sleep(2); /* the others found the mismatch meanwhile */
  ncclResult_t res = issue(k, s, r, comm);
  WANT(res == ncclInvalidUsage || (c->late && res == ncclSuccess),
       "case \"%s\" (%d ranks, rank %d): %s returned %s, want invalid usage", c->name, nranks, rank,
       coll_names[k->coll], ncclGetErrorString(res));
  /* The last error is one per process: thread ranks overwrite each other's, so processes check it,
   * before the next call (its refusal has a WARN of its own). */
  if (as_procs && res != ncclSuccess) bad += last_error_names(c, rank, "the failed call");
  /* The communicator is unusable after it on every rank; a rank that returned early learns here. */
  ncclResult_t next = ncclAllReduce(&one, &one, 1, ncclFloat32, ncclSum, comm, NULL);
  WANT(next == ncclInvalidUsage, "case \"%s\" (%d ranks, rank %d): the call after it returned %s", c->name,
       nranks, rank, ncclGetErrorString(next));
  if (as_procs && res == ncclSuccess) bad += last_error_names(c, rank, "a late rank, after its next call");
  keep_buffers(rank, s, r);
  wait_all_done(nranks);
  return bad;
}

/* Ranks on emulated hosts (loopback sockets between them), one per host or two: the steps' call
 * tags cross the socket network; a rank that finds a difference tells its network peers (the ranks
 * that wait for it), and writes it in the connector pages it shares with its ring neighbours on
 * its host, which give up too and pass it on. */
static int ranks_per_host = 1;
static void own_host(int rank, int nranks) {
  (void)nranks;
  char host[32];
  snprintf(host, sizeof(host), "mismatch-host-%d", rank / ranks_per_host);
  setenv("WEFT_HOSTID", host, 1);
}

/* Ranks whose calls match but that stall waiting for a late peer on the other host leave it
 * notes (call_note.h): they must never be taken for a mismatch. Each rank is late in turn, by
 * more than the second after which a stalled rank asks, and the late rank then stalls too. */
static int late_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int bad = 0;
  for (int call = 0; call < 4; call++) {
    int root = call % 2, late = call < 2 ? 1 : 0;
    int32_t v = rank + 1, sum = -1;
    if (rank == late) usleep(1600 * 1000);
    WANT_RES(ncclReduce(&v, &sum, 1, ncclInt32, ncclSum, root, comm, NULL), ncclSuccess);
    WANT(rank != root || sum == nranks * (nranks + 1) / 2, "late call %d: root %d got %d", call, root, sum);
  }
  return bad;
}

static int run_hosts(void) {
  int failures = 0, f;
  coll_rank_setup = own_host;
  across_hosts = 1;
  for (ranks_per_host = 1; ranks_per_host <= 2; ranks_per_host++)
    for (int i = 0; i < NCASES; i++) {
      reset_done();
      f = run_procs(2 * ranks_per_host, body, (void*)&cases[i], 60);
      printf("%s %s, %d processes on 2 hosts\n", f ? "FAIL" : "ok  ", cases[i].name, 2 * ranks_per_host);
      failures += f != 0;
    }
  ranks_per_host = 1;
  f = run_procs(2, late_body, NULL, 60);
  printf("%s matching calls with a late rank, 2 processes on 2 hosts\n", f ? "FAIL" : "ok  ");
  failures += f != 0;
  /* Rank 2 late: rank 1 tells it over the network, it tells rank 3 (the odd one) on its host. */
  ranks_per_host = 2;
  slow_rank = 2;
  reset_done();
  const struct mcase* dt_case = &cases[3];
  f = run_procs(4, body, (void*)dt_case, 60);
  printf("%s %s, 4 processes on 2 hosts, rank 2 calls late\n", f ? "FAIL" : "ok  ", dt_case->name);
  failures += f != 0;
  slow_rank = -1;
  ranks_per_host = 1;
  across_hosts = 0;
  coll_rank_setup = NULL;
  return failures;
}

static int repeat_case(int i, int nranks, int times) {
  if (i < 0 || i >= NCASES || nranks < 2 || nranks > 8) return 2;
  setenv("WEFT_DIRECT", "1", 1);
  int failures = 0;
  for (int n = 0; n < times; n++) {
    reset_done();
    int f = run_procs(nranks, body, (void*)&cases[i], 60);
    if (f) printf("FAIL %s, %d processes, run %d\n", cases[i].name, nranks, n);
    failures += f != 0;
  }
  printf("%d of %d runs failed\n", failures, times);
  return failures ? 1 : 0;
}

/* `test_coll_mismatch hosts`: only the cases across hosts (tests/net/test_net_ib.sh runs them
 * over IB). */
int main(int argc, char** argv) {
  setenv("WEFT_TIMEOUT", "10", 1); /* a missed mismatch fails in seconds, not half an hour */
  as_procs = 1;
  if (argc > 1 && strcmp(argv[1], "hosts") == 0) return run_hosts() ? 1 : 0;
  /* `test_coll_mismatch repeat CASE RANKS N`: one case on RANKS processes, N times (a race hunt). */
  if (argc > 4 && strcmp(argv[1], "repeat") == 0)
    return repeat_case(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  int failures = 0;
  /* WEFT_DIRECT=0: the ring runs every collective, so only its steps carry the check. */
  for (int direct = 1; direct >= 0; direct--) {
    setenv("WEFT_DIRECT", direct ? "1" : "0", 1);
    for (as_procs = 0; as_procs < 2; as_procs++)
      for (int nranks = 2; nranks <= 4; nranks += 2)
        for (int i = 0; i < NCASES; i++) {
          reset_done();
          int f = as_procs ? run_procs(nranks, body, (void*)&cases[i], 60)
                           : run_threads(nranks, body, (void*)&cases[i]);
          printf("%s %s, %d %s, WEFT_DIRECT=%d\n", f ? "FAIL" : "ok  ", cases[i].name, nranks,
                 as_procs ? "processes" : "threads", direct);
          failures += f != 0;
        }
  }
  as_procs = 1;
  failures += run_hosts();
  printf("%d mismatch cases failed\n", failures);
  return failures ? 1 : 0;
}
