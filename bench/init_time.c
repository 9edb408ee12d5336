/* bench/init_time.c: how long communicator init takes, and what it leaves resident, for
 * bench/init_scale.sh.
 *
 *   init_time -t N [-r R]   N thread ranks in this process, R unique ids (ncclCommInitRankScalable
 *                           when R > 1); prints one "threads" row for the job
 *   init_time -b N [-r R]   N thread ranks that only join the bootstrap and then time one 64-byte
 *                           all-gather: the parts the model in docs/PERFORMANCE.md is made of
 *   init_time               one rank of a weftrun job (WEFT_RANK, WEFT_NRANKS, NCCL_COMM_ID);
 *                           prints a "proc" row per rank: realtime start and end of init, Pss
 *   init_time -p K          one rank of a weftrun job that only joins the bootstrap, then (after
 *                           a barrier) times K rounds of a 64-byte all-gather and a barrier: the
 *                           messages between processes; prints a "bproc" row per rank
 *
 * Times are from the moment every thread is released (a barrier) to the last return. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "nccl.h"

static int64_t now_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A "Field: N kB" line of a /proc/self file (VmRSS in status; Pss in smaps_rollup, which
 * counts pages shared between processes once in all, not once per process). */
static long proc_kib(const char* file, const char* field) {
  FILE* f = fopen(file, "r");
  char line[256];
  long kib = -1;
  size_t len = strlen(field);
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, field, len) == 0) kib = atol(line + len + 1);
  if (f) fclose(f);
  return kib;
}

struct job {
  int nranks, nroots, boot_only;
  ncclUniqueId* ids;
  pthread_barrier_t go;
  int64_t start;
  int64_t* end;       /* per rank: init returned */
  int64_t* boot_end;  /* -b: bootstrap joined */
  int64_t* gather_ns; /* -b: one all-gather */
  int failed;
};

struct rank_arg {
  struct job* job;
  int rank;
};

static void boot_rank(struct job* j, int rank) {
  struct weft_bootstrap* bs = NULL;
  if (weft_bootstrap_init_scalable(j->ids, j->nroots, rank, j->nranks, NULL, &bs) != ncclSuccess) {
    __atomic_add_fetch(&j->failed, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&j->go); /* still meet the others twice, so nobody waits forever */
    pthread_barrier_wait(&j->go);
    return;
  }
  j->boot_end[rank] = now_ns(CLOCK_MONOTONIC);
  /* Everyone joined before the gather is timed, so it measures the gather alone. */
  pthread_barrier_wait(&j->go);
  char* all = calloc(j->nranks, 64);
  int64_t t0 = now_ns(CLOCK_MONOTONIC);
  if (weft_bootstrap_allgather(bs, all, 64) != ncclSuccess)
    __atomic_add_fetch(&j->failed, 1, __ATOMIC_SEQ_CST);
  j->gather_ns[rank] = now_ns(CLOCK_MONOTONIC) - t0;
  free(all);
  pthread_barrier_wait(&j->go);
  weft_bootstrap_destroy(bs);
}

static void* thread_rank(void* p) {
  struct rank_arg* a = p;
  struct job* j = a->job;
  pthread_barrier_wait(&j->go);
  if (j->boot_only) {
    boot_rank(j, a->rank);
    return NULL;
  }
  ncclComm_t comm;
  ncclResult_t res = j->nroots > 1
                         ? ncclCommInitRankScalable(&comm, j->nranks, a->rank, j->nroots, j->ids, NULL)
                         : ncclCommInitRank(&comm, j->nranks, j->ids[0], a->rank);
  j->end[a->rank] = now_ns(CLOCK_MONOTONIC);
  if (res != ncclSuccess) __atomic_add_fetch(&j->failed, 1, __ATOMIC_SEQ_CST);
  pthread_barrier_wait(&j->go); /* all inits done: the resident set is measured now */
  pthread_barrier_wait(&j->go);
  if (res == ncclSuccess) ncclCommDestroy(comm);
  return NULL;
}

