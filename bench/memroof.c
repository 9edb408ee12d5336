/* Memory-bandwidth roof of bench/compare.sh: c[i] = a[i] + b[i] over float32 buffers of -m MiB
 * with one thread per CPU (pinned), median of -r repetitions. Bytes counted: read a and b,
 * write c (3N, write-allocate traffic not counted). Prints "memroof_gbs <GB/s>". The all-reduce
 * roof on n ranks of one host follows: every input read once and every output written once is
 * 2nS bytes, so busbw <= B (n-1)/n^2. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static float *A, *B, *C;
static size_t N;
static int T;
static pthread_barrier_t bar;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void* worker(void* arg) {
  int id = (int)(long)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(id, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  size_t per = N / T, lo = per * id, hi = id == T - 1 ? N : lo + per;
  for (size_t i = lo; i < hi; i++) A[i] = 1, B[i] = 2, C[i] = 0; /* first touch by the user */
  for (;;) {
    pthread_barrier_wait(&bar);
    if (A == NULL) return NULL;
    for (size_t i = lo; i < hi; i++) C[i] = A[i] + B[i];
    pthread_barrier_wait(&bar);
  }
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  int mib = 256, reps = 9, opt;
  while ((opt = getopt(argc, argv, "m:r:")) != -1) {
    if (opt == 'm') mib = atoi(optarg);
    if (opt == 'r') reps = atoi(optarg);
  }
  if (reps < 1 || reps > 99) reps = 9;
  cpu_set_t set;
  sched_getaffinity(0, sizeof(set), &set);
  T = CPU_COUNT(&set);
  N = (size_t)mib << 20 >> 2;
  A = malloc(N * 4), B = malloc(N * 4), C = malloc(N * 4);
  if (!A || !B || !C) return 1;
  pthread_barrier_init(&bar, NULL, (unsigned)T + 1);
  pthread_t th[256];
  for (int i = 0; i < T && i < 256; i++) pthread_create(&th[i], NULL, worker, (void*)(long)i);
  double gbs[99];
  for (int r = 0; r <= reps; r++) {
    double t0 = now();
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    if (r > 0) gbs[r - 1] = 3.0 * (double)N * 4 / (now() - t0) / 1e9; /* r == 0 warms up */
  }
  float* a = A;
  A = NULL;
  pthread_barrier_wait(&bar);
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  qsort(gbs, reps, sizeof(double), cmp);
  printf("# memroof: c=a+b float32, %d MiB buffers, %d threads, median of %d (min %.1f max %.1f)\n", mib, T,
         reps, gbs[0], gbs[reps - 1]);
  printf("memroof_gbs %.2f\n", gbs[reps / 2]);
  free(a), free(B), free(C);
  return 0;
}
