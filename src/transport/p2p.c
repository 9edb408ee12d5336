/* CUDA P2P transport memory: connectors in device memory, exported with cudaIpcGetMemHandle to
 * other processes (same GPU or a peer-accessible one) and shared by address within a process,
 * where a refcount lets the last of the two sides free it. Memory exported to another process is
 * freed only once the importer has closed it: the importer marks the control page before it
 * closes, and an owner that gets there first leaves the memory on a list that later setups and
 * teardowns sweep. Empty without the CUDA backend. */
#include "transport/p2p.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "transport/connector.h"
#include "util/check.h"
#include "util/log.h"

#if WEFT_CUDA
#include "util/cuda_check.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(((struct weft_p2p_handle*)0)->ipc),
               "IPC handle fits the connector handle");
/* Kernels find the FIFOs WEFT_CTRL_BYTES after the control page (kernel.h), whatever it grows to;
 * its last word is the importer's "closed" mark. */
#define CLOSED_MARK_OFFSET (WEFT_CTRL_BYTES - sizeof(uint64_t))
_Static_assert(sizeof(struct weft_conn_ctrl) <= CLOSED_MARK_OFFSET, "connector control page fits its space");

/* Same-process allocations and how many sides use them: the owner from creation, the peer from
 * a successful attach, so a peer that fails to attach leaves nothing to leak. */
struct shared_ref {
  void* base;
  int refs;
  struct shared_ref* next;
};
static pthread_mutex_t refs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_ref* refs;

static struct shared_ref** ref_find(void* base) {
  struct shared_ref** at = &refs;
  while (*at && (*at)->base != base) at = &(*at)->next;
  return at;
}

