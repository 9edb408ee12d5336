/* The IB network's devices and connection setup. listen makes the receiving queue pairs and puts
 * their address in the handle after the socket network's part; connect makes the sending queue
 * pairs, connects them at once and sends their address over an authenticated socket connection;
 * accept connects the receiving queue pairs when that address arrives. The sender never waits for
 * the receiver, which may still be blocked elsewhere until the sender has connected. On a merged
 * device the handle holds the receiver's first member only: the sender connects the queue pairs
 * to the others when the receiver has written their addresses into its memory (before any offer). */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net_ib_comm.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
#include "util/psk.h"

#if WEFT_IBVERBS_HEADERS

#define IB_MAGIC 0x49425632u /* "IBV2" */

static const struct weft_net_ops* sock = &weft_net_socket_ops;
static const struct weft_ib_device* devs;
static int ndevs;

struct ib_listen {
  void* sock_listen;
  struct ib_comm* pending; /* accepted, setup under way */
  struct weft_auth_key key;
  int dev;
};

/* RDMA traffic cannot be encrypted: with a pre-shared key set (ncclSetEncryption, WEFT_PSK_FILE)
 * the IB network stands aside for TLS sockets, or refuses to connect when it was already chosen. */
static int encrypted(void) {
  uint8_t digest[WEFT_PSK_DIGEST_BYTES];
  int on = weft_psk_digest(digest) != 0;
  memset(digest, 0, sizeof(digest));
  return on;
}

static ncclResult_t refuse_if_encrypted(void) {
  if (!encrypted()) return ncclSuccess;
  WEFT_WARN(
      "NET/IB: encryption is on (ncclSetEncryption or WEFT_PSK_FILE) and RDMA traffic cannot be encrypted; "
      "set it before the first communicator (sockets are then used) or set NCCL_NET=Socket");
  return ncclInvalidUsage;
}

static ncclResult_t ib_init(void) {
  if (encrypted()) {
    WEFT_INFO(WEFT_NET | WEFT_INIT,
              "NET/IB: encryption is on and RDMA cannot encrypt: using TLS sockets instead");
    return ncclSystemError;
  }
  WEFT_CHECK(weft_ib_devices(&devs, &ndevs));
  if (ndevs == 0) return ncclSystemError; /* INFO said why; the next network is tried */
  return sock->init();                    /* setup and liveness go over sockets */
}

static ncclResult_t ib_devices(int* n) {
  *n = ndevs;
  return ncclSuccess;
}

static ncclResult_t ib_props(int dev, struct weft_net_props* p) {
  if (dev < 0 || dev >= ndevs) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "%s", devs[dev].name);
  struct weft_net_props s;
  /* Errors name a peer by its host's socket address: people know hosts by that, not by GID. */
  if (sock->get_properties(0, &s) == ncclSuccess) snprintf(p->addr, sizeof(p->addr), "%s", s.addr);
  p->speed_mbps = devs[dev].speed_mbps;
  p->latency_us = 0;
  p->max_comms = 65536;
  return ncclSuccess;
}

/* ---- queue pairs ---- */

static int mtu_enum(int bytes) {
  int e = 1; /* IBV_MTU_256 */
  while (e < 5 && (256 << (e - 1)) < bytes) e++;
  return e;
}

/* Queue pair i, on its member's protection domain and completion queue. */
static ncclResult_t make_qp(struct ib_comm* c, const struct weft_ibv_fns* ibv, int i) {
  const struct ib_member* m = &c->m[ib_qp_member(c, i)];
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof(qa));
  qa.send_cq = qa.recv_cq = m->cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 4 * IB_SLOTS; /* per request: metadata, data, its immediate (adaptive routing) */
  qa.cap.max_recv_wr = IB_SLOTS;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  c->qp[i] = ibv->create_qp(m->pd, &qa);
  if (c->qp[i] == NULL) return weft_ib_fail(c, ncclSystemError, "cannot create a queue pair");
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = (uint8_t)m->port->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv->modify_qp(c->qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    return weft_ib_fail(c, ncclSystemError, "cannot move the queue pair to INIT");
  return ncclSuccess;
}

