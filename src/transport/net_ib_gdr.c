/* GPUDirect RDMA over the IB network: whether a network device can register GPU memory (a
 * DMA-BUF of it, or its addresses through the nvidia-peermem kernel module; a merged device only
 * what every member can), and registering the GPU ranges the proxy keeps (a connector's FIFOs in
 * GPU memory) in every member. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "transport/net_ib_comm.h"
#include "util/log.h"
#include "util/param.h"

int weft_ib_peermem_loaded(const char* root) {
  static const char* const paths[] = {"/sys/kernel/mm/memory_peers/nv_mem/version",
                                      "/sys/module/nvidia_peermem/version",
                                      "/sys/module/nv_peer_mem/version"};
  char path[512];
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    snprintf(path, sizeof(path), "%s%s", root ? root : "", paths[i]);
    if (access(path, F_OK) == 0) return 1;
  }
  return 0;
}

#if WEFT_IBVERBS_HEADERS

/* A provider without DMA-BUF answers an empty registration with "not supported"; one with it
 * refuses the bad descriptor instead (NCCL's probe). */
static int dmabuf_probe(const struct weft_ibv_fns* ibv, struct ibv_context* ctx) {
  if (ibv->reg_dmabuf_mr == NULL || !weft_param_int("NCCL_DMABUF_ENABLE")) return 0;
  struct ibv_pd* pd = ibv->alloc_pd(ctx);
  if (pd == NULL) return 0;
  errno = 0;
  struct ibv_mr* mr = ibv->reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  int supported = errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
  if (mr != NULL) ibv->dereg_mr(mr);
  ibv->dealloc_pd(pd);
  return supported;
}

static int answers[WEFT_IB_MAX_PORTS]; /* per network device */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int port_answer(const struct weft_ibv_fns* ibv, const struct weft_ib_port* p, int peermem) {
  return (dmabuf_probe(ibv, p->ctx) ? WEFT_NET_GPU_DMABUF : 0) | (peermem ? WEFT_NET_GPU_PEERMEM : 0);
}

static void probe_all(void) {
  const struct weft_ib_device* devs;
  int n = 0;
  const struct weft_ibv_fns* ibv = weft_ibv_load(NULL);
  if (ibv == NULL || weft_ib_devices(&devs, &n) != ncclSuccess) return;
  int peermem = weft_ib_peermem_loaded("");
  for (int i = 0; i < n && i < WEFT_IB_MAX_PORTS; i++) {
    answers[i] = WEFT_NET_GPU_DMABUF | WEFT_NET_GPU_PEERMEM;
    for (int k = 0; k < devs[i].nmembers; k++) answers[i] &= port_answer(ibv, devs[i].member[k], peermem);
    WEFT_INFO(WEFT_INIT | WEFT_NET, "NET/IB: %s GPUDirect RDMA:%s%s%s", devs[i].name,
              answers[i] & WEFT_NET_GPU_DMABUF ? " DMA-BUF" : "",
              answers[i] & WEFT_NET_GPU_PEERMEM ? " peermem" : "", answers[i] ? "" : " none");
  }
}

int weft_ib_gpu_direct(int dev) {
  pthread_once(&once, probe_all);
  return dev >= 0 && dev < WEFT_IB_MAX_PORTS ? answers[dev] : 0;
}

/* A connector's FIFOs in GPU memory: the peer writes a receiver's, a sender's are only read. One
 * registration per member (the DMA-BUF serves them all). */
ncclResult_t weft_ib_reg_gpu(void* owner, void* data, size_t size, int dmabuf_fd, void** mh) {
  struct ib_comm* c = owner;
  int k;
  if ((*mh = weft_ib_mrs_keep(c, data, size, dmabuf_fd, &k)) != NULL) return ncclSuccess;
  if (k >= 0)
    WEFT_WARN("NET/IB: %s:%d cannot register %zu bytes of GPU memory at %p (%s): %s", c->m[k].port->name,
              c->m[k].port->port, size, data, dmabuf_fd >= 0 ? "DMA-BUF" : "peer memory", strerror(errno));
  return ncclSystemError;
}

ncclResult_t weft_ib_keep_registered_gpu(void* comm, void* data, size_t size, int dmabuf_fd) {
  struct ib_comm* c = comm;
  return weft_net_regcache_keep_gpu(&c->regs, data, size, dmabuf_fd);
}

#endif
