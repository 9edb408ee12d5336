/* One conformance suite for every network behind struct weft_net_ops: the built-in Socket
 * network and the external test plugin (tests/net/plugin) built for each NCCL ABI version, 6 to
 * 12, all loaded at once through NCCL_NET_PLUGIN and run through the adapter. The same cases run over each:
 * listen/connect/accept, sizes 0, 1 and large, tags picking one of several offered buffers, requests in
 * flight up to the limit, the metadata word where a network carries one (Socket, IB), ranges kept
 * registered where a network registers memory (IB, plugins; on the test verbs provider the
 * registrations are counted), an unknown tag, bad arguments, and closing while idle. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net_pair.h"
#include "transport/connector.h"
#include "transport/net.h"
#include "transport/net_plugin.h"

static const struct weft_net_ops* net;
static const char* label;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned char pattern(size_t i, unsigned seed) {
  return (unsigned char)(seed * 131 + i * 7 + (i >> 11));
}

/* Test until done (10 s at most); the sizes the request reports land in sizes. */
static ncclResult_t wait_req(void* req, size_t* sizes) {
  int done = 0;
  ncclResult_t res = ncclSuccess;
  double t0 = now_s();
  while (res == ncclSuccess && !done && now_s() - t0 < 10) res = net->test(req, &done, sizes);
  if (res == ncclSuccess && !done) return ncclInternalError;
  return res;
}

/* One message of size bytes with tag; the receive offers nbuf buffers tagged base..base+nbuf-1. */
static void one_message(void* s, void* r, size_t size, int tag, int nbuf, int base, unsigned seed) {
  unsigned char* src = malloc(size + 1);
  unsigned char* dst[WEFT_NET_MAX_RECVS];
  void* bufs[WEFT_NET_MAX_RECVS];
  size_t caps[WEFT_NET_MAX_RECVS], got[WEFT_NET_MAX_RECVS];
  int tags[WEFT_NET_MAX_RECVS];
  for (size_t i = 0; i < size; i++) src[i] = pattern(i, seed);
  for (int i = 0; i < nbuf; i++) {
    bufs[i] = dst[i] = calloc(1, size + 1);
    caps[i] = size + 1;
    tags[i] = base + i;
  }
  void *sreq = NULL, *rreq = NULL;
  EXPECT(net->irecv(r, nbuf, bufs, caps, tags, &rreq) == ncclSuccess && rreq != NULL);
  EXPECT(net->isend(s, src, size, tag, &sreq) == ncclSuccess && sreq != NULL);
  size_t sent[1] = {0};
  if (sreq)
    EXPECT_MSG(wait_req(sreq, sent) == ncclSuccess && sent[0] == size, "%s: send of %zu", label, size);
  if (rreq) EXPECT_MSG(wait_req(rreq, got) == ncclSuccess, "%s: receive of %zu", label, size);
  for (int i = 0; rreq && i < nbuf; i++) {
    if (tags[i] != tag) {
      EXPECT_MSG(got[i] == SIZE_MAX, "%s: buffer %d (tag %d) reports %zu for tag %d", label, i, tags[i],
                 got[i], tag);
      continue;
    }
    EXPECT_MSG(got[i] == size, "%s: %zu bytes reported, %zu sent", label, got[i], size);
    EXPECT_MSG(memcmp(dst[i], src, size) == 0, "%s: %zu bytes with tag %d differ", label, size, tag);
  }
  for (int i = 0; i < nbuf; i++) free(dst[i]);
  free(src);
}

static void case_sizes(void* s, void* r) {
  static const size_t sizes[] = {0, 1, 4096, (4u << 20) + 3};
  int before = test_failures;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && test_failures == before; i++)
    one_message(s, r, sizes[i], 5, 1, 5, (unsigned)i);
}

/* The tag, not the order, picks the buffer. */
static void case_multi(void* s, void* r) {
  static const int order[] = {13, 10, 12, 11, 11, 13, 10, 12};
  int before = test_failures;
  for (int i = 0; i < 8 && test_failures == before; i++)
    one_message(s, r, (size_t)(i * 1000), order[i], WEFT_NET_MAX_RECVS, 10, (unsigned)i);
}

