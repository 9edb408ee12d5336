/* The GPU side of the transports: the P2P transport (device memory of the receiving GPU,
 * transport/p2p.c), and the CUDA mapping of host connector memory (SHM, NET) that kernels address
 * while the CPU side of the transport (a peer process, the proxy thread) sees the same bytes.
 * Without the CUDA backend P2P never connects and there is nothing to map. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"
#include "util/param.h"

#if WEFT_CUDA
#include "util/cuda_check.h"

static int can_map_each_other(int a, int b) {
  int ab = 0, ba = 0;
  if (cudaDeviceCanAccessPeer(&ab, a, b) != cudaSuccess ||
      cudaDeviceCanAccessPeer(&ba, b, a) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return ab && ba;
}

/* Within one device (its own memory, whatever the settings); else as p->topo_p2p says: the
 * topology model's verdict (the path between the GPUs and NCCL_P2P_LEVEL), or without one no P2P
 * only when it is off. A peer GPU visible here must also map this one both ways; one this process
 * cannot see (CUDA_VISIBLE_DEVICES) cannot be asked: with the model's yes its memory is mapped
 * through CUDA IPC (NCCL's behaviour), without the model its peer goes through shared memory. */
static int p2p_can_connect(const struct weft_link_peer* p) {
  if (!p->gpu || p->remote) return 0;
  if (p->same_device) return 1;
  if (p->topo_p2p == WEFT_TOPO_P2P_DENIED) return 0;
  if (p->peer_dev < 0) {
    if (p->topo_p2p == WEFT_TOPO_P2P_ALLOWED) return 1;
    WEFT_INFO(WEFT_INIT | WEFT_P2P,
              "Rank %d: the GPU of rank %d is not visible to this process (CUDA_VISIBLE_DEVICES) and no "
              "topology model places it, so no P2P",
              p->net.rank, p->net.peer);
    return 0;
  }
  return p->peer_dev != p->my_dev && can_map_each_other(p->my_dev, p->peer_dev);
}

static void p2p_view(struct weft_link_mem* m) {
  m->base = m->p2p->base;
  m->simple_bytes = m->p2p->simple_bytes;
  m->ll_bytes = m->p2p->ll_bytes;
}

_Static_assert(sizeof(struct weft_p2p_handle) <= WEFT_TRANSPORT_HANDLE_BYTES, "a P2P handle must fit");

static ncclResult_t p2p_offer(const struct weft_link_peer* p, size_t simple, size_t ll,
                              struct weft_link_mem* m, void* handle) {
  WEFT_CHECK(weft_p2p_mem_create(simple, ll, !p->same_process, p->my_dev, p->stream, &m->p2p, handle));
  ((struct weft_p2p_handle*)handle)->bus_id = weft_cuda_device_busid(p->my_dev);
  p2p_view(m);
  return ncclSuccess;
}

static ncclResult_t p2p_take(const struct weft_link_peer* p, const void* handle, int ack_tag,
                             struct weft_link_mem* m) {
  const struct weft_net_peer* np = &p->net;
  struct weft_p2p_handle h;
  memcpy(&h, handle, sizeof(h));
  ncclResult_t res = weft_p2p_mem_attach(&h, p->my_dev, p->peer_dev, &m->p2p);
  if (res != ncclSuccess)
    WEFT_WARN("Rank %d (device %d) could not map the GPU connector of rank %d (bus id %llx, host %s, pid %d)",
              np->rank, p->my_dev, np->peer, (unsigned long long)h.bus_id, np->peer_host, p->peer_pid);
  else
    p2p_view(m);
  return weft_transport_ack(p, ack_tag, res);
}

static ncclResult_t p2p_finish_offer(const struct weft_link_peer* p, int ack_tag, struct weft_link_mem* m) {
  (void)m;
  return weft_transport_wait_ack(p, ack_tag);
}

static void p2p_release(struct weft_link_mem* m) { weft_p2p_mem_release(m->p2p); }

const struct weft_transport_ops weft_transport_p2p = {
    "P2P", 1, p2p_can_connect, p2p_offer, p2p_take, p2p_finish_offer, p2p_release};

