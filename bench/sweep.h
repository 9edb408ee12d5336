/* The measurement loop shared by the peer drivers (MPI in C, Gloo in C++): float32 sum,
 * out-of-place, sizes doubling from -b to -e; an all-reduce unless the driver names another
 * collective's output check (want, out_elems), sizes then counted as nccl-tests counts them.
 * Per size: a short warmup that estimates the time of one call, then T trials of enough calls
 * to fill -t seconds in all; each trial starts at a barrier and its time per call is averaged
 * over ranks. One verification call with the output poisoned checks every element. Prints
 * "bytes best_us median_us wrong" per size (rank 0). A driver defines struct sweep_ops and
 * calls sweep_main. */
#ifndef BENCH_SWEEP_H
#define BENCH_SWEEP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct sweep_ops {
  int rank, nranks;
  void (*allreduce)(const float* in, float* out, size_t count); /* the call being measured */
  void (*barrier)(void);
  double (*sum)(double x); /* all-reduce of one double (sum): timings, error counts */
  double (*max)(double x);
  /* Other collectives (NULL: all-reduce): the call gets the size in elements (nccl-tests' count:
   * all-gather's output, reduce-scatter's input); out_elems of it are checked on this rank, each
   * against want(i). */
  size_t (*out_elems)(const struct sweep_ops* o, size_t count);
  float (*want)(const struct sweep_ops* o, size_t count, size_t i);
};

static double sweep_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int sweep_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static size_t sweep_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

/* Input of rank r at element i: small integers, so every summation order is exact. */
static float sweep_input(int r, size_t i) { return (float)((r + 1) * (int)(i % 7 + 1)); }

/* fixed > 0: every trial makes exactly that many calls instead of filling the target time. */
static size_t sweep_one(const struct sweep_ops* o, float* in, float* out, size_t bytes, double target,
                        int trials, long fixed, double* best, double* median) {
  size_t count = bytes / sizeof(float);
  double warm[8], spent = 0;
  int nw = 0;
  o->barrier();
  while (nw < 8) {
    double t0 = sweep_now();
    o->allreduce(in, out, count);
    warm[nw] = sweep_now() - t0;
    spent += warm[nw++];
    if (o->max(spent) > 0.5) break; /* one slow call must not eat the whole budget */
  }
  qsort(warm, nw, sizeof(double), sweep_cmp);
  double est = o->max(warm[nw / 2]);
  double calls = target / (est > 1e-8 ? est : 1e-8);
  if (calls < 3) calls = 3;
  if (calls > 20000) calls = 20000;
  long per = fixed > 0 ? fixed : (long)ceil(calls / trials);
  double t[16];
  for (int k = 0; k < trials; k++) {
    o->barrier();
    double t0 = sweep_now();
    for (long c = 0; c < per; c++) o->allreduce(in, out, count);
    t[k] = o->sum((sweep_now() - t0) / (double)per) / o->nranks;
  }
  qsort(t, trials, sizeof(double), sweep_cmp);
  *best = t[0];
  *median = t[trials / 2];
  for (size_t i = 0; i < count; i++) out[i] = NAN;
  o->allreduce(in, out, count);
  double wrong = 0, total = (double)o->nranks * (o->nranks + 1) / 2;
  size_t checked = o->out_elems ? o->out_elems(o, count) : count;
  for (size_t i = 0; i < checked; i++)
    if (out[i] != (o->want ? o->want(o, count, i) : (float)(total * (double)(i % 7 + 1)))) wrong++;
  return (size_t)o->sum(wrong);
}

/* Options: -b min bytes, -e max bytes, -f factor, -t seconds per size, -T trials, -n calls per
 * trial (instead of -t: bench/compare.sh's steadiness runs). */
static int sweep_main(const struct sweep_ops* o, int argc, char** argv, const char* name) {
  size_t minb = 8, maxb = 256u << 20;
  int factor = 2, trials = 3, opt;
  long fixed = 0;
  double target = 0.1;
  while ((opt = getopt(argc, argv, "b:e:f:t:T:n:")) != -1) {
    if (opt == 'b')
      minb = sweep_size(optarg);
    else if (opt == 'e')
      maxb = sweep_size(optarg);
    else if (opt == 'f')
      factor = atoi(optarg);
    else if (opt == 't')
      target = atof(optarg);
    else if (opt == 'T')
      trials = atoi(optarg);
    else if (opt == 'n')
      fixed = atol(optarg);
    else
      return 1;
  }
  if (minb < 4) minb = 4;
  if (factor < 2) factor = 2;
  if (trials < 1) trials = 1;
  if (trials > 16) trials = 16;
  size_t maxel = maxb / sizeof(float);
  float *in = NULL, *out = NULL;
  if (posix_memalign((void**)&in, 4096, maxel * sizeof(float)) ||
      posix_memalign((void**)&out, 4096, maxel * sizeof(float)))
    return 2;
  for (size_t i = 0; i < maxel; i++) in[i] = sweep_input(o->rank, i), out[i] = 0; /* touched once */
  if (o->rank == 0)
    printf("# %s: %d ranks, float32 sum, out-of-place\n# bytes best_us median_us wrong\n", name, o->nranks);
  size_t wrong_total = 0;
  for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
    double best, median;
    size_t wrong = sweep_one(o, in, out, bytes, target, trials, fixed, &best, &median);
    wrong_total += wrong;
    if (o->rank == 0) printf("%zu %.3f %.3f %zu\n", bytes, best * 1e6, median * 1e6, wrong);
    fflush(stdout);
  }
  free(in);
  free(out);
  return wrong_total ? 3 : 0;
}

#endif