/* Post sends until the network says no (NULL) or the limit, then receives: every one arrives,
 * in order. A network must take at least what a proxy connector keeps in flight (its FIFO's
 * steps, a notice and a goodbye) and never more than WEFT_NET_MAX_REQUESTS. */
static void case_inflight(void* s, void* r) {
  enum { N = WEFT_NET_MAX_REQUESTS + 1, SZ = 64 };
  static unsigned char src[N][SZ], dst[N][SZ];
  void *sreq[N] = {0}, *rreq[N] = {0};
  int ns = 0, nr = 0;
  /* Buffers used over and over, as a proxy connector's are: kept registered where the network
   * registers memory (the other cases' buffers are registered per request). */
  if (net->keep_registered) {
    EXPECT(net->keep_registered(s, src, sizeof(src)) == ncclSuccess);
    EXPECT(net->keep_registered(r, dst, sizeof(dst)) == ncclSuccess);
  }
  for (; ns < N; ns++) {
    memset(src[ns], ns + 1, SZ);
    EXPECT(net->isend(s, src[ns], SZ, 0, &sreq[ns]) == ncclSuccess);
    if (sreq[ns] == NULL) break;
  }
  EXPECT_MSG(ns >= WEFT_NSTEPS + 2 && ns <= WEFT_NET_MAX_REQUESTS, "%s: %d sends in flight", label, ns);
  printf("%s: %d sends of %d bytes in flight at once\n", label, ns, SZ);
  for (; nr < ns; nr++) {
    void* bufs[1] = {dst[nr]};
    size_t caps[1] = {SZ};
    int tags[1] = {0};
    EXPECT(net->irecv(r, 1, bufs, caps, tags, &rreq[nr]) == ncclSuccess && rreq[nr] != NULL);
  }
  for (int i = 0; i < ns; i++) {
    size_t got[1] = {0};
    EXPECT(sreq[i] && wait_req(sreq[i], got) == ncclSuccess);
    EXPECT(rreq[i] && wait_req(rreq[i], got) == ncclSuccess && got[0] == SZ);
    EXPECT_MSG(memcmp(dst[i], src[i], SZ) == 0, "%s: message %d of %d in flight differs", label, i, ns);
  }
}

/* The test verbs provider's counts (reg_mr, dereg_mr, live, messages, dmabuf) while the IB network
 * runs on it; NULL for other networks. NCOUNTS is WEFT_FAKE_NCOUNTS (tests/ibemu/fake.h, which
 * needs verbs' header): the provider fills that many. */
enum { NCOUNTS = 5 };
static void (*verbs_counts)(uint64_t out[NCOUNTS]);

static void counts(uint64_t out[NCOUNTS]) {
  if (verbs_counts)
    verbs_counts(out);
  else
    memset(out, 0, NCOUNTS * sizeof(*out));
}

/* One message from src into dst (the receive offers dst alone); 0 when it arrived intact. */
static int kept_message(void* s, void* r, unsigned char* src, unsigned char* dst, size_t size,
                        unsigned seed) {
  for (size_t i = 0; i < size; i++) src[i] = pattern(i, seed);
  memset(dst, 0, size);
  void *sreq = NULL, *rreq = NULL, *bufs[1] = {dst};
  size_t caps[1] = {size}, got[1] = {0}, sent[1] = {0};
  int tags[1] = {6};
  if (net->irecv(r, 1, bufs, caps, tags, &rreq) != ncclSuccess || rreq == NULL) return -1;
  if (net->isend(s, src, size, 6, &sreq) != ncclSuccess || sreq == NULL) return -1;
  if (wait_req(sreq, sent) != ncclSuccess || wait_req(rreq, got) != ncclSuccess) return -1;
  return got[0] == size && memcmp(dst, src, size) == 0 ? 0 : -1;
}

/* n messages from rotating places inside src into dst; the registrations they made (counted on
 * the test verbs provider). */