/* Inside one process the two sides share one block, registered once (by whichever side comes
 * first). */
ncclResult_t weft_gpu_link_map(struct weft_link_mem* m) {
  struct weft_conn_mem* h = m->host;
  cudaError_t err = cudaHostRegister(h->base, h->size, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err == cudaErrorHostMemoryAlreadyRegistered) {
    cudaGetLastError();
    err = cudaSuccess;
  } else if (err == cudaSuccess) {
    m->registered = 1;
  }
  if (err == cudaSuccess) err = cudaHostGetDevicePointer((void**)&m->base, h->base, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    WEFT_WARN("Mapping %zu bytes of %s connector memory for the GPU failed: %s", h->size, m->tr->name,
              cudaGetErrorString(err));
    return ncclUnhandledCudaError;
  }
  m->simple_bytes = h->simple_bytes;
  m->ll_bytes = h->ll_bytes;
  return ncclSuccess;
}

void weft_gpu_link_unmap(struct weft_link_mem* m) {
  if (m->host != NULL && m->registered && cudaHostUnregister(m->host->base) != cudaSuccess)
    cudaGetLastError();
  m->registered = 0;
}

/* ---- GPUDirect RDMA: a network connector's FIFOs in its GPU's memory ---- */

#define GDR_ALIGN (2u << 20) /* a whole allocation of its own, page aligned, for its DMA-BUF */

static void gdr_free(struct weft_conn_mem* h) {
  if (h->fifo_dmabuf >= 0) close(h->fifo_dmabuf);
  if (cudaFree(h->fifo) != cudaSuccess) cudaGetLastError();
  h->fifo = NULL;
  h->fifo_free = NULL;
}

/* Whether the NIC's writes must be flushed before a kernel may read what they carry: on GPUs
 * that do not order them for their own kernels (before Hopper), or when NCCL_NET_FORCE_FLUSH says
 * so. NCCL flushes with an RDMA read; Weft with cudaDeviceFlushGPUDirectRDMAWrites. */
static int gdr_needs_flush(int dev) {
  return weft_param_int("NCCL_NET_FORCE_FLUSH") || !weft_cuda_gdr_ordered(dev);
}

/* Sending, the NIC reads the FIFOs: NCCL_NET_GDR_READ, by default from Ampere (compute capability
 * 8.0) on. NCCL by default also lets an older GPU with an NVLink peer do it; Weft does not. */
static const char* gdr_read_refusal(int dev) {
  int64_t read = weft_param_int("NCCL_NET_GDR_READ");
  int major = 0;
  if (read == 0) return "NCCL_NET_GDR_READ=0";
  if (read > 0) return NULL;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    cudaGetLastError();
    return "its attributes cannot be read";
  }
  return major < 8 ? "before Ampere the NIC reads from host memory unless NCCL_NET_GDR_READ=1" : NULL;
}

/* Why this GPU cannot take the NIC's writes (receive) or reads (send), NULL when it can. */
static const char* gdr_refusal(int dev, int how, int is_send) {
  int rdma = 0;
  if (cudaDeviceGetAttribute(&rdma, cudaDevAttrGPUDirectRDMASupported, dev) != cudaSuccess) {
    cudaGetLastError();
    return "its attributes cannot be read";
  }
  if (!rdma) return "it does not support GPUDirect RDMA";
  if (is_send) {
    const char* why = gdr_read_refusal(dev);
    if (why != NULL) return why;
  } else if (gdr_needs_flush(dev) && !weft_cuda_gdr_can_flush(dev))
    return "its kernels may see the NIC's writes out of order and it cannot flush them";
  if (!(how & WEFT_NET_GPU_PEERMEM) && !weft_cuda_dmabuf_supported(dev))
    return "it exports no DMA-BUF and the network has no peer memory";
  return NULL;
}

