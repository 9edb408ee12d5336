/* DMA-BUF handles of GPU memory, for networks that register it (GPUDirect RDMA through
 * ibv_reg_dmabuf_mr). The driver API calls are found through the runtime
 * (cudaGetDriverEntryPointByVersion), so the library links against the runtime alone. */
#include <pthread.h>

#include "util/cuda.h"
#include "util/log.h"

#if WEFT_CUDA
#include <cuda_runtime.h>

/* The driver API's types, as cuda.h declares them (the header itself is not needed for two calls). */
typedef int (*get_handle_fn)(void* handle, unsigned long long dptr, size_t size, int type,
                             unsigned long long flags);
typedef int (*device_attr_fn)(int* value, int attribute, int dev);
#define DRIVER_DMA_BUF_FD 1          /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
#define DRIVER_DMA_BUF_SUPPORTED 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
#define DRIVER_API_VERSION 11070     /* the first CUDA with both calls */

static get_handle_fn get_handle;
static device_attr_fn device_attr;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void* entry_point(const char* name) {
  void* fn = NULL;
  enum cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion(name, &fn, DRIVER_API_VERSION, cudaEnableDefault, &status) !=
          cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    WEFT_INFO(WEFT_INIT | WEFT_NET, "CUDA driver has no %s: no DMA-BUF of GPU memory", name);
    return NULL;
  }
  return fn;
}

static void load(void) {
  get_handle = (get_handle_fn)entry_point("cuMemGetHandleForAddressRange");
  device_attr = (device_attr_fn)entry_point("cuDeviceGetAttribute");
}

int weft_cuda_dmabuf_supported(int dev) {
  pthread_once(&once, load);
  int yes = 0;
  return get_handle != NULL && device_attr != NULL && device_attr(&yes, DRIVER_DMA_BUF_SUPPORTED, dev) == 0 &&
         yes;
}

int weft_cuda_dmabuf_fd(void* ptr, size_t size) {
  pthread_once(&once, load);
  int fd = -1;
  if (get_handle == NULL) return -1;
  int rc = get_handle(&fd, (unsigned long long)(uintptr_t)ptr, size, DRIVER_DMA_BUF_FD, 0);
  if (rc != 0) {
    WEFT_INFO(WEFT_NET, "No DMA-BUF for %zu bytes of GPU memory at %p (CUDA driver error %d)", size, ptr, rc);
    return -1;
  }
  return fd;
}

#else
int weft_cuda_dmabuf_supported(int dev) {
  (void)dev;
  return 0;
}
int weft_cuda_dmabuf_fd(void* ptr, size_t size) {
  (void)ptr, (void)size;
  return -1;
}
#endif
