/* Network connectors: the connector FIFO lives in this process's memory on both sides and the
 * proxy thread moves each step over the network selected by NCCL_NET (built-in: Socket).
 * Setup is a listen / connect / accept handshake carried by the bootstrap. */
#include "transport/net.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "proxy/proxy.h"
#include "transport/connector.h"
#include "transport/net_plugin.h"
#include "transport/transport.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
#include "util/socket.h"

/* NCCL's order: InfiniBand when a device is up, else sockets. */
static const struct weft_net_ops* builtins[] = {&weft_net_ib_ops, &weft_net_socket_ops};
_Static_assert(sizeof(((struct weft_conn_handle*)0)->name) >= WEFT_NET_HANDLE_BYTES,
               "a connector handle must hold a network handle");
static const struct weft_net_ops* chosen;
static ncclResult_t init_result = ncclSuccess;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* As NCCL: plugins first (in NCCL_NET_PLUGIN order), then the built-ins. */
static int candidates(const struct weft_net_ops** out, int max) {
  const struct weft_net_ops* const* plugins;
  int n = 0, np;
  weft_net_plugins(&plugins, &np);
  for (int i = 0; i < np && n < max; i++) out[n++] = plugins[i];
  for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]) && n < max; i++) out[n++] = builtins[i];
  return n;
}

static void net_init(void) {
  const char* want = weft_param_str("NCCL_NET");
  if (want != NULL && want[0] == 0) want = NULL;
  const struct weft_net_ops* nets[WEFT_NET_MAX_PLUGINS + 4];
  int n = candidates(nets, (int)(sizeof(nets) / sizeof(nets[0])));
  char names[512] = "";
  for (int i = 0; i < n; i++) {
    size_t len = strlen(names);
    snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", nets[i]->name);
    if (want != NULL && strcasecmp(want, nets[i]->name) != 0) continue;
    if (chosen == NULL && nets[i]->init() == ncclSuccess) chosen = nets[i];
  }
  if (chosen) {
    WEFT_INFO(WEFT_NET | WEFT_INIT, "Using network %s", chosen->name);
    return;
  }
  if (want)
    WEFT_WARN("NCCL_NET=%s names no usable network; the networks available are: %s", want, names);
  else
    WEFT_WARN("No usable network among: %s", names);
  init_result = want ? ncclInvalidUsage : ncclSystemError;
}

ncclResult_t weft_net_get(const struct weft_net_ops** out) {
  pthread_once(&once, net_init);
  *out = chosen;
  return chosen ? ncclSuccess : init_result;
}

int weft_net_near_dev(const struct weft_net_near* near, int ndev, int channel) {
  if (near == NULL || ndev <= 0) return 0;
  int n = near->n > 0 ? near->n : ndev;
  int sharers = near->sharers > 0 ? near->sharers : 1;
  int spread = (n + sharers - 1) / sharers;
  int i = (near->rail * spread + (channel < 0 ? 0 : channel) % spread) % n;
  int dev = near->n > 0 ? near->dev[i] : i;
  return dev < ndev ? dev : 0;
}

int weft_net_near_gdr(const struct weft_net_near* near, int dev) {
  if (near == NULL) return 0;
  if (near->n == 0) return near->gdr_unplaced;
  for (int i = 0; i < near->n; i++)
    if (near->dev[i] == dev) return (int)(near->gdr >> i & 1);
  return 0;
}

/* This side's device for p's connector, and its name for the log. */
static int device_for(const struct weft_net_ops* net, const struct weft_net_peer* p) {
  int ndev = 0;
  if (net->devices(&ndev) != ncclSuccess) return 0;
  int dev = weft_net_near_dev(p->near, ndev, p->channel);
  struct weft_net_props props;
  if (ndev > 1 && net->get_properties(dev, &props) == ncclSuccess)
    WEFT_INFO(WEFT_NET | WEFT_INIT, "rank %d: channel %d with rank %d over %s device %d (%s)", p->rank,
              p->channel, p->peer, net->name, dev, props.name);
  return dev;
}

/* Who a side is, exchanged at setup so errors name a peer's host distinctly even where every
 * host has the same host name (containers, namespaces): its host identity (WEFT_HOSTID, else
 * NCCL_HOSTID, else the host name) and the address of its network device. */
struct who {
  char host[64];
  char addr[64];
};

struct ack {
  int32_t ok;
  struct who who;
};