static int gdr_alloc(struct weft_conn_mem* h, int dev, int how, int is_send, void* stream) {
  size_t size = (h->simple_bytes + h->ll_bytes + GDR_ALIGN - 1) / GDR_ALIGN * GDR_ALIGN;
  void* fifo = NULL;
  if (cudaMalloc(&fifo, size) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  h->fifo = fifo;
  h->fifo_size = size;
  h->fifo_dmabuf = -1;
  h->fifo_free = gdr_free;
  h->fifo_flush = !is_send && gdr_needs_flush(dev); /* a NIC's reads need none */
  h->fifo_dev = dev;
  /* Zeroed LL flags: step 0 waits for flag 1, which stale zeros never match. */
  if (cudaMemsetAsync(fifo, 0, size, (cudaStream_t)stream) != cudaSuccess ||
      cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess || (uintptr_t)fifo % 4096 != 0) {
    cudaGetLastError();
    gdr_free(h);
    return 0;
  }
  if (how & WEFT_NET_GPU_DMABUF && weft_cuda_dmabuf_supported(dev))
    h->fifo_dmabuf = weft_cuda_dmabuf_fd(fifo, size);
  if (h->fifo_dmabuf < 0 && !(how & WEFT_NET_GPU_PEERMEM)) {
    gdr_free(h);
    return 0;
  }
  return 1;
}

int weft_gpu_link_gdr(const struct weft_link_peer* p, struct weft_link_mem* m, int how, int is_send) {
  const char* why = gdr_refusal(p->my_dev, how, is_send);
  const char* dir = is_send ? "to" : "from";
  if (why == NULL && !gdr_alloc(m->host, p->my_dev, how, is_send, p->stream))
    why = "its memory for the FIFOs could not be allocated or exported";
  if (why != NULL) {
    WEFT_INFO(WEFT_INIT | WEFT_NET, "Rank %d: connector %s rank %d in host memory, not GPU %d's: %s",
              p->net.rank, dir, p->net.peer, p->my_dev, why);
    return 0;
  }
  WEFT_INFO(WEFT_INIT | WEFT_NET, "Rank %d: connector %s rank %d %s GPU %d's memory (GPUDirect RDMA, %s%s)",
            p->net.rank, dir, p->net.peer, is_send ? "sent from" : "received into", p->my_dev,
            m->host->fifo_dmabuf >= 0 ? "DMA-BUF" : "registered by address",
            m->host->fifo_flush ? ", flushed" : "");
  return 1;
}

#else /* no CUDA backend in this build: P2P never connects (no peer offers it either) */

static int p2p_can_connect(const struct weft_link_peer* p) {
  (void)p;
  return 0;
}
static ncclResult_t no_cuda(void) {
  WEFT_WARN("GPU connectors need the CUDA backend, which this build does not have");
  return ncclInvalidUsage;
}
static ncclResult_t p2p_offer(const struct weft_link_peer* p, size_t simple, size_t ll,
                              struct weft_link_mem* m, void* handle) {
  (void)p, (void)simple, (void)ll, (void)m, (void)handle;
  return no_cuda();
}
static ncclResult_t p2p_take(const struct weft_link_peer* p, const void* handle, int ack_tag,
                             struct weft_link_mem* m) {
  (void)p, (void)handle, (void)ack_tag, (void)m;
  return no_cuda();
}
static ncclResult_t p2p_finish_offer(const struct weft_link_peer* p, int ack_tag, struct weft_link_mem* m) {
  (void)p, (void)ack_tag, (void)m;
  return no_cuda();
}
static void p2p_release(struct weft_link_mem* m) { (void)m; }

const struct weft_transport_ops weft_transport_p2p = {
    "P2P", 1, p2p_can_connect, p2p_offer, p2p_take, p2p_finish_offer, p2p_release};

ncclResult_t weft_gpu_link_map(struct weft_link_mem* m) {
  (void)m;
  return no_cuda();
}
void weft_gpu_link_unmap(struct weft_link_mem* m) { (void)m; }
int weft_gpu_link_gdr(const struct weft_link_peer* p, struct weft_link_mem* m, int how, int is_send) {
  (void)p, (void)m, (void)how, (void)is_send;
  return 0;
}
#endif