static uint64_t kept_round(void* s, void* r, unsigned char* src, unsigned char* dst, size_t len, int n,
                           const char* phase) {
  uint64_t before[NCOUNTS], after[NCOUNTS];
  int bad = 0;
  counts(before);
  for (int i = 0; i < n && !bad; i++) {
    size_t off = (size_t)(i % 4) * (len / 8), size = len / 2 - (size_t)(i % 7);
    bad = kept_message(s, r, src + off, dst + off, size, (unsigned)i) != 0;
    EXPECT_MSG(!bad, "%s: %s: message %d (%zu bytes at offset %zu) wrong", label, phase, i, size, off);
  }
  counts(after);
  return after[0] - before[0];
}

/* Buffers declared long-lived (keep_registered) are registered once: every request inside them
 * uses that registration, whatever its offset and size; a buffer only partly inside is
 * registered for its request. A range kept twice stays after one drop; after the last, requests
 * register per message again, and a receive in flight holds the registration until it is done. */
static void case_kept(void* s, void* r) {
  enum { LEN = 8192, N = 100 };
  static unsigned char src[LEN], dst[LEN + 64];
  uint64_t c0[NCOUNTS], c1[NCOUNTS];
  counts(c0);
  EXPECT(net->keep_registered(s, src, LEN) == ncclSuccess &&
         net->keep_registered(r, dst, LEN) == ncclSuccess);
  EXPECT(net->keep_registered(r, dst, LEN) == ncclSuccess); /* a second keep: a reference */
  counts(c1);
  EXPECT_MSG(c1[0] - c0[0] == (verbs_counts ? 2u : 0u), "%s: 3 keeps of 2 ranges made %llu registrations",
             label, (unsigned long long)(c1[0] - c0[0]));
  uint64_t kept_regs = kept_round(s, r, src, dst, LEN, N, "kept"), regs = kept_regs;
  EXPECT_MSG(regs == 0, "%s: %d messages within kept ranges made %llu registrations", label, N,
             (unsigned long long)regs);
  /* A receive buffer running past the kept range: its own registration, the data intact. */
  counts(c0);
  EXPECT_MSG(kept_message(s, r, src, dst + LEN - 32, 64, 99) == 0, "%s: a buffer past a kept range", label);
  counts(c1);
  EXPECT_MSG(c1[0] - c0[0] == (verbs_counts ? 1u : 0u) && c1[2] == c0[2],
             "%s: a buffer past a kept range: %llu registrations, %llu left", label,
             (unsigned long long)(c1[0] - c0[0]), (unsigned long long)(c1[2] - c0[2]));
  net->drop_registered(r, dst, LEN); /* one keep remains */
  regs = kept_round(s, r, src, dst, LEN, N, "kept twice, dropped once");
  EXPECT_MSG(regs == 0, "%s: after one of two drops, %llu registrations", label, (unsigned long long)regs);
  /* The last drop while a receive into the range is in flight: its registration stays until
   * the receive is done, then goes. */
  void *sreq = NULL, *rreq = NULL, *bufs[1] = {dst};
  size_t caps[1] = {64}, got[1] = {0};
  int tags[1] = {6};
  memset(src, 0x5a, 64);
  EXPECT(net->irecv(r, 1, bufs, caps, tags, &rreq) == ncclSuccess && rreq != NULL);
  counts(c0);
  net->drop_registered(r, dst, LEN);
  counts(c1);
  EXPECT_MSG(c1[1] == c0[1], "%s: a registration went while a receive used it", label);
  EXPECT(net->isend(s, src, 64, 6, &sreq) == ncclSuccess && sreq != NULL);
  EXPECT(sreq && wait_req(sreq, NULL) == ncclSuccess);
  EXPECT(rreq && wait_req(rreq, got) == ncclSuccess && got[0] == 64 && memcmp(dst, src, 64) == 0);
  counts(c1);
  EXPECT_MSG(c1[1] - c0[1] == (verbs_counts ? 1u : 0u),
             "%s: the dropped registration stayed after its receive", label);
  net->drop_registered(s, src, LEN);
  regs = kept_round(s, r, src, dst, LEN, N, "dropped");
  EXPECT_MSG(regs == (verbs_counts ? 2u * N : 0u), "%s: %d messages after the drops made %llu registrations",
             label, N, (unsigned long long)regs);
  if (verbs_counts)
    printf("%s: %d messages in kept ranges made %llu registrations, %llu once dropped\n", label, N,
           (unsigned long long)kept_regs, (unsigned long long)regs);
}