static void who_am_i(const struct weft_net_ops* net, int dev, struct who* w) {
  memset(w, 0, sizeof(*w));
  const char* id = weft_param_str("WEFT_HOSTID");
  if (id == NULL) id = weft_param_str("NCCL_HOSTID");
  if (id != NULL)
    snprintf(w->host, sizeof(w->host), "%s", id);
  else
    gethostname(w->host, sizeof(w->host) - 1);
  struct weft_net_props props;
  if (net->get_properties(dev, &props) == ncclSuccess) snprintf(w->addr, sizeof(w->addr), "%s", props.addr);
  w->addr[strcspn(w->addr, "<")] = 0; /* the listening port says nothing about the host */
}

/* "h2, 10.1.2.3": what errors print after "host". */
static void who_label(const struct who* w, char* out, size_t size) {
  char host[60], addr[60]; /* bounded (and terminated) whatever the peer sent */
  snprintf(host, sizeof(host), "%.59s", w->host);
  snprintf(addr, sizeof(addr), "%.59s", w->addr);
  snprintf(out, size, "%s%s%s", host[0] ? host : "?", addr[0] ? ", " : "", addr);
}

/* Per connector: the listener until accepted, then the proxy connection. */
struct net_state {
  const struct weft_net_ops* net;
  void* listen_comm;
  struct weft_proxy_conn* proxy;
};

static void net_release(struct weft_conn_mem* m) {
  struct net_state* st = m->transport;
  if (st != NULL) {
    weft_proxy_conn_remove(st->proxy);
    if (st->listen_comm) st->net->close_listen(st->listen_comm);
    free(st);
  }
  if (m->fifo_free != NULL) m->fifo_free(m); /* the proxy no longer receives into it */
  weft_conn_mem_free_base(m);
  free(m);
}

static ncclResult_t mem_create(size_t simple, size_t ll, struct weft_conn_mem** out,
                               struct weft_conn_handle* h) {
  struct weft_conn_mem* m;
  WEFT_CHECK(weft_conn_mem_create(simple, ll, 0, "net", &m, h));
  m->release = net_release;
  m->transport = calloc(1, sizeof(struct net_state));
  if (m->transport == NULL) {
    net_release(m);
    return ncclSystemError;
  }
  *out = m;
  return ncclSuccess;
}