/* One protection domain and completion queue per member, shared by its queue pairs. */
static ncclResult_t make_qps(struct ib_comm* c, const struct weft_ibv_fns* ibv) {
  for (int k = 0; k < c->nmembers; k++) {
    struct ib_member* m = &c->m[k];
    m->pd = ibv->alloc_pd(m->port->ctx);
    m->cq = m->pd ? ibv->create_cq(m->port->ctx, (5 * IB_SLOTS + 8) * c->nqps, NULL, NULL, 0) : NULL;
    if (m->cq == NULL)
      return weft_ib_fail(c, ncclSystemError, "cannot allocate a protection domain or CQ on %s:%d",
                          m->port->name, m->port->port);
  }
  for (int i = 0; i < c->nqps; i++) WEFT_CHECK(make_qp(c, ibv, i));
  return ncclSuccess;
}

/* The FIFO of clear-to-send slots: the sender's is written by the receiver; the receiver's is
 * what it writes from. Registered in every member, as are the metadata words. */
static ncclResult_t make_fifo(struct ib_comm* c, const struct weft_ibv_fns* ibv) {
  c->fifo = calloc(1, IB_FIFO_BYTES);
  if (c->fifo == NULL) return weft_ib_fail(c, ncclSystemError, "out of memory");
  int access = IBV_ACCESS_LOCAL_WRITE | (c->is_send ? IBV_ACCESS_REMOTE_WRITE : 0);
  for (int k = 0; k < c->nmembers; k++) {
    struct ib_member* m = &c->m[k];
    m->fifo_mr = ibv->reg_mr(m->pd, c->fifo, IB_FIFO_BYTES, access);
    if (!c->is_send) m->seq_mr = ibv->reg_mr(m->pd, c->seq_out, sizeof(c->seq_out), IBV_ACCESS_LOCAL_WRITE);
    /* Messages' metadata words: the sender writes them from its array into the receiver's. */
    m->meta_mr = ibv->reg_mr(m->pd, c->meta, sizeof(c->meta),
                             IBV_ACCESS_LOCAL_WRITE | (c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE));
    if (m->fifo_mr == NULL || (!c->is_send && m->seq_mr == NULL) || m->meta_mr == NULL)
      return weft_ib_fail(c, ncclSystemError, "cannot register the FIFO");
  }
  return ncclSuccess;
}

static void fill_addr(const struct ib_member* m, int is_send, struct ib_addr* a) {
  memcpy(a->gid, m->port->gid, 16);
  a->lid = m->port->lid;
  a->mtu = (uint8_t)mtu_enum(m->port->mtu);
  a->fifo_rkey = is_send ? m->fifo_mr->rkey : 0;
}

static void fill_info(struct ib_comm* c, struct ib_hello* h) {
  memset(h, 0, sizeof(*h));
  struct ib_info* info = &h->info;
  info->magic = IB_MAGIC;
  info->nqps = (uint8_t)c->nqps;
  info->split = (uint8_t)c->split;
  info->ar = (uint8_t)c->ar;
  info->nmembers = (uint8_t)c->nmembers;
  for (int i = 0; i < c->nqps; i++) info->qpn[i] = c->qp[i]->qp_num;
  for (int k = 0; k < c->nmembers; k++) fill_addr(&c->m[k], c->is_send, &h->m.a[k]);
  info->mtu = h->m.a[0].mtu;
  info->lid = h->m.a[0].lid;
  memcpy(info->gid, h->m.a[0].gid, 16);
  if (c->is_send) {
    info->fifo_addr = (uint64_t)(uintptr_t)c->fifo;
    info->fifo_rkey = h->m.a[0].fifo_rkey;
  }
}

