/* CUDA graph capture of an all-reduce on the CUDA backend: two ranks (threads sharing the GPU)
 * capture ncclAllReduce on their streams, then replay the graph with new inputs each time; every
 * replay must produce the sum of that replay's inputs. SKIP without a GPU. */
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

int main(void) {
  gpu_require();
  int failed = run_threads(2, graph_body, NULL);
  printf("%s\n", failed ? "FAILED" : "graph-captured all-reduce replays match");
  return failed ? 1 : 0;
}
