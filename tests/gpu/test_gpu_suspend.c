/* ncclCommSuspend / ncclCommResume on the CUDA backend: ranks as threads sharing the GPU and as
 * processes (CUDA IPC connectors). Before the suspend: a checked all-reduce and ring of sends and
 * receives (lazily connected), a group of more tasks than the kernel arguments hold (a work list
 * in device memory), and a captured all-reduce graph. Suspend must count device memory as
 * released, refuse work, and resume must make all of it right again, the graph captured before
 * the suspend included (the device state keeps its address). SKIP without a GPU. */
#include "gpu_util.h"

#define COUNT (64 * 1024)
#define GROUP_TASKS 50 /* more than the works the kernel arguments carry */

struct bufs {
  cudaStream_t st;
  float *d_in, *d_out, *h;
  cudaGraphExec_t graph; /* the all-reduce d_in -> d_out, captured */
};

static float input(int rank, int it, size_t i) { return (float)(rank + 1 + it) + (float)(i % 7); }

/* Rank r sends to r + 1 the input of iteration it; all-reduce of the same inputs. */
static int check_out(int rank, int nranks, int it, int ring, const float* h) {
  int bad = 0;
  for (size_t i = 0; i < COUNT; i++) {
    float want = 0;
    if (ring)
      want = input((rank + nranks - 1) % nranks, it, i);
    else
      for (int r = 0; r < nranks; r++) want += input(r, it, i);
    if (h[i] != want) {
      WANT(0, "%s iteration %d: element %zu is %g, want %g", ring ? "send/recv" : "all-reduce", it, i, h[i],
           want);
      break;
    }
  }
  return bad;
}

static int run_op(ncclComm_t comm, int rank, int nranks, struct bufs* b, int it, int ring, int use_graph) {
  int bad = 0;
  for (size_t i = 0; i < COUNT; i++) b->h[i] = input(rank, it, i);
  GPU_CHECK(cudaMemcpyAsync(b->d_in, b->h, COUNT * sizeof(float), cudaMemcpyHostToDevice, b->st));
  if (use_graph) {
    GPU_CHECK(cudaGraphLaunch(b->graph, b->st));
  } else if (ring) {
    WANT_RES(ncclGroupStart(), ncclSuccess);
    WANT_RES(ncclSend(b->d_in, COUNT, ncclFloat32, (rank + 1) % nranks, comm, b->st), ncclSuccess);
    WANT_RES(ncclRecv(b->d_out, COUNT, ncclFloat32, (rank + nranks - 1) % nranks, comm, b->st), ncclSuccess);
    WANT_RES(ncclGroupEnd(), ncclSuccess);
  } else {
    WANT_RES(ncclAllReduce(b->d_in, b->d_out, COUNT, ncclFloat32, ncclSum, comm, b->st), ncclSuccess);
  }
  GPU_CHECK(cudaMemcpyAsync(b->h, b->d_out, COUNT * sizeof(float), cudaMemcpyDeviceToHost, b->st));
  GPU_CHECK(cudaStreamSynchronize(b->st));
  return bad + check_out(rank, nranks, it, ring, b->h);
}

/* GROUP_TASKS small all-reduces in one group: one kernel whose work list is in device memory. */
static int run_group(ncclComm_t comm, int rank, int nranks, struct bufs* b) {
  int bad = 0;
  for (int t = 0; t < GROUP_TASKS; t++) b->h[t] = (float)(rank + t);
  GPU_CHECK(cudaMemcpyAsync(b->d_in, b->h, GROUP_TASKS * sizeof(float), cudaMemcpyHostToDevice, b->st));
  WANT_RES(ncclGroupStart(), ncclSuccess);
  for (int t = 0; t < GROUP_TASKS; t++)
    WANT_RES(ncclAllReduce(b->d_in + t, b->d_out + t, 1, ncclFloat32, ncclSum, comm, b->st), ncclSuccess);
  WANT_RES(ncclGroupEnd(), ncclSuccess);
  GPU_CHECK(cudaMemcpyAsync(b->h, b->d_out, GROUP_TASKS * sizeof(float), cudaMemcpyDeviceToHost, b->st));
  GPU_CHECK(cudaStreamSynchronize(b->st));
  for (int t = 0; t < GROUP_TASKS; t++) {
    float want = (float)(nranks * t + nranks * (nranks - 1) / 2);
    if (b->h[t] != want) {
      WANT(0, "grouped all-reduce %d is %g, want %g", t, b->h[t], want);
      break;
    }
  }
  return bad;
}