static int64_t max_of(const int64_t* v, int n) {
  int64_t m = v[0];
  for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

static int run_threads(int n, int nroots, int boot_only) {
  struct job j = {.nranks = n, .nroots = nroots, .boot_only = boot_only};
  j.ids = calloc(nroots, sizeof(*j.ids));
  j.end = calloc(n, sizeof(int64_t));
  j.boot_end = calloc(n, sizeof(int64_t));
  j.gather_ns = calloc(n, sizeof(int64_t));
  for (int i = 0; i < nroots; i++)
    if (ncclGetUniqueId(&j.ids[i]) != ncclSuccess) return 1;
  pthread_barrier_init(&j.go, NULL, (unsigned)n + 1);
  pthread_t* t = calloc(n, sizeof(*t));
  struct rank_arg* args = calloc(n, sizeof(*args));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20); /* 1,024 threads of 8 MiB stacks would be 8 GiB mapped */
  for (int r = 0; r < n; r++) {
    args[r] = (struct rank_arg){&j, r};
    if (pthread_create(&t[r], &attr, thread_rank, &args[r]) != 0) {
      fprintf(stderr, "init_time: cannot start thread %d of %d\n", r, n);
      return 1;
    }
  }
  pthread_barrier_wait(&j.go);
  j.start = now_ns(CLOCK_MONOTONIC);
  /* Both modes meet twice more: after init (or the bootstrap), and before teardown. */
  pthread_barrier_wait(&j.go);
  long rss = proc_kib("/proc/self/status", "VmRSS:");
  pthread_barrier_wait(&j.go);
  for (int r = 0; r < n; r++) pthread_join(t[r], NULL);
  if (j.failed) {
    fprintf(stderr, "init_time: %d of %d ranks failed\n", j.failed, n);
    return 1;
  }
  if (boot_only)
    printf("boot ranks %d roots %d boot_s %.4f gather_s %.5f\n", n, nroots,
           (max_of(j.boot_end, n) - j.start) / 1e9, max_of(j.gather_ns, n) / 1e9);
  else
    printf("threads ranks %d roots %d init_s %.4f rss_mib %.1f\n", n, nroots,
           (max_of(j.end, n) - j.start) / 1e9, rss / 1024.0);
  return 0;
}

/* One rank of a weftrun job: the script takes the latest start and the latest end over ranks. */
static int run_process(void) {
  const char* r = getenv("WEFT_RANK");
  const char* n = getenv("WEFT_NRANKS");
  if (r == NULL || n == NULL) {
    fprintf(stderr, "init_time: WEFT_RANK and WEFT_NRANKS unset: run under weftrun, or give -t/-b N\n");
    return 2;
  }
  int rank = atoi(r), nranks = atoi(n);
  ncclUniqueId id;
  ncclComm_t comm;
  int64_t start = now_ns(CLOCK_REALTIME);
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess)
    return 1;
  int64_t end = now_ns(CLOCK_REALTIME);
  printf("proc rank %d ranks %d start_ns %lld end_ns %lld pss_kib %ld\n", rank, nranks, (long long)start,
         (long long)end, proc_kib("/proc/self/smaps_rollup", "Pss:"));
  fflush(stdout);
  ncclCommDestroy(comm);
  return 0;
}

/* One rank of a weftrun job, bootstrap only: join, then K rounds of all-gather + barrier. */
static int run_process_boot(int rounds) {
  const char* r = getenv("WEFT_RANK");
  const char* n = getenv("WEFT_NRANKS");
  if (r == NULL || n == NULL) {
    fprintf(stderr, "init_time: WEFT_RANK and WEFT_NRANKS unset: run -p under weftrun\n");
    return 2;
  }
  int rank = atoi(r), nranks = atoi(n);
  ncclUniqueId id;
  struct weft_bootstrap* bs = NULL;
  int64_t start = now_ns(CLOCK_REALTIME);
  if (ncclGetUniqueId(&id) != ncclSuccess || weft_bootstrap_init(&id, rank, nranks, NULL, &bs) != ncclSuccess)
    return 1;
  int64_t joined = now_ns(CLOCK_REALTIME);
  if (weft_bootstrap_barrier(bs) != ncclSuccess) return 1;
  char* all = calloc(nranks, 64);
  int64_t t0 = now_ns(CLOCK_MONOTONIC);
  for (int k = 0; k < rounds; k++)
    if (weft_bootstrap_allgather(bs, all, 64) != ncclSuccess || weft_bootstrap_barrier(bs) != ncclSuccess)
      return 1;
  int64_t rounds_ns = now_ns(CLOCK_MONOTONIC) - t0;
  printf("bproc rank %d ranks %d start_ns %lld joined_ns %lld rounds %d rounds_ns %lld\n", rank, nranks,
         (long long)start, (long long)joined, rounds, (long long)rounds_ns);
  fflush(stdout);
  free(all);
  weft_bootstrap_barrier(bs);
  weft_bootstrap_destroy(bs);
  return 0;
}

int main(int argc, char** argv) {
  int n = 0, nroots = 1, boot_only = 0, rounds = 0, opt;
  while ((opt = getopt(argc, argv, "t:b:r:p:")) != -1) {
    if (opt == 't' || opt == 'b')
      n = atoi(optarg), boot_only = opt == 'b';
    else if (opt == 'r')
      nroots = atoi(optarg);
    else if (opt == 'p')
      rounds = atoi(optarg);
    else
      return 2;
  }
  if (n == 0 && rounds > 0) return run_process_boot(rounds);
  if (n == 0) return run_process();
  if (n < 1 || nroots < 1 || nroots > n) {
    fprintf(stderr, "init_time: -t/-b %d with -r %d: need 1 <= roots <= ranks\n", n, nroots);
    return 2;
  }
  return run_threads(n, nroots, boot_only);
}
