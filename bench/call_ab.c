/* Per-call cost of two builds of the library side by side in one process: each libnccl.so is
 * dlopen'ed RTLD_LOCAL from its own path (its calls bind to itself), and small all-reduces run on
 * communicators of each, in alternating blocks on the same thread ranks; the figure is the median
 * of each block's B/A ratio against its neighbour (neighbouring blocks see the same load).
 * Cases: one rank (nothing but the per-call path), two thread ranks on the direct path of small
 * sizes, and on the ring (WEFT_DIRECT=0, the path of sizes and comms the direct paths do not take). A build's
 * own perf binaries are the figure for processes; on this noisy machine single launches of those vary
 * by 1.5x, which hides a change of 10-20 %. Build: gcc -O2 -Iinclude bench/call_ab.c -ldl -pthread -o
 * build/call_ab Run:   build/call_ab A/lib/libnccl.so.2 B/lib/libnccl.so.2 [bytes=8] */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "side_by_side.h"

#define ITERS 2000
#define BLOCKS 31

struct lib {
  ncclResult_t (*init_all)(ncclComm_t*, int, const int*);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*destroy)(ncclComm_t);
};

struct set {
  int nranks;
  size_t count; /* floats */
  struct lib* libs[2];
  ncclComm_t comms[2][2]; /* [lib][rank] */
  pthread_barrier_t bar;
  double us[2][BLOCKS]; /* [lib][block]: us per call, rank 0 */
};

struct rank_arg {
  struct set* s;
  int rank;
};

static int load(const char* path, struct lib* l) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  *(void**)&l->init_all = dlsym(h, "ncclCommInitAll");
  *(void**)&l->all_reduce = dlsym(h, "ncclAllReduce");
  *(void**)&l->destroy = dlsym(h, "ncclCommDestroy");
  if (!l->init_all || !l->all_reduce || !l->destroy) {
    fprintf(stderr, "%s: missing NCCL symbols\n", path);
    return 1;
  }
  return 0;
}

static void* rank_main(void* p) {
  struct rank_arg* a = p;
  struct set* s = a->s;
  float* buf = calloc(s->count, sizeof(float));
  for (int b = 0; b < BLOCKS; b++)
    for (int k = 0; k < 2; k++) {
      int which = (b & 1) ? 1 - k : k; /* ABBA: neither build always runs first */
      struct lib* l = s->libs[which];
      ncclComm_t comm = s->comms[which][a->rank];
      pthread_barrier_wait(&s->bar);
      double t0 = bench_now();
      for (int i = 0; i < ITERS; i++) l->all_reduce(buf, buf, s->count, ncclFloat32, ncclSum, comm, NULL);
      if (a->rank == 0) s->us[which][b] = (bench_now() - t0) / ITERS * 1e6;
    }
  free(buf);
  return NULL;
}

static int run_set(struct lib* libs, int nranks, size_t bytes, const char* direct) {
  struct set s;
  setenv("WEFT_DIRECT", direct, 1);
  memset(&s, 0, sizeof(s));
  s.nranks = nranks;
  s.count = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
  for (int k = 0; k < 2; k++) {
    s.libs[k] = &libs[k];
    if (libs[k].init_all(s.comms[k], nranks, NULL) != ncclSuccess) return 1;
  }
  pthread_barrier_init(&s.bar, NULL, (unsigned)nranks);
  struct rank_arg args[2] = {{&s, 0}, {&s, 1}};
  bench_run_ranks(nranks, rank_main, args, sizeof(args[0]));
  double r = bench_median_ratio(s.us[0], s.us[1], BLOCKS);
  double a = bench_median(s.us[0], BLOCKS), b = bench_median(s.us[1], BLOCKS);
  printf("all-reduce %zu B, %d rank%s%s: A %.3f us, B %.3f us (medians of %d blocks of %d calls), B/A %.3f\n",
         s.count * sizeof(float), nranks, nranks > 1 ? "s" : "", direct[0] == '0' ? ", ring" : "", a, b,
         BLOCKS, ITERS, r);
  for (int k = 0; k < 2; k++)
    for (int rk = 0; rk < nranks; rk++) libs[k].destroy(s.comms[k][rk]);
  pthread_barrier_destroy(&s.bar);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s A/libnccl.so.2 B/libnccl.so.2 [bytes]\n", argv[0]);
    return 2;
  }
  size_t bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : 8;
  struct lib libs[2];
  if (load(argv[1], &libs[0]) || load(argv[2], &libs[1])) return 1;
  unsetenv("WEFT_TRACE_DIR");
  return run_set(libs, 1, bytes, "1") | run_set(libs, 2, bytes, "1") | run_set(libs, 2, bytes, "0");
}
