/* The test provider's fabric: protection domains, memory regions, completion queues and reliable
 * connected queue pairs, with the RC rules the IB transport relies on. A queue pair's RDMA writes
 * travel over a TCP connection to the peer device's listener, in order; the peer checks the rkey
 * and bounds against its memory regions, places the data, consumes a posted receive for a write
 * with immediate, and acknowledges. A send completes when acknowledged, so a completion means the
 * data is in the peer's memory. A key is good only in its own protection domain, so a key of
 * one device's registration used on another device's queue pair is refused like any bad key (a
 * transport that mixes up the members of a merged device fails). Errors complete as hardware
 * does: a bad lkey with a local
 * protection error, a bad rkey or range with a remote access error (both queue pairs enter the
 * error state), a write with immediate that finds no receive with an RNR error, a peer that is
 * gone with "retry exceeded"; after an error every outstanding request is flushed. A write of
 * whole 8-byte words to an aligned address lands word by word, never torn, as GPU pollers of flag
 * words need. Memory regions are ordinary memory, or the emulated CUDA runtime's device memory
 * registered through ibv_reg_dmabuf_mr: its DMA-BUF fds are not real dma-bufs but memfds holding
 * a record that names the range (tests/gpuemu/emu_dmabuf.h), and the region is that memory. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake.h"

#define WIRE_MAGIC 0x77656674u /* "weft" */
enum { OP_WRITE = 1, OP_WRITE_IMM = 2, OP_ACK = 3, OP_NAK = 4 };

struct wire_hello {
  uint32_t magic, dst_qpn, src_qpn;
};
struct wire_op {
  uint32_t type, imm, rkey, status; /* imm as the sender gave it (network order) */
  uint64_t addr, len, seq;
};

struct fake_mr {
  struct ibv_mr mr;
  int access;
  struct fake_mr* next;
};

struct fake_cq {
  struct ibv_cq cq;
  pthread_mutex_t mu;
  struct ibv_wc* wc;
  int head, n, cap;
};

struct pending {
  uint64_t wr_id, seq, len;
  int signaled;
};

struct fake_qp {
  struct ibv_qp qp;
  pthread_mutex_t mu;     /* state, the queues below */
  pthread_mutex_t out_mu; /* one message at a time on out_fd */
  int out_fd, in_fd;      /* our writes and their acks; the peer's writes and our acks */
  pthread_t ack_thread, in_thread;
  int ack_running, in_running;
  uint64_t next_seq;
  struct pending* sends; /* sent, not yet acknowledged, oldest first */
  int sends_head, nsends, sends_cap;
  uint64_t* recvs; /* posted receives' wr_ids, oldest first */
  int recvs_head, nrecvs, recvs_cap;
  struct fake_qp* next;
};

static pthread_mutex_t fab_mu = PTHREAD_MUTEX_INITIALIZER; /* the lists and counters below */
static struct fake_mr* mrs;
static struct fake_qp* qps;
static uint32_t next_key = 0x1000, next_qpn = 0x100;
static uint64_t nreg, ndereg, nmessages, ndmabuf;  /* weft_fake_verbs_counts */
static uint64_t device_messages[FAKE_MAX_DEVICES]; /* nmessages by the sending device */
static uint64_t nempty;   /* messages whose write with immediate carried no bytes (adaptive routing) */
static uint64_t nrelaxed; /* registrations asking for relaxed ordering */

void weft_fake_verbs_counts(uint64_t out[WEFT_FAKE_NCOUNTS]) {
  pthread_mutex_lock(&fab_mu);
  out[0] = nreg;
  out[1] = ndereg;
  out[2] = nreg - ndereg;
  out[3] = __atomic_load_n(&nmessages, __ATOMIC_RELAXED);
  out[4] = ndmabuf;
  pthread_mutex_unlock(&fab_mu);
}

/* WEFT_FAKE_IB_COUNTS=FILE: each process appends its counts at exit, one line (the tests of
 * whole jobs read them there, by field number: new counts go before by_device, whose list of one
 * count per device stays last). */
