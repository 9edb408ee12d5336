/* The test verbs provider's protection checks (tests/ibemu), which the IB network's tests rely on
 * to catch a transfer that strays: an RDMA write lands only inside a region registered for
 * remote writes in the receiving queue pair's protection domain, and reads only from a region of
 * the sending queue pair's own domain; anything else fails (remote access or local protection
 * error) and leaves memory untouched. Also its registration counts. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "net_pair.h"
#include "transport/net_ib.h"

#if WEFT_IBVERBS_HEADERS
#include <dlfcn.h>

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

static void run(void) {
  enum { PAGE = 4096 };
  static unsigned char src[2 * PAGE], dst[3 * PAGE];
  uint64_t before[4], after[4]; /* weft_fake_verbs_counts (tests/ibemu/fake.h) */
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
    EXPECT_MSG(after[0] - before[0] == 6 && after[1] - before[1] == 1 && after[2] - before[2] == 5,
               "6 registrations, 1 deregistration: counted %llu, %llu, %llu live",
               (unsigned long long)(after[0] - before[0]), (unsigned long long)(after[1] - before[1]),
               (unsigned long long)(after[2] - before[2]));
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