static int workload(ncclComm_t comm, int rank, int nranks, struct bufs* b, int it) {
  return run_op(comm, rank, nranks, b, it, 0, 0) + run_op(comm, rank, nranks, b, it, 1, 0) +
         run_op(comm, rank, nranks, b, it + 1, 0, 1) + run_group(comm, rank, nranks, b);
}

static uint64_t stat(ncclComm_t comm, ncclCommMemStat_t which) {
  uint64_t v = ~0ull;
  if (ncclCommMemStats(comm, which, &v) != ncclSuccess) return ~0ull;
  return v;
}

static int capture(ncclComm_t comm, int rank, struct bufs* b) {
  int bad = 0;
  cudaGraph_t g;
  GPU_CHECK(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
  WANT_RES(ncclAllReduce(b->d_in, b->d_out, COUNT, ncclFloat32, ncclSum, comm, b->st), ncclSuccess);
  GPU_CHECK(cudaStreamEndCapture(b->st, &g));
  GPU_CHECK(cudaGraphInstantiate(&b->graph, g, 0));
  cudaGraphDestroy(g);
  return bad;
}

static int body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  int bad = 0;
  struct bufs b;
  GPU_CHECK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
  GPU_CHECK(cudaMalloc((void**)&b.d_in, COUNT * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&b.d_out, COUNT * sizeof(float)));
  b.h = malloc(COUNT * sizeof(float));
  bad += capture(comm, rank, &b);
  bad += workload(comm, rank, nranks, &b, 0);
  uint64_t sus = stat(comm, ncclStatGpuMemSuspend), per = stat(comm, ncclStatGpuMemPersist);
  WANT(sus > 0 && sus != ~0ull, "Suspend %llu: no device buffers to release", (unsigned long long)sus);
  WANT(stat(comm, ncclStatGpuMemTotal) == sus + per, "Total != Suspend + Persist");
  for (int cycle = 1; cycle <= 2; cycle++) {
    WANT_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
    WANT(stat(comm, ncclStatGpuMemSuspended) == 1, "not suspended");
    WANT(stat(comm, ncclStatGpuMemSuspend) == sus, "released %llu, held %llu before",
         (unsigned long long)stat(comm, ncclStatGpuMemSuspend), (unsigned long long)sus);
    WANT(stat(comm, ncclStatGpuMemPersist) == per, "persistent bytes changed");
    WANT_RES(ncclAllReduce(b.d_in, b.d_out, COUNT, ncclFloat32, ncclSum, comm, b.st), ncclInvalidUsage);
    WANT_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
    WANT_RES(ncclCommResume(comm), ncclSuccess);
    WANT(stat(comm, ncclStatGpuMemSuspended) == 0, "still suspended");
    bad += workload(comm, rank, nranks, &b, 10 * cycle);
    /* The same connectors and lists again, the work list re-created by the group. */
    WANT(stat(comm, ncclStatGpuMemSuspend) == sus, "after resume and the same work: %llu, before %llu",
         (unsigned long long)stat(comm, ncclStatGpuMemSuspend), (unsigned long long)sus);
  }
  WANT_RES(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess); /* destroyed suspended */
  cudaGraphExecDestroy(b.graph);
  cudaFree(b.d_in);
  cudaFree(b.d_out);
  cudaStreamDestroy(b.st);
  free(b.h);
  return bad;
}

int main(void) {
  gpu_require();
  int failed = run_threads(2, body, NULL);
  failed += run_procs(2, body, NULL, 240);
  printf("%s\n", failed ? "FAILED" : "suspend releases device buffers; after resume every path is right");
  return failed ? 1 : 0;
}
