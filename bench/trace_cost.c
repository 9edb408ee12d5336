/* Per-call cost of the flight recorder: small all-reduces on two sets of communicators of the same
 * thread ranks, one made with the recorder on (WEFT_TRACE_BUFFER=2048) and one with it off
 * (WEFT_TRACE_BUFFER=0), timed in alternating blocks in one run; printed as the ratio on/off.
 * Cases: one rank (nothing but the per-call path), two ranks on the direct path (the default for
 * small sizes), two ranks forced onto the ring (WEFT_DIRECT=0: the waits record channel progress).
 * Build: gcc -O2 -Iinclude bench/trace_cost.c -Lbuild/lib -lnccl -Wl,-rpath,$PWD/build/lib \
 *        -pthread -o build/trace_cost        Run: build/trace_cost */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"

#define ITERS 1000
#define BLOCKS 41

struct set {
  int nranks;
  ncclComm_t on[2], off[2];
  pthread_barrier_t bar;
  double us[2][BLOCKS]; /* [recorder off/on][block]: us per call, rank 0 */
};

struct rank_arg {
  struct set* s;
  int rank;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void* rank_main(void* p) {
  struct rank_arg* a = p;
  struct set* s = a->s;
  float buf[8] = {0};
  for (int b = 0; b < BLOCKS; b++)
    for (int on = 0; on < 2; on++) {
      ncclComm_t comm = on ? s->on[a->rank] : s->off[a->rank];
      pthread_barrier_wait(&s->bar);
      double t0 = now();
      for (int i = 0; i < ITERS; i++) ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, comm, NULL);
      if (a->rank == 0) s->us[on][b] = (now() - t0) / ITERS * 1e6;
    }
  return NULL;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp);
  return v[n / 2];
}

static int run_set(const char* name, int nranks, const char* direct) {
  struct set s;
  memset(&s, 0, sizeof(s));
  s.nranks = nranks;
  setenv("WEFT_DIRECT", direct, 1);
  setenv("WEFT_TRACE_BUFFER", "2048", 1);
  if (ncclCommInitAll(s.on, nranks, NULL) != ncclSuccess) return 1;
  setenv("WEFT_TRACE_BUFFER", "0", 1);
  if (ncclCommInitAll(s.off, nranks, NULL) != ncclSuccess) return 1;
  pthread_barrier_init(&s.bar, NULL, (unsigned)nranks);
  pthread_t th[2];
  struct rank_arg args[2];
  for (int r = 0; r < nranks; r++) {
    args[r] = (struct rank_arg){&s, r};
    pthread_create(&th[r], NULL, rank_main, &args[r]);
  }
  for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
  /* Neighbouring blocks see the same machine load: the median of their ratios is the figure. */
  double ratio[BLOCKS];
  for (int b = 0; b < BLOCKS; b++) ratio[b] = s.us[1][b] / s.us[0][b];
  double r = median(ratio, BLOCKS);
  double off = median(s.us[0], BLOCKS), on = median(s.us[1], BLOCKS);
  printf("all-reduce 32 B, %s: recorder off %.3f us, on %.3f us (medians), ratio on/off %.3f\n", name, off,
         on, r);
  for (int r = 0; r < nranks; r++) ncclCommDestroy(s.on[r]), ncclCommDestroy(s.off[r]);
  pthread_barrier_destroy(&s.bar);
  return 0;
}

int main(void) {
  unsetenv("WEFT_TRACE_DIR"); /* the per-call path only: no dumps, no signal handlers */
  int bad = run_set("1 rank", 1, "1");
  bad |= run_set("2 thread ranks, direct path", 2, "1");
  bad |= run_set("2 thread ranks, ring (WEFT_DIRECT=0)", 2, "0");
  return bad;
}