__attribute__((destructor)) static void report_counts(void) {
  const char* path = getenv("WEFT_FAKE_IB_COUNTS");
  if (path == NULL || path[0] == 0) return;
  uint64_t n[WEFT_FAKE_NCOUNTS];
  weft_fake_verbs_counts(n);
  char line[512];
  int len =
      snprintf(line, sizeof(line),
               "pid %d reg_mr %llu dereg_mr %llu live %llu messages %llu empty %llu relaxed %llu dmabuf %llu "
               "by_device",
               (int)getpid(), (unsigned long long)n[0], (unsigned long long)n[1], (unsigned long long)n[2],
               (unsigned long long)n[3], (unsigned long long)__atomic_load_n(&nempty, __ATOMIC_RELAXED),
               (unsigned long long)__atomic_load_n(&nrelaxed, __ATOMIC_RELAXED), (unsigned long long)n[4]);
  for (int d = 0; d < fake_ndevices(); d++)
    len += snprintf(line + len, sizeof(line) - (size_t)len, " %llu",
                    (unsigned long long)__atomic_load_n(&device_messages[d], __ATOMIC_RELAXED));
  len += snprintf(line + len, sizeof(line) - (size_t)len, "\n");
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, line, (size_t)len) != len) { /* nothing to do about it at exit */
  }
  close(fd);
}

/* ---- small helpers ---- */

static int send_all(int fd, const void* buf, size_t len) {
  for (const char* p = buf; len > 0;) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n, len -= (size_t)n;
  }
  return 0;
}

static int recv_all(int fd, void* buf, size_t len) {
  for (char* p = buf; len > 0;) {
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n, len -= (size_t)n;
  }
  return 0;
}

static int drain(int fd, uint64_t len) {
  char sink[4096];
  while (len > 0) {
    size_t n = len < sizeof(sink) ? (size_t)len : sizeof(sink);
    if (recv_all(fd, sink, n) != 0) return -1;
    len -= n;
  }
  return 0;
}

/* Appends to a growable ring; 0 on success. */
static int grow(void** items, size_t size, int* head, int n, int* cap) {
  if (n < *cap) return 0;
  int ncap = *cap ? *cap * 2 : 64;
  char* fresh = malloc((size_t)ncap * size);
  if (fresh == NULL) return -1;
  for (int i = 0; i < n; i++)
    memcpy(fresh + (size_t)i * size, (char*)*items + (size_t)((*head + i) % *cap) * size, size);
  free(*items);
  *items = fresh, *head = 0, *cap = ncap;
  return 0;
}

static void push_wc(struct ibv_cq* cq, const struct ibv_wc* wc) {
  struct fake_cq* c = (struct fake_cq*)cq;
  pthread_mutex_lock(&c->mu);
  if (grow((void**)&c->wc, sizeof(*c->wc), &c->head, c->n, &c->cap) == 0) {
    c->wc[(c->head + c->n) % c->cap] = *wc;
    c->n++;
  }
  pthread_mutex_unlock(&c->mu);
}

static void complete(struct fake_qp* q, struct ibv_cq* cq, uint64_t wr_id, enum ibv_wc_status st,
                     enum ibv_wc_opcode op, uint32_t len) {
  struct ibv_wc wc;
  memset(&wc, 0, sizeof(wc));
  wc.wr_id = wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = len;
  wc.qp_num = q->qp.qp_num;
  push_wc(cq, &wc);
}

static struct fake_mr* find_mr(uint32_t key, int by_rkey) {
  for (struct fake_mr* m = mrs; m; m = m->next)
    if ((by_rkey ? m->mr.rkey : m->mr.lkey) == key) return m;
  return NULL;
}

static int mr_covers(const struct fake_mr* m, uint64_t addr, uint64_t len) {
  uint64_t base = (uint64_t)(uintptr_t)m->mr.addr;
  return addr >= base && len <= m->mr.length && addr - base <= m->mr.length - len;
}

/* ---- error state ---- */

/* The queue pair enters the error state: the oldest send completes with status (a real error;
 * IBV_WC_WR_FLUSH_ERR when there is none), every other request is flushed. Called with q->mu. */
