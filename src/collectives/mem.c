/* ncclMemAlloc / ncclMemFree on the host backend (shared memory other ranks of the host can
 * map) and ncclCommRegister / ncclCommDeregister (per-communicator registrations); the entry
 * points are in core/api_mem.c. */
#include "collectives/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "collectives/context.h"
#include "collectives/cuda/engine_cuda.h"
#include "proxy/proxy.h"
#include "transport/connector.h"
#include "util/check.h"
#include "util/log.h"
#include "util/tsan.h"

struct seg_node {
  struct weft_mem_seg seg;
  struct seg_node* next;
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seg_node* segs;
static struct weft_mem_reg* regs;
static unsigned long seg_counter;

/* Create, size and map a segment of size bytes (page multiple) that peers open through
 * /proc/<pid>/fd: it has no name, so nothing can leak in /dev/shm (transport/shm.c). */
static ncclResult_t seg_create(size_t size, struct weft_mem_seg* seg) {
  struct weft_shm_seg shm;
  WEFT_CHECK(weft_shm_create("mem", size, &shm));
  seg->base = shm.ptr;
  seg->size = size;
  seg->fd = shm.fd;
  seg->pid = getpid();
  seg->id = __atomic_add_fetch(&seg_counter, 1, __ATOMIC_RELAXED);
  snprintf(seg->path, sizeof(seg->path), "%s", shm.name);
  return ncclSuccess;
}

/* Create a segment of rounded bytes and add it to the registry. */
static ncclResult_t alloc_node(size_t rounded, struct seg_node** out) {
  struct seg_node* node = calloc(1, sizeof(*node));
  if (node == NULL) {
    WEFT_WARN("ncclMemAlloc: out of memory for the allocation record");
    return ncclSystemError;
  }
  ncclResult_t res = seg_create(rounded, &node->seg);
  if (res != ncclSuccess) {
    free(node);
    return res;
  }
  pthread_mutex_lock(&mem_lock);
  node->next = segs;
  segs = node;
  pthread_mutex_unlock(&mem_lock);
  *out = node;
  return ncclSuccess;
}

static size_t page_round(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (size + page - 1) / page * page;
}

ncclResult_t weft_mem_alloc(void** ptr, size_t size) {
  WEFT_ARG_CHECK(ptr != NULL, "ncclMemAlloc: ptr is NULL (size %zu)", size);
  WEFT_ARG_CHECK(size != 0, "ncclMemAlloc: size is 0");
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  WEFT_ARG_CHECK(size <= SIZE_MAX - page, "ncclMemAlloc: size %zu is too large", size);
  if (weft_cuda_mem_wanted()) return weft_cuda_mem_alloc(ptr, size); /* device memory on the CUDA backend */
  struct seg_node* node;
  WEFT_CHECK(alloc_node(page_round(size), &node));
  *ptr = node->seg.base;
  WEFT_INFO(WEFT_ALLOC, "ncclMemAlloc: %p size %zu (mapped %zu) shared as %s", node->seg.base, size,
            node->seg.size, node->seg.path);
  return ncclSuccess;
}

ncclResult_t weft_mem_alloc_shared(size_t size, void** ptr) {
  struct seg_node* node;
  WEFT_CHECK(alloc_node(page_round(size), &node));
  *ptr = node->seg.base;
  return ncclSuccess;
}

/* A thread rank mapping a segment of its own process: tell ThreadSanitizer both are one memory. */
static void alias_own_segment(int fd, void* mapped, size_t size) {
  pthread_mutex_lock(&mem_lock);
  for (struct seg_node* n = segs; n; n = n->next)
    if (n->seg.fd == fd) weft_tsan_alias_add(mapped, n->seg.base, size);
  pthread_mutex_unlock(&mem_lock);
}

ncclResult_t weft_mem_map_peer(int pid, int fd, size_t size, void** base) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
  int f = open(path, O_RDWR);
  if (f < 0) {
    WEFT_WARN("Mapping shared memory %s (%zu bytes) of process %d failed: open: %s", path, size, pid,
              strerror(errno));
    return ncclSystemError;
  }
  /* Populated now: a fault per page later would cost far more than the collective. */
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, f, 0);
  int err = errno;
  close(f);
  if (p == MAP_FAILED) {
    WEFT_WARN("Mapping shared memory %s (%zu bytes) of process %d failed: mmap: %s", path, size, pid,
              strerror(err));
    return ncclSystemError;
  }
  *base = p;
  if (pid == (int)getpid()) alias_own_segment(fd, p, size);
  return ncclSuccess;
}

void weft_mem_unmap(void* base, size_t size) {
  weft_tsan_alias_remove(base);
  if (base != NULL) munmap(base, size);
}

ncclResult_t weft_mem_free(void* ptr) {
  if (ptr == NULL) return ncclSuccess;
  if (weft_cuda_mem_owns(ptr)) return weft_cuda_mem_free(ptr);
  pthread_mutex_lock(&mem_lock);
  struct seg_node** at = &segs;
  while (*at && (*at)->seg.base != ptr) at = &(*at)->next;
  struct seg_node* node = *at;
  if (node) *at = node->next;
  pthread_mutex_unlock(&mem_lock);
  WEFT_ARG_CHECK(node != NULL, "ncclMemFree: ptr %p was not returned by ncclMemAlloc (or was freed already)",
                 ptr);
  munmap(node->seg.base, node->seg.size);
  close(node->seg.fd);
  WEFT_INFO(WEFT_ALLOC, "ncclMemFree: %p size %zu", ptr, node->seg.size);
  free(node);
  return ncclSuccess;
}

