/* Every collective x datatype x op with ranks as separate processes (forked after
 * ncclGetUniqueId), for 1, 2, 3, 4, 5 and 8 ranks; counts 0, 1, 7 and random; in place and
 * out of place. Arguments: rank counts to run instead; COLL_SEED=<seed> repeats a run. */
#include "check.h"
#include "coll_util.h"

int main(int argc, char** argv) {
  static const int all[] = {1, 2, 3, 4, 5, 8};
  int counts[16], ncounts = 0;
  for (int i = 1; i < argc && ncounts < 16; i++) counts[ncounts++] = atoi(argv[i]);
  if (ncounts == 0) {
    for (int i = 0; i < 6; i++) counts[ncounts++] = all[i];
  }
  coll_base_seed = pick_seed();
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  for (int i = 0; i < ncounts; i++) {
    int n = counts[i];
    struct case_list l = {0};
    cases_matrix(&l, n, coll_base_seed + (uint64_t)n, 30000);
    cases_edges(&l, n, coll_base_seed + (uint64_t)n);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failed = run_procs(n, run_case_list, &l, 300);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d ranks (processes): %d cases, %d failed ranks, %.1f s\n", n, l.n, failed,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    fflush(stdout);
    EXPECT_MSG(failed == 0, "%d ranks as processes: %d ranks failed (base seed 0x%llx)", n, failed,
               (unsigned long long)coll_base_seed);
    free(l.v);
  }
  return test_finish("test_coll_procs");
}
