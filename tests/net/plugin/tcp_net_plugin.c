/* A small external network plugin for the tests: plain TCP over 127.0.0.1 behind the NCCL net
 * plugin ABI, built once per ABI version (TCPTEST_VERSION 8 or 12; 0 builds a library that
 * exports no plugin symbol). Written from the ABI alone, apart from Weft's own declarations, so
 * it checks them. It is strict where the ABI asks something of its caller: every isend/irecv
 * must come with an mhandle this comm registered that covers the buffer, only host memory may
 * be registered, receives have one buffer. It counts the bytes it sends and logs them when a
 * send comm closes ("tcptest: ... bytes sent"), so scripts can tell it really carried data, and
 * WARNs when a comm closes with memory still registered.
 * TCPTEST_GPU=cuda or dmabuf: it also takes GPU memory of the emulated CUDA runtime (which is this
 * process's memory), registered by address (NCCL_PTR_CUDA) or, with dmabuf, also through
 * regMrDmaBuf with the emulator's DMA-BUF records (tests/gpuemu/emu_dmabuf.h); a message received
 * into GPU memory lands whole 8-byte words at a time, as a NIC's writes do. TCPTEST_FORCE_FLUSH=1
 * (v9 and later): the device says GPU memory it writes needs a flush. */
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

#include "../../gpuemu/emu_dmabuf.h"

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
#define PTR_CUDA 2
#define PTR_DMABUF 4
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
  int gpu;
};
struct comm;
struct req {
  struct comm* comm;
  int used, done;
  uint64_t len; /* the message's length: header on the wire */
  size_t cap, off;
  char* data;
  char* bounce; /* a receive into GPU memory: the bytes land here, then word by word in data */
};
struct comm {
  int fd, is_send;
  int nreg; /* registrations not yet deregistered */
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

/* TCPTEST_GPU: 0 host memory only, 1 ("cuda") GPU memory by address too, 2 ("dmabuf") and DMA-BUFs. */
static int gpu_mode(void) {
  const char* v = getenv("TCPTEST_GPU");
  if (v == NULL) return 0;
  return strcmp(v, "dmabuf") == 0 ? 2 : strcmp(v, "cuda") == 0;
}

static res_t tt_reg(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != PTR_HOST && !(type == PTR_CUDA && gpu_mode() >= 1)) {
    SAY(LOG_WARN, "tcptest: regMr of memory type %d; only host memory is supported", type);
    return BAD_ARG;
  }
  struct mr* m = malloc(sizeof(*m));
  *m = (struct mr){MAGIC, comm, (uintptr_t)data, (uintptr_t)data + size, type == PTR_CUDA};
  ((struct comm*)comm)->nreg++;
  *mhandle = m;
  return OK;
}
/* The emulator's record must name this process's memory, and [data, data+size) lie at offset in it. */
static res_t tt_reg_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mh) {
  struct weft_emu_dmabuf rec;
  if (gpu_mode() < 2 || type != PTR_CUDA || pread(fd, &rec, sizeof(rec), 0) != (ssize_t)sizeof(rec) ||
      memcmp(rec.magic, WEFT_EMU_DMABUF_MAGIC, 8) != 0 || rec.pid != getpid() || offset > rec.size ||
      size > rec.size - offset || (uintptr_t)data != rec.dptr + offset) {
    SAY(LOG_WARN, "tcptest: regMrDmaBuf of %zu bytes at %p (type %d, offset %llu, fd %d) refused", size, data,
        type, (unsigned long long)offset, fd);
    return BAD_ARG;
  }
  return tt_reg(comm, data, size, PTR_CUDA, mh);
}

static res_t tt_dereg(void* comm, void* mhandle) {
  struct mr* m = mhandle;
  if (m == NULL || m->magic != MAGIC || m->comm != comm) return BAD_ARG;
  m->magic = 0;
  ((struct comm*)comm)->nreg--;
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
  *r = (struct req){c, 1, 0, c->is_send ? size : 0, size, 0, data, NULL};
  if (!c->is_send && m->gpu && (r->bounce = malloc(size + 1)) == NULL) return SYS_ERR;
  c->posted++;
  *request = r;
  return OK;
}

/* A received message into GPU memory: whole 8-byte words where it is aligned, for the LL
 * protocol's flag words that the GPU polls while it lands. */