static int contains(const void* base, size_t size, const void* addr, size_t len) {
  uintptr_t b = (uintptr_t)base, a = (uintptr_t)addr;
  return a >= b && a - b <= size && len <= size - (a - b);
}

ncclResult_t weft_mem_lookup(const void* addr, size_t len, struct weft_mem_seg* seg) {
  ncclResult_t res = ncclInvalidArgument;
  pthread_mutex_lock(&mem_lock);
  for (struct seg_node* n = segs; n; n = n->next) {
    if (contains(n->seg.base, n->seg.size, addr, len)) {
      if (seg) *seg = n->seg;
      res = ncclSuccess;
      break;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  return res;
}

ncclResult_t weft_mem_register(struct weft_comm_ctx* comm, void* buff, size_t size, void** handle) {
  WEFT_ARG_CHECK(buff != NULL, "ncclCommRegister: buff is NULL (size %zu, comm %p)", size, (void*)comm);
  WEFT_ARG_CHECK(size != 0, "ncclCommRegister: size is 0 (buff %p, comm %p)", buff, (void*)comm);
  WEFT_ARG_CHECK(handle != NULL, "ncclCommRegister: handle is NULL (buff %p, comm %p)", buff, (void*)comm);
  WEFT_ARG_CHECK((uintptr_t)buff <= UINTPTR_MAX - size, "ncclCommRegister: buff %p + size %zu wraps around",
                 buff, size);
  struct weft_mem_reg* reg = calloc(1, sizeof(*reg));
  if (reg == NULL) {
    WEFT_WARN("ncclCommRegister: out of memory for the registration record");
    return ncclSystemError;
  }
  reg->comm = comm;
  reg->buff = buff;
  reg->size = size;
  reg->shared = weft_mem_lookup(buff, size, NULL) == ncclSuccess;
  /* The network keeps it registered: steps the host backend sends in place from it (the CUDA
   * backend sends from its connectors only) then cost no registration each. */
  reg->net_kept = comm->backend == WEFT_BACKEND_HOST;
  if (reg->net_kept && weft_proxy_keep_registered(&comm->abort_flag, buff, size, 1) != ncclSuccess) {
    WEFT_WARN("ncclCommRegister: out of memory for the network's registration record");
    free(reg);
    return ncclSystemError;
  }
  pthread_mutex_lock(&mem_lock);
  reg->next = regs;
  regs = reg;
  pthread_mutex_unlock(&mem_lock);
  *handle = reg;
  WEFT_INFO(WEFT_REG, "ncclCommRegister: comm %p buff %p size %zu handle %p%s", (void*)comm, buff, size,
            (void*)reg, reg->shared ? " (shared memory)" : "");
  return ncclSuccess;
}

ncclResult_t weft_mem_deregister(struct weft_comm_ctx* comm, void* handle) {
  pthread_mutex_lock(&mem_lock);
  struct weft_mem_reg** at = &regs;
  while (*at && (*at != handle || (*at)->comm != comm)) at = &(*at)->next;
  struct weft_mem_reg* reg = *at;
  if (reg) *at = reg->next;
  pthread_mutex_unlock(&mem_lock);
  WEFT_ARG_CHECK(reg != NULL, "ncclCommDeregister: handle %p is not a registration of comm %p", handle,
                 (void*)comm);
  WEFT_INFO(WEFT_REG, "ncclCommDeregister: comm %p buff %p size %zu", (void*)comm, reg->buff, reg->size);
  if (reg->net_kept) weft_proxy_keep_registered(&comm->abort_flag, reg->buff, reg->size, 0);
  free(reg);
  return ncclSuccess;
}

const struct weft_mem_reg* weft_mem_reg_find(const struct weft_comm_ctx* comm, const void* addr, size_t len) {
  const struct weft_mem_reg* found = NULL;
  pthread_mutex_lock(&mem_lock);
  for (struct weft_mem_reg* r = regs; r && !found; r = r->next) {
    if (r->comm == comm && contains(r->buff, r->size, addr, len)) found = r;
  }
  pthread_mutex_unlock(&mem_lock);
  return found;
}

void weft_mem_reg_usage(const struct weft_comm_ctx* comm, uint64_t* count, uint64_t* bytes) {
  *count = *bytes = 0;
  pthread_mutex_lock(&mem_lock);
  for (struct weft_mem_reg* r = regs; r; r = r->next) {
    if (r->comm != comm) continue;
    (*count)++;
    *bytes += r->size;
  }
  pthread_mutex_unlock(&mem_lock);
}

void weft_mem_comm_fini(struct weft_comm_ctx* comm) {
  if (comm == NULL) return;
  pthread_mutex_lock(&mem_lock);
  struct weft_mem_reg** at = &regs;
  while (*at) {
    if ((*at)->comm == comm) {
      struct weft_mem_reg* r = *at;
      *at = r->next;
      if (r->net_kept) weft_proxy_keep_registered(&comm->abort_flag, r->buff, r->size, 0);
      free(r);
    } else {
      at = &(*at)->next;
    }
  }
  pthread_mutex_unlock(&mem_lock);
}
