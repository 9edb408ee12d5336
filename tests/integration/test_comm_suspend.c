/* ncclCommSuspend / ncclCommResume / ncclCommMemStats / ncclCommQueryProperties on the host
 * backend: ranks as threads and as processes (shared memory, trees, two "hosts" over sockets),
 * and one thread driving every rank through groups. Suspend must release the comm's buffers
 * (the stats say how much; no shared segment stays mapped), refuse work while suspended, and
 * resume so that checked collectives and send/recv are right again. Plus the invalid calls. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "coll_util.h"
#include "nccl_device.h"

/* NCCL_COMM_PROPERTIES_INITIALIZER sets the header fields only, as NCCL's does. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define BAD(...)                                                 \
  do {                                                           \
    fprintf(stderr, "FAILED rank %d line %d: ", rank, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                                \
    fprintf(stderr, "\n");                                       \
    bad++;                                                       \
  } while (0)
struct stats {
  uint64_t suspend, suspended, persist, total;
};

static int read_stats(ncclComm_t comm, int rank, struct stats* s) {
  int bad = 0;
  WANT_RES(ncclCommMemStats(comm, ncclStatGpuMemSuspend, &s->suspend), ncclSuccess);
  WANT_RES(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &s->suspended), ncclSuccess);
  WANT_RES(ncclCommMemStats(comm, ncclStatGpuMemPersist, &s->persist), ncclSuccess);
  WANT_RES(ncclCommMemStats(comm, ncclStatGpuMemTotal, &s->total), ncclSuccess);
  WANT(s->total == s->suspend + s->persist, "Total %llu != Suspend %llu + Persist %llu",
       (unsigned long long)s->total, (unsigned long long)s->suspend, (unsigned long long)s->persist);
  return bad;
}

/* Shared memory segments of the library mapped in this process (named /weft-...). */
static int weft_mappings(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof(line), f))
    /* Weft's segments have no name: unnamed files in /dev/shm ("/dev/shm/#<inode> (deleted)")
     * or memfds ("/memfd:weft-<tag> (deleted)"). */
    if (strstr(line, "/dev/shm/") != NULL || strstr(line, "memfd:weft") != NULL) n++;
  fclose(f);
  return n;
}

/* Collectives on ring connectors, direct paths and send/recv connectors, with checked results. */
static int run_checked(ncclComm_t comm, int rank, int n, uint64_t seed) {
  const struct coll_case cases[] = {
      {C_ALLREDUCE, ncclFloat32, O_SUM, 0, 0, 7, seed + 1},
      {C_ALLREDUCE, ncclInt32, O_MAX, 1, 0, 70001, seed + 2},
      {C_ALLGATHER, ncclUint8, O_NONE, 0, 0, 5003, seed + 3},
      {C_SENDRECV, ncclFloat64, O_NONE, 0, 0, 3001, seed + 4},
      {C_BROADCAST, ncclInt64, O_NONE, 0, n - 1, 999, seed + 5},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    bad += run_case(&cases[i], comm, rank, n) != 0;
  return bad;
}

/* Work and a second suspend are refused while suspended, without changing the state. */
static int check_refused(ncclComm_t comm, int rank, int n) {
  int bad = 0;
  float buf[4] = {0};
  WANT_RES(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  WANT_RES(ncclAllReduce(buf, buf, 0, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage);
  WANT_RES(ncclSend(buf, 4, ncclFloat32, (rank + 1) % n, comm, NULL), ncclInvalidUsage);
  WANT_RES(ncclGroupStart(), ncclSuccess);
  WANT_RES(ncclRecv(buf, 4, ncclFloat32, (rank + n - 1) % n, comm, NULL), ncclInvalidUsage);
  WANT_RES(ncclGroupEnd(), ncclInvalidUsage);
  WANT_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
  WANT_RES(ncclSignal((rank + 1) % n, 0, 0, 0, comm, NULL), ncclInvalidUsage); /* one-sided too */
  uint64_t v = 0;
  WANT_RES(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v), ncclSuccess);
  WANT(v == 1, "Suspended %llu after refused calls", (unsigned long long)v);
  return bad;
}

static int check_bad_args(ncclComm_t comm, int rank) {
  int bad = 0;
  uint64_t v = 12345;
  WANT_RES(ncclCommSuspend(comm, 0), ncclInvalidArgument);
  WANT_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM | 0x80), ncclInvalidArgument);
  WANT_RES(ncclCommSuspend(comm, -1), ncclInvalidArgument);
  WANT_RES(ncclCommSuspend(NULL, NCCL_SUSPEND_MEM), ncclInvalidArgument);
  WANT_RES(ncclCommResume(NULL), ncclInvalidArgument);
  WANT_RES(ncclCommResume(comm), ncclInvalidUsage); /* active */
  WANT_RES(ncclCommMemStats(comm, (ncclCommMemStat_t)4, &v), ncclInvalidArgument);
  WANT_RES(ncclCommMemStats(comm, (ncclCommMemStat_t)-1, &v), ncclInvalidArgument);
  WANT_RES(ncclCommMemStats(comm, ncclStatGpuMemTotal, NULL), ncclInvalidArgument);
  WANT_RES(ncclCommMemStats(NULL, ncclStatGpuMemTotal, &v), ncclInvalidArgument);
  WANT(v == 12345, "a refused ncclCommMemStats wrote %llu", (unsigned long long)v);
  WANT_RES(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v), ncclSuccess);
  WANT(v == 0, "refused calls left Suspended at %llu", (unsigned long long)v);
  return bad;
}