static ncclResult_t make_resources(struct ib_comm* c) {
  const struct weft_ibv_fns* ibv = weft_ibv_load(NULL);
  WEFT_CHECK(make_qps(c, ibv));
  WEFT_CHECK(make_fifo(c, ibv));
  fill_info(c, &c->info);
  return ncclSuccess;
}

static int param_or(const char* name, int dflt) {
  int v = (int)weft_param_int(name);
  return v < 0 ? dflt : v;
}

/* Queue pair i, ready to receive then ready to send, to the peer's member at addr (always with a
 * global route header: RoCE needs one, and on InfiniBand it works within a subnet too). */
static int move_qp(struct ib_comm* c, int i, const struct ib_addr* addr) {
  const struct weft_ibv_fns* ibv = weft_ibv_load(NULL);
  const struct weft_ib_port* port = c->m[ib_qp_member(c, i)].port;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  int mtu = mtu_enum(port->mtu);
  a.path_mtu = (enum ibv_mtu)((int)addr->mtu < mtu ? (int)addr->mtu : mtu);
  a.dest_qp_num = c->peer.info.qpn[i];
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  memcpy(a.ah_attr.grh.dgid.raw, addr->gid, 16);
  a.ah_attr.grh.sgid_index = (uint8_t)port->gid_index;
  a.ah_attr.grh.hop_limit = 255;
  a.ah_attr.grh.traffic_class = (uint8_t)param_or("NCCL_IB_TC", 0);
  a.ah_attr.dlid = addr->lid;
  a.ah_attr.sl = (uint8_t)param_or("NCCL_IB_SL", 0);
  a.ah_attr.port_num = (uint8_t)port->port;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (ibv->modify_qp(c->qp[i], &a, mask) != 0) return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = (uint8_t)param_or("NCCL_IB_TIMEOUT", 20);
  a.retry_cnt = (uint8_t)param_or("NCCL_IB_RETRY_CNT", 7);
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
         IBV_QP_MAX_QP_RD_ATOMIC;
  return ibv->modify_qp(c->qp[i], &a, mask) != 0 ? -1 : 0;
}

/* The queue pairs to the peer's members [lo, hi), whose addresses are in c->peer.m. */
static ncclResult_t connect_qps(struct ib_comm* c, int lo, int hi) {
  for (int i = 0; i < c->nqps; i++) {
    int j = ib_qp_peer_member(c, i);
    if (j < lo || j >= hi || move_qp(c, i, &c->peer.m.a[j]) == 0) continue;
    if (c->nmembers == 1 && c->peer_members == 1)
      return weft_ib_fail(c, ncclSystemError, "cannot move queue pair %d to RTR and RTS", i);
    return weft_ib_fail(c, ncclSystemError,
                        "cannot move queue pair %d (%s:%d to the peer's member %d) to RTR and RTS", i,
                        c->m[ib_qp_member(c, i)].port->name, c->m[ib_qp_member(c, i)].port->port, j);
  }
  return ncclSuccess;
}

/* The peer's setup message: the receiver's choice of queue pairs holds on both sides, and a
 * peer with another number of members is fine (each queue pair names both ends' members). */
static ncclResult_t check_peer(struct ib_comm* c) {
  const struct ib_info* peer = &c->peer.info;
  int n = peer->nmembers;
  if (peer->magic != IB_MAGIC || (int)peer->nqps != c->nqps || n < 1 || n > IB_MAX_MEMBERS || n > c->nqps)
    return weft_ib_fail(c, ncclRemoteError, "peer sent a malformed setup message");
  c->peer_members = n;
  inet_ntop(AF_INET6, peer->gid, c->peer_addr, sizeof(c->peer_addr));
  return ncclSuccess;
}

/* Receiver: the sender's setup message has come; every queue pair connects. */
static ncclResult_t connect_receiver(struct ib_comm* c) {
  WEFT_CHECK(check_peer(c));
  WEFT_CHECK(connect_qps(c, 0, c->peer_members));
  c->qps_up = 1;
  if (c->nmembers > 1) WEFT_CHECK(weft_ib_send_members(c));
  c->stage = IB_READY;
  /* From now on the control connection only tells when the sender is gone. */
  void* bufs[1] = {&c->live_byte};
  size_t sizes[1] = {1};
  int tags[1] = {0};
  return sock->irecv(c->ctrl, 1, bufs, sizes, tags, &c->ctrl_req);
}

