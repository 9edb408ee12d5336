/* The test verbs provider's protection checks (tests/ibemu), which the IB network's tests rely on
 * to catch a transfer that strays: an RDMA write lands only inside a region registered for
 * remote writes in the receiving queue pair's protection domain, and reads only from a region of
 * the sending queue pair's own domain; anything else fails (remote access or local protection
 * error) and leaves memory untouched. Also its registration counts, its emulated DMA-BUF regions
 * (the emulated CUDA runtime's device memory, registered as GPUDirect RDMA does) and its writes of
 * whole words, which land word by word. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "net_pair.h"
#include "transport/net_ib.h"

#if WEFT_IBVERBS_HEADERS
#include <dlfcn.h>
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../ibemu/fake.h" /* WEFT_FAKE_NCOUNTS, struct weft_emu_dmabuf */

static const struct weft_ibv_fns* ibv;
static const struct weft_ib_port* port;

static struct ibv_qp* make_qp(struct ibv_pd* pd, struct ibv_cq* cq) {
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof(qa));
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  struct ibv_qp* qp = ibv->create_qp(pd, &qa);
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = (uint8_t)port->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  EXPECT(qp && ibv->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  return qp;
}

static void connect_qp(struct ibv_qp* qp, uint32_t peer) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer;
  a.ah_attr.is_global = 1;
  memcpy(a.ah_attr.grh.dgid.raw, port->gid, 16);
  a.ah_attr.dlid = port->lid;
  a.ah_attr.port_num = (uint8_t)port->port;
  EXPECT(ibv->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN) == 0);
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  EXPECT(ibv->modify_qp(qp, &a, IBV_QP_STATE) == 0);
}

/* One RDMA write of len bytes from src (lkey) to remote (rkey), on a fresh pair of queue pairs:
 * the sender's in pd_s, the receiver's in pd_r. Returns the write's completion status. */
static enum ibv_wc_status write_once(struct ibv_pd* pd_s, struct ibv_pd* pd_r, const void* src, uint32_t lkey,
                                     size_t len, void* remote, uint32_t rkey) {
  struct ibv_cq* cq = ibv->create_cq(port->ctx, 16, NULL, NULL, 0);
  struct ibv_qp *s = make_qp(pd_s, cq), *r = make_qp(pd_r, cq);
  enum ibv_wc_status status = (enum ibv_wc_status) - 1;
  if (s && r) {
    connect_qp(s, r->qp_num);
    connect_qp(r, s->qp_num);
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)src, .length = (uint32_t)len, .lkey = lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)remote;
    wr.wr.rdma.rkey = rkey;
    EXPECT(ibv_post_send(s, &wr, &bad) == 0);
    struct ibv_wc wc;
    time_t t0 = time(NULL);
    int n = 0;
    while (n == 0 && time(NULL) - t0 < 10) n = ibv_poll_cq(cq, 1, &wc);
    if (n == 1 && wc.wr_id == 7) status = wc.status;
  }
  if (s) ibv->destroy_qp(s);
  if (r) ibv->destroy_qp(r);
  ibv->destroy_cq(cq);
  return status;
}

