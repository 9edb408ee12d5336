/* Emulated CUDA runtime: the allocation registry and memory management. Device memory lives in
 * its own memfd mappings (one header page, then the user's bytes) so that other processes can map
 * it for IPC; pinned and registered host memory are recorded so that copies can check pointers. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt.h"

pthread_mutex_t rt_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rt_alloc* allocs; /* sorted by base, non-overlapping */
static size_t nallocs, cap_allocs;
static size_t used[64]; /* device bytes per device, for cudaMemGetInfo */
static _Atomic uint64_t next_id = 1;

static size_t round_page(size_t n) { return (n + RT_PAGE - 1) & ~(RT_PAGE - 1); }

/* Index of the first entry whose base is > p. */
static size_t upper_bound(uintptr_t p) {
  size_t lo = 0, hi = nallocs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (allocs[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

struct rt_alloc* rt_mem_find_locked(const void* p) {
  uintptr_t u = (uintptr_t)p;
  size_t i = upper_bound(u);
  if (i == 0) return NULL;
  struct rt_alloc* a = &allocs[i - 1];
  return u < a->base + a->size ? a : NULL;
}

int rt_mem_find(const void* p, struct rt_alloc* out) {
  pthread_mutex_lock(&rt_mem_lock);
  struct rt_alloc* a = rt_mem_find_locked(p);
  if (a && out) *out = *a;
  pthread_mutex_unlock(&rt_mem_lock);
  return a != NULL;
}

cudaError_t rt_mem_insert_locked(const struct rt_alloc* a) {
  size_t i = upper_bound(a->base);
  int overlaps = (i > 0 && allocs[i - 1].base + allocs[i - 1].size > a->base) ||
                 (i < nallocs && allocs[i].base < a->base + a->size);
  if (overlaps) return cudaErrorHostMemoryAlreadyRegistered;
  if (nallocs == cap_allocs) {
    size_t ncap = cap_allocs ? 2 * cap_allocs : 64;
    struct rt_alloc* n = realloc(allocs, ncap * sizeof(*n));
    if (!n) return cudaErrorMemoryAllocation;
    allocs = n, cap_allocs = ncap;
  }
  memmove(&allocs[i + 1], &allocs[i], (nallocs - i) * sizeof(*allocs));
  allocs[i] = *a;
  nallocs++;
  if (a->kind == RT_MEM_DEVICE) used[a->dev] += a->size;
  return cudaSuccess;
}

cudaError_t rt_mem_insert(const struct rt_alloc* a) {
  pthread_mutex_lock(&rt_mem_lock);
  cudaError_t err = rt_mem_insert_locked(a);
  pthread_mutex_unlock(&rt_mem_lock);
  return err;
}

struct rt_alloc* rt_mem_find_import_locked(uint64_t id) {
  for (size_t i = 0; i < nallocs; i++)
    if (allocs[i].kind == RT_MEM_IPC && allocs[i].ipc_id == id) return &allocs[i];
  return NULL;
}

int rt_mem_remove_locked(uintptr_t base, struct rt_alloc* out) {
  size_t i = upper_bound(base);
  if (i == 0 || allocs[i - 1].base != base) return 0;
  i--;
  if (out) *out = allocs[i];
  if (allocs[i].kind == RT_MEM_DEVICE) used[allocs[i].dev] -= allocs[i].size;
  memmove(&allocs[i], &allocs[i + 1], (nallocs - i - 1) * sizeof(*allocs));
  nallocs--;
  return 1;
}

int rt_mem_range_kind(const void* p, size_t n, int* dev) {
  struct rt_alloc a;
  if (!rt_mem_find(p, &a)) return 0;
  if (n > a.base + a.size - (uintptr_t)p) return -1;
  if (dev) *dev = a.dev;
  return (int)a.kind;
}

int weft_emu_pointer_kind(const void* p, int* dev) {
  struct rt_alloc a;
  if (!rt_mem_find(p, &a)) return 0;
  if (dev) *dev = a.dev;
  return a.kind == RT_MEM_DEVICE || a.kind == RT_MEM_IPC ? 1 : 2;
}

/* A zombie has released its mappings already: it no longer counts. */
static int process_alive(int32_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return 0;
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* end = strrchr(buf, ')'); /* "pid (comm) state ..." where comm may hold spaces */
  return !end || (end[1] == ' ' && end[2] != 'Z' && end[2] != 'X');
}

/* Importers still alive: a process that died without closing its mapping no longer counts,
 * as the driver cleans up after dead processes. */
static int live_importers(struct rt_hdr* h) {
  int n = 0;
  for (int i = 0; i < RT_HDR_SLOTS; i++) {
    int32_t pid = atomic_load(&h->slots[i]);
    if (pid > 0 && process_alive(pid)) n++;
  }
  return n;
}

static cudaError_t map_device_memory(size_t len, int dev, struct rt_alloc* a) {
  char name[32];
  snprintf(name, sizeof(name), "weft-emu-dev%d", dev);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return cudaErrorMemoryAllocation;
  void* map = MAP_FAILED;
  if (ftruncate(fd, (off_t)(len + RT_PAGE)) == 0)
    map = mmap(NULL, len + RT_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    close(fd);
    return cudaErrorMemoryAllocation;
  }
  struct rt_hdr* h = map;
  h->magic = RT_HDR_MAGIC;
  h->size = len;
  h->id = atomic_fetch_add(&next_id, 1) | ((uint64_t)getpid() << 32);
  h->dev = rt_device_physical(dev);
  h->owner = getpid();
  memset(a, 0, sizeof(*a));
  *a = (struct rt_alloc){.base = (uintptr_t)map + RT_PAGE,
                         .size = len,
                         .kind = RT_MEM_DEVICE,
                         .dev = dev,
                         .map = map,
                         .map_len = len + RT_PAGE,
                         .fd = fd};
  return cudaSuccess;
}

RT_API cudaError_t cudaMalloc(void** p, size_t size) {
  if (!p) return rt_error(cudaErrorInvalidValue);
  *p = NULL;
  cudaError_t err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  if (size == 0) return cudaSuccess;
  int dev = rt_device_current();
  size_t len = round_page(size);
  pthread_mutex_lock(&rt_mem_lock);
  int fits = len <= RT_DEVICE_MEM - used[dev];
  pthread_mutex_unlock(&rt_mem_lock);
  if (!fits) return rt_error(cudaErrorMemoryAllocation);
  struct rt_alloc a;
  err = map_device_memory(len, dev, &a);
  if (err == cudaSuccess) err = rt_mem_insert(&a);
  if (err != cudaSuccess) return rt_error(err);
  *p = (void*)a.base;
  return cudaSuccess;
}

/* cudaFree synchronizes the device, as the real one does: a free while a kernel still waits for
 * a peer is the hang this reproduces. */
RT_API cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess; /* apps call cudaFree(0) to create the context */
  cudaError_t err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  struct rt_alloc a;
  if (!rt_mem_find(p, &a) || a.kind != RT_MEM_DEVICE || a.base != (uintptr_t)p)
    return rt_error(cudaErrorInvalidValue);
  rt_device_sync(a.dev);
  int importers = live_importers(a.map);
  if (importers > 0)
    weft_emu_fatal("cudaFree of %p while %d process(es) still have it open through CUDA IPC", p, importers);
  pthread_mutex_lock(&rt_mem_lock);
  int found = rt_mem_remove_locked(a.base, &a);
  pthread_mutex_unlock(&rt_mem_lock);
  if (!found) return rt_error(cudaErrorInvalidValue); /* freed concurrently by another thread */
  munmap(a.map, a.map_len);
  close(a.fd);
  return cudaSuccess;
}

RT_API cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int flags) {
  if (!p) return rt_error(cudaErrorInvalidValue);
  *p = NULL;
  if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
    return rt_error(cudaErrorInvalidValue);
  cudaError_t err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  if (size == 0) return cudaSuccess;
  size_t len = round_page(size);
  void* map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return rt_error(cudaErrorMemoryAllocation);
  struct rt_alloc a = {.base = (uintptr_t)map,
                       .size = len,
                       .kind = RT_MEM_PINNED,
                       .dev = rt_device_current(),
                       .map = map,
                       .map_len = len,
                       .fd = -1};
  err = rt_mem_insert(&a);
  if (err != cudaSuccess) {
    munmap(map, len);
    return rt_error(err);
  }
  *p = map;
  return cudaSuccess;
}

RT_API cudaError_t cudaMallocHost(void** p, size_t size) { return cudaHostAlloc(p, size, 0); }

RT_API cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  struct rt_alloc a;
  if (!rt_mem_find(p, &a) || a.kind != RT_MEM_PINNED || a.base != (uintptr_t)p)
    return rt_error(cudaErrorInvalidValue);
  rt_device_sync(a.dev); /* like cudaFree, the real one synchronizes */
  pthread_mutex_lock(&rt_mem_lock);
  int found = rt_mem_remove_locked(a.base, &a);
  pthread_mutex_unlock(&rt_mem_lock);
  if (!found) return rt_error(cudaErrorInvalidValue);
  munmap(a.map, a.map_len);
  return cudaSuccess;
}

