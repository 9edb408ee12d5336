/* The log-round all-gather (src/bootstrap/gather.c): right contents for 1-17 ranks and 64 as
 * threads and 33 as processes, block sizes from 1 byte to 40 KB, gathers back to back (their
 * messages share tags), and a rank that dies after init: the others fail within the timeout, and
 * the ones that needed it name it. */
#include "bootstrap/internal.h"
#include "test_bootstrap_common.h"
#include "uid.h"

#define DEAD_TIMEOUT_S 3
#define DEAD_RANKS 6
#define DEAD_VICTIM 2

static unsigned char gather_byte(int round, int rank, size_t i) {
  return (unsigned char)(rank * 29 + round * 101 + i * 7 + i / 253);
}

/* One all-gather of size-byte blocks; 0 when every block is right. */
static int gather_once(struct weft_bootstrap* bs, size_t size, int round) {
  int rank = weft_bootstrap_rank(bs), n = weft_bootstrap_nranks(bs), bad = 0;
  unsigned char* all = malloc((size_t)n * size);
  memset(all, 0xee, (size_t)n * size);
  for (size_t i = 0; i < size; i++) all[(size_t)rank * size + i] = gather_byte(round, rank, i);
  if (weft_bootstrap_allgather(bs, all, size) != ncclSuccess) bad++;
  for (int r = 0; r < n && !bad; r++)
    for (size_t i = 0; i < size && !bad; i++)
      if (all[(size_t)r * size + i] != gather_byte(round, r, i)) {
        fprintf(stderr, "rank %d of %d: block %d byte %zu wrong (size %zu)\n", rank, n, r, i, size);
        bad++;
      }
  free(all);
  return bad;
}

static int gather_workload(struct weft_bootstrap* bs) {
  static const size_t sizes[] = {1, 24, 56, 40000, 8};
  int bad = weft_bootstrap_nranks(bs) > 1 && !weft_bs_uses_log_gather(bs);
  if (bad) fprintf(stderr, "rank %d: the ring was used, not the log all-gather\n", weft_bootstrap_rank(bs));
  for (int k = 0; k < 5 && !bad; k++) bad += gather_once(bs, sizes[k], k);
  return bad;
}

struct gather_job {
  const ncclUniqueId* id;
  int rank, nranks, bad;
};

static void* gather_rank(void* p) {
  struct gather_job* j = p;
  struct weft_bootstrap* bs = NULL;
  if (weft_bootstrap_init(j->id, j->rank, j->nranks, NULL, &bs) != ncclSuccess) {
    j->bad = 1;
    return NULL;
  }
  j->bad = gather_workload(bs);
  weft_bootstrap_destroy(bs);
  return NULL;
}

static int gather_threads(int n) {
  ncclUniqueId id;
  if (weft_bootstrap_get_unique_id(&id) != ncclSuccess) return n;
  pthread_t* t = calloc(n, sizeof(*t));
  struct gather_job* jobs = calloc(n, sizeof(*jobs));
  for (int r = 0; r < n; r++) {
    jobs[r] = (struct gather_job){&id, r, n, 0};
    pthread_create(&t[r], NULL, gather_rank, &jobs[r]);
  }
  int failed = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(t[r], NULL);
    failed += jobs[r].bad != 0;
  }
  free(t);
  free(jobs);
  return failed;
}

/* Forks n ranks; victim >= 0 dies (SIGKILL) right after init. Each survivor's result, its last
 * error and the seconds its gather took go to shared memory. */
struct proc_result {
  ncclResult_t res;
  int bad;
  double secs;
  char err[256];
};