#define CANARY 0x5a

/* A caller built against an older header passes a shorter struct: only whole fields within its
 * size are written, and nothing after it. */
static int check_short_props(ncclComm_t comm, int rank, int n, size_t size, int want_nranks) {
  int bad = 0;
  unsigned char raw[sizeof(ncclCommProperties_t) + 64];
  memset(raw, CANARY, sizeof(raw));
  ncclCommProperties_t init = NCCL_COMM_PROPERTIES_INITIALIZER;
  init.size = size;
  memcpy(raw, &init, offsetof(ncclCommProperties_t, rank));
  WANT_RES(ncclCommQueryProperties(comm, (ncclCommProperties_t*)raw), ncclSuccess);
  ncclCommProperties_t got;
  memcpy(&got, raw, sizeof(got));
  WANT(got.rank == rank, "short struct (size %zu): rank %d", size, got.rank);
  if (want_nranks) WANT(got.nRanks == n, "short struct (size %zu): nRanks %d", size, got.nRanks);
  size_t from = size;
  if (!want_nranks) from = offsetof(ncclCommProperties_t, nRanks); /* size cut nRanks in two */
  for (size_t i = from; i < sizeof(raw); i++)
    if (raw[i] != CANARY) {
      BAD("short struct (size %zu): byte %zu written (0x%02x)", size, i, raw[i]);
      break;
    }
  return bad;
}

static int check_props(ncclComm_t comm, int rank, int n) {
  int bad = 0, count = -1, me = -1, dev = -2;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &me);
  ncclCommCuDevice(comm, &dev);
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  WANT_RES(ncclCommQueryProperties(comm, &p), ncclSuccess);
  WANT(p.rank == me && p.nRanks == count && p.cudaDev == dev, "rank %d nRanks %d cudaDev %d vs %d %d %d",
       p.rank, p.nRanks, p.cudaDev, me, count, dev);
  WANT(p.nvmlDev == -1, "host backend: nvmlDev %d", p.nvmlDev);
  WANT(p.hostRmaSupport, "host backend: one-sided operations are real but hostRmaSupport is false");
  WANT(!p.deviceApiSupport && !p.multimemSupport && p.ginType == NCCL_GIN_TYPE_NONE &&
           p.railedGinType == NCCL_GIN_TYPE_NONE && p.nLsaTeams == 0,
       "a device-API capability reads as present");
  WANT(p.size == sizeof(p) && p.magic == NCCL_API_MAGIC && p.version == NCCL_VERSION_CODE,
       "the header fields changed: size %zu magic 0x%x version %u", p.size, p.magic, p.version);
  /* The hash is the same on every rank: all-gather it. */
  uint64_t* all = calloc(n, sizeof(*all));
  WANT_RES(ncclAllGather(&p.commHash, all, 1, ncclUint64, comm, NULL), ncclSuccess);
  for (int r = 0; r < n; r++)
    WANT(all[r] == p.commHash, "commHash of rank %d 0x%llx, mine 0x%llx", r, (unsigned long long)all[r],
         (unsigned long long)p.commHash);
  free(all);
  bad += check_short_props(comm, rank, n, offsetof(ncclCommProperties_t, nRanks) + sizeof(int), 1);
  bad += check_short_props(comm, rank, n, offsetof(ncclCommProperties_t, nRanks) + 2, 0);
  ncclCommProperties_t q = NCCL_COMM_PROPERTIES_INITIALIZER;
  q.magic = 0x12345678;
  WANT_RES(ncclCommQueryProperties(comm, &q), ncclInvalidArgument);
  WANT(q.rank == 0 && q.nRanks == 0, "bad magic: fields written");
  ncclCommProperties_t z = NCCL_COMM_PROPERTIES_INITIALIZER;
  z.size = offsetof(ncclCommProperties_t, rank);
  WANT_RES(ncclCommQueryProperties(comm, &z), ncclInvalidArgument);
  WANT_RES(ncclCommQueryProperties(comm, NULL), ncclInvalidArgument);
  WANT_RES(ncclCommQueryProperties(NULL, &p), ncclInvalidArgument);
  return bad;
}

