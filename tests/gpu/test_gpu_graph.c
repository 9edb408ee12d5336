/* CUDA graph capture on the CUDA backend: two and three ranks (threads sharing the GPU) capture
 * ncclAllReduce on their streams, then replay the graph with new inputs each time; every replay
 * must produce the sum of that replay's inputs. Then a ring of sends and receives whose
 * connectors are set up lazily, during the capture (thread-local capture mode, where a plain
 * cudaMalloc would end the capture), replayed the same way. SKIP without a GPU. */
#include "gpu_util.h"

#define COUNT (1u << 20)
#define REPLAYS 3

static int graph_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *d_in, *d_out, *h = malloc(COUNT * sizeof(float));
  GPU_CHECK(cudaMalloc((void**)&d_in, COUNT * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&d_out, COUNT * sizeof(float)));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  ncclResult_t res = ncclAllReduce(d_in, d_out, COUNT, ncclFloat32, ncclSum, comm, st);
  GPU_CHECK(cudaStreamEndCapture(st, &graph));
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: ncclAllReduce under capture: %s\n", rank, ncclGetErrorString(res));
    return 1;
  }
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  int bad = 0;
  for (int it = 0; it < REPLAYS; it++) {
    for (size_t i = 0; i < COUNT; i++) h[i] = (float)(rank + 1 + it) + (float)(i % 7);
    GPU_CHECK(cudaMemcpyAsync(d_in, h, COUNT * sizeof(float), cudaMemcpyHostToDevice, st));
    GPU_CHECK(cudaGraphLaunch(exec, st));
    GPU_CHECK(cudaMemcpyAsync(h, d_out, COUNT * sizeof(float), cudaMemcpyDeviceToHost, st));
    GPU_CHECK(cudaStreamSynchronize(st));
    for (size_t i = 0; i < COUNT && bad < 3; i++) {
      float want = (float)(nranks * (nranks + 1) / 2 + nranks * it) + (float)(nranks * (int)(i % 7));
      if (h[i] != want) {
        fprintf(stderr, "FAILED rank %d replay %d: element %zu is %g, want %g\n", rank, it, i, h[i], want);
        bad++;
      }
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaStreamDestroy(st);
  free(h);
  return bad;
}

/* Each replay: rank r sends its input to r+1 and receives r-1's, captured before any send or
 * receive has connected those peers. */
static int graph_p2p_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *d_in, *d_out, *h = malloc(COUNT * sizeof(float));
  GPU_CHECK(cudaMalloc((void**)&d_in, COUNT * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&d_out, COUNT * sizeof(float)));
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks, bad = 0;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  ncclGroupStart();
  ncclSend(d_in, COUNT, ncclFloat32, next, comm, st);
  ncclRecv(d_out, COUNT, ncclFloat32, prev, comm, st);
  ncclResult_t res = ncclGroupEnd();
  cudaError_t cerr = cudaStreamEndCapture(st, &graph);
  if (res != ncclSuccess || cerr != cudaSuccess) {
    fprintf(stderr, "FAILED rank %d: send/recv connected under capture: %s, capture %s\n", rank,
            ncclGetErrorString(res), cudaGetErrorString(cerr));
    return 1;
  }
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int it = 0; it < REPLAYS && !bad; it++) {
    for (size_t i = 0; i < COUNT; i++) h[i] = (float)(rank * 100 + it) + (float)(i % 5);
    GPU_CHECK(cudaMemcpyAsync(d_in, h, COUNT * sizeof(float), cudaMemcpyHostToDevice, st));
    GPU_CHECK(cudaGraphLaunch(exec, st));
    GPU_CHECK(cudaMemcpyAsync(h, d_out, COUNT * sizeof(float), cudaMemcpyDeviceToHost, st));
    GPU_CHECK(cudaStreamSynchronize(st));
    for (size_t i = 0; i < COUNT && !bad; i++)
      if (h[i] != (float)(prev * 100 + it) + (float)(i % 5)) {
        fprintf(stderr, "FAILED rank %d replay %d: element %zu is %g\n", rank, it, i, h[i]);
        bad = 1;
      }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaStreamDestroy(st);
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
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  ncclResult_t res = ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st);
  GPU_CHECK(cudaStreamEndCapture(st, &graph));
  if (res != ncclSuccess) return 1;
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  if (rank == 1) sleep(1);
  GPU_CHECK(cudaGraphLaunch(exec, st));
  if (rank == 1) GPU_CHECK(cudaStreamSynchronize(st));
  return 0; /* run_procs destroys the comm now: on rank 0, while its replay still runs */
}

int main(void) {
  gpu_require();
  int failed = run_threads(2, graph_body, NULL) + run_threads(3, graph_body, NULL);
  failed += run_threads(3, graph_p2p_body, NULL);
  failed += run_procs(2, destroy_during_replay_body, NULL, 60);
  printf("%s\n",
         failed ? "FAILED" : "graph-captured all-reduce and lazily connected send/recv replays match");
  return failed ? 1 : 0;
}