static ncclResult_t ref_create(void* base) {
  struct shared_ref* r = calloc(1, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  r->base = base;
  r->refs = 1;
  pthread_mutex_lock(&refs_lock);
  r->next = refs;
  refs = r;
  pthread_mutex_unlock(&refs_lock);
  return ncclSuccess;
}

/* The peer's use; 0 when the owner has already released the memory. */
static int ref_take(void* base) {
  pthread_mutex_lock(&refs_lock);
  struct shared_ref* r = *ref_find(base);
  if (r) r->refs++;
  pthread_mutex_unlock(&refs_lock);
  return r != NULL;
}

/* Drop one use; 1 when it was the last. */
static int ref_drop(void* base) {
  int last = 0;
  pthread_mutex_lock(&refs_lock);
  struct shared_ref** at = ref_find(base);
  if (*at && --(*at)->refs <= 0) {
    struct shared_ref* r = *at;
    *at = r->next;
    free(r);
    last = 1;
  }
  pthread_mutex_unlock(&refs_lock);
  return last;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Exported memory whose importer had not closed it when its owner was released. */
struct deferred_free {
  void* base;
  struct deferred_free* next;
};
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static struct deferred_free* deferred;

static int importer_closed(void* base) {
  uint64_t mark = 0;
  if (cudaMemcpy(&mark, (char*)base + CLOSED_MARK_OFFSET, sizeof(mark), cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return mark != 0;
}

/* Free what importers have closed since. An importer that died never marks: its memory stays
 * until the process ends. */
static void sweep_deferred(void) {
  pthread_mutex_lock(&deferred_lock);
  for (struct deferred_free** at = &deferred; *at;) {
    struct deferred_free* d = *at;
    if (!importer_closed(d->base)) {
      at = &d->next;
      continue;
    }
    *at = d->next;
    cudaFree(d->base);
    free(d);
  }
  pthread_mutex_unlock(&deferred_lock);
}

static void free_exported(void* base) {
  struct deferred_free* d = importer_closed(base) ? NULL : calloc(1, sizeof(*d));
  if (d == NULL) {
    cudaFree(base);
    return;
  }
  d->base = base;
  pthread_mutex_lock(&deferred_lock);
  d->next = deferred;
  deferred = d;
  pthread_mutex_unlock(&deferred_lock);
}

/* The importer's last act on the memory: mark the control page, then close it. */
static void close_imported(void* base) {
  static const uint64_t one = 1;
  if (cudaMemcpy((char*)base + CLOSED_MARK_OFFSET, &one, sizeof(one), cudaMemcpyHostToDevice) != cudaSuccess)
    cudaGetLastError();
  cudaIpcCloseMemHandle(base);
}

ncclResult_t weft_p2p_mem_create(size_t simple_bytes, size_t ll_bytes, int for_other_process, int dev,
                                 void* stream, struct weft_p2p_mem** out, struct weft_p2p_handle* h) {
  sweep_deferred();
  struct weft_p2p_mem* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  ncclResult_t res = ncclSuccess;
  m->simple_bytes = round_up(simple_bytes, 4096);
  m->ll_bytes = round_up(ll_bytes, 4096);
  m->size = WEFT_CTRL_BYTES + m->simple_bytes + m->ll_bytes;
  m->owner = 1;
  void* base = NULL;
  cudaError_t err = cudaMalloc(&base, m->size);
  if (err != cudaSuccess) {
    cudaGetLastError(); /* reported here, not to the application's next cudaGetLastError */
    WEFT_WARN("Allocating %zu bytes of connector memory on device %d failed: %s", m->size, dev,
              cudaGetErrorString(err));
    free(m);
    return ncclUnhandledCudaError;
  }
  m->base = base;
  /* Zeroed counters and LL flags: step 0 waits for flag 1, which stale zeros never match. */
  WEFT_CUDACHECK_GOTO(cudaMemsetAsync(base, 0, m->size, (cudaStream_t)stream), res, fail);
  WEFT_CUDACHECK_GOTO(cudaStreamSynchronize((cudaStream_t)stream), res, fail);
  memset(h, 0, sizeof(*h));
  h->size = m->size;
  h->simple_bytes = m->simple_bytes;
  h->ll_bytes = m->ll_bytes;
  h->ptr = (uint64_t)(uintptr_t)base;
  h->dev = dev;
  h->use_ipc = for_other_process;
  if (for_other_process) {
    cudaIpcMemHandle_t ipc;
    WEFT_CUDACHECK_GOTO(cudaIpcGetMemHandle(&ipc, base), res, fail);
    memcpy(h->ipc, &ipc, sizeof(ipc));
  } else {
    m->shared = 1;
    WEFT_CHECK_GOTO(ref_create(base), res, fail);
  }
  *out = m;
  return ncclSuccess;
fail:
  cudaFree(base);
  free(m);
  return res;
}

/* Within one process on two devices the accessing device needs peer access to the owner's. */
static ncclResult_t enable_peer(int my_dev, int owner_dev) {
  if (my_dev == owner_dev) return ncclSuccess;
  if (owner_dev < 0) {
    WEFT_WARN("The device of a connector's owner in this process is unknown (device %d accessing it)",
              my_dev);
    return ncclInternalError;
  }
  int ok = 0;
  WEFT_CUDACHECK(cudaDeviceCanAccessPeer(&ok, my_dev, owner_dev));
  if (!ok) {
    WEFT_WARN("Device %d cannot access device %d directly (no P2P), but the peer offered a P2P connector",
              my_dev, owner_dev);
    return ncclSystemError;
  }
  cudaError_t err = cudaDeviceEnablePeerAccess(owner_dev, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    err = cudaSuccess;
  }
  WEFT_CUDACHECK(err);
  return ncclSuccess;
}

ncclResult_t weft_p2p_mem_attach(const struct weft_p2p_handle* h, int my_dev, int owner_dev,
                                 struct weft_p2p_mem** out) {
  struct weft_p2p_mem* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  m->size = h->size;
  m->simple_bytes = h->simple_bytes;
  m->ll_bytes = h->ll_bytes;
  ncclResult_t res = ncclSuccess;
  if (h->use_ipc) {
    cudaIpcMemHandle_t ipc;
    memcpy(&ipc, h->ipc, sizeof(ipc));
    void* base = NULL;
    cudaError_t err = cudaIpcOpenMemHandle(&base, ipc, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();
      WEFT_WARN(
          "cudaIpcOpenMemHandle of a peer's connector (bus id %llx, %llu bytes) from device %d failed: %s",
          (unsigned long long)h->bus_id, (unsigned long long)h->size, my_dev, cudaGetErrorString(err));
      free(m);
      return ncclUnhandledCudaError;
    }
    m->base = base;
    m->ipc = 1;
  } else {
    /* Same process: one numbering of devices, the owner's is visible here. */
    WEFT_CHECK_GOTO(enable_peer(my_dev, owner_dev), res, fail);
    m->base = (char*)(uintptr_t)h->ptr;
    if (!ref_take(m->base)) {
      WEFT_WARN("The connector memory of device %d at %p was released before this side mapped it", h->dev,
                (void*)m->base);
      res = ncclInternalError;
      goto fail;
    }
    m->shared = 1;
  }
  *out = m;
  return ncclSuccess;
fail:
  free(m);
  return res;
}

void weft_p2p_mem_release(struct weft_p2p_mem* m) {
  if (m == NULL) return;
  if (m->ipc)
    close_imported(m->base);
  else if (m->base != NULL && !m->shared)
    free_exported(m->base);
  else if (m->base != NULL && ref_drop(m->base))
    cudaFree(m->base);
  free(m);
  sweep_deferred();
}

#else /* no CUDA backend in this build */

ncclResult_t weft_p2p_mem_create(size_t simple_bytes, size_t ll_bytes, int for_other_process, int dev,
                                 void* stream, struct weft_p2p_mem** out, struct weft_p2p_handle* handle) {
  (void)simple_bytes, (void)ll_bytes, (void)for_other_process, (void)dev, (void)stream, (void)handle;
  *out = NULL;
  WEFT_WARN("CUDA P2P connectors need the CUDA backend, which this build does not have");
  return ncclInvalidUsage;
}
ncclResult_t weft_p2p_mem_attach(const struct weft_p2p_handle* handle, int my_dev, int owner_dev,
                                 struct weft_p2p_mem** out) {
  (void)handle, (void)my_dev, (void)owner_dev;
  *out = NULL;
  WEFT_WARN("CUDA P2P connectors need the CUDA backend, which this build does not have");
  return ncclInvalidUsage;
}
void weft_p2p_mem_release(struct weft_p2p_mem* mem) { (void)mem; }
#endif