static void enter_error(struct fake_qp* q, enum ibv_wc_status status) {
  q->qp.state = IBV_QPS_ERR;
  for (; q->nsends > 0; q->nsends--) {
    struct pending* p = &q->sends[q->sends_head];
    q->sends_head = (q->sends_head + 1) % q->sends_cap;
    complete(q, q->qp.send_cq, p->wr_id, status, IBV_WC_RDMA_WRITE, 0);
    status = IBV_WC_WR_FLUSH_ERR;
  }
  for (; q->nrecvs > 0; q->nrecvs--) {
    complete(q, q->qp.recv_cq, q->recvs[q->recvs_head], IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0);
    q->recvs_head = (q->recvs_head + 1) % q->recvs_cap;
  }
}

static void fail_qp(struct fake_qp* q, enum ibv_wc_status status) {
  pthread_mutex_lock(&q->mu);
  if (q->qp.state != IBV_QPS_ERR && q->qp.state != IBV_QPS_RESET) enter_error(q, status);
  pthread_mutex_unlock(&q->mu);
}

/* ---- the responder: the peer's writes ---- */

/* How much of a word-by-word write is staged at a time: bounded memory on the responder's stack. */
enum { BOUNCE_WORDS = 2048 }; /* 16 KiB */

/* Lands nwords words at to, each with one 8-byte atomic store, as hardware lands an aligned
 * write: a GPU polling a flag word inside a longer write (the LL protocol) with 8-byte loads sees
 * it old or new, never half of each, and ThreadSanitizer sees no race with those loads. The data
 * goes through a bounce buffer because recv() into the target would store bytes. The last word is
 * a release store: whoever reads it with acquire sees everything this write (and every write
 * before it) put in memory. -1 when the connection breaks (some words may have landed). */
static int place_words(int fd, uint64_t* to, uint64_t nwords) {
  uint64_t bounce[BOUNCE_WORDS];
  while (nwords > 0) {
    uint64_t n = nwords < BOUNCE_WORDS ? nwords : BOUNCE_WORDS;
    if (recv_all(fd, bounce, n * sizeof(*bounce)) != 0) return -1;
    nwords -= n;
    uint64_t relaxed = nwords == 0 ? n - 1 : n; /* all but the write's last word */
    for (uint64_t i = 0; i < relaxed; i++) __atomic_store_n(to++, bounce[i], __ATOMIC_RELAXED);
    if (relaxed < n) __atomic_store_n(to, bounce[relaxed], __ATOMIC_RELEASE);
  }
  return 0;
}

static enum ibv_wc_status place_write(struct fake_qp* q, const struct wire_op* op) {
  pthread_mutex_lock(&fab_mu);
  struct fake_mr* m = find_mr(op->rkey, 1);
  /* An empty write touches no memory, so no key is checked (senders use it as a probe). A key
   * is good only in its own protection domain: the queue pair's. */
  int ok = op->len == 0 || (m && m->mr.pd == q->qp.pd && (m->access & IBV_ACCESS_REMOTE_WRITE) &&
                            mr_covers(m, op->addr, op->len));
  pthread_mutex_unlock(&fab_mu);
  /* The region could be deregistered while the data lands; tests never do that. */
  if (!ok) return drain(q->in_fd, op->len) == 0 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_RETRY_EXC_ERR;
  int whole_words = op->addr % 8 == 0 && op->len % 8 == 0; /* other writes have no word to keep */
  int broken = whole_words ? place_words(q->in_fd, (uint64_t*)(uintptr_t)op->addr, op->len / 8)
                           : recv_all(q->in_fd, (void*)(uintptr_t)op->addr, op->len);
  return broken ? IBV_WC_RETRY_EXC_ERR : IBV_WC_SUCCESS;
}

