/* Registrations a network keeps for memory its owner declared long-lived (weft_net_ops'
 * keep_registered: the proxy's connector buffers), shared by the IB network and the plugin
 * adapter. Only declared ranges are cached: any other buffer (a caller's, sent in place) may be
 * freed and its addresses reused once its request is done, so it is registered per request. */
#ifndef WEFT_TRANSPORT_NET_REGCACHE_H
#define WEFT_TRANSPORT_NET_REGCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* Per comm: a proxy connector declares 3 ranges (its FIFO memory, its LL bounce slots, its
 * notice), and a sending one each range its communicator registered (ncclCommRegister). Past this
 * a declared range is registered per request, as any other buffer. */
#define WEFT_NET_REGCACHE_MAX 32

struct weft_net_kept {
  uintptr_t lo, hi; /* the range registered, exactly as declared (no rounding to pages: on a
                       receiving comm it is remotely writable, and its neighbours must not be) */
  void* mh;         /* the network's handle (struct ibv_mr*, a plugin's mhandle) */
  int keeps;        /* keeps not yet dropped: requests find it only while > 0 */
  int refs;         /* keeps + requests using it: deregistered when it reaches 0 */
};

struct weft_net_regcache {
  void* owner; /* the comm, passed to reg and dereg (one protection domain each) */
  ncclResult_t (*reg)(void* owner, void* data, size_t size, void** mh);
  void (*dereg)(void* owner, void* mh);
  /* GPU memory, where the network takes it (GPUDirect RDMA; NULL: it does not): dmabuf_fd is a
   * DMA-BUF of exactly the range, or -1 to register the GPU addresses as they are. */
  ncclResult_t (*reg_gpu)(void* owner, void* data, size_t size, int dmabuf_fd, void** mh);
  struct weft_net_kept e[WEFT_NET_REGCACHE_MAX];
  uint64_t hits; /* requests that found a registration here */
};

void weft_net_regcache_init(struct weft_net_regcache* rc, void* owner,
                            ncclResult_t (*reg)(void* owner, void* data, size_t size, void** mh),
                            void (*dereg)(void* owner, void* mh));
/* [data, data+size) stays allocated until dropped or the comm closes: registered once, or a
 * reference taken on a kept range that covers it. A full cache is no error (INFO): the range is
 * then registered per request. */
ncclResult_t weft_net_regcache_keep(struct weft_net_regcache* rc, void* data, size_t size);
/* The same for GPU memory (rc->reg_gpu); a GPU range is never found for host memory because the
 * two never overlap in one address space. */
ncclResult_t weft_net_regcache_keep_gpu(struct weft_net_regcache* rc, void* data, size_t size, int dmabuf_fd);
/* Ends one keep of the range: a kept range covering it loses a reference, and its registration
 * goes as soon as neither keeps nor requests hold it. A range never kept is ignored. */
void weft_net_regcache_drop(struct weft_net_regcache* rc, void* data, size_t size);
/* A kept registration covering [data, data+size), referenced for one request until release;
 * NULL when there is none (register per request). */
struct weft_net_kept* weft_net_regcache_find(struct weft_net_regcache* rc, const void* data, size_t size);
void weft_net_regcache_release(struct weft_net_regcache* rc, struct weft_net_kept* k);
/* The comm closes: every registration goes, held or not. */
void weft_net_regcache_fini(struct weft_net_regcache* rc);

#endif
