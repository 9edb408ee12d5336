/* CUDA graph capture on the CUDA backend: two and three ranks (threads sharing the GPU) capture
 * ncclAllReduce on their streams, then replay the graph with new inputs each time; every replay
 * must produce the sum of that replay's inputs. Then a ring of sends and receives whose
 * connectors are set up lazily, during the capture (thread-local capture mode, where a plain
 * cudaMalloc would end the capture), replayed the same way. Then replays and eager all-reduces on
 * two streams with no synchronization between them, which must not run at once. SKIP without a
 * GPU. */
#include "gpu_util.h"

#define COUNT (1u << 20)
#define REPLAYS 3

/* What a graph captures: an all-reduce, or a ring of sends and receives (rank r sends its input
 * to r+1 and receives r-1's) whose connectors are set up during the capture. */
enum captured { CAPTURE_ALLREDUCE, CAPTURE_RING_SENDRECV };

static ncclResult_t capture(enum captured what, ncclComm_t comm, int rank, int nranks, float* in, float* out,
                            cudaStream_t st) {
  if (what == CAPTURE_ALLREDUCE) return ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, st);
  ncclGroupStart();
  ncclSend(in, COUNT, ncclFloat32, (rank + 1) % nranks, comm, st);
  ncclRecv(out, COUNT, ncclFloat32, (rank + nranks - 1) % nranks, comm, st);
  return ncclGroupEnd();
}

/* Rank r's input in replay it, and what each rank's output must be. */
static float replay_input(enum captured what, int rank, int it, size_t i) {
  return what == CAPTURE_ALLREDUCE ? (float)(rank + 1 + it) + (float)(i % 7)
                                   : (float)(rank * 100 + it) + (float)(i % 5);
}
static float replay_want(enum captured what, int rank, int nranks, int it, size_t i) {
  if (what == CAPTURE_RING_SENDRECV) return replay_input(what, (rank + nranks - 1) % nranks, it, i);
  return (float)(nranks * (nranks + 1) / 2 + nranks * it) + (float)(nranks * (int)(i % 7));
}

static int replay_and_check(enum captured what, cudaGraphExec_t exec, int rank, int nranks, float* d_in,
                            float* d_out, float* h, cudaStream_t st) {
  int bad = 0;
  for (int it = 0; it < REPLAYS; it++) {
    for (size_t i = 0; i < COUNT; i++) h[i] = replay_input(what, rank, it, i);
    GPU_CHECK(cudaMemcpyAsync(d_in, h, COUNT * sizeof(float), cudaMemcpyHostToDevice, st));
    GPU_CHECK(cudaGraphLaunch(exec, st));
    GPU_CHECK(cudaMemcpyAsync(h, d_out, COUNT * sizeof(float), cudaMemcpyDeviceToHost, st));
    GPU_CHECK(cudaStreamSynchronize(st));
    for (size_t i = 0; i < COUNT && bad < 3; i++) {
      float want = replay_want(what, rank, nranks, it, i);
      if (h[i] != want) {
        fprintf(stderr, "FAILED rank %d replay %d: element %zu is %g, want %g\n", rank, it, i, h[i], want);
        bad++;
      }
    }
  }
  return bad;
}

/* Capture (thread-local mode, where a plain cudaMalloc would end the capture), then replay with
 * new inputs each time. */
static int graph_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  enum captured what = *(const enum captured*)arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *d_in, *d_out, *h = malloc(COUNT * sizeof(float));
  GPU_CHECK(cudaMalloc((void**)&d_in, COUNT * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&d_out, COUNT * sizeof(float)));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  ncclResult_t res = capture(what, comm, rank, nranks, d_in, d_out, st);
  cudaError_t cerr = cudaStreamEndCapture(st, &graph);
  if (res != ncclSuccess || cerr != cudaSuccess) {
    fprintf(stderr, "FAILED rank %d: %s under capture: %s, capture %s\n", rank,
            what == CAPTURE_ALLREDUCE ? "ncclAllReduce" : "send/recv", ncclGetErrorString(res),
            cudaGetErrorString(cerr));
    return 1;
  }
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  int bad = replay_and_check(what, exec, rank, nranks, d_in, d_out, h, st);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaStreamDestroy(st);
  free(h);
  return bad;
}

/* One all-reduce captured on st (thread-local mode) as an executable graph. */
static int capture_allreduce(ncclComm_t comm, const float* in, float* out, cudaStream_t st,
                             cudaGraphExec_t* exec) {
  cudaGraph_t graph;
  GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  ncclResult_t res = ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, st);
  GPU_CHECK(cudaStreamEndCapture(st, &graph));
  if (res != ncclSuccess) return 1;
  GPU_CHECK(cudaGraphInstantiate(exec, graph, 0));
  GPU_CHECK(cudaGraphDestroy(graph)); /* the executable graph keeps what it needs */
  return 0;
}