/* A write with immediate consumes the oldest posted receive. */
static enum ibv_wc_status deliver_imm(struct fake_qp* q, const struct wire_op* op) {
  pthread_mutex_lock(&q->mu);
  if (q->qp.state == IBV_QPS_ERR || q->nrecvs == 0) {
    pthread_mutex_unlock(&q->mu);
    return q->qp.state == IBV_QPS_ERR ? IBV_WC_WR_FLUSH_ERR : IBV_WC_RNR_RETRY_EXC_ERR;
  }
  uint64_t wr_id = q->recvs[q->recvs_head];
  q->recvs_head = (q->recvs_head + 1) % q->recvs_cap;
  q->nrecvs--;
  struct ibv_wc wc;
  memset(&wc, 0, sizeof(wc));
  wc.wr_id = wr_id;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  wc.byte_len = (uint32_t)op->len;
  wc.imm_data = op->imm;
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.qp_num = q->qp.qp_num;
  push_wc(q->qp.recv_cq, &wc);
  pthread_mutex_unlock(&q->mu);
  return IBV_WC_SUCCESS;
}

static void* in_main(void* arg) {
  struct fake_qp* q = arg;
  struct wire_op op;
  while (recv_all(q->in_fd, &op, sizeof(op)) == 0) {
    if (op.type != OP_WRITE && op.type != OP_WRITE_IMM) break;
    enum ibv_wc_status st = place_write(q, &op);
    if (st == IBV_WC_RETRY_EXC_ERR) break; /* the connection broke mid-message */
    if (st == IBV_WC_SUCCESS && op.type == OP_WRITE_IMM) st = deliver_imm(q, &op);
    if (st != IBV_WC_SUCCESS) fail_qp(q, IBV_WC_WR_FLUSH_ERR);
    struct wire_op reply = {.type = st == IBV_WC_SUCCESS ? OP_ACK : OP_NAK, .status = st, .seq = op.seq};
    if (send_all(q->in_fd, &reply, sizeof(reply)) != 0) break;
  }
  return NULL; /* a peer that is gone is noticed by its writes' requester, not here */
}

/* ---- the requester: our writes and their acknowledgements ---- */

static void* ack_main(void* arg) {
  struct fake_qp* q = arg;
  struct wire_op op;
  while (recv_all(q->out_fd, &op, sizeof(op)) == 0) {
    pthread_mutex_lock(&q->mu);
    if (q->nsends == 0 || q->sends[q->sends_head].seq != op.seq) {
      pthread_mutex_unlock(&q->mu);
      continue; /* flushed already */
    }
    if (op.type == OP_NAK) {
      enter_error(q, (enum ibv_wc_status)op.status);
    } else {
      struct pending p = q->sends[q->sends_head];
      q->sends_head = (q->sends_head + 1) % q->sends_cap;
      q->nsends--;
      if (p.signaled) complete(q, q->qp.send_cq, p.wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint32_t)p.len);
    }
    pthread_mutex_unlock(&q->mu);
  }
  fail_qp(q, IBV_WC_RETRY_EXC_ERR); /* the peer's device or process is gone */
  return NULL;
}

/* Sends one write's header and gathered data; -1 when the connection is broken. */
static int transmit(struct fake_qp* q, const struct ibv_send_wr* wr, uint64_t seq, uint64_t len) {
  struct wire_op op = {.type = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? OP_WRITE_IMM : OP_WRITE,
                       .imm = wr->imm_data,
                       .rkey = wr->wr.rdma.rkey,
                       .addr = wr->wr.rdma.remote_addr,
                       .len = len,
                       .seq = seq};
  if (q->out_fd < 0 || send_all(q->out_fd, &op, sizeof(op)) != 0) return -1;
  for (int i = 0; i < wr->num_sge; i++)
    if (send_all(q->out_fd, (void*)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length) != 0) return -1;
  return 0;
}

/* 1 when every gather entry lies in a local region of this queue pair's protection domain (or
 * is inline). */
static int local_ok(const struct fake_qp* q, const struct ibv_send_wr* wr, uint64_t* len) {
  *len = 0;
  int ok = 1;
  pthread_mutex_lock(&fab_mu);
  for (int i = 0; i < wr->num_sge; i++) {
    struct fake_mr* m = find_mr(wr->sg_list[i].lkey, 0);
    if (!(wr->send_flags & IBV_SEND_INLINE) &&
        (m == NULL || m->mr.pd != q->qp.pd || !mr_covers(m, wr->sg_list[i].addr, wr->sg_list[i].length)))
      ok = 0;
    *len += wr->sg_list[i].length;
  }
  pthread_mutex_unlock(&fab_mu);
  return ok;
}

