/* WEFT_DETERMINISTIC=1 on the CUDA backend: the cases of tests/integration/deterministic.h with
 * device buffers, rank r on device r % count, each rank on its own stream. SKIP without a GPU. */
#define LARGE 98304 /* 384 KiB of float: Simple, and more than one channel's share */
#include "deterministic.h"
#include "gpu_util.h"

static void* det_alloc(size_t bytes) {
  void* p = NULL;
  GPU_CHECK(cudaMalloc(&p, bytes));
  GPU_CHECK(cudaMemset(p, 0, bytes));
  return p;
}
static void det_put(void* dst, const void* src, size_t bytes) {
  GPU_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void det_get(void* dst, const void* src, size_t bytes) {
  GPU_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
static void det_release(void* p) { GPU_CHECK(cudaFree(p)); }
static cudaStream_t det_rank_stream(int rank) {
  int n = 0;
  GPU_CHECK(cudaGetDeviceCount(&n));
  GPU_CHECK(cudaSetDevice(rank % n));
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  return st;
}
static int det_sync(cudaStream_t stream) { return cudaStreamSynchronize(stream) == cudaSuccess; }
static void det_stream_done(cudaStream_t stream) { GPU_CHECK(cudaStreamDestroy(stream)); }

int main(void) {
  gpu_require();
  return deterministic_main("test_gpu_deterministic");
}