struct job {
  pthread_barrier_t* barrier; /* threads: all ranks' releases done before the mappings are read */
  int shm_expected;           /* the comm maps shared segments while active */
  uint64_t seed;
};

static void sync_ranks(const struct job* j) {
  if (j->barrier) pthread_barrier_wait(j->barrier);
}

/* One suspend: the stats show what was released, nothing shared stays mapped, work is refused. */
static int suspend_checked(ncclComm_t comm, int rank, int n, const struct job* j,
                           const struct stats* before) {
  int bad = 0;
  sync_ranks(j);
  int maps = weft_mappings();
  WANT(!j->shm_expected || maps > 0, "no shared segment mapped before suspend");
  sync_ranks(j);
  WANT_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
  sync_ranks(j);
  maps = weft_mappings();
  WANT(maps == 0, "%d shared segment(s) still mapped while suspended", maps);
  struct stats s;
  bad += read_stats(comm, rank, &s);
  WANT(s.suspended == 1, "Suspended %llu after suspend", (unsigned long long)s.suspended);
  WANT(s.suspend == before->suspend && s.persist == before->persist,
       "while suspended Suspend %llu Persist %llu, before %llu %llu", (unsigned long long)s.suspend,
       (unsigned long long)s.persist, (unsigned long long)before->suspend,
       (unsigned long long)before->persist);
  bad += check_refused(comm, rank, n);
  /* Registrations are records, not buffers: they may come and go while suspended. */
  static char area[4096];
  void* handle = NULL;
  WANT_RES(ncclCommRegister(comm, area, sizeof(area), &handle), ncclSuccess);
  WANT_RES(ncclCommDeregister(comm, handle), ncclSuccess);
  return bad;
}

static int resume_checked(ncclComm_t comm, int rank, int n, const struct job* j, const struct stats* before,
                          int cycle) {
  int bad = 0;
  WANT_RES(ncclCommResume(comm), ncclSuccess);
  WANT_RES(ncclCommResume(comm), ncclInvalidUsage);
  struct stats s;
  bad += read_stats(comm, rank, &s);
  WANT(s.suspended == 0, "Suspended %llu after resume", (unsigned long long)s.suspended);
  bad += run_checked(comm, rank, n, j->seed + 100 * (uint64_t)cycle);
  /* The same work holds the same buffers again (scratch such as coroutine stacks comes back at
   * first use, connectors at resume). */
  bad += read_stats(comm, rank, &s);
  WANT(s.suspend == before->suspend && s.persist == before->persist,
       "after resume and the same work Suspend %llu Persist %llu, before suspend %llu %llu",
       (unsigned long long)s.suspend, (unsigned long long)s.persist, (unsigned long long)before->suspend,
       (unsigned long long)before->persist);
  return bad;
}