static void proc_rank(const ncclUniqueId* id, int rank, int n, int victim, struct proc_result* out) {
  struct weft_bootstrap* bs = NULL;
  out->res = weft_bootstrap_init(id, rank, n, NULL, &bs);
  if (out->res != ncclSuccess) _exit(1);
  if (rank == victim) kill(getpid(), SIGKILL);
  if (victim >= 0) usleep(300000); /* the victim is gone before the gather starts */
  int64_t t0 = weft_socket_now_ns();
  if (victim < 0) {
    out->bad = gather_workload(bs);
    out->res = out->bad ? ncclInternalError : ncclSuccess;
    out->secs = (weft_socket_now_ns() - t0) / 1e9;
  } else {
    size_t size = 64;
    char* all = calloc(n, size);
    out->res = weft_bootstrap_allgather(bs, all, size);
    out->secs = (weft_socket_now_ns() - t0) / 1e9;
    free(all);
    /* Stay (listening) until every survivor is done, so only the victim refuses connections. */
    while (weft_socket_now_ns() < t0 + (DEAD_TIMEOUT_S + 1) * 1000000000LL) usleep(50000);
  }
  snprintf(out->err, sizeof(out->err), "%s", weft_log_last_error());
  weft_bootstrap_destroy(bs);
  _exit(0);
}

static struct proc_result* gather_procs(int n, int victim) {
  struct proc_result* res =
      mmap(NULL, n * sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  memset(res, 0, n * sizeof(*res));
  ncclUniqueId id;
  struct test_uid_holder root;
  EXPECT(test_uid_from_child(&id, &root) == ncclSuccess);
  pid_t* pids = calloc(n, sizeof(*pids));
  fflush(NULL);
  for (int r = 0; r < n; r++) {
    res[r].res = ncclInternalError;
    if ((pids[r] = fork()) == 0) {
      alarm(60); /* a hung rank must not hang the test */
      proc_rank(&id, r, n, victim, &res[r]);
    }
  }
  for (int r = 0; r < n; r++) waitpid(pids[r], NULL, 0);
  test_uid_release(&root);
  free(pids);
  return res;
}

static void test_rank_counts(void) {
  for (int n = 1; n <= 17; n++) EXPECT_MSG(gather_threads(n) == 0, "%d ranks as threads", n);
  EXPECT_MSG(gather_threads(64) == 0, "64 ranks as threads");
  struct proc_result* res = gather_procs(33, -1);
  for (int r = 0; r < 33; r++) EXPECT_MSG(res[r].res == ncclSuccess, "rank %d of 33 processes", r);
  munmap(res, 33 * sizeof(*res));
}

/* Ranks 3 and 4 send to the victim (rounds 1 and 2) and are refused at once; ranks 1 and 0
 * wait for its message (rounds 1 and 2) until the timeout; all four name it. Rank 5 waits for
 * rank 1 and names that one. */
static void test_dead_peer(void) {
  char value[16];
  snprintf(value, sizeof(value), "%d", DEAD_TIMEOUT_S);
  setenv("WEFT_BOOTSTRAP_TIMEOUT", value, 1);
  struct proc_result* res = gather_procs(DEAD_RANKS, DEAD_VICTIM);
  for (int r = 0; r < DEAD_RANKS; r++) {
    if (r == DEAD_VICTIM) continue;
    printf("rank %d: result %d after %.2f s: %s\n", r, res[r].res, res[r].secs, res[r].err);
    EXPECT_MSG(res[r].res == ncclRemoteError, "rank %d's gather without rank %d gave %d", r, DEAD_VICTIM,
               res[r].res);
    EXPECT_MSG(res[r].secs < DEAD_TIMEOUT_S + 2.0, "rank %d failed after %.2f s", r, res[r].secs);
    int partner = r == 0 || r == 1 || r == 3 || r == 4;
    EXPECT_MSG(!partner || strstr(res[r].err, "rank 2") != NULL, "rank %d's error does not name rank 2: %s",
               r, res[r].err);
  }
  for (int r = 3; r <= 4; r++)
    EXPECT_MSG(res[r].secs < 1.0, "rank %d was refused by rank 2 only after %.2f s", r, res[r].secs);
  munmap(res, DEAD_RANKS * sizeof(*res));
}

int main(void) {
  setenv("WEFT_BOOTSTRAP_LOG_GATHER_MIN", "1", 1); /* the log path for every job size */
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "30", 1);       /* a wrong partner fails, not hangs */
  test_rank_counts();
  test_dead_peer();
  return test_finish("test_bootstrap_gather");
}
