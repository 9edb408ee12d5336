/* GPU connectors over CUDA P2P, shared memory or the network (see gpu_link.h). Host memory is
 * registered with CUDA (mapped, portable) so kernels address it; the CPU side of the transport
 * (a peer process, the proxy thread) sees the same bytes. Empty without the CUDA backend. */
#include "transport/gpu_link.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

const char* weft_gpu_link_name(int link) {
  return link == WEFT_GPU_LINK_P2P ? "P2P" : link == WEFT_GPU_LINK_SHM ? "SHM" : "NET";
}

#if WEFT_CUDA
#include "util/cuda_check.h"

static int p2p_allowed(void) {
  const char* level = weft_param_str("NCCL_P2P_LEVEL");
  int loc_only = level != NULL && (strcasecmp(level, "LOC") == 0 || strcmp(level, "0") == 0);
  return weft_param_int("NCCL_P2P_DISABLE") == 0 && !loc_only;
}

static int can_map_each_other(int a, int b) {
  int ab = 0, ba = 0;
  if (cudaDeviceCanAccessPeer(&ab, a, b) != cudaSuccess ||
      cudaDeviceCanAccessPeer(&ba, b, a) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return ab && ba;
}

int weft_gpu_link_choose(const struct weft_gpu_peer* p) {
  if (p->link.remote) return WEFT_GPU_LINK_NET;
  if (p->my_dev == p->peer_dev) return WEFT_GPU_LINK_P2P; /* one GPU's own memory */
  if (p2p_allowed() && can_map_each_other(p->my_dev, p->peer_dev)) return WEFT_GPU_LINK_P2P;
  return weft_param_int("NCCL_SHM_DISABLE") ? WEFT_GPU_LINK_NET : WEFT_GPU_LINK_SHM;
}

/* Kernels address host connector memory through a CUDA mapping. Inside one process the two
 * sides share one block, registered once (by whichever side comes first). */
static ncclResult_t map_host(struct weft_gpu_mem* g) {
  struct weft_conn_mem* h = g->host;
  cudaError_t err = cudaHostRegister(h->base, h->size, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err == cudaErrorHostMemoryAlreadyRegistered) {
    cudaGetLastError();
    err = cudaSuccess;
  } else if (err == cudaSuccess) {
    g->registered = 1;
  }
  if (err == cudaSuccess) err = cudaHostGetDevicePointer((void**)&g->base, h->base, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    WEFT_WARN("Mapping %zu bytes of %s connector memory for the GPU failed: %s", h->size,
              weft_gpu_link_name(g->link), cudaGetErrorString(err));
    return ncclUnhandledCudaError;
  }
  g->simple_bytes = h->simple_bytes;
  g->ll_bytes = h->ll_bytes;
  return ncclSuccess;
}

static ncclResult_t gpu_mem_new(int link, struct weft_gpu_mem** out) {
  *out = calloc(1, sizeof(**out));
  if (*out == NULL) return ncclSystemError;
  (*out)->link = link;
  return ncclSuccess;
}

/* P2P: the handle of memory on this GPU, sent as it is. */
static ncclResult_t offer_p2p(const struct weft_gpu_peer* p, int tag, size_t simple, size_t ll,
                              struct weft_gpu_mem* g) {
  struct weft_p2p_handle h;
  WEFT_CHECK(weft_p2p_mem_create(simple, ll, !p->link.same_process, p->my_dev, p->stream, &g->p2p, &h));
  g->base = g->p2p->base;
  g->simple_bytes = g->p2p->simple_bytes;
  g->ll_bytes = g->p2p->ll_bytes;
  return weft_bootstrap_send(p->link.net.bootstrap, p->link.net.peer, tag, &h, sizeof(h));
}

static ncclResult_t take_p2p(const struct weft_gpu_peer* p, int tag, int ack_tag, struct weft_gpu_mem* g) {
  const struct weft_net_peer* np = &p->link.net;
  struct weft_p2p_handle h;
  WEFT_CHECK(weft_bootstrap_recv(np->bootstrap, np->peer, tag, &h, sizeof(h)));
  ncclResult_t res = weft_p2p_mem_attach(&h, p->my_dev, &g->p2p);
  if (res != ncclSuccess)
    WEFT_WARN("Rank %d (device %d) could not map the GPU connector of rank %d (device %d, host %s, pid %d)",
              np->rank, p->my_dev, np->peer, h.dev, np->peer_host, p->link.peer_pid);
  int ok = res == ncclSuccess;
  WEFT_CHECK(weft_bootstrap_send(np->bootstrap, np->peer, ack_tag, &ok, sizeof(ok)));
  if (res == ncclSuccess) {
    g->base = g->p2p->base;
    g->simple_bytes = g->p2p->simple_bytes;
    g->ll_bytes = g->p2p->ll_bytes;
  }
  return res;
}

/* The network when the receiver says so, even on one host (NCCL_SHM_DISABLE without P2P). */
static struct weft_link_peer link_for(const struct weft_gpu_peer* p, int link) {
  struct weft_link_peer lp = p->link;
  lp.remote = link == WEFT_GPU_LINK_NET;
  return lp;
}

ncclResult_t weft_gpu_link_offer(const struct weft_gpu_peer* p, int tag, size_t simple, size_t ll,
                                 struct weft_gpu_mem** out) {
  int32_t link = weft_gpu_link_choose(p);
  struct weft_gpu_mem* g;
  WEFT_CHECK(gpu_mem_new(link, &g));
  ncclResult_t res = weft_bootstrap_send(p->link.net.bootstrap, p->link.net.peer, tag, &link, sizeof(link));
  if (res == ncclSuccess && link == WEFT_GPU_LINK_P2P) res = offer_p2p(p, tag, simple, ll, g);
  if (res == ncclSuccess && link != WEFT_GPU_LINK_P2P) {
    struct weft_link_peer lp = link_for(p, link);
    res = weft_link_offer(&lp, tag, simple, ll, &g->host);
    if (res == ncclSuccess) res = map_host(g);
  }
  if (res != ncclSuccess) {
    weft_gpu_link_release(g);
    return res;
  }
  *out = g;
  return ncclSuccess;
}

ncclResult_t weft_gpu_link_take(const struct weft_gpu_peer* p, int tag, int ack_tag,
                                struct weft_gpu_mem** out) {
  const struct weft_net_peer* np = &p->link.net;
  int32_t link = 0;
  WEFT_CHECK(weft_bootstrap_recv(np->bootstrap, np->peer, tag, &link, sizeof(link)));
  if (link != WEFT_GPU_LINK_P2P && link != WEFT_GPU_LINK_SHM && link != WEFT_GPU_LINK_NET) {
    WEFT_WARN("Rank %d: rank %d (host %s) offered a GPU connector over unknown transport %d", np->rank,
              np->peer, np->peer_host, (int)link);
    return ncclInternalError;
  }
  struct weft_gpu_mem* g;
  WEFT_CHECK(gpu_mem_new(link, &g));
  ncclResult_t res;
  if (link == WEFT_GPU_LINK_P2P) {
    res = take_p2p(p, tag, ack_tag, g);
  } else {
    struct weft_link_peer lp = link_for(p, link);
    res = weft_link_take(&lp, tag, ack_tag, &g->host);
    if (res == ncclSuccess) res = map_host(g);
  }
  if (res != ncclSuccess) {
    weft_gpu_link_release(g);
    return res;
  }
  *out = g;
  return ncclSuccess;
}

ncclResult_t weft_gpu_link_finish_offer(const struct weft_gpu_peer* p, int ack_tag, struct weft_gpu_mem* g) {
  if (g->link != WEFT_GPU_LINK_P2P) {
    struct weft_link_peer lp = link_for(p, g->link);
    return weft_link_finish_offer(&lp, ack_tag, g->host);
  }
  int ok = 0;
  WEFT_CHECK(weft_bootstrap_recv(p->link.net.bootstrap, p->link.net.peer, ack_tag, &ok, sizeof(ok)));
  return ok ? ncclSuccess : ncclRemoteError;
}

void weft_gpu_link_release(struct weft_gpu_mem* g) {
  if (g == NULL) return;
  weft_p2p_mem_release(g->p2p);
  if (g->host != NULL && g->registered && cudaHostUnregister(g->host->base) != cudaSuccess)
    cudaGetLastError();
  weft_conn_mem_release(g->host); /* a network connector says goodbye and stops its proxy first */
  free(g);
}

#else /* no CUDA backend in this build */

int weft_gpu_link_choose(const struct weft_gpu_peer* p) {
  (void)p;
  return WEFT_GPU_LINK_NET;
}
ncclResult_t weft_gpu_link_offer(const struct weft_gpu_peer* p, int tag, size_t simple, size_t ll,
                                 struct weft_gpu_mem** out) {
  (void)p, (void)tag, (void)simple, (void)ll;
  *out = NULL;
  WEFT_WARN("GPU connectors need the CUDA backend, which this build does not have");
  return ncclInvalidUsage;
}
ncclResult_t weft_gpu_link_take(const struct weft_gpu_peer* p, int tag, int ack_tag,
                                struct weft_gpu_mem** out) {
  (void)ack_tag;
  return weft_gpu_link_offer(p, tag, 0, 0, out); /* the same refusal */
}
ncclResult_t weft_gpu_link_finish_offer(const struct weft_gpu_peer* p, int ack_tag, struct weft_gpu_mem* m) {
  (void)p, (void)ack_tag, (void)m;
  return ncclInvalidUsage;
}
void weft_gpu_link_release(struct weft_gpu_mem* m) { (void)m; }
#endif