static int post_one(struct fake_qp* q, struct ibv_send_wr* wr) {
  if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) return EINVAL;
  uint64_t len;
  int ok = local_ok(q, wr, &len);
  pthread_mutex_lock(&q->out_mu);
  pthread_mutex_lock(&q->mu);
  if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) {
    pthread_mutex_unlock(&q->mu);
    pthread_mutex_unlock(&q->out_mu);
    return EINVAL;
  }
  if (q->qp.state == IBV_QPS_ERR || !ok ||
      grow((void**)&q->sends, sizeof(*q->sends), &q->sends_head, q->nsends, &q->sends_cap) != 0) {
    int flushed = q->qp.state == IBV_QPS_ERR;
    complete(q, q->qp.send_cq, wr->wr_id, flushed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_LOC_PROT_ERR,
             IBV_WC_RDMA_WRITE, 0);
    if (!flushed) enter_error(q, IBV_WC_WR_FLUSH_ERR);
    pthread_mutex_unlock(&q->mu);
    pthread_mutex_unlock(&q->out_mu);
    return 0;
  }
  if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && wr->imm_data != 0xffffffffu) { /* not a rejection */
    __atomic_add_fetch(&nmessages, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&device_messages[fake_dev_of(q->qp.context)->index], 1, __ATOMIC_RELAXED);
    if (len == 0) __atomic_add_fetch(&nempty, 1, __ATOMIC_RELAXED);
  }
  uint64_t seq = q->next_seq++;
  q->sends[(q->sends_head + q->nsends) % q->sends_cap] = (struct pending){
      .wr_id = wr->wr_id, .seq = seq, .len = len, .signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0};
  q->nsends++;
  pthread_mutex_unlock(&q->mu);
  int broken = transmit(q, wr, seq, len) != 0;
  pthread_mutex_unlock(&q->out_mu);
  if (broken) fail_qp(q, IBV_WC_RETRY_EXC_ERR);
  return 0;
}

static int fake_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  for (; wr; wr = wr->next) {
    int rc = post_one((struct fake_qp*)qp, wr);
    if (rc != 0) {
      if (bad) *bad = wr;
      return rc;
    }
  }
  return 0;
}

static int fake_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  struct fake_qp* q = (struct fake_qp*)qp;
  pthread_mutex_lock(&q->mu);
  for (; wr; wr = wr->next) {
    if (q->qp.state == IBV_QPS_RESET ||
        grow((void**)&q->recvs, sizeof(*q->recvs), &q->recvs_head, q->nrecvs, &q->recvs_cap) != 0) {
      pthread_mutex_unlock(&q->mu);
      if (bad) *bad = wr;
      return EINVAL;
    }
    if (q->qp.state == IBV_QPS_ERR) {
      complete(q, q->qp.recv_cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0);
      continue;
    }
    q->recvs[(q->recvs_head + q->nrecvs) % q->recvs_cap] = wr->wr_id;
    q->nrecvs++;
  }
  pthread_mutex_unlock(&q->mu);
  return 0;
}

static int fake_poll_cq(struct ibv_cq* cq, int num, struct ibv_wc* out) {
  struct fake_cq* c = (struct fake_cq*)cq;
  int got = 0;
  pthread_mutex_lock(&c->mu);
  for (; got < num && c->n > 0; got++, c->n--) {
    out[got] = c->wc[c->head];
    c->head = (c->head + 1) % c->cap;
  }
  pthread_mutex_unlock(&c->mu);
  return got;
}

/* ---- the wire: a device's listener ---- */

