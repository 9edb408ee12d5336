/* The host backend's direct paths: collectives on buffers from ncclMemAlloc (which ranks of one
 * host read and write in place) give the same results as on malloc buffers (staged through the
 * connectors), for every datatype and op, in place and out of place, at counts around each
 * path's limits (2 KiB exchange, 16 KiB board copy, 4 MiB streaming stores) and odd counts;
 * also when only some ranks' buffers are shared (every rank must then agree on the fallback),
 * with ranks as processes and as threads, and with many calls in a row on the same buffers. */
#include "check.h"
#include "direct_util.h"

static int body(ncclComm_t comm, int me, int n, void* arg) {
  const struct direct_run* run = arg;
  int problems = 0;
  for (int i = 0; i < run->l.n; i++) problems += run_shared_case(&run->l.v[i], comm, me, n, run->mode) != 0;
  return problems;
}

/* Many all-reduces in a row on the same ncclMemAlloc buffers (mappings cached, boards reused
 * with alternating parity), each checked, mixing sizes so consecutive calls take different paths. */
static int repeat_body(ncclComm_t comm, int me, int n, void* arg) {
  (void)arg;
  const size_t counts[] = {2, 200, 3000, 70001, 5, 1100000, 16, 4096};
  size_t maxc = 1100000;
  float *in, *out;
  if (ncclMemAlloc((void**)&in, maxc * 4) != ncclSuccess ||
      ncclMemAlloc((void**)&out, maxc * 4) != ncclSuccess)
    return 1;
  int bad = 0;
  for (int it = 0; it < 40 && !bad; it++) {
    size_t cnt = counts[it % 8];
    for (size_t j = 0; j < cnt; j++) in[j] = (float)((me + 1) * (int)((j + (size_t)it) % 5));
    ncclResult_t res = ncclAllReduce(in, out, cnt, ncclFloat32, ncclSum, comm, NULL);
    if (res != ncclSuccess) {
      fprintf(stderr, "FAILED repeat %d count %zu: %s\n", it, cnt, ncclGetErrorString(res));
      bad = 1;
      break;
    }
    float ranks = (float)(n * (n + 1) / 2);
    for (size_t j = 0; j < cnt && !bad; j++)
      if (out[j] != ranks * (float)((j + (size_t)it) % 5)) {
        fprintf(stderr, "FAILED repeat %d count %zu rank %d: element %zu got %g want %g\n", it, cnt, me, j,
                out[j], ranks * (float)((j + (size_t)it) % 5));
        bad = 1;
      }
  }
  ncclMemFree(in);
  ncclMemFree(out);
  return bad;
}

/* All-reduce x every datatype x op at counts around the paths' limits; other collectives at
 * a few counts (their results must not change either). */
static void direct_cases(struct case_list* l, int n, uint64_t seed, int big) {
  static const size_t counts[] = {1, 7, 129, 255, 257, 1023, 1025, 4095, 4097, 16385, 70001};
  int k = 0;
  for (int dt = 0; dt < ncclNumTypes; dt++)
    for (int op = 0; op < O_COUNT; op++, k++) {
      uint64_t s = mix64(seed + (uint64_t)k);
      size_t count = counts[(size_t)k % (sizeof(counts) / sizeof(counts[0]))];
      case_add(l, (struct coll_case){C_ALLREDUCE, dt, op, k & 1, 0, count, s});
      case_add(l, (struct coll_case){C_ALLREDUCE, dt, op, !(k & 1), 0, count + 2, mix64(s)});
    }
  for (int coll = 0; coll < C_COUNT; coll++) {
    if (coll == C_ALLREDUCE) continue;
    uint64_t s = mix64(seed ^ (uint64_t)coll);
    case_add(l, (struct coll_case){coll, ncclFloat32, coll_has_op(coll) ? O_SUM : O_NONE, 0,
                                   (int)(s % (uint64_t)n), 3001, s});
  }
  if (big) { /* past the streaming-store limit: 4 MiB and more, odd counts */
    case_add(l,
             (struct coll_case){C_ALLREDUCE, ncclFloat32, O_SUM, 0, 0, (4u << 20) / 4 + 37, mix64(seed + 1)});
    case_add(l, (struct coll_case){C_ALLREDUCE, ncclInt8, O_MAX, 1, 0, (5u << 20) + 3, mix64(seed + 2)});
    case_add(l, (struct coll_case){C_ALLREDUCE, ncclFloat64, O_AVG, 1, 0, 700001, mix64(seed + 3)});
  }
}

static void run(const char* what, int n, int threads, int mode, int big) {
  struct direct_run r = {.mode = mode};
  direct_cases(&r.l, n, coll_base_seed + (uint64_t)n * 31 + (uint64_t)mode, big);
  int failed = threads ? run_threads(n, body, &r) : run_procs(n, body, &r, 300);
  printf("%d ranks (%s), %s: %d cases, %d failed ranks\n", n, threads ? "threads" : "processes", what, r.l.n,
         failed);
  fflush(stdout);
  EXPECT_MSG(failed == 0, "%d ranks as %s, %s (base seed 0x%llx)", n, threads ? "threads" : "processes", what,
             (unsigned long long)coll_base_seed);
  free(r.l.v);
}

int main(void) {
  alarm(900);
  coll_base_seed = pick_seed();
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  run("ncclMemAlloc buffers", 2, 0, SHARED_ALL, 1);
  run("ncclMemAlloc buffers", 3, 0, SHARED_ALL, 0);
  run("ncclMemAlloc buffers", 4, 0, SHARED_ALL, 1);
  run("rank 0 on malloc, the others on ncclMemAlloc", 3, 0, SHARED_BUT_RANK0, 0);
  run("malloc buffers", 2, 0, SHARED_NONE, 0);
  run("ncclMemAlloc buffers", 2, 1, SHARED_ALL, 1);
  run("malloc buffers", 3, 1, SHARED_NONE, 0);
  EXPECT_MSG(run_procs(2, repeat_body, NULL, 300) == 0, "40 all-reduces in a row, 2 processes");
  EXPECT_MSG(run_procs(3, repeat_body, NULL, 300) == 0, "40 all-reduces in a row, 3 processes");
  EXPECT_MSG(run_threads(4, repeat_body, NULL) == 0, "40 all-reduces in a row, 4 threads");
  return test_finish("test_coll_direct");
}
