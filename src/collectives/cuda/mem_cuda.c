/* ncclMemAlloc / ncclMemFree on the CUDA backend: device memory of the current device from
 * cudaMalloc (which CUDA IPC can share), recorded so that ncclMemFree knows its own. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/cuda/engine_cuda.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"

#if WEFT_CUDA
#include "util/cuda_check.h"

struct dev_alloc {
  void* ptr;
  size_t size;
  struct dev_alloc* next;
};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct dev_alloc* allocs;

int weft_cuda_mem_wanted(void) { return weft_cuda_selected(); }

ncclResult_t weft_cuda_mem_alloc(void** ptr, size_t size) {
  struct dev_alloc* a = calloc(1, sizeof(*a));
  if (a == NULL) return ncclSystemError;
  cudaError_t err = cudaMalloc(&a->ptr, size);
  if (err != cudaSuccess) {
    int dev = -1;
    cudaGetDevice(&dev);
    WEFT_WARN("ncclMemAlloc: cudaMalloc of %zu bytes on device %d failed: %s", size, dev,
              cudaGetErrorString(err));
    cudaGetLastError();
    free(a);
    return ncclUnhandledCudaError;
  }
  a->size = size;
  pthread_mutex_lock(&lock);
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&lock);
  *ptr = a->ptr;
  WEFT_INFO(WEFT_ALLOC, "ncclMemAlloc: %p size %zu (device memory)", a->ptr, size);
  return ncclSuccess;
}

int weft_cuda_mem_owns(const void* ptr) {
  int found = 0;
  pthread_mutex_lock(&lock);
  for (struct dev_alloc* a = allocs; a && !found; a = a->next) found = a->ptr == ptr;
  pthread_mutex_unlock(&lock);
  return found;
}

ncclResult_t weft_cuda_mem_free(void* ptr) {
  pthread_mutex_lock(&lock);
  struct dev_alloc** at = &allocs;
  while (*at && (*at)->ptr != ptr) at = &(*at)->next;
  struct dev_alloc* a = *at;
  if (a) *at = a->next;
  pthread_mutex_unlock(&lock);
  if (a == NULL) {
    WEFT_WARN("ncclMemFree: %p is not device memory from ncclMemAlloc", ptr);
    return ncclInvalidArgument;
  }
  free(a);
  WEFT_CUDACHECK(cudaFree(ptr));
  WEFT_INFO(WEFT_ALLOC, "ncclMemFree: %p (device memory)", ptr);
  return ncclSuccess;
}

#else /* no CUDA backend in this build */

int weft_cuda_mem_wanted(void) { return 0; }
ncclResult_t weft_cuda_mem_alloc(void** ptr, size_t size) {
  (void)ptr, (void)size;
  return ncclInvalidUsage;
}
int weft_cuda_mem_owns(const void* ptr) {
  (void)ptr;
  return 0;
}
ncclResult_t weft_cuda_mem_free(void* ptr) {
  (void)ptr;
  return ncclInvalidUsage;
}

#endif