/* Attaches an incoming connection to the queue pair its hello names. */
static void attach(struct fake_context* fc, int fd) {
  struct wire_hello h;
  if (recv_all(fd, &h, sizeof(h)) != 0 || h.magic != WIRE_MAGIC) {
    close(fd);
    return;
  }
  pthread_mutex_lock(&fab_mu);
  struct fake_qp* q = qps;
  while (q && !(q->qp.qp_num == h.dst_qpn && q->qp.context == &fc->ctx)) q = q->next;
  int taken = q == NULL || q->in_fd >= 0;
  if (!taken) {
    q->in_fd = fd;
    q->in_running = pthread_create(&q->in_thread, NULL, in_main, q) == 0;
  }
  pthread_mutex_unlock(&fab_mu);
  if (taken) close(fd);
}

static void* accept_main(void* arg) {
  struct fake_context* fc = arg;
  for (;;) {
    int fd = accept(fc->listen_fd, NULL, NULL);
    if (fd < 0 && errno == EINTR) continue;
    if (fd < 0) return NULL; /* the device is closing */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    attach(fc, fd);
  }
}

int fake_fabric_open(struct fake_context* fc) {
  fc->ctx.ops.post_send = fake_post_send;
  fc->ctx.ops.post_recv = fake_post_recv;
  fc->ctx.ops.poll_cq = fake_poll_cq;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
  socklen_t len = sizeof(a);
  fc->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fc->listen_fd < 0 || bind(fc->listen_fd, (struct sockaddr*)&a, sizeof(a)) != 0 ||
      listen(fc->listen_fd, 64) != 0 || getsockname(fc->listen_fd, (struct sockaddr*)&a, &len) != 0) {
    if (fc->listen_fd >= 0) close(fc->listen_fd);
    return -1;
  }
  fc->tcp_port = ntohs(a.sin_port);
  fc->acceptor_running = pthread_create(&fc->acceptor, NULL, accept_main, fc) == 0;
  return fc->acceptor_running ? 0 : -1;
}

void fake_fabric_close(struct fake_context* fc) {
  shutdown(fc->listen_fd, SHUT_RDWR);
  if (fc->acceptor_running) pthread_join(fc->acceptor, NULL);
  close(fc->listen_fd);
}

/* ---- objects ---- */

struct ibv_pd*(ibv_alloc_pd)(struct ibv_context* ctx) {
  struct ibv_pd* pd = calloc(1, sizeof(*pd));
  if (pd) pd->context = ctx;
  return pd;
}

int(ibv_dealloc_pd)(struct ibv_pd* pd) {
  free(pd);
  return 0;
}

/* What every registration comes down to: keys, the list of regions, the counts. dmabuf: made
 * through ibv_reg_dmabuf_mr (counted apart too). */
static struct ibv_mr* register_region(struct ibv_pd* pd, void* addr, size_t length, int access, int dmabuf) {
  struct fake_mr* m = calloc(1, sizeof(*m));
  if (m == NULL || pd == NULL || (addr == NULL && length > 0)) {
    free(m);
    errno = EINVAL;
    return NULL;
  }
  m->mr = (struct ibv_mr){.context = pd->context, .pd = pd, .addr = addr, .length = length};
  m->access = access;
  pthread_mutex_lock(&fab_mu);
  m->mr.lkey = next_key++;
  m->mr.rkey = next_key++;
  nreg++;
  ndmabuf += dmabuf != 0;
  m->next = mrs;
  mrs = m;
  pthread_mutex_unlock(&fab_mu);
  return &m->mr;
}

struct ibv_mr*(ibv_reg_mr)(struct ibv_pd* pd, void* addr, size_t length, int access) {
  return register_region(pd, addr, length, access, 0);
}

static void count_relaxed(const struct ibv_mr* mr, unsigned access) {
  if (mr != NULL && (access & IBV_ACCESS_RELAXED_ORDERING))
    __atomic_add_fetch(&nrelaxed, 1, __ATOMIC_RELAXED);
}

/* Optional access flags (relaxed ordering) are accepted and counted; the fabric needs no order. */
struct ibv_mr*(ibv_reg_mr_iova2)(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                 unsigned access) {
  if (iova != (uint64_t)(uintptr_t)addr) { /* other virtual addresses are not emulated */
    errno = EOPNOTSUPP;
    return NULL;
  }
  struct ibv_mr* mr = (ibv_reg_mr)(pd, addr, length, (int)(access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE));
  count_relaxed(mr, access);
  return mr;
}

