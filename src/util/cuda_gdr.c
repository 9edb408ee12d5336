/* GPUDirect RDMA's CUDA side: DMA-BUF handles of GPU memory, for networks that register it
 * (ibv_reg_dmabuf_mr; the driver API calls are found through the runtime,
 * cudaGetDriverEntryPointByVersion, so the library links against the runtime alone), and whether
 * a NIC's writes reach the GPU's kernels in order or need a flush first. */
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

int weft_cuda_gdr_ordered(int dev) {
  int ordering = 0;
  if (cudaDeviceGetAttribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return ordering >= cudaGPUDirectRDMAWritesOrderingOwner;
}

int weft_cuda_gdr_can_flush(int dev) {
  int options = 0;
  if (cudaDeviceGetAttribute(&options, cudaDevAttrGPUDirectRDMAFlushWritesOptions, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return (options & cudaFlushGPUDirectRDMAWritesOptionHost) != 0;
}

int weft_cuda_gdr_flush(int dev) {
  cudaError_t err = cudaSetDevice(dev);
  if (err == cudaSuccess)
    err = cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                             cudaFlushGPUDirectRDMAWritesToOwner);
  if (err == cudaSuccess) return 0;
  cudaGetLastError();
  WEFT_WARN("Flushing GPUDirect RDMA writes to device %d failed: %s", dev, cudaGetErrorString(err));
  return -1;
}

#else
int weft_cuda_gdr_ordered(int dev) {
  (void)dev;
  return 0;
}
int weft_cuda_gdr_can_flush(int dev) {
  (void)dev;
  return 0;
}
int weft_cuda_gdr_flush(int dev) {
  (void)dev;
  return -1;
}
int weft_cuda_dmabuf_supported(int dev) {
  (void)dev;
  return 0;
}
int weft_cuda_dmabuf_fd(void* ptr, size_t size) {
  (void)ptr, (void)size;
  return -1;
}
#endif
