/* Windows and one-sided operations on the host backend, ranks as threads and as processes (2, 3
 * and 4 ranks): ncclCommWindowRegister on ncclMemAlloc buffers, ncclWinGetUserPtr, peer and LSA
 * pointers that really reach the peers' buffers, ncclPutSignal from every rank to the next (also
 * to itself and grouped to every peer), ncclSignal without data, ncclWaitSignal over several
 * peers; rejected arguments (a put past the window, bad peer / sigIdx / ctx / flags / window,
 * GIN-only windows) that change nothing; malloc windows; a wait that times out names its peer,
 * and a wait on a peer that left ends early; ranks on different hosts (WEFT_HOSTID) get no
 * pointer and no puts. */
#include <sys/time.h>

#include "check.h"
#include "coll_util.h"
#include "nccl_device/host.h"

#define HDR 64         /* bytes at the start of every window: a marker of its owner */
#define SLOT_INTS 1000 /* int32 per put */
#define ROUNDS 3       /* rounds of put-to-next, each into its own slot */
#define GUARD 4096     /* bytes after the window, inside the allocation, that must stay POISON */
#define MAX_RANKS 4

struct mode {
  int procs; /* ranks are processes: peers' malloc buffers are out of reach */
};

static int win_slots(int n) { return ROUNDS * n + 2 * n; } /* put rounds, self put, grouped puts */
static size_t win_bytes(int n) { return HDR + (size_t)win_slots(n) * SLOT_INTS * sizeof(int32_t); }
static int32_t value(int from, int slot, int j) { return from * 1000003 + slot * 7919 + j; }
static unsigned char marker(int rank, int k) { return (unsigned char)(0x40 + rank * 17 + k); }

static int32_t* slot_at(void* buf, int slot) {
  return (int32_t*)((char*)buf + HDR) + (size_t)slot * SLOT_INTS;
}

static void fill_marker(void* buf, int rank) {
  for (int k = 0; k < HDR; k++) ((unsigned char*)buf)[k] = marker(rank, k);
}

#define CHECK_RES(call, want)                                                                         \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != (want)) {                                                                               \
      fprintf(stderr, "FAILED rank %d/%d %s:%d: %s returned %d (%s), want %d: %s\n", me, n, __FILE__, \
              __LINE__, #call, r_, ncclGetErrorString(r_), (int)(want), ncclGetLastError(NULL));      \
      bad++;                                                                                          \
    }                                                                                                 \
  } while (0)

#define CHECK_TRUE(cond, ...)                                                             \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "FAILED rank %d/%d %s:%d: %s: ", me, n, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                       \
      fprintf(stderr, "\n");                                                              \
      bad++;                                                                              \
    }                                                                                     \
  } while (0)

static int check_slot(int me, int n, void* buf, int slot, int from) {
  int bad = 0;
  int32_t* s = slot_at(buf, slot);
  for (int j = 0; j < SLOT_INTS && bad < 3; j++)
    CHECK_TRUE(s[j] == value(from, slot, j), "slot %d element %d is %d, want %d (put from rank %d)", slot, j,
               s[j], value(from, slot, j), from);
  return bad;
}

/* Every peer's pointer (world and LSA) reaches that peer's buffer: its marker is there. */
static int check_pointers(ncclComm_t comm, ncclWindow_t win, void* buf, int me, int n) {
  int bad = 0;
  void* p = NULL;
  CHECK_RES(ncclWinGetUserPtr(comm, win, &p), ncclSuccess);
  CHECK_TRUE(p == buf, "ncclWinGetUserPtr gave %p, the buffer is %p", p, buf);
  for (int peer = 0; peer < n; peer++) {
    void* q = NULL;
    CHECK_RES(ncclGetPeerDevicePointer(win, 0, peer, &q), ncclSuccess);
    if (q == NULL) {
      CHECK_TRUE(0, "no pointer to rank %d", peer);
      continue;
    }
    if (peer == me) CHECK_TRUE(q == buf, "own pointer %p, buffer %p", q, buf);
    for (int k = 0; k < HDR; k++)
      if (((unsigned char*)q)[k] != marker(peer, k)) {
        CHECK_TRUE(0, "byte %d through rank %d's pointer is 0x%x, want 0x%x", k, peer, ((unsigned char*)q)[k],
                   marker(peer, k));
        break;
      }
    void* at = NULL;
    CHECK_RES(ncclGetPeerDevicePointer(win, 5, peer, &at), ncclSuccess);
    CHECK_TRUE(at == (char*)q + 5, "offset 5 of rank %d gave %p, base %p", peer, at, q);
    void* lsa = NULL;
    CHECK_RES(ncclGetLsaDevicePointer(win, 0, peer, &lsa), ncclSuccess); /* one host: lsa rank == rank */
    CHECK_TRUE(lsa == q, "LSA pointer of rank %d %p, world pointer %p", peer, lsa, q);
  }
  void* q = (void*)1;
  CHECK_RES(ncclGetPeerDevicePointer(win, win_bytes(n), (me + 1) % n, &q), ncclInvalidArgument);
  CHECK_RES(ncclGetPeerDevicePointer(win, 0, n, &q), ncclInvalidArgument);
  CHECK_RES(ncclGetPeerDevicePointer(win, 0, -1, &q), ncclInvalidArgument);
  CHECK_RES(ncclGetLsaDevicePointer(win, 0, n, &q), ncclInvalidArgument);
  CHECK_RES(ncclGetPeerDevicePointer(win, 0, me, NULL), ncclInvalidArgument);
  int not_a_window;
  CHECK_RES(ncclGetPeerDevicePointer((ncclWindow_t)&not_a_window, 0, me, &q), ncclInvalidArgument);
  CHECK_RES(ncclWinGetUserPtr(comm, (ncclWindow_t)&not_a_window, &q), ncclInvalidArgument);
  return bad;
}

