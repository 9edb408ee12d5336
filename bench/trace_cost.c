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
#include "side_by_side.h"

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

static void* rank_main(void* p) {
  struct rank_arg* a = p;
  struct set* s = a->s;
  float buf[8] = {0};
  for (int b = 0; b < BLOCKS; b++)
    for (int on = 0; on < 2; on++) {
      ncclComm_t comm = on ? s->on[a->rank] : s->off[a->rank];
      pthread_barrier_wait(&s->bar);
      double t0 = bench_now();
      for (int i = 0; i < ITERS; i++) ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, comm, NULL);
      if (a->rank == 0) s->us[on][b] = (bench_now() - t0) / ITERS * 1e6;
    }
  return NULL;
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
  struct rank_arg args[2] = {{&s, 0}, {&s, 1}};
  bench_run_ranks(nranks, rank_main, args, sizeof(args[0]));
  double r = bench_median_ratio(s.us[0], s.us[1], BLOCKS);
  double off = bench_median(s.us[0], BLOCKS), on = bench_median(s.us[1], BLOCKS);
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
