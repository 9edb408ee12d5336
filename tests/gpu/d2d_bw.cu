/* Device-to-device copy bandwidth of GPU 0 (cudaMemcpy D2D of 256 MiB, timed with events): the
 * roof device_check.sh puts next to the all-reduce bandwidth. Prints "d2d_copy_GBps <value>",
 * counting the bytes copied once (each is read and written). */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void) {
  const size_t bytes = 256u << 20;
  void *a, *b;
  cudaEvent_t e0, e1;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 1;
  cudaMemset(a, 1, bytes);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; i++) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  const int iters = 20;
  cudaEventRecord(e0);
  for (int i = 0; i < iters; i++) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  double gbps = (double)bytes * iters / (ms * 1e-3) / 1e9;
  printf("d2d_copy_GBps %.1f\n", gbps);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
