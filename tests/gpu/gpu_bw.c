/* All-reduce bandwidth on the CUDA backend with ranks as threads sharing the GPU, each on its
 * own non-blocking stream: nccl-tests' algbw and busbw columns for sizes from min to max bytes
 * (float sum, out of place), no checking (test_gpu_coll checks). Used by device_check.sh.
 * Usage: gpu_bw nranks [min_bytes] [max_bytes] [iters] */
#include <time.h>

#include "gpu_util.h"

struct bw_job {
  int nranks, iters;
  size_t min_bytes, max_bytes;
  ncclUniqueId id;
  pthread_barrier_t bar;
  double* times; /* [nranks] seconds per iteration of the current size */
};
struct bw_rank {
  pthread_t th;
  struct bw_job* job;
  int rank, failed;
};

static void* bw_main(void* p) {
  struct bw_rank* r = p;
  struct bw_job* job = r->job;
  ncclComm_t comm;
  cudaStream_t st;
  GPU_CHECK(cudaSetDevice(0));
  ncclResult_t res = ncclCommInitRank(&comm, job->nranks, job->id, r->rank);
  if (res != ncclSuccess) { /* the other ranks would wait at the barriers for ever */
    fprintf(stderr, "FAILED rank %d: ncclCommInitRank: %s\n", r->rank, ncclGetErrorString(res));
    exit(1);
  }
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  void *in, *out;
  GPU_CHECK(cudaMalloc(&in, job->max_bytes));
  GPU_CHECK(cudaMalloc(&out, job->max_bytes));
  /* Stream-ordered, and every rank ready before any launches: a device-wide sync here would wait
   * for a faster rank's kernel, which waits for this rank. */
  GPU_CHECK(cudaMemsetAsync(in, 0, job->max_bytes, st));
  GPU_CHECK(cudaStreamSynchronize(st));
  pthread_barrier_wait(&job->bar);
  for (size_t bytes = job->min_bytes; bytes <= job->max_bytes; bytes *= 4) {
    size_t count = bytes / 4;
    for (int i = 0; i < 3; i++) ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, st);
    GPU_CHECK(cudaStreamSynchronize(st));
    pthread_barrier_wait(&job->bar);
    double t0 = now_s();
    for (int i = 0; i < job->iters; i++)
      if (ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, st) != ncclSuccess) r->failed = 1;
    GPU_CHECK(cudaStreamSynchronize(st));
    job->times[r->rank] = (now_s() - t0) / job->iters;
    pthread_barrier_wait(&job->bar);
    if (r->rank == 0) {
      double t = 0;
      for (int i = 0; i < job->nranks; i++) t = job->times[i] > t ? job->times[i] : t;
      double algbw = (double)bytes / t / 1e9, busbw = algbw * 2.0 * (job->nranks - 1) / job->nranks;
      printf("%12zu %12zu %10.1f %8.2f %8.2f\n", bytes, count, t * 1e6, algbw, busbw);
      fflush(stdout);
    }
    pthread_barrier_wait(&job->bar);
  }
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(st);
  ncclCommDestroy(comm);
  return NULL;
}

int main(int argc, char** argv) {
  gpu_require();
  struct bw_job job = {.nranks = argc > 1 ? atoi(argv[1]) : 2,
                       .min_bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 1024,
                       .max_bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : 256u << 20,
                       .iters = argc > 4 ? atoi(argv[4]) : 20};
  if (job.nranks < 1 || ncclGetUniqueId(&job.id) != ncclSuccess) return 1;
  job.times = calloc(job.nranks, sizeof(double));
  pthread_barrier_init(&job.bar, NULL, job.nranks);
  printf("# all-reduce float sum, %d ranks (threads) sharing GPU 0, %d iterations per size\n", job.nranks,
         job.iters);
  printf("%12s %12s %10s %8s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw");
  struct bw_rank* r = calloc(job.nranks, sizeof(*r));
  for (int i = 0; i < job.nranks; i++) {
    r[i] = (struct bw_rank){.job = &job, .rank = i};
    pthread_create(&r[i].th, NULL, bw_main, &r[i]);
  }
  int failed = 0;
  for (int i = 0; i < job.nranks; i++) {
    pthread_join(r[i].th, NULL);
    failed += r[i].failed;
  }
  return failed ? 1 : 0;
}