/* Rounds of put-signal to the next rank, waited for by the next rank; a put to itself. */
static int put_rounds(ncclComm_t comm, ncclWindow_t win, void* buf, int32_t* src, int me, int n) {
  int bad = 0, next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int round = 0; round < ROUNDS; round++) {
    int slot = round * n + me; /* in next's window: slot of (round, sender) */
    for (int j = 0; j < SLOT_INTS; j++) src[j] = value(me, slot, j);
    size_t off = (char*)slot_at(buf, slot) - (char*)buf;
    CHECK_RES(ncclPutSignal(src, SLOT_INTS, ncclInt32, next, win, off, 0, 0, 0, comm, NULL), ncclSuccess);
    ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = prev, .sigIdx = 0, .ctx = 0};
    CHECK_RES(ncclWaitSignal(1, &d, comm, NULL), ncclSuccess);
    bad += check_slot(me, n, buf, round * n + prev, prev);
  }
  int slot = ROUNDS * n + me;
  for (int j = 0; j < SLOT_INTS; j++) src[j] = value(me, slot, j);
  CHECK_RES(ncclPutSignal(src, SLOT_INTS, ncclInt32, me, win, (char*)slot_at(buf, slot) - (char*)buf, 0, 0, 0,
                          comm, NULL),
            ncclSuccess);
  ncclWaitSignalDesc_t self = {.opCnt = 1, .peer = me};
  CHECK_RES(ncclWaitSignal(1, &self, comm, NULL), ncclSuccess);
  bad += check_slot(me, n, buf, slot, me);
  return bad;
}

/* Grouped puts to every other rank, then one wait over all of them; then signals without data,
 * two to each peer, waited for as opCnt 2. */
static int group_and_signals(ncclComm_t comm, ncclWindow_t win, void* buf, int32_t* src, int me, int n) {
  int bad = 0;
  ncclWaitSignalDesc_t d[MAX_RANKS];
  int nd = 0;
  int base = ROUNDS * n + n; /* slot base + sender */
  for (int j = 0; j < SLOT_INTS; j++) src[j] = value(me, base + me, j);
  CHECK_RES(ncclGroupStart(), ncclSuccess);
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    size_t off = (char*)slot_at(buf, base + me) - (char*)buf;
    CHECK_RES(ncclPutSignal(src, SLOT_INTS, ncclInt32, p, win, off, 0, 0, 0, comm, NULL), ncclSuccess);
    d[nd++] = (ncclWaitSignalDesc_t){.opCnt = 1, .peer = p};
  }
  CHECK_RES(ncclGroupEnd(), ncclSuccess);
  if (nd > 0) CHECK_RES(ncclWaitSignal(nd, d, comm, NULL), ncclSuccess);
  for (int p = 0; p < n; p++)
    if (p != me) bad += check_slot(me, n, buf, base + p, p);
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    CHECK_RES(ncclSignal(p, 0, 0, 0, comm, NULL), ncclSuccess);
    CHECK_RES(ncclSignal(p, 0, 0, 0, comm, NULL), ncclSuccess);
  }
  for (int i = 0; i < nd; i++) d[i].opCnt = 2;
  if (nd > 0) CHECK_RES(ncclWaitSignal(nd, d, comm, NULL), ncclSuccess);
  return bad;
}