RT_API cudaError_t cudaHostRegister(void* p, size_t size, unsigned int flags) {
  unsigned ok =
      cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
  if (!p || size == 0 || (flags & ~ok)) return rt_error(cudaErrorInvalidValue);
  struct rt_alloc a = {
      .base = (uintptr_t)p, .size = size, .kind = RT_MEM_REGISTERED, .dev = rt_device_current(), .fd = -1};
  return rt_error(rt_mem_insert(&a));
}

RT_API cudaError_t cudaHostUnregister(void* p) {
  pthread_mutex_lock(&rt_mem_lock);
  struct rt_alloc* a = rt_mem_find_locked(p);
  int ok = a && a->kind == RT_MEM_REGISTERED && a->base == (uintptr_t)p;
  if (ok) rt_mem_remove_locked(a->base, NULL);
  pthread_mutex_unlock(&rt_mem_lock);
  return ok ? cudaSuccess : rt_error(cudaErrorHostMemoryNotRegistered);
}

RT_API cudaError_t cudaHostGetDevicePointer(void** pd, void* ph, unsigned int flags) {
  if (!pd || flags) return rt_error(cudaErrorInvalidValue);
  struct rt_alloc a;
  if (!rt_mem_find(ph, &a) || (a.kind != RT_MEM_PINNED && a.kind != RT_MEM_REGISTERED))
    return rt_error(cudaErrorInvalidValue);
  *pd = ph; /* unified addressing: the device sees host memory at the host's address */
  return cudaSuccess;
}

