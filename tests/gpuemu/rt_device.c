/* Emulated CUDA runtime: devices (count, current device per host thread, properties and
 * attributes of an H200-like device, PCI ids, peer access). WEFT_EMU_DEVICES physical devices,
 * of which CUDA_VISIBLE_DEVICES selects and orders what this process numbers 0, 1, ... */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

#define MAX_DEVICES 64
#define PCI_BUS(dev) (0x10 + (dev))

static __thread int current_device = 0;
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char peer_enabled[MAX_DEVICES][MAX_DEVICES]; /* [from][to] */

uint64_t rt_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One entry of CUDA_VISIBLE_DEVICES as a physical index: decimal digits, blanks around them;
 * -1 for anything else (a UUID or MIG name, which the emulated devices do not have). */
static int visible_entry(const char* s, size_t len) {
  while (len && (*s == ' ' || *s == '\t')) s++, len--;
  while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
  if (len == 0 || len > 6) return -1;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* The physical devices this process sees, in its order (phys[ordinal]); read at every call, so
 * that a forked child may set its own. As CUDA does, the list ends at its first invalid entry:
 * not a device index, past the last device, or a device listed already. */
static int visible_devices(int* phys) {
  int total = weft_emu_device_count();
  total = total < 0 ? 0 : total > MAX_DEVICES ? MAX_DEVICES : total;
  const char* list = getenv("CUDA_VISIBLE_DEVICES");
  if (list == NULL) {
    for (int d = 0; d < total; d++) phys[d] = d;
    return total;
  }
  int n = 0;
  for (const char* s = list; n < total;) {
    size_t len = strcspn(s, ",");
    int v = visible_entry(s, len);
    if (v < 0 || v >= total) break;
    for (int i = 0; i < n; i++)
      if (phys[i] == v) v = -1;
    if (v < 0) break;
    phys[n++] = v;
    if (s[len] != ',') break;
    s += len + 1;
  }
  return n;
}

int rt_device_count(void) {
  int phys[MAX_DEVICES];
  return visible_devices(phys);
}

int rt_device_physical(int dev) {
  int phys[MAX_DEVICES];
  return dev >= 0 && dev < visible_devices(phys) ? phys[dev] : -1;
}

int rt_device_from_physical(int p) {
  int phys[MAX_DEVICES], n = visible_devices(phys);
  for (int d = 0; d < n; d++)
    if (phys[d] == p) return d;
  return -1;
}

/* WEFT_EMU_NO_PEER_ACCESS=1: devices that cannot map each other (consumer cards, ACS, VMs). */
int rt_physical_peers(int a, int b) {
  const char* none = getenv("WEFT_EMU_NO_PEER_ACCESS");
  return a == b || !(none && strcmp(none, "1") == 0);
}

int rt_device_valid(int dev) { return dev >= 0 && dev < rt_device_count(); }
int rt_device_current(void) { return current_device; }

RT_API cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return rt_error(cudaErrorInvalidValue);
  *count = rt_device_count();
  return *count ? cudaSuccess : rt_error(cudaErrorNoDevice);
}

RT_API cudaError_t cudaSetDevice(int dev) {
  if (!rt_device_valid(dev)) return rt_error(cudaErrorInvalidDevice);
  current_device = dev;
  return cudaSuccess;
}

RT_API cudaError_t cudaGetDevice(int* dev) {
  if (!dev) return rt_error(cudaErrorInvalidValue);
  *dev = current_device;
  return cudaSuccess;
}

RT_API cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  (void)flags; /* scheduling hints: every wait in the emulator blocks on a condition variable */
  return cudaSuccess;
}

RT_API cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (!flags) return rt_error(cudaErrorInvalidValue);
  *flags = cudaDeviceScheduleAuto | cudaDeviceMapHost;
  return cudaSuccess;
}

static void fill_sizes(struct cudaDeviceProp* p) {
  p->totalGlobalMem = RT_DEVICE_MEM;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 227 * 1024;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->reservedSharedMemPerBlock = 1024;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->memPitch = 2147483647;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
  p->totalConstMem = 65536;
  p->textureAlignment = 512;
  p->texturePitchAlignment = 32;
  p->surfaceAlignment = 512;
  p->memoryBusWidth = 6144;
  p->l2CacheSize = 50 * 1024 * 1024;
  p->persistingL2CacheMaxSize = 30 * 1024 * 1024;
  p->accessPolicyMaxWindowSize = 128 * 1024 * 1024;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxBlocksPerMultiProcessor = 32;
}

/* Hopper's 9.0, or WEFT_EMU_COMPUTE_CAPABILITY="major.minor" (the library's choices by
 * generation, such as GPUDirect RDMA reads before Ampere). */
