/* The zero-copy all-gather, reduce-scatter, broadcast and reduce of the host backend: on
 * ncclMemAlloc buffers (and on any buffers of thread ranks) they give the results of the
 * reference, 1 to 5 ranks as threads and as processes, in place and out of place, every root,
 * counts that the ranks do not divide, several datatypes and ops, small calls and calls past the
 * streaming-store limit (4 MiB), mixed with all-reduces on the board exchange so consecutive
 * calls take different paths. Ranks whose calls differ (count, root, collective) get
 * ncclInvalidUsage on every rank, with the call checks on and off (WEFT_CHECK_CALLS=0: the size
 * check alone keeps peers' buffers safe), and the bytes after each rank's own buffers stay
 * untouched. */
#include "check.h"
#include "direct_util.h"

static const int direct_colls[] = {C_ALLGATHER, C_REDUCESCATTER, C_BROADCAST, C_REDUCE};
#define NCOLLS 4

static int body(ncclComm_t comm, int me, int n, void* arg) {
  const struct direct_run* run = arg;
  int problems = 0;
  for (int i = 0; i < run->l.n; i++) problems += run_shared_case(&run->l.v[i], comm, me, n, run->mode) != 0;
  return problems;
}

/* Each collective x layout x count, the datatype and op (and root) moving on from case to case;
 * every fourth case is followed by a tiny all-reduce (the board exchange, no descriptors). */
static void colls_cases(struct case_list* l, int n, uint64_t seed, int big) {
  static const size_t counts[] = {1, 5, 1001, 4097, 70001};
  static const int dts[] = {ncclFloat32,  ncclInt8,   ncclFloat16, ncclInt64,
                            ncclBfloat16, ncclUint32, ncclFloat64};
  int k = 0;
  for (int i = 0; i < NCOLLS; i++)
    for (int in_place = 0; in_place < 2; in_place++)
      for (size_t j = 0; j < sizeof(counts) / sizeof(counts[0]); j++, k++) {
        int coll = direct_colls[i], dt = dts[(size_t)k % (sizeof(dts) / sizeof(dts[0]))];
        uint64_t s = mix64(seed + (uint64_t)k);
        int op = coll_has_op(coll) ? k % O_COUNT : O_NONE;
        case_add(l, (struct coll_case){coll, dt, op, in_place, k % n, counts[j], s});
        if (k % 4 == 3) case_add(l, (struct coll_case){C_ALLREDUCE, ncclInt32, O_SUM, 0, 0, 3, mix64(s)});
      }
  if (!big) return;
  for (int i = 0; i < NCOLLS; i++) { /* the largest buffer past 4 MiB, odd counts */
    int coll = direct_colls[i];
    size_t count = coll == C_ALLGATHER || coll == C_REDUCESCATTER ? (5u << 20) / 4 / (size_t)n + 3 : 1100007;
    case_add(l, (struct coll_case){coll, ncclFloat32, coll_has_op(coll) ? O_SUM : O_NONE, i & 1, n - 1, count,
                                   mix64(seed ^ (uint64_t)(i + 77))});
  }
}

static void run(int n, int threads, int mode, int big) {
  struct direct_run r = {.mode = mode};
  colls_cases(&r.l, n, coll_base_seed + (uint64_t)n * 17 + (uint64_t)threads, big);
  int failed = threads ? run_threads(n, body, &r) : run_procs(n, body, &r, 300);
  printf("%d ranks (%s), %s: %d cases, %d failed ranks\n", n, threads ? "threads" : "processes",
         mode == SHARED_ALL ? "ncclMemAlloc" : "rank 0 on malloc", r.l.n, failed);
  fflush(stdout);
  EXPECT_MSG(failed == 0, "%d ranks as %s (base seed 0x%llx)", n, threads ? "threads" : "processes",
             (unsigned long long)coll_base_seed);
  free(r.l.v);
}

/* ---- mismatched calls on shared buffers ---- */

struct mismatch {
  const char* name;
  int coll, odd_coll;
  size_t count, odd_count;
  int root, odd_root; /* the last rank makes the odd call */
};