static int body(ncclComm_t comm, int rank, int n, void* arg) {
  const struct job* j = arg;
  int bad = run_checked(comm, rank, n, j->seed);
  struct stats before;
  bad += read_stats(comm, rank, &before);
  WANT(before.suspended == 0, "a new comm reads as suspended");
  WANT(n == 1 || before.suspend > 0, "%d ranks and nothing to suspend", n);
  WANT(before.persist > 0, "no persistent state counted");
  bad += check_bad_args(comm, rank);
  bad += check_props(comm, rank, n);
  for (int cycle = 1; cycle <= 2; cycle++) {
    bad += suspend_checked(comm, rank, n, j, &before);
    bad += resume_checked(comm, rank, n, j, &before, cycle);
  }
  /* Left suspended: ncclCommDestroy (in the launcher) must free a suspended comm. */
  WANT_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
  return bad;
}

static void run_threads_job(int n) {
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  struct job j = {&barrier, 1, coll_base_seed + (uint64_t)n};
  j.shm_expected = n > 1; /* the direct paths' boards are shared memory, even between threads */
  int failed = run_threads(n, body, &j);
  EXPECT_MSG(failed == 0, "%d ranks as threads: %d problem(s)", n, failed);
  pthread_barrier_destroy(&barrier);
}

/* Per-rank environment of the process variants. */
static const char* variant;
static void rank_env(int rank, int nranks) {
  (void)nranks;
  if (strcmp(variant, "tree") == 0) {
    setenv("NCCL_ALGO", "Tree", 1); /* all-reduce on tree connectors, connected at first use */
  } else if (strcmp(variant, "hosts") == 0) {
    char host[32];
    snprintf(host, sizeof(host), "suspend-host-%d", rank % 2); /* network connectors between them */
    setenv("WEFT_HOSTID", host, 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  }
}

static void run_procs_job(int n, const char* v) {
  variant = v;
  coll_rank_setup = rank_env;
  struct job j = {NULL, 0, coll_base_seed + 1000 + (uint64_t)n};
  j.shm_expected = n > 1 && strcmp(v, "hosts") != 0;
  int failed = run_procs(n, body, &j, 240);
  EXPECT_MSG(failed == 0, "%d ranks as processes (%s): %d failed", n, v, failed);
  coll_rank_setup = NULL;
}

/* One thread drives every rank: suspend and resume join the group, and run at its end. */
static void run_grouped(int n) {
  int rank = -1, bad = 0;
  ncclComm_t comms[4];
  WANT_RES(ncclCommInitAll(comms, n, NULL), ncclSuccess);
  WANT_RES(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++) WANT_RES(ncclCommSuspend(comms[i], NCCL_SUSPEND_MEM), ncclSuccess);
  WANT_RES(ncclCommResume(comms[0]), ncclInvalidUsage); /* its suspend is still queued */
  WANT_RES(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; i++) {
    uint64_t v = 0;
    WANT_RES(ncclCommMemStats(comms[i], ncclStatGpuMemSuspended, &v), ncclSuccess);
    WANT(v == 1, "grouped suspend: comm %d reads Suspended %llu", i, (unsigned long long)v);
  }
  WANT_RES(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++) WANT_RES(ncclCommResume(comms[i]), ncclSuccess);
  WANT_RES(ncclGroupEnd(), ncclSuccess);
  float* bufs[4];
  for (int i = 0; i < n; i++) {
    bufs[i] = malloc(1000 * sizeof(float));
    for (int k = 0; k < 1000; k++) bufs[i][k] = (float)(i + k);
  }
  WANT_RES(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++)
    WANT_RES(ncclAllReduce(bufs[i], bufs[i], 1000, ncclFloat32, ncclSum, comms[i], NULL), ncclSuccess);
  WANT_RES(ncclCommSuspend(comms[0], NCCL_SUSPEND_MEM), ncclInvalidUsage); /* an all-reduce is queued */
  WANT_RES(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 1000; k++) {
      float want = (float)(n * k + n * (n - 1) / 2);
      if (bufs[i][k] != want) {
        BAD("grouped all-reduce after resume: comm %d element %d is %g, want %g", i, k, bufs[i][k], want);
        break;
      }
    }
  for (int i = 0; i < n; i++) {
    WANT_RES(ncclCommDestroy(comms[i]), ncclSuccess);
    free(bufs[i]);
  }
  test_failures += bad;
}

int main(void) {
  coll_base_seed = pick_seed();
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  alarm(500);
  run_threads_job(1);
  run_threads_job(3);
  run_procs_job(2, "shm");
  run_procs_job(3, "tree");
  run_procs_job(2, "hosts");
  run_grouped(3);
  return test_finish("test_comm_suspend");
}