/* Sender: the handle names the receiver's first member, so the queue pairs to it connect now;
 * those to its other members once it has written their addresses (weft_ib_connect_rest). */
static ncclResult_t connect_sender(struct ib_comm* c) {
  struct ib_addr* first = &c->peer.m.a[0];
  memcpy(first->gid, c->peer.info.gid, 16);
  first->lid = c->peer.info.lid;
  first->mtu = c->peer.info.mtu;
  WEFT_CHECK(connect_qps(c, 0, 1));
  c->qps_up = c->peer_members == 1;
  c->stage = IB_READY;
  return ncclSuccess;
}

ncclResult_t weft_ib_connect_rest(struct ib_comm* c) {
  struct ib_members* landed = ib_fifo_members(c);
  if (c->qps_up || __atomic_load_n(&landed->ready, __ATOMIC_ACQUIRE) == 0) return ncclSuccess;
  memcpy(&c->peer.m.a[1], &landed->a[1], sizeof(landed->a[0]) * (size_t)(c->peer_members - 1));
  WEFT_CHECK(connect_qps(c, 1, c->peer_members));
  c->qps_up = 1;
  return ncclSuccess;
}

/* ---- setup ---- */

/* The receiver's one setup step: the sender's address arrives, the queue pair connects. */
ncclResult_t weft_ib_progress_setup(struct ib_comm* c) {
  if (c->error != ncclSuccess || c->stage == IB_READY) return c->error;
  int done = 0;
  if (sock->test(c->ctrl_req, &done, NULL) != ncclSuccess)
    return weft_ib_fail(c, ncclRemoteError, "the sender went away during setup");
  if (!done) return ncclSuccess;
  c->ctrl_req = NULL;
  return connect_receiver(c);
}

/* ---- listen, connect, accept, close ---- */

static struct ib_comm* comm_new(int is_send, int dev, const struct weft_auth_key* key) {
  struct ib_comm* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->is_send = is_send;
  c->dev = &devs[dev];
  for (int k = 0; k < c->dev->nmembers; k++) c->m[k].port = c->dev->member[k];
  if (key)
    c->key = *key;
  else
    weft_auth_public_key(&c->key);
  snprintf(c->peer_addr, sizeof(c->peer_addr), "?");
  /* NCCL_IB_PCI_RELAXED_ORDERING 1 or 2 (NCCL's default: where supported): where the library takes
   * optional access flags, data buffers are registered for relaxed ordering. */
  c->relaxed =
      weft_param_int("NCCL_IB_PCI_RELAXED_ORDERING") != 0 && weft_ibv_load(NULL)->reg_mr_iova2 != NULL;
  for (int i = 0; i < IB_SLOTS; i++) c->reqs[i].c = c;
  weft_ib_regcache_init(c);
  return c;
}

static void members_free(struct ib_comm* c, const struct weft_ibv_fns* ibv) {
  for (int k = 0; k < IB_MAX_MEMBERS; k++) {
    struct ib_member* m = &c->m[k];
    if (m->fifo_mr) ibv->dereg_mr(m->fifo_mr);
    if (m->seq_mr) ibv->dereg_mr(m->seq_mr);
    if (m->meta_mr) ibv->dereg_mr(m->meta_mr);
    if (m->cq) ibv->destroy_cq(m->cq);
    if (m->pd) ibv->dealloc_pd(m->pd);
  }
}

