/* Emulated CUDA runtime: the few driver API functions that cudaGetDriverEntryPoint[ByVersion]
 * hands out. There is no libcuda behind the emulator, so these stand in for the driver where Weft
 * needs it: device attributes the runtime does not number, and DMA-BUF handles of device memory for
 * GPUDirect RDMA (a memfd record, emu_dmabuf.h, that only the test verbs provider understands).
 * The driver types are declared here with cuda.h's values: cuda.h itself is not included, the
 * emulator's files build against the runtime headers only. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_dmabuf.h"
#include "rt.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_OPERATING_SYSTEM = 304,
  CUDA_ERROR_NOT_SUPPORTED = 801,
};
enum {
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
};
enum { CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1 };
enum { CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE = 1 };

/* The runtime's cudaDeviceAttr values are the driver's, so only what the runtime leaves unnumbered
 * (124 is cudaDevAttrReserved124 there) is answered here. GPUDirect RDMA support comes from the
 * runtime's properties, so that the runtime and the driver can never disagree about it. */
/* WEFT_EMU_NO_DMABUF=1: a driver or kernel without DMA-BUF export (Linux before 5.12). */
static int dmabuf_exported(void) {
  const char* no = getenv("WEFT_EMU_NO_DMABUF");
  return !(no && no[0] == '1');
}

static CUresult emu_cuDeviceGetAttribute(int* pi, int attrib, CUdevice dev) {
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!rt_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (attrib == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) {
    *pi = dmabuf_exported();
    return CUDA_SUCCESS;
  }
  /* rt_device_attribute, not cudaDeviceGetAttribute: a driver call leaves the runtime's last
   * error alone. */
  cudaError_t err = rt_device_attribute(pi, (enum cudaDeviceAttr)attrib, dev);
  return err == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The driver exports whole pages of one device allocation: [dptr, dptr+size) must be host-page
 * aligned, non-empty and inside a single live cudaMalloc (host memory, pinned or not, and IPC
 * imports are refused). */
static CUresult check_dmabuf_range(CUdeviceptr dptr, size_t size) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (size == 0 || dptr % page != 0 || size % page != 0) return CUDA_ERROR_INVALID_VALUE;
  struct rt_alloc a;
  if (!rt_mem_find((const void*)(uintptr_t)dptr, &a) || a.kind != RT_MEM_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (size > a.base + a.size - dptr) return CUDA_ERROR_INVALID_VALUE; /* runs past the allocation */
  return CUDA_SUCCESS;
}

/* A new descriptor per call, as the driver gives: the caller owns it and closes it. */
static CUresult new_dmabuf_fd(CUdeviceptr dptr, size_t size, int* fd_out) {
  struct weft_emu_dmabuf rec;
  memset(&rec, 0, sizeof(rec));
  memcpy(rec.magic, WEFT_EMU_DMABUF_MAGIC, sizeof(rec.magic));
  rec.dptr = dptr;
  rec.size = size;
  rec.pid = (int32_t)getpid();
  int fd = memfd_create(WEFT_EMU_DMABUF_NAME, MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  if (pwrite(fd, &rec, sizeof(rec), 0) != (ssize_t)sizeof(rec)) {
    close(fd);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  *fd_out = fd;
  return CUDA_SUCCESS;
}

static CUresult emu_cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                  int handle_type, unsigned long long flags) {
  if (!handle || handle_type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_INVALID_VALUE;
  if (!dmabuf_exported()) return CUDA_ERROR_NOT_SUPPORTED;
  /* A mapping through the PCIe BAR is a platform property the emulated GPU does not have. */
  if (flags == CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) return CUDA_ERROR_NOT_SUPPORTED;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult res = check_dmabuf_range(dptr, size);
  if (res != CUDA_SUCCESS) return res;
  return new_dmabuf_fd(dptr, size, (int*)handle);
}

/* since: the CUDA version (1000 * major + 10 * minor) that introduced the symbol's current ABI. */
struct driver_symbol {
  const char* name;
  unsigned since;
  void* fn;
};

static const struct driver_symbol symbols[] = {
    {"cuDeviceGetAttribute", 2000, (void*)emu_cuDeviceGetAttribute},
    {"cuMemGetHandleForAddressRange", 11070, (void*)emu_cuMemGetHandleForAddressRange},
};

void* rt_driver_symbol(const char* symbol, unsigned version, enum cudaDriverEntryPointQueryResult* status) {
  *status = cudaDriverEntryPointSymbolNotFound;
  for (size_t i = 0; symbol && i < sizeof(symbols) / sizeof(symbols[0]); i++) {
    if (strcmp(symbols[i].name, symbol) != 0) continue;
    if (version < symbols[i].since) {
      *status = cudaDriverEntryPointVersionNotSufficent;
      return NULL;
    }
    *status = cudaDriverEntryPointSuccess;
    return symbols[i].fn;
  }
  return NULL;
}

/* ---- GPUDirect RDMA writes ---- */

int rt_gdr_unordered(void) {
  const char* v = getenv("WEFT_EMU_GDR_UNORDERED");
  if (v && strcmp(v, "noflush") == 0) return 2;
  return v && v[0] == '1';
}

/* The emulated NIC (tests/ibemu) stores into device memory with the CPU, so a fence is all a
 * flush can be; what it checks is that callers pass what the runtime takes. */
RT_API cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget target,
                                                      enum cudaFlushGPUDirectRDMAWritesScope scope) {
  if (target != cudaFlushGPUDirectRDMAWritesTargetCurrentDevice ||
      (scope != cudaFlushGPUDirectRDMAWritesToOwner && scope != cudaFlushGPUDirectRDMAWritesToAllDevices))
    return rt_error(cudaErrorInvalidValue);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  return cudaSuccess;
}