static void land_words(struct req* r) {
  size_t n = (size_t)r->len, i = 0;
  if ((uintptr_t)r->data % 8 == 0)
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      memcpy(&w, r->bounce + i, 8);
      __atomic_store_n((uint64_t*)(r->data + i), w, __ATOMIC_RELAXED);
    }
  memcpy(r->data + i, r->bounce + i, n - i);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  free(r->bounce);
  r->bounce = NULL;
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
        p = (r->bounce ? r->bounce : r->data) + (r->off - sizeof(r->len));
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
    if (r->bounce) land_words(r);
    r->done = 1;
    c->completed++;
  }
  return OK;
}

static res_t tt_test(void* request, int* done, int* size) {
  struct req* r = request;
  *done = 0;
  if (r == NULL || !r->used) return BAD_ARG;
  /* A request that completed is reported even when the connection broke after it (the peer sent
   * its last message and closed): progress reads on into the next posted receives, and their EOF
   * is theirs, not this one's. */
  res_t res = progress(r->comm);
  if (!r->done) return res;
  *done = 1;
  if (size) *size = (int)r->len;
  r->used = 0;
  return OK;
}

static res_t tt_close(void* comm) {
  struct comm* c = comm;
  if (c == NULL) return OK;
  if (c->is_send) SAY(LOG_INFO, "tcptest: send comm closed, %llu bytes sent", (unsigned long long)c->bytes);
  if (c->nreg)
    SAY(LOG_WARN, "tcptest: a %s comm closed with %d registrations left", c->is_send ? "send" : "receive",
        c->nreg);
  for (int i = 0; i < MAX_REQS; i++) free(c->reqs[i].bounce);
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

/* Everything below follows the version: V is TCPTEST_VERSION, each #if a change in the ABI. */
#define V TCPTEST_VERSION
#if V != 0
struct props {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
#if V >= 8
  int reg_is_global;
#endif
#if V >= 9
  int force_flush;
#endif
  int speed, port;
  float latency;
  int max_comms, max_recvs;
#if V >= 7
  int dev_type, dev_version;
#endif
#if V >= 9
  struct {
    int ndevs;
    int devs[V >= 12 ? 8 : 4];
  } vprops;
  size_t max_p2p_bytes, max_coll_bytes;
#endif
#if V >= 11
  int max_multi_request;
#endif
#if V >= 12
  int16_t rail, plane;
#endif
};
static res_t tt_props(int dev, struct props* p) {
  if (dev != 0) return BAD_ARG;
  memset(p, 0, sizeof(*p));
  p->name = "lo";
  p->ptr_support = PTR_HOST | (gpu_mode() >= 1 ? PTR_CUDA : 0) | (gpu_mode() >= 2 ? PTR_DMABUF : 0);
#if V >= 9
  p->force_flush = getenv("TCPTEST_FORCE_FLUSH") != NULL && getenv("TCPTEST_FORCE_FLUSH")[0] == '1';
#endif
  p->speed = 10000;
  p->max_comms = 65536;
  p->max_recvs = 1;
#if V >= 9
  p->vprops.ndevs = 1;
  p->max_p2p_bytes = p->max_coll_bytes = (size_t)1 << 30;
#endif
  return OK;
}

struct dev_handle;
struct config {
  int traffic_class;
};
typedef res_t (*prof_t)(void**, int, void*, int64_t, void*);
static int ctx_token; /* v11 and later: what init hands out and listen/connect must get back */
#if V >= 11
#define CTX void *ctx,
#define CHECK_CTX() \
  if (ctx != &ctx_token) return BAD_ARG
static res_t vn_init(void** ctx, uint64_t id, struct config* cfg, logger_t log, prof_t prof) {
  (void)id, (void)cfg, (void)prof;
  *ctx = &ctx_token;
  return tt_init_common(log);
}
static res_t vn_finalize(void* ctx) { return ctx == &ctx_token ? OK : BAD_ARG; }
#else
#define CTX
#define CHECK_CTX() (void)ctx_token
#if V == 10
static res_t vn_init(logger_t log, prof_t prof) {
  (void)prof;
  return tt_init_common(log);
}
#else
static res_t vn_init(logger_t log) { return tt_init_common(log); }
#endif
#endif
static res_t vn_listen(CTX int dev, void* h, void** l) {
  CHECK_CTX();
  return tt_listen(dev, h, l);
}
#if V == 6
static res_t vn_connect(int dev, void* h, void** sc) { return tt_connect(dev, h, sc); }
static res_t vn_accept(void* l, void** rc) { return tt_accept(l, rc); }
#else
#if V == 10
static res_t vn_connect(int dev, struct config* cfg, void* h, void** sc, struct dev_handle** dc) {
  (void)cfg;
#else
static res_t vn_connect(CTX int dev, void* h, void** sc, struct dev_handle** dc) {
  CHECK_CTX();
#endif
  if (dc) *dc = NULL;
  return tt_connect(dev, h, sc);
}
static res_t vn_accept(void* l, void** rc, struct dev_handle** dc) {
  if (dc) *dc = NULL;
  return tt_accept(l, rc);
}
#endif
/* Sizes: int up to v7 (regMr) or v8 (isend/irecv), size_t after. */
#if V >= 8
typedef size_t reg_size_t;
#else
typedef int reg_size_t;
#endif
#if V >= 9
typedef size_t msg_size_t;
#else
typedef int msg_size_t;
#endif
static res_t vn_reg(void* comm, void* data, reg_size_t size, int type, void** mh) {
  return (long long)size < 0 ? BAD_ARG : tt_reg(comm, data, (size_t)size, type, mh);
}
#if V >= 10
#define PH void *ph,
#define PHS void **ph,
#define PH_UNUSED (void)ph
#else
#define PH
#define PHS
#define PH_UNUSED
#endif
static res_t vn_isend(void* c, void* data, msg_size_t size, int tag, void* mh, PH void** req) {
  (void)tag;
  PH_UNUSED;
  return (long long)size < 0 ? BAD_ARG : tt_isend(c, data, (size_t)size, mh, req);
}
static res_t vn_irecv(void* c, int n, void** data, msg_size_t* sizes, int* tags, void** mh, PHS void** req) {
  (void)tags;
  PH_UNUSED;
  return n != 1 || (long long)sizes[0] < 0 ? BAD_ARG : tt_irecv(c, n, data, (size_t)sizes[0], mh, req);
}

#define STR2(x) #x
#define STR(x) STR2(x)
#define TABLE2(v) ncclNetPlugin_v##v
#define TABLE(v) TABLE2(v)
struct {
  const char* name;
  __typeof__(vn_init)* init;
  res_t (*devices)(int*);
  res_t (*get_properties)(int, struct props*);
  __typeof__(vn_listen)* listen;
  __typeof__(vn_connect)* connect;
  __typeof__(vn_accept)* accept;
  __typeof__(vn_reg)* reg_mr;
  __typeof__(tt_reg_dmabuf)* reg_mr_dmabuf;
  res_t (*dereg_mr)(void*, void*);
  __typeof__(vn_isend)* isend;
  __typeof__(vn_irecv)* irecv;
  void* iflush;
  res_t (*test)(void*, int*, int*);
  res_t (*close_send)(void*);
  res_t (*close_recv)(void*);
  res_t (*close_listen)(void*);
#if V >= 7
  void *get_device_mr, *irecv_consumed;
#endif
#if V >= 9
  void* make_vdevice;
#endif
#if V >= 11
  res_t (*finalize)(void*);
  void* set_net_attr;
#endif
} TABLE(V) = {
  "TcpTest-v" STR(V),
  vn_init,
  tt_devices,
  tt_props,
  vn_listen,
  vn_connect,
  vn_accept,
  vn_reg,
  tt_reg_dmabuf,
  tt_dereg,
  vn_isend,
  vn_irecv,
  NULL,
  tt_test,
  tt_close,
  tt_close,
  tt_close_listen,
#if V >= 7
  NULL,
  NULL,
#endif
#if V >= 9
  NULL,
#endif
#if V >= 11
  vn_finalize,
  NULL,
#endif
};
#endif

#if V == 12
/* A CollNet table beside it: Weft reports it and does not use it (nothing here is callable). */
struct {
  const char* name;
  void* calls[24];
} ncclCollNetPlugin_v12 = {"TcpTest-CollNet", {0}};
#elif V == 0
/* TCPTEST_VERSION 0: a library with no plugin symbol at all. */
int tcptest_no_symbol = 1;
#endif
