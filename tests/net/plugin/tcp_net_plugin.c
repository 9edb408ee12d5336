/* A small external network plugin for the tests: plain TCP over 127.0.0.1 behind the NCCL net
 * plugin ABI, built once per ABI version (TCPTEST_VERSION 8 or 12; 0 builds a library that
 * exports no plugin symbol). Written from the ABI alone, apart from Weft's own declarations, so
 * it checks them. It is strict where the ABI asks something of its caller: every isend/irecv
 * must come with an mhandle this comm registered that covers the buffer, only host memory may
 * be registered, receives have one buffer. It counts the bytes it sends and logs them when a
 * send comm closes ("tcptest: ... bytes sent"), so scripts can tell it really carried data. */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef TCPTEST_VERSION
#define TCPTEST_VERSION 8
#endif
#if TCPTEST_VERSION == 0 /* the calls exist, no table points at them */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

typedef int res_t; /* ncclResult_t: 0 success, 2 system error, 3 internal, 4 invalid argument */
enum { OK = 0, SYS_ERR = 2, INTERNAL = 3, BAD_ARG = 4, REMOTE = 6 };
typedef void (*logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
#define LOG_WARN 2
#define LOG_INFO 3
#define SUBSYS_NET 0x10
#define PTR_HOST 1
#define MAX_REQS 32
#define MAGIC 0x74637074u

static logger_t logf_;
#define SAY(level, ...)                                                   \
  do {                                                                    \
    if (logf_) logf_(level, SUBSYS_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

struct handle {
  uint32_t magic, stage;
  struct sockaddr_in addr;
  int fd; /* connecting socket between calls of connect */
};
struct listen_comm {
  int fd;
};
struct mr {
  uint32_t magic;
  void* comm;
  uintptr_t lo, hi;
};
struct comm;
struct req {
  struct comm* comm;
  int used, done;
  uint64_t len; /* the message's length: header on the wire */
  size_t cap, off;
  char* data;
};
struct comm {
  int fd, is_send;
  uint64_t posted, completed, bytes;
  struct req reqs[MAX_REQS];
};

static res_t tt_init_common(logger_t log) {
  logf_ = log;
  SAY(LOG_INFO, "tcptest: plugin v%d initialized", TCPTEST_VERSION);
  return OK;
}
static res_t tt_devices(int* n) {
  *n = 1;
  return OK;
}

static res_t tt_listen(int dev, void* opaque, void** listen_comm) {
  struct handle* h = opaque;
  if (dev != 0) return BAD_ARG;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof(a)) || listen(fd, 64) ||
      getsockname(fd, (struct sockaddr*)&a, &len)) {
    SAY(LOG_WARN, "tcptest: listen failed: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return SYS_ERR;
  }
  struct listen_comm* l = calloc(1, sizeof(*l));
  l->fd = fd;
  memset(h, 0, sizeof(*h));
  h->magic = MAGIC;
  h->addr = a;
  *listen_comm = l;
  return OK;
}

static struct comm* new_comm(int fd, int is_send) {
  struct comm* c = calloc(1, sizeof(*c));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  c->fd = fd;
  c->is_send = is_send;
  return c;
}

/* Non-blocking on purpose: the first call only starts the connection, later calls finish it. */
static res_t tt_connect(int dev, void* opaque, void** send_comm) {
  struct handle* h = opaque;
  *send_comm = NULL;
  if (dev != 0 || h->magic != MAGIC) return BAD_ARG;
  if (h->stage == 0) {
    h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (h->fd < 0) return SYS_ERR;
    if (connect(h->fd, (struct sockaddr*)&h->addr, sizeof(h->addr)) && errno != EINPROGRESS) return SYS_ERR;
    h->stage = 1;
    return OK;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  struct sockaddr_in peer;
  socklen_t plen = sizeof(peer);
  if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) return SYS_ERR;
  if (getpeername(h->fd, (struct sockaddr*)&peer, &plen)) return OK; /* still connecting */
  *send_comm = new_comm(h->fd, 1);
  h->stage = 2;
  return OK;
}

static res_t tt_accept(void* listen_comm, void** recv_comm) {
  struct listen_comm* l = listen_comm;
  *recv_comm = NULL;
  int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK);
  if (fd < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? OK : SYS_ERR;
  *recv_comm = new_comm(fd, 0);
  return OK;
}

static res_t tt_reg(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != PTR_HOST) {
    SAY(LOG_WARN, "tcptest: regMr of memory type %d; only host memory is supported", type);
    return BAD_ARG;
  }
  struct mr* m = malloc(sizeof(*m));
  *m = (struct mr){MAGIC, comm, (uintptr_t)data, (uintptr_t)data + size};
  *mhandle = m;
  return OK;
}
static res_t tt_dereg(void* comm, void* mhandle) {
  struct mr* m = mhandle;
  if (m == NULL || m->magic != MAGIC || m->comm != comm) return BAD_ARG;
  m->magic = 0;
  free(m);
  return OK;
}

static res_t post(struct comm* c, void* data, size_t size, void* mhandle, void** request) {
  struct mr* m = mhandle;
  *request = NULL;
  uintptr_t lo = (uintptr_t)data;
  if (m == NULL || m->magic != MAGIC || m->comm != c || lo < m->lo || lo + size > m->hi) {
    SAY(LOG_WARN, "tcptest: %s of %zu bytes at %p without a registration of this comm covering it",
        c->is_send ? "isend" : "irecv", size, data);
    return INTERNAL;
  }
  struct req* r = &c->reqs[c->posted % MAX_REQS];
  if (r->used) return OK; /* full: NULL request */
  *r = (struct req){c, 1, 0, c->is_send ? size : 0, size, 0, data};
  c->posted++;
  *request = r;
  return OK;
}

/* Move the oldest requests along; 0, or an error once the connection broke. */
static res_t progress(struct comm* c) {
  while (c->completed < c->posted) {
    struct req* r = &c->reqs[c->completed % MAX_REQS];
    size_t total = sizeof(r->len) + (c->is_send ? r->len : 0);
    while (r->off < total || (!c->is_send && r->off < sizeof(r->len) + r->len)) {
      char* p;
      size_t want;
      if (r->off < sizeof(r->len)) {
        p = (char*)&r->len + r->off;
        want = sizeof(r->len) - r->off;
      } else {
        p = r->data + (r->off - sizeof(r->len));
        want = sizeof(r->len) + r->len - r->off;
      }
      ssize_t n = c->is_send ? send(c->fd, p, want, MSG_NOSIGNAL) : recv(c->fd, p, want, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return OK;
      if (n <= 0) return n == 0 ? REMOTE : SYS_ERR;
      r->off += (size_t)n;
      if (c->is_send) c->bytes += (size_t)n;
      if (!c->is_send && r->off == sizeof(r->len) && r->len > r->cap) {
        SAY(LOG_WARN, "tcptest: message of %llu bytes for a %zu-byte receive", (unsigned long long)r->len,
            r->cap);
        return INTERNAL;
      }
      total = sizeof(r->len) + r->len;
    }
    r->done = 1;
    c->completed++;
  }
  return OK;
}

static res_t tt_test(void* request, int* done, int* size) {
  struct req* r = request;
  *done = 0;
  if (r == NULL || !r->used) return BAD_ARG;
  res_t res = progress(r->comm);
  if (res != OK) return res;
  if (!r->done) return OK;
  *done = 1;
  if (size) *size = (int)r->len;
  r->used = 0;
  return OK;
}

static res_t tt_close(void* comm) {
  struct comm* c = comm;
  if (c == NULL) return OK;
  if (c->is_send) SAY(LOG_INFO, "tcptest: send comm closed, %llu bytes sent", (unsigned long long)c->bytes);
  close(c->fd);
  free(c);
  return OK;
}
static res_t tt_close_listen(void* listen_comm) {
  struct listen_comm* l = listen_comm;
  close(l->fd);
  free(l);
  return OK;
}

static res_t tt_isend(void* comm, void* data, size_t size, void* mh, void** request) {
  res_t res = post(comm, data, size, mh, request);
  return res == OK ? progress(comm) : res;
}
static res_t tt_irecv(void* comm, int n, void** data, size_t size, void** mh, void** request) {
  if (n != 1) return BAD_ARG; /* maxRecvs is 1 */
  return post(comm, data[0], size, mh ? mh[0] : NULL, request);
}

/* Properties: the fields up to maxRecvs, as each version lays them out. */
#if TCPTEST_VERSION == 8
struct props {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global, speed, port;
  float latency;
  int max_comms, max_recvs, dev_type, dev_version;
};
#else
struct props {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global, force_flush, speed, port;
  float latency;
  int max_comms, max_recvs, dev_type, dev_version;
  int vdevs[1 + 8];
  size_t max_p2p_bytes, max_coll_bytes;
  int max_multi_request;
  int16_t rail, plane;
};
#endif
static res_t tt_props(int dev, struct props* p) {
  if (dev != 0) return BAD_ARG;
  memset(p, 0, sizeof(*p));
  p->name = "lo";
  p->pci_path = NULL;
  p->ptr_support = PTR_HOST;
  p->speed = 10000;
  p->max_comms = 65536;
  p->max_recvs = 1;
#if TCPTEST_VERSION != 8
  p->max_p2p_bytes = p->max_coll_bytes = (size_t)1 << 30;
#endif
  return OK;
}

struct dev_handle;
#if TCPTEST_VERSION == 8
static res_t v8_init(logger_t log) { return tt_init_common(log); }
static res_t v8_connect(int dev, void* h, void** sc, struct dev_handle** dc) {
  (void)dc;
  return tt_connect(dev, h, sc);
}
static res_t v8_accept(void* l, void** rc, struct dev_handle** dc) {
  (void)dc;
  return tt_accept(l, rc);
}
static res_t v8_isend(void* c, void* data, int size, int tag, void* mh, void** req) {
  (void)tag;
  return size < 0 ? BAD_ARG : tt_isend(c, data, (size_t)size, mh, req);
}
static res_t v8_irecv(void* c, int n, void** data, int* sizes, int* tags, void** mh, void** req) {
  (void)tags;
  return n != 1 || sizes[0] < 0 ? BAD_ARG : tt_irecv(c, n, data, (size_t)sizes[0], mh, req);
}
struct {
  const char* name;
  res_t (*init)(logger_t);
  res_t (*devices)(int*);
  res_t (*get_properties)(int, struct props*);
  res_t (*listen)(int, void*, void**);
  res_t (*connect)(int, void*, void**, struct dev_handle**);
  res_t (*accept)(void*, void**, struct dev_handle**);
  res_t (*reg_mr)(void*, void*, size_t, int, void**);
  void* reg_mr_dmabuf;
  res_t (*dereg_mr)(void*, void*);
  res_t (*isend)(void*, void*, int, int, void*, void**);
  res_t (*irecv)(void*, int, void**, int*, int*, void**, void**);
  void* iflush;
  res_t (*test)(void*, int*, int*);
  res_t (*close_send)(void*);
  res_t (*close_recv)(void*);
  res_t (*close_listen)(void*);
  void *get_device_mr, *irecv_consumed;
} ncclNetPlugin_v8 = {"TcpTest-v8", v8_init,  tt_devices,      tt_props, tt_listen, v8_connect, v8_accept,
                      tt_reg,       NULL,     tt_dereg,        v8_isend, v8_irecv,  NULL,       tt_test,
                      tt_close,     tt_close, tt_close_listen, NULL,     NULL};
#elif TCPTEST_VERSION == 12
struct config {
  int traffic_class;
};
typedef res_t (*prof_t)(void**, int, void*, int64_t, void*);
static int ctx_token; /* what init hands out and listen/connect must get back */
static res_t v12_init(void** ctx, uint64_t id, struct config* cfg, logger_t log, prof_t prof) {
  (void)id, (void)cfg, (void)prof;
  *ctx = &ctx_token;
  return tt_init_common(log);
}
static res_t v12_listen(void* ctx, int dev, void* h, void** l) {
  return ctx != &ctx_token ? BAD_ARG : tt_listen(dev, h, l);
}
static res_t v12_connect(void* ctx, int dev, void* h, void** sc, struct dev_handle** dc) {
  (void)dc;
  return ctx != &ctx_token ? BAD_ARG : tt_connect(dev, h, sc);
}
static res_t v12_accept(void* l, void** rc, struct dev_handle** dc) {
  (void)dc;
  return tt_accept(l, rc);
}
static res_t v12_isend(void* c, void* data, size_t size, int tag, void* mh, void* ph, void** req) {
  (void)tag, (void)ph;
  return tt_isend(c, data, size, mh, req);
}
static res_t v12_irecv(void* c, int n, void** data, size_t* sizes, int* tags, void** mh, void** ph,
                       void** req) {
  (void)tags, (void)ph;
  return n != 1 ? BAD_ARG : tt_irecv(c, n, data, sizes[0], mh, req);
}
static res_t v12_finalize(void* ctx) { return ctx == &ctx_token ? OK : BAD_ARG; }
struct {
  const char* name;
  res_t (*init)(void**, uint64_t, struct config*, logger_t, prof_t);
  res_t (*devices)(int*);
  res_t (*get_properties)(int, struct props*);
  res_t (*listen)(void*, int, void*, void**);
  res_t (*connect)(void*, int, void*, void**, struct dev_handle**);
  res_t (*accept)(void*, void**, struct dev_handle**);
  res_t (*reg_mr)(void*, void*, size_t, int, void**);
  void* reg_mr_dmabuf;
  res_t (*dereg_mr)(void*, void*);
  res_t (*isend)(void*, void*, size_t, int, void*, void*, void**);
  res_t (*irecv)(void*, int, void**, size_t*, int*, void**, void**, void**);
  void* iflush;
  res_t (*test)(void*, int*, int*);
  res_t (*close_send)(void*);
  res_t (*close_recv)(void*);
  res_t (*close_listen)(void*);
  void *get_device_mr, *irecv_consumed, *make_vdevice;
  res_t (*finalize)(void*);
  void* set_net_attr;
} ncclNetPlugin_v12 = {"TcpTest-v12", v12_init, tt_devices,   tt_props, v12_listen,      v12_connect,
                       v12_accept,    tt_reg,   NULL,         tt_dereg, v12_isend,       v12_irecv,
                       NULL,          tt_test,  tt_close,     tt_close, tt_close_listen, NULL,
                       NULL,          NULL,     v12_finalize, NULL};
/* A CollNet table beside it: Weft reports it and does not use it (nothing here is callable). */
struct {
  const char* name;
  void* calls[24];
} ncclCollNetPlugin_v12 = {"TcpTest-CollNet", {0}};
#else
/* TCPTEST_VERSION 0: a library with no plugin symbol at all. */
int tcptest_no_symbol = 1;
#endif
