/* The nccl*Config collectives on the CUDA backend: every variant's results with a protocol and
 * channel selection (or, for those made of sends and receives, bounds alone); Tree forced on an
 * all-reduce run, and on a broadcast (which Tree cannot run) refused, yet accepted with
 * forceAlgSelection 0; and
 * launchCompletionEvent recorded right after the launch: not complete while the kernel waits
 * for a peer that has not called yet, recorded (it has a time) once the call ran. 2 ranks as
 * threads sharing the GPU. SKIP without a GPU. */
#include "gpu_util.h"

#define N 3001 /* elements per rank and slice */

static float value(int rank, size_t j) { return (float)(rank * 1000 + (int)(j % 97)); }

/* Expected element i of rank me's output for collective coll (roots: Broadcast and Gather 1,
 * Reduce and Scatter 0); returns 0 where the output is undefined. */
static int want(int coll, int me, int k, size_t i, float* w) {
  float sum = 0;
  switch (coll) {
    case C_REDUCE:
      if (me != 0) return 0;
      /* fall through */
    case C_ALLREDUCE:
      for (int r = 0; r < k; r++) sum += value(r, i);
      *w = sum;
      return 1;
    case C_BROADCAST:
      *w = value(1, i);
      return 1;
    case C_ALLGATHER:
      *w = value((int)(i / N), i % N);
      return 1;
    case C_REDUCESCATTER:
      for (int r = 0; r < k; r++) sum += value(r, (size_t)me * N + i);
      *w = sum;
      return 1;
    case C_ALLTOALL:
      *w = value((int)(i / N), (size_t)me * N + i % N);
      return 1;
    case C_GATHER:
      if (me != 1) return 0;
      *w = value((int)(i / N), i % N);
      return 1;
    case C_SCATTER:
      *w = value(0, (size_t)me * N + i);
      return 1;
  }
  return 0;
}

static size_t out_count(int coll, int k) {
  return coll == C_ALLGATHER || coll == C_ALLTOALL || coll == C_GATHER ? (size_t)N * k : N;
}

static ncclResult_t call(int coll, const float* in, float* out, ncclComm_t comm, cudaStream_t st,
                         const ncclCollConfig_t* cfg) {
  switch (coll) {
    case C_ALLREDUCE:
      return ncclAllReduceConfig(in, out, N, ncclFloat32, ncclSum, comm, st, cfg);
    case C_BROADCAST:
      return ncclBroadcastConfig(in, out, N, ncclFloat32, 1, comm, st, cfg);
    case C_REDUCE:
      return ncclReduceConfig(in, out, N, ncclFloat32, ncclSum, 0, comm, st, cfg);
    case C_ALLGATHER:
      return ncclAllGatherConfig(in, out, N, ncclFloat32, comm, st, cfg);
    case C_REDUCESCATTER:
      return ncclReduceScatterConfig(in, out, N, ncclFloat32, ncclSum, comm, st, cfg);
    case C_ALLTOALL:
      return ncclAlltoAllConfig(in, out, N, ncclFloat32, comm, st, cfg);
    case C_GATHER:
      return ncclGatherConfig(in, out, N, ncclFloat32, 1, comm, st, cfg);
    case C_SCATTER:
      return ncclScatterConfig(in, out, N, ncclFloat32, 0, comm, st, cfg);
  }
  return ncclInternalError;
}

struct bufs {
  float *d_in, *d_out, *h;
  cudaStream_t st;
};

static int run_one(int coll, ncclComm_t comm, int me, int k, struct bufs* b, const ncclCollConfig_t* cfg,
                   const char* what) {
  GPU_CHECK(cudaMemsetAsync(b->d_out, 0, (size_t)N * k * sizeof(float), b->st));
  ncclResult_t r = call(coll, b->d_in, b->d_out, comm, b->st, cfg);
  if (r != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d %sConfig (%s): %s: %s\n", me, coll_names[coll], what,
            ncclGetErrorString(r), ncclGetLastError(comm));
    return 1;
  }
  GPU_CHECK(
      cudaMemcpyAsync(b->h, b->d_out, out_count(coll, k) * sizeof(float), cudaMemcpyDeviceToHost, b->st));
  GPU_CHECK(cudaStreamSynchronize(b->st));
  for (size_t i = 0; i < out_count(coll, k); i++) {
    float w;
    if (want(coll, me, k, i, &w) && b->h[i] != w) {
      fprintf(stderr, "FAILED rank %d %sConfig (%s): element %zu is %g, want %g\n", me, coll_names[coll],
              what, i, b->h[i], w);
      return 1;
    }
  }
  return 0;
}

static ncclCollConfig_t cfg_of(const char* sel, int min_ctas, int max_ctas) {
  ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
  c.algSelection = sel;
  if (min_ctas) c.minCTAs = min_ctas;
  if (max_ctas) c.maxCTAs = max_ctas;
  c.userProfilerTag = 42;
  return c;
}

static volatile int rank0_checked;