static void comm_free(struct ib_comm* c) {
  const struct weft_ibv_fns* ibv = weft_ibv_load(NULL);
  if (!c->is_send && c->stage == IB_READY && c->error == ncclSuccess) weft_ib_say_closed(c);
  for (int i = 0; i < IB_SLOTS; i++) weft_ib_req_release(&c->reqs[i]);
  if (c->stage == IB_READY)
    WEFT_INFO(WEFT_NET,
              "NET/IB: %s connection %s peer GID %s closed: %llu buffers found kept registered, %llu "
              "registered for their request",
              c->dev->name, c->is_send ? "to" : "from", c->peer_addr, (unsigned long long)c->regs.hits,
              (unsigned long long)c->own_regs);
  weft_net_regcache_fini(&c->regs);
  for (int i = 0; i < c->nqps; i++)
    if (c->qp[i]) ibv->destroy_qp(c->qp[i]);
  members_free(c, ibv);
  free(c->fifo);
  if (c->ctrl) c->is_send ? sock->close_send(c->ctrl) : sock->close_recv(c->ctrl);
  free(c);
}

static ncclResult_t ib_listen(int dev, const struct weft_auth_key* key, void* handle, void** out) {
  *out = NULL;
  if (dev < 0 || dev >= ndevs) {
    WEFT_WARN("NET/IB: device %d does not exist (%d devices)", dev, ndevs);
    return ncclInvalidArgument;
  }
  WEFT_CHECK(refuse_if_encrypted());
  struct ib_listen* l = calloc(1, sizeof(*l));
  struct ib_comm* c = l ? comm_new(0, dev, key) : NULL;
  if (c != NULL) {
    /* NCCL's count: NCCL_IB_QPS_PER_CONNECTION per member, here at most 4 in all (the handle's
     * room), so at least one per member. */
    int64_t n = weft_param_int("NCCL_IB_QPS_PER_CONNECTION");
    c->nmembers = c->dev->nmembers;
    n = (n < 1 ? 1 : n) * c->nmembers;
    c->nqps = n > IB_MAX_QPS ? IB_MAX_QPS : (int)n;
    c->split = weft_param_int("NCCL_IB_SPLIT_DATA_ON_QPS") == 1;
    int64_t ar = weft_param_int("NCCL_IB_ADAPTIVE_ROUTING");
    c->ar = ar == -2 ? !c->m[0].port->ethernet : ar == 1; /* NCCL's default: InfiniBand only */
  }
  ncclResult_t res = c ? make_resources(c) : ncclSystemError;
  if (res == ncclSuccess) res = sock->listen(0, key, handle, &l->sock_listen);
  if (res != ncclSuccess) {
    if (c) comm_free(c);
    free(l);
    return res;
  }
  /* The handle is bytes at any alignment (the connector's handle name): copied, not assigned. */
  memcpy((char*)handle + offsetof(struct ib_handle, info), &c->info.info, sizeof(c->info.info));
  l->pending = c;
  *out = l;
  return ncclSuccess;
}

/* A sender uses at most one member per queue pair (the receiver chose their number): with more
 * members than that, the rest stay idle on this connection. */
static void sender_members(struct ib_comm* c) {
  c->nmembers = c->dev->nmembers < c->nqps ? c->dev->nmembers : c->nqps;
  if (c->nmembers < c->dev->nmembers)
    WEFT_INFO(WEFT_NET,
              "NET/IB: %s connection to peer GID %s: the receiver's device has %d member(s) and %d queue "
              "pair(s): %d of our %d members carry it",
              c->dev->name, c->peer_addr, c->peer_members, c->nqps, c->nmembers, c->dev->nmembers);
}