/* The memory [offset, offset + length) of an emulated DMA-BUF stands for: 0 with *start set, or
 * EINVAL for what a real provider could not register either (not a dma-buf of this process, a
 * range outside it, nothing). fd is the emulated CUDA runtime's memfd; its record names device
 * memory of the process that made it, so another process's record names nothing here. */
static int dmabuf_range(int fd, uint64_t offset, size_t length, uint64_t* start) {
  struct weft_emu_dmabuf rec;
  if (fd < 0 || pread(fd, &rec, sizeof(rec), 0) != (ssize_t)sizeof(rec)) return EINVAL;
  if (memcmp(rec.magic, WEFT_EMU_DMABUF_MAGIC, sizeof(rec.magic)) != 0 || rec.pid != (int32_t)getpid() ||
      rec.dptr == 0)
    return EINVAL;
  if (length == 0 || offset > rec.size || length > rec.size - offset) return EINVAL;
  *start = rec.dptr + offset;
  return 0;
}

/* GPU memory, as GPUDirect RDMA registers it; optional access flags as in ibv_reg_mr_iova2. */
struct ibv_mr*(ibv_reg_dmabuf_mr)(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                  int access) {
  uint64_t start = 0;
  int err = pd == NULL ? EINVAL : dmabuf_range(fd, offset, length, &start);
  if (err == 0 && iova != start) err = EOPNOTSUPP; /* peers address the memory as it is mapped here */
  if (err != 0) {
    errno = err;
    return NULL;
  }
  struct ibv_mr* mr = register_region(pd, (void*)(uintptr_t)iova, length,
                                      (int)((unsigned)access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE), 1);
  count_relaxed(mr, (unsigned)access);
  return mr;
}

int(ibv_dereg_mr)(struct ibv_mr* mr) {
  pthread_mutex_lock(&fab_mu);
  struct fake_mr** p = &mrs;
  while (*p && &(*p)->mr != mr) p = &(*p)->next;
  struct fake_mr* m = *p;
  if (m) *p = m->next;
  ndereg += m != NULL;
  pthread_mutex_unlock(&fab_mu);
  free(m);
  return m ? 0 : EINVAL;
}

struct ibv_cq*(ibv_create_cq)(struct ibv_context* ctx, int cqe, void* cq_context, struct ibv_comp_channel* ch,
                              int vector) {
  (void)vector;
  struct fake_cq* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->cq.context = ctx;
  c->cq.channel = ch;
  c->cq.cq_context = cq_context;
  c->cq.cqe = cqe;
  pthread_mutex_init(&c->mu, NULL);
  return &c->cq;
}

int(ibv_destroy_cq)(struct ibv_cq* cq) {
  struct fake_cq* c = (struct fake_cq*)cq;
  pthread_mutex_destroy(&c->mu);
  free(c->wc);
  free(c);
  return 0;
}

struct ibv_qp*(ibv_create_qp)(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  /* A queue pair's completion queues are its device's (each device has its own). */
  if (attr->qp_type != IBV_QPT_RC || attr->send_cq == NULL || attr->recv_cq == NULL ||
      attr->send_cq->context != pd->context || attr->recv_cq->context != pd->context) {
    errno = EINVAL;
    return NULL;
  }
  struct fake_qp* q = calloc(1, sizeof(*q));
  if (q == NULL) return NULL;
  q->qp = (struct ibv_qp){.context = pd->context,
                          .qp_context = attr->qp_context,
                          .pd = pd,
                          .send_cq = attr->send_cq,
                          .recv_cq = attr->recv_cq,
                          .state = IBV_QPS_RESET,
                          .qp_type = IBV_QPT_RC};
  q->out_fd = q->in_fd = -1;
  pthread_mutex_init(&q->mu, NULL);
  pthread_mutex_init(&q->out_mu, NULL);
  pthread_mutex_lock(&fab_mu);
  q->qp.qp_num = next_qpn++;
  q->next = qps;
  qps = q;
  pthread_mutex_unlock(&fab_mu);
  return &q->qp;
}