/* Calls refused before anything runs; afterwards the comm still works. */
static int rejected(ncclComm_t comm, ncclWindow_t win, void* buf, int32_t* src, int me, int n) {
  int bad = 0, next = (me + 1) % n;
  size_t size = win_bytes(n);
  CHECK_RES(ncclPutSignal(src, 2, ncclInt32, next, win, size - 4, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, next, win, size + 100, 0, 0, 0, comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, (size_t)-1 / 2, ncclInt32, next, win, 0, 0, 0, 0, comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, n, win, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, -1, win, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, next, win, 0, 1, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, next, win, 0, 0, -1, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, next, win, 0, 0, 0, 1, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, (ncclDataType_t)99, next, win, 0, 0, 0, 0, comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(NULL, 1, ncclInt32, next, win, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, next, NULL, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  int not_a_window;
  CHECK_RES(ncclPutSignal(src, 1, ncclInt32, next, (ncclWindow_t)&not_a_window, 0, 0, 0, 0, comm, NULL),
            ncclInvalidArgument);
  CHECK_RES(ncclSignal(n, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclSignal(next, 1, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclSignal(next, 0, 0, 2, comm, NULL), ncclInvalidArgument);
  ncclWaitSignalDesc_t d = {.opCnt = 0, .peer = next};
  CHECK_RES(ncclWaitSignal(1, &d, comm, NULL), ncclInvalidArgument);
  d.opCnt = 1;
  CHECK_RES(ncclWaitSignal(0, &d, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclWaitSignal(1, NULL, comm, NULL), ncclInvalidArgument);
  d.peer = n;
  CHECK_RES(ncclWaitSignal(1, &d, comm, NULL), ncclInvalidArgument);
  d = (ncclWaitSignalDesc_t){.opCnt = 1, .peer = next, .sigIdx = 3};
  CHECK_RES(ncclWaitSignal(1, &d, comm, NULL), ncclInvalidArgument);
  /* A bad call inside a group fails the group too, and nothing of the group runs. */
  CHECK_RES(ncclGroupStart(), ncclSuccess);
  CHECK_RES(ncclPutSignal(src, 2, ncclInt32, next, win, size - 4, 0, 0, 0, comm, NULL), ncclInvalidArgument);
  CHECK_RES(ncclGroupEnd(), ncclInvalidArgument);
  ncclWindow_t w2 = NULL;
  CHECK_RES(ncclCommWindowRegister(comm, buf, 4096, &w2, NCCL_WIN_GIN_ONLY), ncclInvalidUsage);
  CHECK_RES(ncclCommWindowRegister(comm, buf, 4096, &w2, 0x40), ncclInvalidArgument);
  CHECK_RES(ncclCommWindowRegister(comm, buf, 4096, NULL, 0), ncclInvalidArgument);
  CHECK_TRUE(w2 == NULL, "a refused registration left window %p", (void*)w2);
  return bad;
}

static int guard_intact(int me, int n, const void* buf) {
  int bad = 0;
  const unsigned char* g = (const unsigned char*)buf + win_bytes(n);
  for (int k = 0; k < GUARD; k++)
    if (g[k] != POISON) {
      CHECK_TRUE(0, "byte %d after the window was written (0x%x)", k, g[k]);
      break;
    }
  return bad;
}

/* A window on malloc memory: threads reach each other's; another process's is out of reach. */
static int malloc_window(ncclComm_t comm, const struct mode* m, int me, int n) {
  int bad = 0, next = (me + 1) % n, prev = (me + n - 1) % n;
  size_t size = win_bytes(n);
  char* buf = malloc(size);
  int32_t src[SLOT_INTS];
  fill_marker(buf, me);
  ncclWindow_t win = NULL;
  CHECK_RES(ncclCommWindowRegister(comm, buf, size, &win, NCCL_WIN_DEFAULT), ncclSuccess);
  void* q = NULL;
  CHECK_RES(ncclGetPeerDevicePointer(win, 0, me, &q), ncclSuccess);
  CHECK_TRUE(q == buf, "own pointer %p, buffer %p", q, (void*)buf);
  for (int j = 0; j < SLOT_INTS; j++) src[j] = value(me, 0, j);
  if (m->procs) {
    CHECK_RES(ncclGetPeerDevicePointer(win, 0, next, &q), ncclInvalidUsage);
    CHECK_RES(ncclPutSignal(src, SLOT_INTS, ncclInt32, next, win, HDR, 0, 0, 0, comm, NULL),
              ncclInvalidUsage);
  } else {
    bad += check_pointers(comm, win, buf, me, n);
    CHECK_RES(ncclPutSignal(src, SLOT_INTS, ncclInt32, next, win, HDR, 0, 0, 0, comm, NULL), ncclSuccess);
    ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = prev};
    CHECK_RES(ncclWaitSignal(1, &d, comm, NULL), ncclSuccess);
    bad += check_slot(me, n, buf, 0, prev);
    /* Deregistration is local: no rank may free its buffer while a peer thread still reads it
     * (check_pointers), so all meet in an all-reduce first (AddressSanitizer saw the use after free). */
    int one = 1, sum = 0;
    CHECK_RES(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
  }
  CHECK_RES(ncclCommWindowDeregister(comm, win), ncclSuccess);
  free(buf);
  return bad;
}

static int body_main(ncclComm_t comm, int me, int n, void* arg) {
  const struct mode* m = arg;
  int bad = 0;
  size_t size = win_bytes(n);
  void* buf = NULL;
  CHECK_RES(ncclMemAlloc(&buf, size + GUARD), ncclSuccess);
  if (buf == NULL) return bad + 1;
  memset(buf, POISON, size + GUARD);
  fill_marker(buf, me);
  int32_t* src = malloc(SLOT_INTS * sizeof(int32_t));
  ncclWindow_t win = NULL;
  CHECK_RES(ncclCommWindowRegister(comm, buf, size, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  if (win != NULL) {
    bad += check_pointers(comm, win, buf, me, n);
    bad += put_rounds(comm, win, buf, src, me, n);
    bad += rejected(comm, win, buf, src, me, n);
    bad += group_and_signals(comm, win, buf, src, me, n);
    bad += guard_intact(me, n, buf);
    CHECK_RES(ncclCommWindowDeregister(comm, win), ncclSuccess);
    void* p;
    CHECK_RES(ncclWinGetUserPtr(comm, win, &p), ncclInvalidArgument);
  }
  CHECK_RES(ncclCommWindowDeregister(comm, NULL), ncclSuccess);
  bad += malloc_window(comm, m, me, n);
  free(src);
  ncclMemFree(buf);
  return bad;
}

/* What rank 0's wait for a signal from rank 1 gave. */
struct lone_wait {
  ncclResult_t res;
  const char* text; /* ncclGetLastError(comm) right after */
  double took_s;
};

/* Every rank registers a 4 KiB window (freed by the caller through *buf); rank 0 then waits for
 * one signal from rank 1, which sends none. Returns the failed checks. */
static int wait_for_rank1(ncclComm_t comm, int me, int n, const char* what, void** buf, struct lone_wait* w) {
  int bad = 0;
  ncclWindow_t win = NULL;
  *buf = NULL;
  CHECK_RES(ncclMemAlloc(buf, 4096), ncclSuccess);
  CHECK_RES(ncclCommWindowRegister(comm, *buf, 4096, &win, 0), ncclSuccess);
  if (me == 0) {
    ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 1};
    double t0 = now_s();
    w->res = ncclWaitSignal(1, &d, comm, NULL);
    w->took_s = now_s() - t0;
    w->text = ncclGetLastError(comm);
    printf("%s: WaitSignal returned \"%s\" after %.1f s: %s\n", what, ncclGetErrorString(w->res), w->took_s,
           w->text);
  }
  return bad;
}

/* Rank 0 waits for a signal rank 1 never sends (WEFT_TIMEOUT 1 s): the error names rank 1. */
static int body_timeout(ncclComm_t comm, int me, int n, void* arg) {
  (void)arg;
  void* buf;
  struct lone_wait w;
  int bad = wait_for_rank1(comm, me, n, "timeout", &buf, &w);
  if (me == 0) {
    CHECK_TRUE(w.res != ncclSuccess, "a wait for a signal that never comes succeeded");
    CHECK_TRUE(strstr(w.text, "WaitSignal") && strstr(w.text, "timed out") && strstr(w.text, "peer rank 1"),
               "the error does not name the operation and rank 1: %s", w.text);
    CHECK_TRUE(w.took_s < 60, "gave up after %.1f s with WEFT_TIMEOUT=1", w.took_s);
  } else {
    sleep(3); /* alive, silent, while rank 0 gives up */
  }
  (void)n;
  /* No deregistration (collective, and rank 0's comm has failed): the launcher's
   * ncclCommDestroy drops the windows with the comm. */
  ncclMemFree(buf);
  return bad;
}

/* Rank 1 leaves without signalling: rank 0's wait ends long before its WEFT_TIMEOUT (100 s). */
static int body_peer_leaves(ncclComm_t comm, int me, int n, void* arg) {
  (void)arg;
  void* buf;
  struct lone_wait w;
  int bad = wait_for_rank1(comm, me, n, "peer leaves", &buf, &w);
  if (me == 0) {
    CHECK_TRUE(w.res != ncclSuccess, "a wait on a rank that left succeeded");
    CHECK_TRUE(strstr(w.text, "rank 1") != NULL, "the error does not name rank 1: %s", w.text);
    CHECK_TRUE(w.took_s < 60, "gave up after %.1f s", w.took_s);
  }
  /* rank 1 returns at once: the launcher destroys its comm, which closes its signal board */
  ncclMemFree(buf);
  return bad;
}

/* Ranks on two hosts (WEFT_HOSTID): windows register, the other host's rank has no pointer and
 * takes no puts, signals or waits; ranks of the same host still do. */
static void two_hosts_setup(int rank, int nranks) {
  char h[32];
  snprintf(h, sizeof(h), "window-host-%d", rank * 2 / nranks);
  setenv("WEFT_HOSTID", h, 1);
}

static int body_two_hosts(ncclComm_t comm, int me, int n, void* arg) {
  (void)arg;
  int bad = 0, mate = me ^ 1, far = (me + 2) % n; /* 4 ranks: {0,1} on one host, {2,3} on the other */
  void* buf = NULL;
  ncclWindow_t win = NULL;
  CHECK_RES(ncclMemAlloc(&buf, 4096), ncclSuccess);
  fill_marker(buf, me);
  CHECK_RES(ncclCommWindowRegister(comm, buf, 4096, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  void* q = (void*)1;
  CHECK_RES(ncclGetPeerDevicePointer(win, 0, far, &q), ncclSuccess);
  CHECK_TRUE(q == NULL, "a pointer %p to rank %d on another host", q, far);
  CHECK_RES(ncclGetPeerDevicePointer(win, 0, mate, &q), ncclSuccess);
  CHECK_TRUE(q != NULL && ((unsigned char*)q)[3] == marker(mate, 3), "no working pointer to rank %d", mate);
  CHECK_RES(ncclGetLsaDevicePointer(win, 0, 2, &q), ncclInvalidArgument); /* two ranks per host */
  int32_t v = me;
  CHECK_RES(ncclPutSignal(&v, 1, ncclInt32, far, win, HDR, 0, 0, 0, comm, NULL), ncclInvalidUsage);
  CHECK_RES(ncclSignal(far, 0, 0, 0, comm, NULL), ncclInvalidUsage);
  ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = far};
  CHECK_RES(ncclWaitSignal(1, &d, comm, NULL), ncclInvalidUsage);
  CHECK_RES(ncclPutSignal(&v, 1, ncclInt32, mate, win, HDR, 0, 0, 0, comm, NULL), ncclSuccess);
  d.peer = mate;
  CHECK_RES(ncclWaitSignal(1, &d, comm, NULL), ncclSuccess);
  CHECK_TRUE(*(int32_t*)((char*)buf + HDR) == mate, "rank %d's put to this rank did not land", mate);
  CHECK_RES(ncclCommWindowDeregister(comm, win), ncclSuccess);
  ncclMemFree(buf);
  return bad;
}

static void run(const char* what, int procs, int n, rank_body body) {
  struct mode m = {procs};
  double t0 = now_s();
  int failed = procs ? run_procs(n, body, &m, 120) : run_threads(n, body, &m);
  printf("%s, %d ranks as %s: %d failed, %.1f s\n", what, n, procs ? "processes" : "threads", failed,
         now_s() - t0);
  fflush(stdout);
  EXPECT_MSG(failed == 0, "%s, %d ranks as %s", what, n, procs ? "processes" : "threads");
}

int main(void) {
  alarm(400);
  setenv("WEFT_BACKEND", "host", 1);
  for (int procs = 0; procs < 2; procs++)
    for (int n = 2; n <= MAX_RANKS; n++) run("windows and one-sided operations", procs, n, body_main);
  setenv("WEFT_TIMEOUT", "1", 1);
  for (int procs = 0; procs < 2; procs++) run("a wait that times out", procs, 2, body_timeout);
  setenv("WEFT_TIMEOUT", "100", 1);
  for (int procs = 0; procs < 2; procs++) run("a wait on a rank that leaves", procs, 2, body_peer_leaves);
  unsetenv("WEFT_TIMEOUT");
  coll_rank_setup = two_hosts_setup;
  run("ranks on two hosts", 1, 4, body_two_hosts);
  coll_rank_setup = NULL;
  return test_finish("test_window");
}