static ncclResult_t ib_connect(int dev, const struct weft_auth_key* key, void* handle, void** out) {
  *out = NULL;
  if (dev < 0 || dev >= ndevs) return ncclInvalidArgument;
  WEFT_CHECK(refuse_if_encrypted());
  void* ctrl = NULL;
  /* the socket keeps its progress in its part, at the handle's start */
  WEFT_CHECK(sock->connect(0, key, (char*)handle + offsetof(struct ib_handle, sock), &ctrl));
  if (ctrl == NULL) return ncclSuccess;
  struct ib_comm* c = comm_new(1, dev, key);
  if (c == NULL) {
    sock->close_send(ctrl);
    return ncclSystemError;
  }
  c->ctrl = ctrl;
  memcpy(&c->peer.info, (const char*)handle + offsetof(struct ib_handle, info), sizeof(c->peer.info));
  c->nqps = c->peer.info.nqps >= 1 && c->peer.info.nqps <= IB_MAX_QPS ? (int)c->peer.info.nqps : 1;
  c->split = c->peer.info.split == 1;
  c->ar = c->peer.info.ar == 1;
  int64_t threshold = weft_param_int("NCCL_IB_AR_THRESHOLD");
  c->ar_threshold = threshold < 0 ? 0 : (size_t)threshold;
  ncclResult_t res = check_peer(c);
  if (res == ncclSuccess) sender_members(c);
  if (res == ncclSuccess) res = make_resources(c);
  if (res == ncclSuccess) res = sock->isend(c->ctrl, &c->info, sizeof(c->info), 0, &c->ctrl_req);
  if (res == ncclSuccess && c->ctrl_req == NULL)
    res = weft_ib_fail(c, ncclInternalError, "no request free on a new connection");
  if (res == ncclSuccess) res = connect_sender(c);
  if (res != ncclSuccess) {
    comm_free(c);
    return res;
  }
  *out = c;
  return ncclSuccess;
}

static ncclResult_t ib_accept(void* listen_comm, void** out) {
  struct ib_listen* l = listen_comm;
  struct ib_comm* c = l->pending;
  *out = NULL;
  if (c == NULL) {
    WEFT_WARN("NET/IB: a listener accepts one connection");
    return ncclInvalidUsage;
  }
  if (c->ctrl == NULL) {
    WEFT_CHECK(sock->accept(l->sock_listen, &c->ctrl));
    if (c->ctrl == NULL) return ncclSuccess;
    void* bufs[1] = {&c->peer};
    size_t sizes[1] = {sizeof(c->peer)};
    int tags[1] = {0};
    WEFT_CHECK(sock->irecv(c->ctrl, 1, bufs, sizes, tags, &c->ctrl_req));
    if (c->ctrl_req == NULL) return weft_ib_fail(c, ncclInternalError, "no request free on a new connection");
  }
  WEFT_CHECK(weft_ib_progress_setup(c));
  if (c->stage != IB_READY) return ncclSuccess;
  l->pending = NULL;
  *out = c;
  return ncclSuccess;
}

static ncclResult_t ib_close(void* comm) {
  if (comm) comm_free(comm);
  return ncclSuccess;
}

static ncclResult_t ib_close_listen(void* listen_comm) {
  struct ib_listen* l = listen_comm;
  if (l == NULL) return ncclSuccess;
  if (l->pending) comm_free(l->pending);
  ncclResult_t res = sock->close_listen(l->sock_listen);
  free(l);
  return res;
}

const struct weft_net_ops weft_net_ib_ops = {
    .name = "IB",
    .init = ib_init,
    .devices = ib_devices,
    .get_properties = ib_props,
    .listen = ib_listen,
    .connect = ib_connect,
    .accept = ib_accept,
    .isend = weft_ib_isend,
    .irecv = weft_ib_irecv,
    .test = weft_ib_test,
    .isend_meta = weft_ib_isend_meta,
    .test_meta = weft_ib_test_meta,
    .keep_registered = weft_ib_keep_registered,
    .drop_registered = weft_ib_drop_registered,
    .gpu_direct = weft_ib_gpu_direct,
    .keep_registered_gpu = weft_ib_keep_registered_gpu,
    .close_send = ib_close,
    .close_recv = ib_close,
    .close_listen = ib_close_listen,
};

#else

static ncclResult_t ib_unavailable(void) {
  WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: built without <infiniband/verbs.h>");
  return ncclSystemError;
}
const struct weft_net_ops weft_net_ib_ops = {.name = "IB", .init = ib_unavailable};

#endif