/* Repeat step until *done, polling the abort flag and the bootstrap deadline. */
static ncclResult_t wait_connected(const struct weft_net_peer* p, const char* what, void* arg,
                                   ncclResult_t (*step)(void* arg, void** comm), void** comm) {
  int64_t deadline = weft_socket_deadline(weft_param_int("WEFT_BOOTSTRAP_TIMEOUT"));
  for (;;) {
    WEFT_CHECK(step(arg, comm));
    if (*comm != NULL) return ncclSuccess;
    if (weft_socket_aborted(p->abort_flag)) return ncclInvalidUsage;
    if (weft_socket_now_ns() >= deadline) {
      WEFT_WARN("Rank %d: %s rank %d (host %s) over the network timed out (WEFT_BOOTSTRAP_TIMEOUT)", p->rank,
                what, p->peer, p->peer_host);
      return ncclRemoteError;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

struct connect_arg {
  const struct weft_net_ops* net;
  int dev;
  const struct weft_auth_key* key;
  void* handle;
};
static ncclResult_t connect_step(void* arg, void** comm) {
  struct connect_arg* a = arg;
  return a->net->connect(a->dev, a->key, a->handle, comm);
}
static ncclResult_t accept_step(void* arg, void** comm) {
  struct net_state* st = arg;
  return st->net->accept(st->listen_comm, comm);
}

static ncclResult_t start_proxy(const struct weft_net_peer* p, int is_send, struct weft_conn_mem* m,
                                void* comm) {
  struct net_state* st = m->transport;
  struct weft_proxy_conn_desc d = {.is_send = is_send,
                                   .mem = m,
                                   .net = st->net,
                                   .net_comm = comm,
                                   .rank = p->rank,
                                   .peer = p->peer,
                                   .abort_flag = p->abort_flag,
                                   .async_result = p->async_result,
                                   .cause = p->cause};
  snprintf(d.peer_host, sizeof(d.peer_host), "%s", p->peer_host ? p->peer_host : "?");
  ncclResult_t res = weft_proxy_conn_add(&d, &st->proxy);
  if (res != ncclSuccess) is_send ? st->net->close_send(comm) : st->net->close_recv(comm);
  return res;
}

/* What the receiving side offers: where to connect, and who it is. */
struct offer {
  struct weft_conn_handle h;
  struct who who;
};
_Static_assert(sizeof(struct offer) <= WEFT_TRANSPORT_HANDLE_BYTES,
               "a network offer must fit a transport handle");

ncclResult_t weft_net_offer(const struct weft_net_peer* p, size_t simple, size_t ll,
                            struct weft_conn_mem** out, void* handle) {
  const struct weft_net_ops* net;
  WEFT_CHECK(weft_net_get(&net));
  struct offer* o = handle;
  memset(o, 0, sizeof(*o));
  struct weft_conn_mem* m;
  WEFT_CHECK(mem_create(simple, ll, &m, &o->h));
  struct net_state* st = m->transport;
  st->net = net;
  memset(o->h.name, 0, sizeof(o->h.name));
  int dev = device_for(net, p);
  ncclResult_t res = net->listen(dev, weft_bootstrap_key(p->bootstrap), o->h.name, &st->listen_comm);
  o->h.is_shm = WEFT_CONN_NET;
  o->h.local_ptr = 0;
  who_am_i(net, dev, &o->who);
  if (res != ncclSuccess) {
    net_release(m);
    return res;
  }
  *out = m;
  return ncclSuccess;
}

ncclResult_t weft_net_take(const struct weft_net_peer* p, const void* handle, int ack_tag,
                           struct weft_conn_mem** out, weft_net_before_proxy_fn before_proxy,
                           const void* arg) {
  const struct weft_net_ops* net;
  struct weft_conn_handle h, mine;
  WEFT_CHECK(weft_net_get(&net));
  int dev = device_for(net, p);
  struct who them;
  struct ack ack = {0};
  const struct offer* o = handle;
  h = o->h;
  them = o->who;
  char label[128];
  who_label(&them, label, sizeof(label));
  struct weft_net_peer lp = *p;
  lp.peer_host = label;
  p = &lp;
  struct weft_conn_mem* m = NULL;
  void* comm = NULL;
  ncclResult_t res = ncclInternalError;
  if (h.is_shm != WEFT_CONN_NET) {
    WEFT_WARN("Rank %d: rank %d (host %s) offered a shared-memory connector where a network one was expected",
              p->rank, p->peer, p->peer_host);
  } else if ((res = mem_create(h.simple_bytes, h.ll_bytes, &m, &mine)) == ncclSuccess) {
    ((struct net_state*)m->transport)->net = net;
    char handle[WEFT_NET_HANDLE_BYTES];
    memcpy(handle, h.name, sizeof(handle));
    struct connect_arg a = {net, dev, weft_bootstrap_key(p->bootstrap), handle};
    res = wait_connected(p, "connecting to", &a, connect_step, &comm);
    if (res == ncclSuccess && before_proxy != NULL) before_proxy(arg, m);
    if (res == ncclSuccess) res = start_proxy(p, 1, m, comm);
  }
  ack.ok = res == ncclSuccess;
  who_am_i(net, dev, &ack.who);
  ncclResult_t sent = weft_bootstrap_send(p->bootstrap, p->peer, ack_tag, &ack, sizeof(ack));
  if (res == ncclSuccess) res = sent;
  if (res != ncclSuccess) {
    if (m) net_release(m);
    return res;
  }
  *out = m;
  return ncclSuccess;
}

ncclResult_t weft_net_finish_offer(const struct weft_net_peer* p, int ack_tag, struct weft_conn_mem* m) {
  struct ack ack;
  WEFT_CHECK(weft_bootstrap_recv(p->bootstrap, p->peer, ack_tag, &ack, sizeof(ack)));
  if (!ack.ok) return ncclRemoteError;
  char label[128];
  who_label(&ack.who, label, sizeof(label));
  struct weft_net_peer lp = *p;
  lp.peer_host = label;
  p = &lp;
  struct net_state* st = m->transport;
  void* comm = NULL;
  WEFT_CHECK(wait_connected(p, "accepting a connection from", st, accept_step, &comm));
  st->net->close_listen(st->listen_comm);
  st->listen_comm = NULL;
  return start_proxy(p, 0, m, comm);
}

int weft_net_gpu_direct(const struct weft_net_peer* p) {
  const struct weft_net_ops* net;
  int ndev = 0;
  if (weft_net_get(&net) != ncclSuccess || net->gpu_direct == NULL || net->keep_registered_gpu == NULL ||
      net->devices(&ndev) != ncclSuccess)
    return 0;
  int dev = weft_net_near_dev(p->near, ndev, p->channel);
  return weft_net_near_gdr(p->near, dev) ? net->gpu_direct(dev) : 0;
}

struct weft_proxy_conn* weft_net_proxy_conn(const struct weft_conn_mem* mem) {
  if (mem == NULL || mem->transport == NULL || mem->release != net_release) return NULL;
  return ((struct net_state*)mem->transport)->proxy;
}