static void compute_capability(int* major, int* minor) {
  const char* v = getenv("WEFT_EMU_COMPUTE_CAPABILITY");
  *major = 9, *minor = 0;
  if (v != NULL && sscanf(v, "%d.%d", major, minor) < 1) *major = 9;
}

static void fill_features(struct cudaDeviceProp* p) {
  compute_capability(&p->major, &p->minor);
  p->multiProcessorCount = weft_emu_sm_count();
  p->canMapHostMemory = 1;
  p->concurrentKernels = 1;
  p->asyncEngineCount = 2;
  p->unifiedAddressing = 1;
  p->streamPrioritiesSupported = 1;
  p->globalL1CacheSupported = 1;
  p->localL1CacheSupported = 1;
  p->managedMemory = 0; /* no cudaMallocManaged in the emulator */
  p->concurrentManagedAccess = 0;
  p->hostNativeAtomicSupported = 0;
  p->computePreemptionSupported = 1;
  p->canUseHostPointerForRegisteredMem = 1;
  p->cooperativeLaunch = 1;
  p->hostRegisterSupported = 1;
  p->memoryPoolsSupported = 0;
  /* NICs may register device memory: the emulated driver exports it as DMA-BUF (rt_driver.c). */
  p->gpuDirectRDMASupported = 1;
  /* A NIC's writes: ordered for the owning GPU's kernels as on Hopper, or, with
   * WEFT_EMU_GDR_UNORDERED=1, not (as on A100): then cudaDeviceFlushGPUDirectRDMAWrites; =noflush:
   * not, and no flush either. */
  p->gpuDirectRDMAFlushWritesOptions = rt_gdr_unordered() == 2 ? 0 : cudaFlushGPUDirectRDMAWritesOptionHost;
  p->gpuDirectRDMAWritesOrdering =
      rt_gdr_unordered() ? cudaGPUDirectRDMAWritesOrderingNone : cudaGPUDirectRDMAWritesOrderingOwner;
  p->ipcEventSupported = 0;
  p->clusterLaunch = 0;
  p->deviceNumaConfig = 0, p->deviceNumaId = -1, p->hostNumaId = 0;
}

RT_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* p, int dev) {
  if (!p) return rt_error(cudaErrorInvalidValue);
  if (!rt_device_valid(dev)) return rt_error(cudaErrorInvalidDevice);
  memset(p, 0, sizeof(*p));
  int phys = rt_device_physical(dev);
  snprintf(p->name, sizeof(p->name), "Weft emulated GPU %d (H200-like, CPU)", phys);
  /* A stable, distinct uuid per device: "WEFTEMU" then the physical index. */
  memcpy(p->uuid.bytes, "WEFTEMU", 7);
  p->uuid.bytes[15] = (char)phys;
  fill_sizes(p);
  fill_features(p);
  p->pciBusID = PCI_BUS(phys);
  p->pciDeviceID = 0;
  p->pciDomainID = 0;
  p->gpuPciDeviceID = 0x233510de; /* H200 SXM device id, NVIDIA vendor */
  return cudaSuccess;
}

/* Attributes read from the properties (F) or constant (K). */
struct attr_entry {
  enum cudaDeviceAttr attr;
  size_t off, size; /* size 0: constant */
  int value;
};
#define F(a, field) \
  { a, offsetof(struct cudaDeviceProp, field), sizeof(((struct cudaDeviceProp*)0)->field), 0 }
#define K(a, v) \
  { a, 0, 0, v }
