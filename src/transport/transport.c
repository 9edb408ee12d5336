/* The transport table and the one connector setup path over it (see transport.h), with the two
 * transports whose memory is host memory: SHM (a segment both processes map, or process memory
 * between ranks that are threads of one process) and NET (transport/net.c, moved by the proxy). */
#include "transport/transport.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

const struct weft_transport_ops* const weft_transports[] = {&weft_transport_p2p, &weft_transport_shm,
                                                            &weft_transport_net};
const int weft_ntransports = (int)(sizeof(weft_transports) / sizeof(weft_transports[0]));

ncclResult_t weft_transport_ack(const struct weft_link_peer* p, int ack_tag, ncclResult_t res) {
  int ok = res == ncclSuccess;
  WEFT_CHECK(weft_bootstrap_send(p->net.bootstrap, p->net.peer, ack_tag, &ok, sizeof(ok)));
  return res;
}

ncclResult_t weft_transport_wait_ack(const struct weft_link_peer* p, int ack_tag) {
  int ok = 0;
  WEFT_CHECK(weft_bootstrap_recv(p->net.bootstrap, p->net.peer, ack_tag, &ok, sizeof(ok)));
  return ok ? ncclSuccess : ncclRemoteError;
}

/* ---- SHM ---- */

/* Ranks of one host share memory unless NCCL_SHM_DISABLE says no: then the network joins them,
 * as NCCL does (users turn SHM off where /dev/shm is small, as in containers). Host-backend
 * ranks of one process keep using their process's memory, which shares nothing with another
 * process (NCCL's P2P transport joins the GPUs of one process the same way). */
static int shm_can_connect(const struct weft_link_peer* p) {
  if (p->remote) return 0;
  return !weft_param_int("NCCL_SHM_DISABLE") || (!p->gpu && p->same_process);
}

_Static_assert(sizeof(struct weft_conn_handle) <= WEFT_TRANSPORT_HANDLE_BYTES, "an SHM handle must fit");

static ncclResult_t shm_offer(const struct weft_link_peer* p, size_t simple, size_t ll,
                              struct weft_link_mem* m, void* handle) {
  return weft_conn_mem_create(simple, ll, !p->same_process, "conn", &m->host, handle);
}

static ncclResult_t shm_take(const struct weft_link_peer* p, const void* handle, int ack_tag,
                             struct weft_link_mem* m) {
  struct weft_conn_handle h;
  memcpy(&h, handle, sizeof(h));
  ncclResult_t res = weft_conn_mem_attach(&h, &m->host);
  if (res != ncclSuccess)
    WEFT_WARN("Rank %d could not map the connector of rank %d (host %s, pid %d)", p->net.rank, p->net.peer,
              p->net.peer_host, p->peer_pid);
  return weft_transport_ack(p, ack_tag, res);
}

static ncclResult_t shm_finish_offer(const struct weft_link_peer* p, int ack_tag, struct weft_link_mem* m) {
  ncclResult_t res = weft_transport_wait_ack(p, ack_tag);
  weft_conn_mem_unlink(m->host); /* mapped by both sides (or never will be): drop the name now */
  return res;
}

/* SHM and NET: a network connector's memory says goodbye and stops its proxy first. */
static void host_release(struct weft_link_mem* m) { weft_conn_mem_release(m->host); }

const struct weft_transport_ops weft_transport_shm = {
    "SHM", 2, shm_can_connect, shm_offer, shm_take, shm_finish_offer, host_release};

/* ---- NET ---- */

static int net_can_connect(const struct weft_link_peer* p) {
  (void)p;
  return 1;
}
/* A GPU receives into its own memory where the topology and the network allow (NCCL's GDR), and
 * sends from it too where NCCL_NET_GDR_READ allows. */