/* Once the call ran, its event was recorded after the one recorded before the call. */
static int check_event_time(ncclComm_t comm, int me, struct bufs* b) {
  cudaEvent_t start, done;
  GPU_CHECK(cudaEventCreate(&start));
  GPU_CHECK(cudaEventCreate(&done));
  ncclCollConfig_t c = cfg_of(NULL, 0, 0);
  c.launchCompletionEvent = done;
  GPU_CHECK(cudaEventRecord(start, b->st));
  int bad = run_one(C_ALLREDUCE, comm, me, 2, b, &c, "completion event"); /* synchronizes the stream */
  float ms = -1;
  cudaError_t e = cudaEventElapsedTime(&ms, start, done); /* fails for an event never recorded */
  EXPECT_MSG(e == cudaSuccess && ms >= 0, "rank %d: elapsed time to launchCompletionEvent: %s, %g ms", me,
             cudaGetErrorString(e), ms);
  (void)cudaGetLastError();
  GPU_CHECK(cudaEventDestroy(start));
  GPU_CHECK(cudaEventDestroy(done));
  return bad;
}

/* The event must come after the kernel in the stream: while the kernel waits for rank 1, which
 * calls only once rank 0 has looked, the event is not complete. The ranks first agree on the
 * call's selection (a call that changes it waits on the host for every rank to reach it), so the
 * call with the event returns as soon as its kernel is queued. */
static int check_event_order(ncclComm_t comm, int me, struct bufs* b) {
  cudaEvent_t done;
  GPU_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  ncclCollConfig_t c = cfg_of("Simple", 0, 0);
  int bad = run_one(C_ALLREDUCE, comm, me, 2, b, &c, "Simple, before the completion event");
  c.launchCompletionEvent = done;
  if (me == 1)
    while (!__atomic_load_n(&rank0_checked, __ATOMIC_ACQUIRE)) usleep(1000);
  ncclResult_t r = ncclAllReduceConfig(b->d_in, b->d_out, N, ncclFloat32, ncclSum, comm, b->st, &c);
  EXPECT(r == ncclSuccess);
  if (me == 0) {
    cudaError_t q = cudaEventQuery(done);
    EXPECT_MSG(q == cudaErrorNotReady, "completion event %s while the kernel waits for rank 1",
               cudaGetErrorString(q));
    (void)cudaGetLastError();
    __atomic_store_n(&rank0_checked, 1, __ATOMIC_RELEASE);
  }
  GPU_CHECK(cudaStreamSynchronize(b->st));
  EXPECT(cudaEventQuery(done) == cudaSuccess);
  GPU_CHECK(cudaEventDestroy(done));
  return bad;
}

static int body(ncclComm_t comm, int me, int k, void* arg) {
  (void)arg;
  struct bufs b;
  GPU_CHECK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
  size_t bytes = (size_t)N * k * sizeof(float);
  b.h = malloc(bytes);
  for (size_t j = 0; j < (size_t)N * k; j++) b.h[j] = value(me, j);
  GPU_CHECK(cudaMalloc((void**)&b.d_in, bytes));
  GPU_CHECK(cudaMalloc((void**)&b.d_out, bytes));
  GPU_CHECK(cudaMemcpy(b.d_in, b.h, bytes, cudaMemcpyHostToDevice));
  int bad = 0;
  ncclCollConfig_t simple1 = cfg_of("Ring,Simple", 0, 1), ll2 = cfg_of("LL", 2, 2),
                   bounds = cfg_of(NULL, 1, 1);
  for (int coll = C_ALLREDUCE; coll <= C_SCATTER; coll++) {
    int p2p = coll == C_ALLTOALL || coll == C_GATHER || coll == C_SCATTER;
    bad +=
        run_one(coll, comm, me, k, &b, p2p ? &bounds : &simple1, p2p ? "maxCTAs 1" : "Ring,Simple maxCTAs 1");
    bad += run_one(coll, comm, me, k, &b, p2p ? NULL : &ll2, p2p ? "NULL" : "LL 2 channels");
  }
  /* Tree runs all-reduce only: forced, an all-reduce runs it and a broadcast is refused; a
   * broadcast that does not force it runs Ring. */
  ncclCollConfig_t tree = cfg_of("Tree", 0, 0);
  bad += run_one(C_ALLREDUCE, comm, me, k, &b, &tree, "Tree, forced");
  if (me == 0) {
    ncclResult_t r = ncclBroadcastConfig(b.d_in, b.d_out, 0, ncclFloat32, 0, comm, b.st, &tree);
    EXPECT_MSG(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "cannot be met"), "%s: %s",
               ncclGetErrorString(r), ncclGetLastError(comm));
  }
  tree.forceAlgSelection = 0;
  bad += run_one(C_BROADCAST, comm, me, k, &b, &tree, "Tree, forceAlgSelection 0");
  bad += check_event_order(comm, me, &b);
  bad += check_event_time(comm, me, &b);
  cudaFree(b.d_in);
  cudaFree(b.d_out);
  cudaStreamDestroy(b.st);
  free(b.h);
  return bad;
}

int main(void) {
  gpu_require();
  setenv("NCCL_MAX_NCHANNELS", "2", 0);
  setenv("WEFT_TIMEOUT", "60", 0);
  int failed = run_threads(2, body, NULL);
  failed += test_failures;
  printf("%s\n",
         failed ? "FAILED" : "nccl*Config on the CUDA backend: results, selections and completion events ok");
  return failed ? 1 : 0;
}
