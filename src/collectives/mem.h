/* Memory from ncclMemAlloc (POSIX shared memory other ranks of the host can map) and the
 * per-communicator registrations of ncclCommRegister. */
#ifndef WEFT_COLLECTIVES_MEM_H
#define WEFT_COLLECTIVES_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl.h"

struct weft_comm_ctx;

/* One ncclMemAlloc allocation. The shm name is unlinked at once (a killed job leaves nothing
 * in /dev/shm); peers of the host map it by opening path, which stays valid while the owner
 * lives. */
struct weft_mem_seg {
  void* base;
  size_t size; /* mapped bytes (the request rounded up to pages) */
  int fd;      /* open for as long as the allocation lives */
  pid_t pid;
  uint64_t id;   /* unique within the process: fd numbers are reused, ids are not */
  char path[64]; /* "/proc/<pid>/fd/<fd>" */
};

/* ncclMemAlloc / ncclMemFree (their entry points are in core/api_mem.c): device memory on the
 * CUDA backend, else a shared segment. */
ncclResult_t weft_mem_alloc(void** ptr, size_t size);
ncclResult_t weft_mem_free(void* ptr);
/* Shared memory like ncclMemAlloc's (in the registry, so weft_mem_lookup finds it), for the
 * library's own use: no API logging. Freed with ncclMemFree. */
ncclResult_t weft_mem_alloc_shared(size_t size, void** ptr);
/* Map the whole segment of another process of this host (fd of pid, size bytes), pages
 * populated up front; *base is the mapping. weft_mem_unmap undoes it. */
ncclResult_t weft_mem_map_peer(int pid, int fd, size_t size, void** base);
void weft_mem_unmap(void* base, size_t size);

/* The allocation containing [addr, addr+len), copied to *seg; ncclInvalidArgument (no WARN)
 * when addr is not inside memory from ncclMemAlloc. */
ncclResult_t weft_mem_lookup(const void* addr, size_t len, struct weft_mem_seg* seg);

/* A registration of ncclCommRegister; the handle given to the caller points at it. */
struct weft_mem_reg {
  struct weft_comm_ctx* comm;
  void* buff;
  size_t size;
  int shared;   /* inside memory from ncclMemAlloc */
  int net_kept; /* the network connections keep it registered (weft_proxy_keep_registered) */
  struct weft_mem_reg* next;
};

/* ncclCommRegister / ncclCommDeregister, on a comm core/ checked. */
ncclResult_t weft_mem_register(struct weft_comm_ctx* comm, void* buff, size_t size, void** handle);
ncclResult_t weft_mem_deregister(struct weft_comm_ctx* comm, void* handle);
/* The registration of comm covering [addr, addr+len), or NULL. */
const struct weft_mem_reg* weft_mem_reg_find(const struct weft_comm_ctx* comm, const void* addr, size_t len);
/* How many registrations comm has and the bytes of user memory they cover (memory accounting). */
void weft_mem_reg_usage(const struct weft_comm_ctx* comm, uint64_t* count, uint64_t* bytes);
/* Drop every registration of comm (communicator teardown). NULL-safe. */
void weft_mem_comm_fini(struct weft_comm_ctx* comm);

#endif