static ncclResult_t net_offer(const struct weft_link_peer* p, size_t simple, size_t ll,
                              struct weft_link_mem* m, void* handle) {
  WEFT_CHECK(weft_net_offer(&p->net, simple, ll, &m->host, handle));
  int how = p->gpu ? weft_net_gpu_direct(&p->net) : 0;
  if (how) weft_gpu_link_gdr(p, m, how, 0);
  return ncclSuccess;
}
struct send_gdr {
  const struct weft_link_peer* p;
  struct weft_link_mem* m;
  int how;
};
static void send_from_gpu(const void* arg, struct weft_conn_mem* host) {
  const struct send_gdr* s = arg;
  s->m->host = host;
  weft_gpu_link_gdr(s->p, s->m, s->how, 1);
}
static ncclResult_t net_take(const struct weft_link_peer* p, const void* handle, int ack_tag,
                             struct weft_link_mem* m) {
  struct send_gdr s = {p, m, p->gpu ? weft_net_gpu_direct(&p->net) : 0};
  return weft_net_take(&p->net, handle, ack_tag, &m->host, s.how ? send_from_gpu : NULL, &s);
}
static ncclResult_t net_finish_offer(const struct weft_link_peer* p, int ack_tag, struct weft_link_mem* m) {
  return weft_net_finish_offer(&p->net, ack_tag, m->host);
}

const struct weft_transport_ops weft_transport_net = {
    "NET", 3, net_can_connect, net_offer, net_take, net_finish_offer, host_release};

/* ---- the setup path ---- */

const struct weft_transport_ops* weft_transport_choose(const struct weft_link_peer* p) {
  for (int i = 0; i < weft_ntransports; i++)
    if (weft_transports[i]->can_connect(p)) return weft_transports[i];
  return &weft_transport_net;
}

static const struct weft_transport_ops* by_id(int32_t id) {
  for (int i = 0; i < weft_ntransports; i++)
    if (weft_transports[i]->id == id) return weft_transports[i];
  return NULL;
}

static ncclResult_t mem_new(const struct weft_transport_ops* tr, struct weft_link_mem** out) {
  *out = calloc(1, sizeof(**out));
  if (*out == NULL) return ncclSystemError;
  (*out)->tr = tr;
  return ncclSuccess;
}

/* After offer or take: kernels address host memory through a CUDA mapping. */
static ncclResult_t done(const struct weft_link_peer* p, struct weft_link_mem* m, ncclResult_t res,
                         struct weft_link_mem** out) {
  if (res == ncclSuccess && p->gpu && m->host != NULL) res = weft_gpu_link_map(m);
  if (res != ncclSuccess) {
    weft_transport_release(m);
    return res;
  }
  *out = m;
  return ncclSuccess;
}

/* The receiving side chooses, so the two sides never disagree (P2P depends on which device asks). */
ncclResult_t weft_transport_offer(const struct weft_link_peer* p, int tag, size_t simple, size_t ll,
                                  struct weft_link_mem** out) {
  *out = NULL;
  const struct weft_transport_ops* tr = weft_transport_choose(p);
  struct weft_link_mem* m;
  WEFT_CHECK(mem_new(tr, &m));
  struct weft_transport_handle h;
  memset(&h, 0, sizeof(h));
  h.id = tr->id;
  ncclResult_t res = tr->offer(p, simple, ll, m, h.data);
  if (res == ncclSuccess) res = weft_bootstrap_send(p->net.bootstrap, p->net.peer, tag, &h, sizeof(h));
  if (res == ncclSuccess)
    WEFT_INFO(WEFT_INIT, "rank %d: connector from rank %d over %s (host %s)", p->net.rank, p->net.peer,
              tr->name, p->net.peer_host ? p->net.peer_host : "?");
  return done(p, m, res, out);
}

ncclResult_t weft_transport_take(const struct weft_link_peer* p, int tag, int ack_tag,
                                 struct weft_link_mem** out) {
  *out = NULL;
  struct weft_transport_handle h;
  WEFT_CHECK(weft_bootstrap_recv(p->net.bootstrap, p->net.peer, tag, &h, sizeof(h)));
  const struct weft_transport_ops* tr = by_id(h.id);
  if (tr == NULL) {
    WEFT_WARN("Rank %d: rank %d (host %s) offered a connector over unknown transport %d", p->net.rank,
              p->net.peer, p->net.peer_host, (int)h.id);
    return ncclInternalError;
  }
  struct weft_link_mem* m;
  WEFT_CHECK(mem_new(tr, &m));
  return done(p, m, tr->take(p, h.data, ack_tag, m), out);
}

ncclResult_t weft_transport_finish_offer(const struct weft_link_peer* p, int ack_tag,
                                         struct weft_link_mem* m) {
  return m->tr->finish_offer(p, ack_tag, m);
}

void weft_transport_release(struct weft_link_mem* m) {
  if (m == NULL) return;
  weft_gpu_link_unmap(m); /* before the memory goes */
  m->tr->release(m);
  free(m);
}