/* A network that carries metadata (isend_meta, test_meta): each receive reports its message's
 * word, in order and whatever its size (a plain isend's is 0); a send reports 0. */
static void case_meta(void* s, void* r) {
  static const uint64_t words[] = {0x0123456789abcdefull, 0, 1, ~0ull, 0x5745465400000007ull};
  static const size_t sizes[] = {0, 64, 4096, 1, (1u << 20) + 5};
  enum { N = sizeof(words) / sizeof(words[0]) };
  unsigned char* buf = calloc(1, (1u << 20) + 8);
  unsigned char* dst[N];
  void *sreq[N] = {0}, *rreq[N] = {0};
  for (int i = 0; i < N; i++) {
    void* bufs[1] = {dst[i] = calloc(1, sizes[i] + 1)};
    size_t caps[1] = {sizes[i] + 1};
    int tags[1] = {4};
    EXPECT(net->irecv(r, 1, bufs, caps, tags, &rreq[i]) == ncclSuccess && rreq[i] != NULL);
  }
  for (int i = 0; i < N; i++) {
    ncclResult_t res = i == 1 ? net->isend(s, buf, sizes[i], 4, &sreq[i])
                              : net->isend_meta(s, buf, sizes[i], 4, words[i], &sreq[i]);
    EXPECT(res == ncclSuccess && sreq[i] != NULL);
  }
  for (int i = 0; i < N; i++) {
    uint64_t got = 7;
    int done = 0;
    double t0 = now_s();
    while (sreq[i] && !done && now_s() - t0 < 10)
      EXPECT(net->test_meta(sreq[i], &done, NULL, &got) == ncclSuccess);
    EXPECT_MSG(done && got == 0, "%s: send %d done %d reports word %llx", label, i, done,
               (unsigned long long)got);
    done = 0;
    while (rreq[i] && !done && now_s() - t0 < 10)
      EXPECT(net->test_meta(rreq[i], &done, NULL, &got) == ncclSuccess);
    EXPECT_MSG(done && got == words[i], "%s: message %d (%zu bytes) carried word %llx, sent %llx", label, i,
               sizes[i], (unsigned long long)got, (unsigned long long)words[i]);
    free(dst[i]);
  }
  free(buf);
}

/* n outside 1..WEFT_NET_MAX_RECVS is an error, not a crash. */
static void case_bad_args(void* r) {
  char buf[8];
  void* bufs[WEFT_NET_MAX_RECVS + 1] = {buf, buf, buf, buf, buf};
  size_t caps[WEFT_NET_MAX_RECVS + 1] = {8, 8, 8, 8, 8};
  int tags[WEFT_NET_MAX_RECVS + 1] = {0};
  void* req = NULL;
  EXPECT(net->irecv(r, 0, bufs, caps, tags, &req) != ncclSuccess && req == NULL);
  EXPECT(net->irecv(r, WEFT_NET_MAX_RECVS + 1, bufs, caps, tags, &req) != ncclSuccess && req == NULL);
}

/* A message whose tag no offered buffer has is an error for the receive (last: it spoils the pair). */
static void case_unknown_tag(void* s, void* r) {
  char src[16] = "x", dst[16];
  void* bufs[1] = {dst};
  size_t caps[1] = {sizeof(dst)};
  int tags[1] = {1};
  void *sreq = NULL, *rreq = NULL;
  EXPECT(net->irecv(r, 1, bufs, caps, tags, &rreq) == ncclSuccess && rreq != NULL);
  EXPECT(net->isend(s, src, sizeof(src), 2, &sreq) == ncclSuccess && sreq != NULL);
  if (rreq)
    EXPECT_MSG(wait_req(rreq, NULL) != ncclSuccess, "%s: a message with an unknown tag was taken", label);
}