RT_API cudaError_t cudaHostGetFlags(unsigned int* flags, void* ph) {
  struct rt_alloc a;
  if (!flags || !rt_mem_find(ph, &a) || a.kind != RT_MEM_PINNED) return rt_error(cudaErrorInvalidValue);
  *flags = cudaHostAllocMapped;
  return cudaSuccess;
}

/* CUDA >= 11 answers cudaMemoryTypeUnregistered (not an error) for memory it does not know. */
RT_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attr, const void* ptr) {
  if (!attr) return rt_error(cudaErrorInvalidValue);
  memset(attr, 0, sizeof(*attr));
  struct rt_alloc a;
  if (!rt_mem_find(ptr, &a)) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = cudaInvalidDeviceId;
    attr->hostPointer = (void*)ptr;
    return cudaSuccess;
  }
  attr->device = a.dev;
  attr->devicePointer = (void*)ptr;
  if (a.kind == RT_MEM_DEVICE || a.kind == RT_MEM_IPC) {
    attr->type = cudaMemoryTypeDevice;
  } else {
    attr->type = cudaMemoryTypeHost;
    attr->hostPointer = (void*)ptr;
  }
  return cudaSuccess;
}

RT_API cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  int dev = rt_device_current();
  pthread_mutex_lock(&rt_mem_lock);
  if (free_bytes) *free_bytes = RT_DEVICE_MEM - used[dev];
  pthread_mutex_unlock(&rt_mem_lock);
  if (total) *total = RT_DEVICE_MEM;
  return cudaSuccess;
}

/* A forked child has no context: the parent's device memory is unmapped there (touching it
 * faults, as it would on a GPU), host memory stays but is no longer known to the runtime. */
void rt_mem_fork_child(void) {
  pthread_mutex_init(&rt_mem_lock, NULL);
  for (size_t i = 0; i < nallocs; i++) {
    if (allocs[i].kind == RT_MEM_DEVICE || allocs[i].kind == RT_MEM_IPC)
      munmap(allocs[i].map, allocs[i].map_len);
    if (allocs[i].fd >= 0) close(allocs[i].fd);
  }
  nallocs = 0;
  memset(used, 0, sizeof(used));
}

static void mem_fork_prepare(void) { pthread_mutex_lock(&rt_mem_lock); }
static void mem_fork_parent(void) { pthread_mutex_unlock(&rt_mem_lock); }

__attribute__((constructor)) static void mem_init(void) {
  pthread_atfork(mem_fork_prepare, mem_fork_parent, rt_mem_fork_child);
}