/* Ready to receive: connect our writes' half of the wire to the peer's device. */
static void connect_wire(struct fake_qp* q, const struct ibv_qp_attr* attr) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(attr->ah_attr.dlid)};
  memcpy(&a.sin_addr, attr->ah_attr.grh.dgid.raw + 12, 4);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct wire_hello h = {.magic = WIRE_MAGIC, .dst_qpn = attr->dest_qp_num, .src_qpn = q->qp.qp_num};
  int one = 1;
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof(a)) != 0 || send_all(fd, &h, sizeof(h)) != 0) {
    if (fd >= 0) close(fd);
    return; /* posts will complete with "retry exceeded", as with an unreachable peer */
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  q->out_fd = fd;
  q->ack_running = pthread_create(&q->ack_thread, NULL, ack_main, q) == 0;
}

static int transition_ok(enum ibv_qp_state from, enum ibv_qp_state to) {
  if (to == IBV_QPS_ERR || to == IBV_QPS_RESET) return 1;
  return (from == IBV_QPS_RESET && to == IBV_QPS_INIT) || (from == IBV_QPS_INIT && to == IBV_QPS_INIT) ||
         (from == IBV_QPS_INIT && to == IBV_QPS_RTR) || (from == IBV_QPS_RTR && to == IBV_QPS_RTS);
}

int(ibv_modify_qp)(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask) {
  struct fake_qp* q = (struct fake_qp*)qp;
  if (!(mask & IBV_QP_STATE)) return 0;
  pthread_mutex_lock(&q->mu);
  int ok = transition_ok(q->qp.state, attr->qp_state);
  int to_rtr = ok && attr->qp_state == IBV_QPS_RTR;
  if (to_rtr && (!(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN) || !attr->ah_attr.is_global)) ok = 0;
  if (ok && attr->qp_state == IBV_QPS_ERR) enter_error(q, IBV_WC_WR_FLUSH_ERR);
  if (ok && attr->qp_state != IBV_QPS_ERR) q->qp.state = attr->qp_state;
  pthread_mutex_unlock(&q->mu);
  if (!ok) return EINVAL;
  if (to_rtr) connect_wire(q, attr);
  if (attr->qp_state == IBV_QPS_RTS && (mask & IBV_QP_TIMEOUT) && q->out_fd >= 0) {
    /* Hardware gives up on an unacknowledged write after 4.096 us x 2^timeout per try; TCP's
     * user timeout does the same for the wire (a host whose link went down). */
    double ms = 4.096e-3 * (double)(1ull << (attr->timeout & 31)) *
                (1 + ((mask & IBV_QP_RETRY_CNT) ? attr->retry_cnt : 7));
    unsigned timeout_ms = ms < 1 ? 1 : ms > 600000 ? 600000 : (unsigned)ms;
    setsockopt(q->out_fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms));
  }
  return 0;
}

int(ibv_destroy_qp)(struct ibv_qp* qp) {
  struct fake_qp* q = (struct fake_qp*)qp;
  pthread_mutex_lock(&fab_mu);
  struct fake_qp** p = &qps;
  while (*p && *p != q) p = &(*p)->next;
  if (*p) *p = q->next;
  pthread_mutex_unlock(&fab_mu); /* the acceptor cannot attach to it any more */
  if (q->out_fd >= 0) shutdown(q->out_fd, SHUT_RDWR);
  if (q->in_fd >= 0) shutdown(q->in_fd, SHUT_RDWR);
  if (q->ack_running) pthread_join(q->ack_thread, NULL);
  if (q->in_running) pthread_join(q->in_thread, NULL);
  if (q->out_fd >= 0) close(q->out_fd);
  if (q->in_fd >= 0) close(q->in_fd);
  pthread_mutex_destroy(&q->mu);
  pthread_mutex_destroy(&q->out_mu);
  free(q->sends);
  free(q->recvs);
  free(q);
  return 0;
}