static void run_suite(void) {
  int ndev = 0;
  struct weft_net_props props;
  EXPECT(net->init() == ncclSuccess);
  EXPECT(net->devices(&ndev) == ncclSuccess && ndev >= 1);
  EXPECT(net->get_properties(0, &props) == ncclSuccess && props.name[0]);
  void *l = NULL, *s, *r;
  char handle[WEFT_NET_HANDLE_BYTES];
  EXPECT(net->listen(0, NULL, handle, &l) == ncclSuccess && l != NULL); /* close while idle */
  if (l) EXPECT(net->close_listen(l) == ncclSuccess);
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "%s: listen/connect/accept", label);
    return;
  }
  EXPECT(net->close_send(s) == ncclSuccess && net->close_recv(r) == ncclSuccess); /* idle pair */
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "%s: a second listen/connect/accept", label);
    return;
  }
  /* After a failed case the pair's state is unknown: the network's remaining cases are skipped
   * (each would wait out its time). */
  int before = test_failures;
  case_sizes(s, r);
  if (test_failures == before) case_multi(s, r);
  if (test_failures == before) case_inflight(s, r);
  if (test_failures == before && net->isend_meta != NULL) case_meta(s, r);
  if (test_failures == before && net->keep_registered != NULL) case_kept(s, r);
  if (test_failures == before) case_bad_args(r);
  if (test_failures == before) case_unknown_tag(s, r);
  net->close_send(s);
  net->close_recv(r);
  printf("%s: conformance cases %s\n", label, test_failures == before ? "passed" : "FAILED");
}

int main(void) {
  enum { VMIN = WEFT_PLUGIN_VERSION_MIN, VMAX = WEFT_PLUGIN_VERSION_MAX, NV = VMAX - VMIN + 1 };
  char exe[PATH_MAX] = {0}, list[NV * (PATH_MAX + 32)] = "";
  if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) < 0) test_skip("no /proc/self/exe");
  const char* dir = dirname(exe); /* <build>/tests/unit: the plugins are in <build>/tests/net/plugin */
  for (int v = VMIN; v <= VMAX; v++)
    snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s/../net/plugin/libnccl-net-tcptest%d.so",
             v > VMIN ? "," : "", dir, v);
  setenv("NCCL_NET_PLUGIN", list, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  const struct weft_net_ops* const* plugins;
  int np = 0;
  weft_net_plugins(&plugins, &np);
  EXPECT_MSG(np == NV, "%d plugins loaded from %s", np, list);
  net = &weft_net_socket_ops;
  label = net->name;
  run_suite();
  if (net_use_test_verbs()) { /* the IB network on the test verbs provider */
    net = &weft_net_ib_ops;
    label = net->name;
    EXPECT(net->init() == ncclSuccess); /* loads the provider */
    void* lib = dlopen(getenv("WEFT_IBVERBS_LIB"), RTLD_NOW | RTLD_NOLOAD);
    verbs_counts = lib ? (void (*)(uint64_t*))dlsym(lib, "weft_fake_verbs_counts") : NULL;
    EXPECT_MSG(verbs_counts != NULL, "the test verbs provider has no weft_fake_verbs_counts");
    run_suite();
    uint64_t n[NCOUNTS];
    counts(n);
    EXPECT_MSG(n[2] == 0, "IB: %llu registrations left after every comm closed", (unsigned long long)n[2]);
    verbs_counts = NULL;
    if (lib) dlclose(lib);
  }
  for (int i = 0; i < np && i < NV; i++) {
    char want[32];
    snprintf(want, sizeof(want), "TcpTest-v%d", VMIN + i);
    EXPECT_MSG(strcmp(plugins[i]->name, want) == 0, "plugin %d is %s, not %s", i, plugins[i]->name, want);
    net = plugins[i];
    label = net->name;
    run_suite();
  }
  return test_finish("test_net_conformance");
}