static const struct attr_entry attrs[] = {
    F(cudaDevAttrMaxThreadsPerBlock, maxThreadsPerBlock),
    F(cudaDevAttrMaxBlockDimX, maxThreadsDim[0]),
    F(cudaDevAttrMaxBlockDimY, maxThreadsDim[1]),
    F(cudaDevAttrMaxBlockDimZ, maxThreadsDim[2]),
    F(cudaDevAttrMaxGridDimX, maxGridSize[0]),
    F(cudaDevAttrMaxGridDimY, maxGridSize[1]),
    F(cudaDevAttrMaxGridDimZ, maxGridSize[2]),
    F(cudaDevAttrMaxSharedMemoryPerBlock, sharedMemPerBlock),
    F(cudaDevAttrMaxSharedMemoryPerBlockOptin, sharedMemPerBlockOptin),
    F(cudaDevAttrMaxSharedMemoryPerMultiprocessor, sharedMemPerMultiprocessor),
    F(cudaDevAttrReservedSharedMemoryPerBlock, reservedSharedMemPerBlock),
    F(cudaDevAttrTotalConstantMemory, totalConstMem),
    F(cudaDevAttrWarpSize, warpSize),
    F(cudaDevAttrMaxPitch, memPitch),
    F(cudaDevAttrMaxRegistersPerBlock, regsPerBlock),
    F(cudaDevAttrMaxRegistersPerMultiprocessor, regsPerMultiprocessor),
    F(cudaDevAttrTextureAlignment, textureAlignment),
    F(cudaDevAttrGlobalMemoryBusWidth, memoryBusWidth),
    F(cudaDevAttrL2CacheSize, l2CacheSize),
    F(cudaDevAttrMaxPersistingL2CacheSize, persistingL2CacheMaxSize),
    F(cudaDevAttrMultiProcessorCount, multiProcessorCount),
    F(cudaDevAttrMaxThreadsPerMultiProcessor, maxThreadsPerMultiProcessor),
    F(cudaDevAttrMaxBlocksPerMultiprocessor, maxBlocksPerMultiProcessor),
    F(cudaDevAttrComputeCapabilityMajor, major),
    F(cudaDevAttrComputeCapabilityMinor, minor),
    F(cudaDevAttrPciBusId, pciBusID),
    F(cudaDevAttrPciDeviceId, pciDeviceID),
    F(cudaDevAttrPciDomainId, pciDomainID),
    F(cudaDevAttrUnifiedAddressing, unifiedAddressing),
    F(cudaDevAttrCanMapHostMemory, canMapHostMemory),
    F(cudaDevAttrConcurrentKernels, concurrentKernels),
    F(cudaDevAttrAsyncEngineCount, asyncEngineCount),
    F(cudaDevAttrStreamPrioritiesSupported, streamPrioritiesSupported),
    F(cudaDevAttrGlobalL1CacheSupported, globalL1CacheSupported),
    F(cudaDevAttrLocalL1CacheSupported, localL1CacheSupported),
    F(cudaDevAttrManagedMemory, managedMemory),
    F(cudaDevAttrConcurrentManagedAccess, concurrentManagedAccess),
    F(cudaDevAttrComputePreemptionSupported, computePreemptionSupported),
    F(cudaDevAttrCanUseHostPointerForRegisteredMem, canUseHostPointerForRegisteredMem),
    F(cudaDevAttrCooperativeLaunch, cooperativeLaunch),
    F(cudaDevAttrHostRegisterSupported, hostRegisterSupported),
    F(cudaDevAttrMemoryPoolsSupported, memoryPoolsSupported),
    F(cudaDevAttrGPUDirectRDMASupported, gpuDirectRDMASupported),
    F(cudaDevAttrGPUDirectRDMAFlushWritesOptions, gpuDirectRDMAFlushWritesOptions),
    F(cudaDevAttrGPUDirectRDMAWritesOrdering, gpuDirectRDMAWritesOrdering),
    F(cudaDevAttrIpcEventSupport, ipcEventSupported),
    F(cudaDevAttrNumaConfig, deviceNumaConfig),
    F(cudaDevAttrNumaId, deviceNumaId),
    F(cudaDevAttrHostNumaId, hostNumaId),
    F(cudaDevAttrIntegrated, integrated),
    F(cudaDevAttrEccEnabled, ECCEnabled),
    F(cudaDevAttrTccDriver, tccDriver),
    F(cudaDevAttrIsMultiGpuBoard, isMultiGpuBoard),
    F(cudaDevAttrPageableMemoryAccess, pageableMemoryAccess),
    F(cudaDevAttrHostNativeAtomicSupported, hostNativeAtomicSupported),
    F(cudaDevAttrClusterLaunch, clusterLaunch),
    F(cudaDevAttrMpsEnabled, mpsEnabled),
    K(cudaDevAttrClockRate, 1980000), /* kHz; no longer in cudaDeviceProp since CUDA 13 */
    K(cudaDevAttrMemoryClockRate, 2619000),
    K(cudaDevAttrGpuOverlap, 1),
    K(cudaDevAttrKernelExecTimeout, 0),
    K(cudaDevAttrComputeMode, cudaComputeModeDefault),
    K(cudaDevAttrSingleToDoublePrecisionPerfRatio, 2),
};
#undef F
#undef K

static int attr_from_prop(const struct cudaDeviceProp* p, enum cudaDeviceAttr a, int* v) {
  for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
    const struct attr_entry* e = &attrs[i];
    if (e->attr != a) continue;
    const char* field = (const char*)p + e->off;
    if (e->size == sizeof(int))
      memcpy(v, field, sizeof(int));
    else if (e->size == sizeof(size_t))
      *v = (int)*(const size_t*)(const void*)field;
    else
      *v = e->value;
    return 1;
  }
  return 0;
}

cudaError_t rt_device_attribute(int* value, enum cudaDeviceAttr attr, int dev) {
  if (!value) return cudaErrorInvalidValue;
  if (!rt_device_valid(dev)) return cudaErrorInvalidDevice;
  struct cudaDeviceProp p;
  cudaGetDeviceProperties(&p, dev);
  return attr_from_prop(&p, attr, value) ? cudaSuccess : cudaErrorInvalidValue;
}

