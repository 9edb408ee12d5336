/* Emulated CUDA runtime: CUDA IPC of device memory between processes. A handle names the owner's
 * memfd (pid and fd number); an importer maps it through /proc/<pid>/fd and signs in its header
 * page, so that the owner's cudaFree can tell it is still in use. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt.h"

#define IPC_MAGIC 0x57495043u /* "WIPC" */

struct ipc_wire {
  uint32_t magic;
  int32_t pid, fd, dev; /* dev: the physical device (processes may see different sets) */
  uint64_t size, offset, id;
};
_Static_assert(sizeof(struct ipc_wire) <= CUDA_IPC_HANDLE_SIZE, "IPC handle too small");

/* Like the driver, the handle stands for the whole allocation even when devPtr is inside it. */
RT_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devptr) {
  struct rt_alloc a;
  if (!handle || !rt_mem_find(devptr, &a) || a.kind != RT_MEM_DEVICE) return rt_error(cudaErrorInvalidValue);
  struct ipc_wire w = {.magic = IPC_MAGIC,
                       .pid = getpid(),
                       .fd = a.fd,
                       .dev = rt_device_physical(a.dev),
                       .size = a.size,
                       .offset = (uintptr_t)devptr - a.base,
                       .id = ((struct rt_hdr*)a.map)->id};
  memset(handle, 0, sizeof(*handle));
  memcpy(handle->reserved, &w, sizeof(w));
  return cudaSuccess;
}

static void sign_in(struct rt_hdr* h) {
  atomic_fetch_add(&h->importers, 1);
  for (int i = 0; i < RT_HDR_SLOTS; i++) {
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&h->slots[i], &zero, (int32_t)getpid())) return;
  }
}

static void sign_out(struct rt_hdr* h) {
  atomic_fetch_sub(&h->importers, 1);
  for (int i = 0; i < RT_HDR_SLOTS; i++) {
    int32_t me = getpid();
    if (atomic_compare_exchange_strong(&h->slots[i], &me, 0)) return;
  }
}

/* The importing device is the current one; the memory stays on the exporter's, which this process
 * may not see (CUDA_VISIBLE_DEVICES): its ordinal here, else the importing device's. */
static int import_device(const struct ipc_wire* w) {
  int here = rt_device_from_physical(w->dev);
  return here >= 0 ? here : rt_device_current();
}

/* Maps the exporter's memfd. A dead owner or a freed allocation (its fd gone or reused by another
 * allocation) is cudaErrorMapBufferObjectFailed, one of the errors CUDA documents for this call. */
static cudaError_t map_import(const struct ipc_wire* w, struct rt_alloc* a) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)w->pid, (int)w->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return cudaErrorMapBufferObjectFailed;
  size_t len = w->size + RT_PAGE;
  void* map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd); /* the mapping keeps the memory */
  if (map == MAP_FAILED) return cudaErrorMapBufferObjectFailed;
  struct rt_hdr* h = map;
  if (h->magic != RT_HDR_MAGIC || h->id != w->id || h->size != w->size) {
    munmap(map, len);
    return cudaErrorMapBufferObjectFailed;
  }
  *a = (struct rt_alloc){.base = (uintptr_t)map + RT_PAGE,
                         .size = w->size,
                         .kind = RT_MEM_IPC,
                         .dev = import_device(w),
                         .map = map,
                         .map_len = len,
                         .fd = -1,
                         .ipc_pid = w->pid,
                         .ipc_fd = w->fd,
                         .ipc_id = w->id,
                         .ipc_opens = 1};
  return cudaSuccess;
}

/* Returns the base of the allocation (the driver's behaviour), not base + the handle's offset. */
RT_API cudaError_t cudaIpcOpenMemHandle(void** p, cudaIpcMemHandle_t handle, unsigned int flags) {
  struct ipc_wire w;
  memcpy(&w, handle.reserved, sizeof(w));
  if (!p || (flags & ~(unsigned)cudaIpcMemLazyEnablePeerAccess) || w.magic != IPC_MAGIC)
    return rt_error(cudaErrorInvalidValue);
  /* The exporting process itself cannot open its handle: CUDA says "invalid device context"
   * (cudaErrorDeviceUninitialized, formerly cudaErrorInvalidContext, 201). */
  if (w.pid == getpid()) return rt_error(cudaErrorDeviceUninitialized);
  /* Another device's memory needs peer access from this one, as the driver's lazy enable does. */
  if (!rt_physical_peers(rt_device_physical(rt_device_current()), w.dev))
    return rt_error(cudaErrorPeerAccessUnsupported);
  pthread_mutex_lock(&rt_mem_lock);
  struct rt_alloc* old = rt_mem_find_import_locked(w.id);
  if (old) { /* opened before in this process: the driver counts references */
    old->ipc_opens++;
    *p = (void*)old->base;
    pthread_mutex_unlock(&rt_mem_lock);
    return cudaSuccess;
  }
  struct rt_alloc a = {0};
  cudaError_t err = map_import(&w, &a);
  if (err == cudaSuccess) err = rt_mem_insert_locked(&a);
  if (err == cudaSuccess) {
    sign_in(a.map);
    *p = (void*)a.base;
  } else if (a.map) {
    munmap(a.map, a.map_len);
  }
  pthread_mutex_unlock(&rt_mem_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaIpcCloseMemHandle(void* p) {
  pthread_mutex_lock(&rt_mem_lock);
  struct rt_alloc* a = rt_mem_find_locked(p);
  if (!a || a->kind != RT_MEM_IPC || a->base != (uintptr_t)p) {
    pthread_mutex_unlock(&rt_mem_lock);
    return rt_error(cudaErrorInvalidValue);
  }
  struct rt_alloc gone = *a;
  if (--a->ipc_opens > 0) {
    pthread_mutex_unlock(&rt_mem_lock);
    return cudaSuccess;
  }
  rt_mem_remove_locked(gone.base, NULL);
  pthread_mutex_unlock(&rt_mem_lock);
  sign_out(gone.map);
  munmap(gone.map, gone.map_len);
  return cudaSuccess;
}

RT_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  (void)handle, (void)event;
  return rt_error(cudaErrorNotSupported);
}

RT_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  (void)event, (void)handle;
  return rt_error(cudaErrorNotSupported);
}
