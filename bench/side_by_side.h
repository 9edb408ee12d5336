/* What the side-by-side benchmarks (call_ab.c, call_check.c, trace_cost.c) share: a clock, the
 * median of blocks, the median of neighbouring blocks' ratios, and thread ranks started and
 * joined. Blocks timed one after another see the same machine load, so a ratio of neighbours is
 * the figure on a noisy machine, not a ratio of separate runs. */
#ifndef WEFT_BENCH_SIDE_BY_SIDE_H
#define WEFT_BENCH_SIDE_BY_SIDE_H

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Sorts v. */
static inline double bench_median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(*v), bench_cmp);
  return v[n / 2];
}

/* The median of b[i] / a[i] (n <= 256). */
static inline double bench_median_ratio(const double* a, const double* b, int n) {
  double r[256];
  for (int i = 0; i < n && i < 256; i++) r[i] = b[i] / a[i];
  return bench_median(r, n < 256 ? n : 256);
}

/* Runs fn(args + r * stride) on n threads (n <= 64) and waits for them. */
static inline void bench_run_ranks(int n, void* (*fn)(void*), void* args, size_t stride) {
  pthread_t th[64];
  for (int r = 0; r < n && r < 64; r++) pthread_create(&th[r], NULL, fn, (char*)args + (size_t)r * stride);
  for (int r = 0; r < n && r < 64; r++) pthread_join(th[r], NULL);
}

#endif