static int all(const unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

/* An emulated DMA-BUF fd as the emulated CUDA runtime makes one: a memfd holding the record
 * (tests/gpuemu/emu_dmabuf.h), of which only the first bytes are written (a short one when fewer
 * than the record's). -1 when it cannot be made. */
static int make_dmabuf(const char* magic, const void* dptr, uint64_t size, pid_t pid, size_t bytes) {
  struct weft_emu_dmabuf rec;
  memset(&rec, 0, sizeof(rec));
  memcpy(rec.magic, magic, sizeof(rec.magic));
  rec.dptr = (uint64_t)(uintptr_t)dptr;
  rec.size = size;
  rec.pid = (int32_t)pid;
  int fd = memfd_create(WEFT_EMU_DMABUF_NAME, MFD_CLOEXEC);
  if (fd >= 0 && write(fd, &rec, bytes) != (ssize_t)bytes) {
    close(fd);
    fd = -1;
  }
  EXPECT(fd >= 0);
  return fd;
}

/* Registrations the provider must refuse, as a real one refuses a dma-buf it cannot use: each
 * fails with its errno and registers nothing. fd's record names gpu (4 pages) of this process. */
static void check_dmabuf_refusals(struct ibv_pd* pd, int fd, unsigned char* gpu, void (*counts)(uint64_t*)) {
  enum { PAGE = 4096 };
  const uint64_t base = (uint64_t)(uintptr_t)gpu, wrap = UINT64_MAX - PAGE + 1;
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  int short_fd =
      make_dmabuf(WEFT_EMU_DMABUF_MAGIC, gpu, 4 * PAGE, getpid(), sizeof(struct weft_emu_dmabuf) - 1);
  int magic_fd = make_dmabuf("WEFTDMAX", gpu, 4 * PAGE, getpid(), sizeof(struct weft_emu_dmabuf));
  int other_fd = make_dmabuf(WEFT_EMU_DMABUF_MAGIC, gpu, 4 * PAGE, getppid(), sizeof(struct weft_emu_dmabuf));
  struct {
    const char* what;
    int fd;
    uint64_t offset;
    size_t length;
    uint64_t iova;
    int want;
  } cases[] = {
      {"no fd", -1, 0, PAGE, base, EINVAL},
      {"a record cut short", short_fd, 0, PAGE, base, EINVAL},
      {"a wrong magic", magic_fd, 0, PAGE, base, EINVAL},
      {"another process's record", other_fd, 0, PAGE, base, EINVAL},
      {"a range past the record's end", fd, 3 * PAGE, 2 * PAGE, base + 3 * PAGE, EINVAL},
      {"an offset past the record's end", fd, 5 * PAGE, PAGE, base + 5 * PAGE, EINVAL},
      {"a range whose end wraps around", fd, wrap, 2 * PAGE, base + wrap, EINVAL},
      {"length 0", fd, PAGE, 0, base + PAGE, EINVAL},
      {"an IOVA other than the memory's address", fd, PAGE, PAGE, base, EOPNOTSUPP},
  };
  uint64_t before[WEFT_FAKE_NCOUNTS], after[WEFT_FAKE_NCOUNTS];
  if (counts) counts(before);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    errno = 0;
    struct ibv_mr* mr =
        ibv->reg_dmabuf_mr(pd, cases[i].offset, cases[i].length, cases[i].iova, cases[i].fd, access);
    int err = errno;
    EXPECT_MSG(mr == NULL && err == cases[i].want, "dmabuf registration with %s: %s, errno %d (%s), want %s",
               cases[i].what, mr ? "registered" : "refused", err, strerror(err), strerror(cases[i].want));
    if (mr) ibv->dereg_mr(mr);
  }
  if (counts) {
    counts(after);
    EXPECT_MSG(after[0] == before[0] && after[4] == before[4],
               "refused dmabuf registrations counted: %llu, %llu", (unsigned long long)(after[0] - before[0]),
               (unsigned long long)(after[4] - before[4]));
  }
  int fds[] = {short_fd, magic_fd, other_fd};
  for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* GPU memory registered as GPUDirect RDMA registers it, through a DMA-BUF fd of the emulated CUDA
 * runtime: the region is the memory the record names, takes and gives RDMA writes like any other
 * (the data lands there and nowhere else), and is counted apart. src (0xab) is in a region of
 * pd_s with key src_lkey. */
static void check_dmabuf(struct ibv_pd* pd_s, struct ibv_pd* pd_r, const unsigned char* src,
                         uint32_t src_lkey, void (*counts)(uint64_t*)) {
  enum { PAGE = 4096 };
  static unsigned char gpu[4 * PAGE] __attribute__((aligned(PAGE))); /* "device memory" */
  static unsigned char host[PAGE];
  EXPECT_MSG(ibv->reg_dmabuf_mr != NULL, "the test verbs provider has no ibv_reg_dmabuf_mr");
  int fd = make_dmabuf(WEFT_EMU_DMABUF_MAGIC, gpu, sizeof(gpu), getpid(), sizeof(struct weft_emu_dmabuf));
  if (ibv->reg_dmabuf_mr == NULL || fd < 0) return;
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  uint64_t before[WEFT_FAKE_NCOUNTS], after[WEFT_FAKE_NCOUNTS];
  if (counts) counts(before);
  /* The receiver's region is gpu's second page; the sender's its last (with an optional flag). */
  struct ibv_mr* in = ibv->reg_dmabuf_mr(pd_r, PAGE, PAGE, (uint64_t)(uintptr_t)(gpu + PAGE), fd, access);
  struct ibv_mr* out = ibv->reg_dmabuf_mr(pd_s, 3 * PAGE, PAGE, (uint64_t)(uintptr_t)(gpu + 3 * PAGE), fd,
                                          access | IBV_ACCESS_RELAXED_ORDERING);
  struct ibv_mr* to_host = ibv->reg_mr(pd_r, host, sizeof(host), access);
  EXPECT_MSG(in && out && to_host, "dmabuf registrations: errno %d (%s)", errno, strerror(errno));
  if (counts) {
    counts(after);
    EXPECT_MSG(after[4] - before[4] == 2 && after[0] - before[0] == 3 && after[2] - before[2] == 3,
               "2 dmabuf registrations and 1 other: counted %llu dmabuf, %llu in all, %llu live",
               (unsigned long long)(after[4] - before[4]), (unsigned long long)(after[0] - before[0]),
               (unsigned long long)(after[2] - before[2]));
  }
  if (in && out && to_host) {
    EXPECT(in->addr == gpu + PAGE && in->length == PAGE);
    memset(gpu, 0, sizeof(gpu));
    EXPECT(write_once(pd_s, pd_r, src, src_lkey, PAGE, gpu + PAGE, in->rkey) == IBV_WC_SUCCESS);
    EXPECT_MSG(all(gpu + PAGE, PAGE, 0xab) && all(gpu, PAGE, 0) && all(gpu + 2 * PAGE, 2 * PAGE, 0),
               "a write into a dmabuf region: memory not as written");
    EXPECT(write_once(pd_s, pd_r, src, src_lkey, 16, gpu + 2 * PAGE - 8, in->rkey) == IBV_WC_REM_ACCESS_ERR);
    memset(gpu + 3 * PAGE, 0xcd, PAGE);
    memset(host, 0, sizeof(host));
    EXPECT(write_once(pd_s, pd_r, gpu + 3 * PAGE, out->lkey, PAGE, host, to_host->rkey) == IBV_WC_SUCCESS);
    EXPECT_MSG(all(host, PAGE, 0xcd), "a write from a dmabuf region: memory not as written");
  }
  check_dmabuf_refusals(pd_r, fd, gpu, counts);
  struct ibv_mr* mrs[] = {in, out, to_host};
  for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
    if (mrs[i]) EXPECT(ibv->dereg_mr(mrs[i]) == 0);
  close(fd);
}

/* A write of whole aligned 8-byte words lands word by word, through a bounce buffer a chunk at a
 * time (16 KiB in tests/ibemu/fake_fabric.c): a long one still lands exactly, every chunk in its
 * place and nothing around it; so do the writes that keep the byte path. That no word is torn
 * while a poller reads is not seen here. */
static void check_long_writes(struct ibv_pd* pd_s, struct ibv_pd* pd_r) {
  enum { LEN = 40 * 1024 + 8, GUARD = 64 };
  static uint64_t src[LEN / 8], dst[(LEN + 2 * GUARD) / 8];
  for (size_t i = 0; i < LEN / 8; i++) src[i] = (i + 1) * 0x9e3779b97f4a7c15ull;
  struct ibv_mr* from = ibv->reg_mr(pd_s, src, sizeof(src), 0);
  struct ibv_mr* to = ibv->reg_mr(pd_r, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  EXPECT(from && to);
  struct {
    const char* what;
    size_t offset, len;
  } cases[] = {
      {"whole words, longer than the bounce buffer", GUARD, LEN},
      {"one word", GUARD, 8},
      {"whole words at an address not aligned", GUARD + 4, LEN - 8},
      {"an odd length at an odd address", GUARD + 3, LEN - 13},
  };
  for (size_t i = 0; from && to && i < sizeof(cases) / sizeof(cases[0]); i++) {
    unsigned char* at = (unsigned char*)dst + cases[i].offset;
    memset(dst, 0, sizeof(dst));
    enum ibv_wc_status got = write_once(pd_s, pd_r, src, from->lkey, cases[i].len, at, to->rkey);
    EXPECT_MSG(got == IBV_WC_SUCCESS, "a write of %s: status %d", cases[i].what, (int)got);
    EXPECT_MSG(memcmp(at, src, cases[i].len) == 0 && all((unsigned char*)dst, cases[i].offset, 0) &&
                   all(at + cases[i].len, sizeof(dst) - cases[i].offset - cases[i].len, 0),
               "a write of %s: memory not as written", cases[i].what);
  }
  if (from) EXPECT(ibv->dereg_mr(from) == 0);
  if (to) EXPECT(ibv->dereg_mr(to) == 0);
}

static void run(void) {
  enum { PAGE = 4096 };
  static unsigned char src[2 * PAGE], dst[3 * PAGE];
  uint64_t before[WEFT_FAKE_NCOUNTS], after[WEFT_FAKE_NCOUNTS];
  void (*counts)(uint64_t*) = NULL;
  void* lib = dlopen(getenv("WEFT_IBVERBS_LIB"), RTLD_NOW | RTLD_NOLOAD);
  if (lib) counts = (void (*)(uint64_t*))dlsym(lib, "weft_fake_verbs_counts");
  EXPECT(counts != NULL);
  if (counts) counts(before);
  struct ibv_pd *pd_s = ibv->alloc_pd(port->ctx), *pd_r = ibv->alloc_pd(port->ctx);
  memset(src, 0xab, sizeof(src));
  /* The receiver's region is the middle page of dst; the pages around it are guards. */
  struct ibv_mr* in = ibv->reg_mr(pd_r, dst + PAGE, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr* out = ibv->reg_mr(pd_s, src, PAGE, 0);
  struct ibv_mr* other_pd =
      ibv->reg_mr(pd_s, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr* local_only = ibv->reg_mr(pd_r, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr* recv_side = ibv->reg_mr(pd_r, src, sizeof(src), 0);
  struct ibv_mr* gone = ibv->reg_mr(pd_r, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  uint32_t gone_rkey = gone ? gone->rkey : 0;
  EXPECT(pd_s && pd_r && in && out && other_pd && local_only && recv_side && gone &&
         ibv->dereg_mr(gone) == 0);
  if (test_failures) return;
  if (counts) {
    counts(after);
    EXPECT_MSG(after[0] - before[0] == 6 && after[1] - before[1] == 1 && after[2] - before[2] == 5 &&
                   after[4] == before[4],
               "6 registrations, 1 deregistration, no dmabuf: counted %llu, %llu, %llu live, %llu dmabuf",
               (unsigned long long)(after[0] - before[0]), (unsigned long long)(after[1] - before[1]),
               (unsigned long long)(after[2] - before[2]), (unsigned long long)(after[4] - before[4]));
  }

  struct {
    const char* what;
    const void* from;
    uint32_t lkey;
    size_t len;
    unsigned char* to;
    uint32_t rkey;
    enum ibv_wc_status want;
  } cases[] = {
      {"the whole region", src, out->lkey, PAGE, dst + PAGE, in->rkey, IBV_WC_SUCCESS},
      {"one byte past the region's end", src, out->lkey, 16, dst + 2 * PAGE - 15, in->rkey,
       IBV_WC_REM_ACCESS_ERR},
      {"one byte before its start", src, out->lkey, 16, dst + PAGE - 1, in->rkey, IBV_WC_REM_ACCESS_ERR},
      {"an rkey of the sender's protection domain", src, out->lkey, 16, dst, other_pd->rkey,
       IBV_WC_REM_ACCESS_ERR},
      {"an rkey without remote write access", src, out->lkey, 16, dst, local_only->rkey,
       IBV_WC_REM_ACCESS_ERR},
      {"an rkey deregistered", src, out->lkey, 16, dst, gone_rkey, IBV_WC_REM_ACCESS_ERR},
      {"a source past the lkey's region", src + 1, out->lkey, PAGE, dst + PAGE, in->rkey,
       IBV_WC_LOC_PROT_ERR},
      {"an lkey of the receiver's protection domain", src, recv_side->lkey, 16, dst + PAGE, in->rkey,
       IBV_WC_LOC_PROT_ERR},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    memset(dst, 0, sizeof(dst));
    enum ibv_wc_status got =
        write_once(pd_s, pd_r, cases[i].from, cases[i].lkey, cases[i].len, cases[i].to, cases[i].rkey);
    EXPECT_MSG(got == cases[i].want, "write with %s: status %d (%s), want %s", cases[i].what, (int)got,
               (int)got >= 0 ? ibv->wc_status_str(got) : "no completion", ibv->wc_status_str(cases[i].want));
    int landed = all(dst + PAGE, PAGE, 0xab), untouched = all(dst, sizeof(dst), 0);
    EXPECT_MSG(cases[i].want == IBV_WC_SUCCESS ? landed && all(dst, PAGE, 0) && all(dst + 2 * PAGE, PAGE, 0)
                                               : untouched,
               "write with %s: memory %s", cases[i].what,
               cases[i].want == IBV_WC_SUCCESS ? "not as written" : "changed by a failed write");
  }
  check_dmabuf(pd_s, pd_r, src, out->lkey, counts);
  check_long_writes(pd_s, pd_r);
  struct ibv_mr* mrs[] = {in, out, other_pd, local_only, recv_side};
  for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++) EXPECT(ibv->dereg_mr(mrs[i]) == 0);
  EXPECT(ibv->dealloc_pd(pd_s) == 0 && ibv->dealloc_pd(pd_r) == 0);
  if (counts) {
    counts(after);
    EXPECT_MSG(after[2] == before[2], "%llu registrations left", (unsigned long long)(after[2] - before[2]));
  }
}

int main(void) {
  if (!net_use_test_verbs()) test_skip("no test verbs provider (needs libibverbs-dev)");
  int n = 0;
  EXPECT(weft_ib_ports(&port, &n) == ncclSuccess && n == 1);
  ibv = weft_ibv_load(NULL);
  if (n == 1 && ibv) run();
  return test_finish("test_ibemu");
}
#else
int main(void) { test_skip("built without <infiniband/verbs.h> (Debian libibverbs-dev)"); }
#endif
