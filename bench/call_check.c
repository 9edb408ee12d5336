/* Cost of the per-call fingerprint check (WEFT_CHECK_CALLS) and of the unaligned-safe reduction
 * loops, each measured side by side in one run:
 *  - small all-reduce and broadcast latency, large all-reduce and all-gather time, on thread ranks, on two
 * sets of communicators of the same ranks, one made with the check on and one with it off, timed in
 * alternating blocks;
 *  - a large float sum through reduce.h's loops at offsets 0 and 1 against a plain typed loop.
 * Build: gcc -O2 -Iinclude -Isrc bench/call_check.c -Lbuild/lib -lnccl -Wl,-rpath,$PWD/build/lib \
 *        -pthread -o build/call_check        Run: build/call_check [nranks] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/reduce.h"
#include "nccl.h"
#include "side_by_side.h"

#define ITERS 2000
#define BLOCKS 7

static int nranks = 2;
static ncclComm_t on[8], off[8];
static pthread_barrier_t bar;
#define NCOLLS 4
#define BIG (1u << 20)                /* floats: 4 MiB all-reduce, all-gather of 4 MiB per rank */
static double lat[NCOLLS][2][BLOCKS]; /* [coll][check off/on][block]: us per call, rank 0 */

static double block(ncclComm_t comm, int coll, float* buf, float* big, float* gathered) {
  int iters = coll < 2 ? ITERS : ITERS / 100;
  pthread_barrier_wait(&bar);
  double t0 = bench_now();
  for (int i = 0; i < iters; i++)
    if (coll == 0)
      ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, comm, NULL);
    else if (coll == 1)
      ncclBroadcast(buf, buf, 8, ncclFloat32, 0, comm, NULL);
    else if (coll == 2)
      ncclAllReduce(big, big, BIG, ncclFloat32, ncclSum, comm, NULL);
    else
      ncclAllGather(big, gathered, BIG, ncclFloat32, comm, NULL);
  return (bench_now() - t0) / iters * 1e6;
}

static void* rank_main(void* arg) {
  int r = (int)(long)arg;
  float buf[8] = {0};
  float* big = calloc(BIG, sizeof(float));
  float* gathered = calloc((size_t)BIG * nranks, sizeof(float));
  for (int b = 0; b < BLOCKS; b++)
    for (int coll = 0; coll < NCOLLS; coll++)
      for (int chk = 0; chk < 2; chk++) {
        double us = block(chk ? on[r] : off[r], coll, buf, big, gathered);
        if (r == 0) lat[coll][chk][b] = us;
      }
  free(big);
  free(gathered);
  return NULL;
}

static void plain_sum(float* d, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}

/* GB/s (3 streams) of a 64 MiB float sum: typed loop, reduce.h aligned, reduce.h at offset 1. */
static void reduce_bench(void) {
  size_t n = 16u << 20;
  char *a = malloc(n * 4 + 64), *b = malloc(n * 4 + 64), *d = malloc(n * 4 + 64);
  memset(a, 0, n * 4 + 64), memset(b, 0, n * 4 + 64), memset(d, 0, n * 4 + 64);
  double t[3][BLOCKS];
  for (int r = 0; r < BLOCKS; r++) {
    double t0 = bench_now();
    plain_sum((float*)(d + 32), (float*)(a + 32), (float*)(b + 32), n);
    double t1 = bench_now();
    weft_red_sum_f32(d + 32, a + 32, b + 32, n);
    double t2 = bench_now();
    weft_red_sum_f32(d + 33, a + 33, b + 33, n);
    double t3 = bench_now();
    t[0][r] = t1 - t0, t[1][r] = t2 - t1, t[2][r] = t3 - t2;
  }
  double g[3];
  for (int k = 0; k < 3; k++) g[k] = 12.0 * (double)n / bench_median(t[k], BLOCKS) / 1e9;
  printf(
      "float sum 64 MiB: typed loop %.2f GB/s, reduce.h aligned %.2f GB/s (ratio %.3f), offset 1 %.2f GB/s "
      "(ratio %.3f)\n",
      g[0], g[1], g[1] / g[0], g[2], g[2] / g[0]);
  free(a), free(b), free(d);
}

int main(int argc, char** argv) {
  if (argc > 1) nranks = atoi(argv[1]);
  if (nranks < 2 || nranks > 8) return 2;
  setenv("WEFT_CHECK_CALLS", "1", 1);
  if (ncclCommInitAll(on, nranks, NULL) != ncclSuccess) return 1;
  setenv("WEFT_CHECK_CALLS", "0", 1);
  if (ncclCommInitAll(off, nranks, NULL) != ncclSuccess) return 1;
  pthread_barrier_init(&bar, NULL, (unsigned)nranks);
  pthread_t th[8];
  for (int r = 0; r < nranks; r++) pthread_create(&th[r], NULL, rank_main, (void*)(long)r);
  for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
  const char* names[NCOLLS] = {"all-reduce 32 B", "broadcast 32 B", "all-reduce 4 MiB",
                               "all-gather 4 MiB/rank"};
  for (int coll = 0; coll < NCOLLS; coll++) {
    double o = bench_median(lat[coll][0], BLOCKS), c = bench_median(lat[coll][1], BLOCKS);
    printf("%s, %d thread ranks: check off %.2f us, on %.2f us, ratio on/off %.3f\n", names[coll], nranks, o,
           c, c / o);
  }
  for (int r = 0; r < nranks; r++) ncclCommDestroy(on[r]), ncclCommDestroy(off[r]);
  reduce_bench();
  return 0;
}