static const struct mismatch mismatches[] = {
    {"allgather count", C_ALLGATHER, C_ALLGATHER, 300000, 200000, 0, 0},
    {"reducescatter count", C_REDUCESCATTER, C_REDUCESCATTER, 70001, 70000, 0, 0},
    {"broadcast count", C_BROADCAST, C_BROADCAST, 100000, 50000, 0, 0},
    {"broadcast root", C_BROADCAST, C_BROADCAST, 100000, 100000, 0, 1},
    {"reduce count", C_REDUCE, C_REDUCE, 100000, 100001, 1, 1},
    {"reduce root", C_REDUCE, C_REDUCE, 100000, 100000, 0, -1}, /* -1: the last rank */
    {"allgather/reducescatter", C_ALLGATHER, C_REDUCESCATTER, 40000, 40000, 0, 0},
};
#define NMISMATCHES (int)(sizeof(mismatches) / sizeof(mismatches[0]))
#define GUARD 4096

static int mismatch_body(ncclComm_t comm, int rank, int n, void* arg) {
  const struct mismatch* m = arg;
  int odd = rank == n - 1, bad = 0;
  struct coll_case c = {odd ? m->odd_coll : m->coll,   ncclInt32, O_NONE, 0, 0,
                        odd ? m->odd_count : m->count, 1};
  c.root = odd ? (m->odd_root < 0 ? n - 1 : m->odd_root) : m->root;
  if (coll_has_op(c.coll)) c.op = O_SUM;
  size_t sb = in_elems(&c, n) * 4, rb = out_elems(&c, n) * 4;
  char *s = NULL, *r = NULL;
  if (ncclMemAlloc((void**)&s, sb + GUARD) != ncclSuccess ||
      ncclMemAlloc((void**)&r, rb + GUARD) != ncclSuccess)
    return 1;
  memset(s, 1, sb + GUARD);
  memset(r, POISON, rb + GUARD);
  ncclResult_t res = case_call(&c, comm, rank, n, s, r, ncclSum);
  WANT(res == ncclInvalidUsage, "\"%s\" (%d ranks, rank %d): %s returned %s, want invalid usage", m->name, n,
       rank, coll_names[c.coll], ncclGetErrorString(res));
  int one = 1;
  ncclResult_t next = ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL);
  WANT(next == ncclInvalidUsage, "\"%s\" (%d ranks, rank %d): the call after it returned %s", m->name, n,
       rank, ncclGetErrorString(next));
  for (size_t i = 0; i < GUARD; i++)
    if (s[sb + i] != 1 || (unsigned char)r[rb + i] != POISON) {
      fprintf(stderr, "FAILED \"%s\" rank %d: byte %zu after its buffers was written\n", m->name, rank, i);
      bad = 1;
      break;
    }
  ncclMemFree(s);
  ncclMemFree(r);
  return bad;
}

static void mismatch_cases(void) {
  setenv("WEFT_TIMEOUT", "10", 1); /* a missed mismatch fails in seconds */
  int failures = 0, total = 0;
  for (int check = 1; check >= 0; check--) {
    setenv("WEFT_CHECK_CALLS", check ? "1" : "0", 1);
    for (int threads = 0; threads < 2; threads++)
      for (int n = 2; n <= 4; n++)
        for (int i = 0; i < NMISMATCHES; i++) {
          int f = threads ? run_threads(n, mismatch_body, (void*)&mismatches[i])
                          : run_procs(n, mismatch_body, (void*)&mismatches[i], 60);
          if (f)
            printf("FAIL %s, %d %s, WEFT_CHECK_CALLS=%d\n", mismatches[i].name, n,
                   threads ? "threads" : "processes", check);
          failures += f != 0;
          total++;
        }
  }
  unsetenv("WEFT_CHECK_CALLS");
  unsetenv("WEFT_TIMEOUT");
  printf("mismatched calls on shared buffers: %d of %d cases failed\n", failures, total);
  EXPECT_MSG(failures == 0, "%d mismatch cases", failures);
}

int main(void) {
  alarm(900);
  coll_base_seed = pick_seed();
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  for (int n = 1; n <= 5; n++) run(n, 1, SHARED_ALL, n == 3);
  for (int n = 1; n <= 5; n++) run(n, 0, SHARED_ALL, n == 2 || n == 4);
  run(3, 0, SHARED_BUT_RANK0, 0); /* every rank agrees on the ring */
  mismatch_cases();
  return test_finish("test_coll_direct_colls");
}