static int check_allreduce(const float* h, int rank, int nranks, int it, const char* what) {
  int bad = 0;
  for (size_t i = 0; i < COUNT && bad < 3; i++) {
    float want = replay_want(CAPTURE_ALLREDUCE, rank, nranks, it, i);
    if (h[i] != want) {
      fprintf(stderr, "FAILED rank %d %s %d: element %zu is %g, want %g\n", rank, what, it, i, h[i], want);
      bad++;
    }
  }
  return bad;
}

static int set_input(float* d_in, float* h, int rank, int it) {
  for (size_t i = 0; i < COUNT; i++) h[i] = replay_input(CAPTURE_ALLREDUCE, rank, it, i);
  GPU_CHECK(cudaMemcpy(d_in, h, COUNT * sizeof(float), cudaMemcpyHostToDevice));
  return 0;
}

/* Replays of a captured all-reduce on one stream and eager all-reduces on another, issued with no
 * synchronization between them (in the same order on every rank; odd rounds replay first): they
 * share the comm's connectors, so the library must run them one after another. */
static int mixed_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  cudaStream_t gs, es;
  GPU_CHECK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
  GPU_CHECK(cudaStreamCreateWithFlags(&es, cudaStreamNonBlocking));
  float *g_in, *g_out, *e_in, *e_out, *h = malloc(COUNT * sizeof(float));
  GPU_CHECK(cudaMalloc((void**)&g_in, COUNT * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&g_out, COUNT * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&e_in, COUNT * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&e_out, COUNT * sizeof(float)));
  cudaGraphExec_t exec;
  if (capture_allreduce(comm, g_in, g_out, gs, &exec)) return 1;
  ncclResult_t res;
  int bad = 0;
  for (int it = 0; it < 2 * REPLAYS && !bad; it++) {
    if (set_input(g_in, h, rank, it) || set_input(e_in, h, rank, it + 50)) return 1;
    if (it % 2) GPU_CHECK(cudaGraphLaunch(exec, gs));
    res = ncclAllReduce(e_in, e_out, COUNT, ncclFloat32, ncclSum, comm, es);
    if (it % 2 == 0) GPU_CHECK(cudaGraphLaunch(exec, gs));
    GPU_CHECK(cudaStreamSynchronize(gs));
    GPU_CHECK(cudaStreamSynchronize(es));
    if (res != ncclSuccess) return 1;
    GPU_CHECK(cudaMemcpy(h, g_out, COUNT * sizeof(float), cudaMemcpyDeviceToHost));
    bad += check_allreduce(h, rank, nranks, it, "replay");
    GPU_CHECK(cudaMemcpy(h, e_out, COUNT * sizeof(float), cudaMemcpyDeviceToHost));
    bad += check_allreduce(h, rank, nranks, it + 50, "eager all-reduce beside replay");
  }
  cudaGraphExecDestroy(exec);
  cudaFree(g_in), cudaFree(g_out), cudaFree(e_in), cudaFree(e_out);
  cudaStreamDestroy(gs), cudaStreamDestroy(es);
  free(h);
  return bad;
}

/* Processes: rank 0 replays a captured all-reduce and destroys its comm at once, while rank 1
 * starts its replay a second later. Rank 0's replay still writes into rank 1's memory through
 * CUDA IPC then, so destroy must wait for it before it closes that memory. */
static int destroy_during_replay_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)nranks, (void)arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* d;
  GPU_CHECK(cudaMalloc((void**)&d, COUNT * sizeof(float)));
  GPU_CHECK(cudaMemset(d, 0, COUNT * sizeof(float)));
  cudaGraphExec_t exec;
  if (capture_allreduce(comm, d, d, st, &exec)) return 1;
  if (rank == 1) sleep(1);
  GPU_CHECK(cudaGraphLaunch(exec, st));
  if (rank == 1) GPU_CHECK(cudaStreamSynchronize(st));
  return 0; /* run_procs destroys the comm now: on rank 0, while its replay still runs */
}

int main(void) {
  gpu_require();
  enum captured allreduce = CAPTURE_ALLREDUCE, ring = CAPTURE_RING_SENDRECV;
  int failed = run_threads(2, graph_body, &allreduce) + run_threads(3, graph_body, &allreduce);
  failed += run_threads(3, graph_body, &ring);
  failed += run_threads(2, mixed_body, NULL) + run_threads(3, mixed_body, NULL);
  failed += run_procs(2, destroy_during_replay_body, NULL, 60);
  printf("%s\n",
         failed ? "FAILED" : "graph-captured all-reduce and lazily connected send/recv replays match");
  return failed ? 1 : 0;
}
