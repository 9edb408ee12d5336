/* Protocols and channel counts: Simple and LL with 1 to 4 channels (NCCL_PROTO,
 * NCCL_MIN/MAX_NCHANNELS), each in a fresh copy of this program so the library reads the
 * settings at start (a spread of cases plus the datatype x op matrix on 3 ranks); then large counts
 * (1_000_003 elements, and one case over 64 MiB) with the defaults. COLL_SEED=<seed> repeats a run. */
#include <errno.h>

#include "check.h"
#include "coll_util.h"

/* A spread of collectives, datatypes and ops with counts large enough to span many chunks. */
static void cases_config(struct case_list* l, int nranks, uint64_t seed) {
  static const int pick[][3] = {
      {C_ALLREDUCE, ncclFloat32, O_SUM},   {C_ALLREDUCE, ncclInt8, O_MAX},
      {C_ALLREDUCE, ncclFloat16, O_AVG},   {C_ALLREDUCE, ncclBfloat16, O_PROD},
      {C_ALLREDUCE, ncclUint64, O_MIN},    {C_BROADCAST, ncclUint8, O_NONE},
      {C_REDUCE, ncclFloat64, O_PMS_HOST}, {C_REDUCE, ncclInt32, O_SUM},
      {C_ALLGATHER, ncclInt32, O_NONE},    {C_REDUCESCATTER, ncclFloat32, O_SUM},
      {C_REDUCESCATTER, ncclInt64, O_AVG}, {C_ALLTOALL, ncclFloat8e4m3, O_NONE},
      {C_GATHER, ncclUint32, O_NONE},      {C_SCATTER, ncclInt8, O_NONE},
      {C_SENDRECV, ncclFloat64, O_NONE},
  };
  int npick = sizeof(pick) / sizeof(pick[0]);
  for (int k = 0; k < 2 * npick; k++) {
    uint64_t s = mix64(seed + (uint64_t)k);
    const int* p = pick[k % npick];
    /* half small (a few LL lines / one slot), half up to ~1.5 MB per rank */
    size_t count = k < npick ? 1 + s % 100 : 1000 + s % 200000;
    struct coll_case c = {p[0], p[1], p[2], (k / npick + k) & 1, (int)(s % (uint64_t)nranks), count, s};
    case_add(l, c);
  }
}

static int run_child(void) {
  static const int ranks[] = {2, 3, 4};
  int problems = 0;
  for (int i = 0; i < 3; i++) {
    struct case_list l = {0};
    cases_config(&l, ranks[i], coll_base_seed + (uint64_t)ranks[i]);
    /* and the whole datatype x op matrix once per setting */
    if (ranks[i] == 3) cases_matrix(&l, 3, coll_base_seed ^ 0x3a7e1ull, 20000);
    problems += run_threads(ranks[i], run_case_list, &l);
    free(l.v);
  }
  return problems;
}

/* Large counts: a few collectives at 1_000_003 elements and one all-reduce over 64 MiB. */
static int run_large(void) {
  int problems = 0;
  struct case_list l = {0};
  uint64_t s = mix64(coll_base_seed ^ 0x1a59e);
  case_add(&l, (struct coll_case){C_ALLREDUCE, ncclFloat32, O_SUM, 0, 0, 1000003, s});
  case_add(&l, (struct coll_case){C_ALLGATHER, ncclInt8, O_NONE, 1, 0, 1000003, s + 1});
  case_add(&l, (struct coll_case){C_REDUCESCATTER, ncclBfloat16, O_SUM, 1, 0, 1000003, s + 2});
  case_add(&l, (struct coll_case){C_BROADCAST, ncclInt32, O_NONE, 0, 2, 1000003, s + 3});
  problems += run_threads(3, run_case_list, &l);
  l.n = 0;
  /* 17e6 floats: 68 MB per buffer */
  case_add(&l, (struct coll_case){C_ALLREDUCE, ncclFloat32, O_SUM, 1, 0, 17000000, s + 4});
  problems += run_threads(2, run_case_list, &l);
  free(l.v);
  return problems;
}

int main(int argc, char** argv) {
  coll_base_seed = pick_seed();
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return run_child() ? 1 : 0;
  if (argc > 1 && strcmp(argv[1], "--large") == 0) return run_large() ? 1 : 0;
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  char seed_text[32];
  snprintf(seed_text, sizeof(seed_text), "0x%llx", (unsigned long long)coll_base_seed);
  setenv("COLL_SEED", seed_text, 1);
  static const char* protos[] = {"Simple", "LL"};
  for (int run = 0; run < 9; run++) {
    char ch[8];
    const char* what = run < 8 ? protos[run / 4] : "default";
    snprintf(ch, sizeof(ch), "%d", run % 4 + 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(240);
      if (run < 8) {
        setenv("NCCL_PROTO", what, 1);
        setenv("NCCL_MIN_NCHANNELS", ch, 1);
        setenv("NCCL_MAX_NCHANNELS", ch, 1);
      }
      execl("/proc/self/exe", argv[0], run < 8 ? "--child" : "--large", (char*)NULL);
      fprintf(stderr, "exec failed: %s\n", strerror(errno));
      _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (run < 8) {
      printf("NCCL_PROTO=%s NCCL_MIN/MAX_NCHANNELS=%s: %s (%.1f s)\n", what, ch, ok ? "ok" : "FAILED",
             (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    } else {
      printf("large counts: %s (%.1f s)\n", ok ? "ok" : "FAILED",
             (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    }
    EXPECT_MSG(ok, "%s with %s channels: status 0x%x (base seed 0x%llx)", what, run < 8 ? ch : "default",
               status, (unsigned long long)coll_base_seed);
  }
  return test_finish("test_coll_config");
}