RT_API cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int dev) {
  return rt_error(rt_device_attribute(value, attr, dev));
}

RT_API cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int dev) {
  if (!id || len <= 0) return rt_error(cudaErrorInvalidValue);
  if (!rt_device_valid(dev)) return rt_error(cudaErrorInvalidDevice);
  snprintf(id, (size_t)len, "%04x:%02x:00.0", 0u, PCI_BUS(rt_device_physical(dev)));
  return cudaSuccess;
}

/* Accepts the forms CUDA does: domain:bus:device.function, domain:bus:device, bus:device.function. */
RT_API cudaError_t cudaDeviceGetByPCIBusId(int* dev, const char* id) {
  if (!dev || !id) return rt_error(cudaErrorInvalidValue);
  unsigned a = 0, b = 0, c = 0;
  int n = sscanf(id, "%x:%x:%x", &a, &b, &c);
  unsigned bus = n == 3 ? b : n == 2 ? a : ~0u;
  if (n < 2 || (n == 3 && a != 0)) return rt_error(cudaErrorInvalidValue);
  for (int d = 0; d < rt_device_count(); d++) {
    if ((unsigned)PCI_BUS(rt_device_physical(d)) == bus) {
      *dev = d;
      return cudaSuccess;
    }
  }
  return rt_error(cudaErrorInvalidDevice);
}

RT_API cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

RT_API cudaError_t cudaDeviceCanAccessPeer(int* can, int dev, int peer) {
  if (!can) return rt_error(cudaErrorInvalidValue);
  if (!rt_device_valid(dev) || !rt_device_valid(peer)) return rt_error(cudaErrorInvalidDevice);
  *can = dev != peer && rt_physical_peers(rt_device_physical(dev), rt_device_physical(peer));
  return cudaSuccess;
}

RT_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  int dev = current_device;
  if (flags) return rt_error(cudaErrorInvalidValue);
  if (!rt_device_valid(peer) || peer == dev) return rt_error(cudaErrorInvalidDevice);
  /* WEFT_EMU_PEER_ENABLE_FAILS=1: devices that could map each other but have run out of peer
   * mappings (a real driver's answer past its limit of peers), so a P2P attach fails. */
  const char* fails = getenv("WEFT_EMU_PEER_ENABLE_FAILS");
  if (fails && strcmp(fails, "1") == 0) return rt_error(cudaErrorTooManyPeers);
  pthread_mutex_lock(&peer_lock);
  int was = peer_enabled[dev][peer];
  peer_enabled[dev][peer] = 1;
  pthread_mutex_unlock(&peer_lock);
  return was ? rt_error(cudaErrorPeerAccessAlreadyEnabled) : cudaSuccess;
}

RT_API cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  int dev = current_device;
  if (!rt_device_valid(peer) || peer == dev) return rt_error(cudaErrorInvalidDevice);
  pthread_mutex_lock(&peer_lock);
  int was = peer_enabled[dev][peer];
  peer_enabled[dev][peer] = 0;
  pthread_mutex_unlock(&peer_lock);
  return was ? cudaSuccess : rt_error(cudaErrorPeerAccessNotEnabled);
}

RT_API cudaError_t cudaDeviceSynchronize(void) {
  cudaError_t err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  return rt_error(rt_device_sync(current_device));
}

/* Minimal: waits for the device's work and forgets its peer mappings; allocations stay. */
RT_API cudaError_t cudaDeviceReset(void) {
  int dev = current_device;
  rt_device_sync(dev);
  pthread_mutex_lock(&peer_lock);
  memset(peer_enabled[dev], 0, sizeof(peer_enabled[dev]));
  pthread_mutex_unlock(&peer_lock);
  return cudaSuccess;
}

RT_API cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  (void)limit, (void)value;
  return cudaSuccess;
}

RT_API cudaError_t cudaDeviceGetLimit(size_t* value, enum cudaLimit limit) {
  if (!value) return rt_error(cudaErrorInvalidValue);
  *value = limit == cudaLimitStackSize ? 1024 : 0;
  return cudaSuccess;
}

/* A child of fork() starts without a context, like a process that never used CUDA. */
static void device_fork_child(void) {
  pthread_mutex_init(&peer_lock, NULL);
  memset(peer_enabled, 0, sizeof(peer_enabled));
}
static void device_fork_prepare(void) { pthread_mutex_lock(&peer_lock); }
static void device_fork_parent(void) { pthread_mutex_unlock(&peer_lock); }

__attribute__((constructor)) static void device_init(void) {
  pthread_atfork(device_fork_prepare, device_fork_parent, device_fork_child);
}
