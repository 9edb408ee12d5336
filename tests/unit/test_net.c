/* Every built-in network over loopback, with the same cases: connect/accept, messages of many
 * sizes with tag matching, many in flight, every helper-thread/socket layout (the IB network's
 * setup and liveness sockets use them too), a peer that vanishes (error, no hang) and an orderly
 * close (no error). The IB network runs over the test verbs provider (tests/ibemu). */
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
#include "transport/net.h"

static const struct weft_net_ops* net;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 9));
}

/* Send nmsg messages of the given sizes (up to 8 in flight), alternating tags 0/1; the
 * receiver offers two buffers and the tag must pick the right one. */
static void transfer(void* s, void* r, const size_t* sizes, int nmsg) {
  enum { INFLIGHT = 8 };
  size_t maxsz = 1;
  for (int i = 0; i < nmsg; i++)
    if (sizes[i] > maxsz) maxsz = sizes[i];
  unsigned char *src[INFLIGHT], *dst[INFLIGHT][2];
  for (int k = 0; k < INFLIGHT; k++) {
    src[k] = malloc(maxsz);
    dst[k][0] = malloc(maxsz);
    dst[k][1] = malloc(maxsz);
  }
  void *sreq[INFLIGHT] = {0}, *rreq[INFLIGHT] = {0};
  int sent = 0, recvd = 0, sposted = 0, rposted = 0, bad = 0;
  double t0 = now_s();
  /* Until every send is done too: a request is released only by the test that finds it done,
   * and a send can be found done after its receive (the sender's helper thread preempted before
   * it marks its chunk sent). Stopping at the last receive left such a send holding its slot, and
   * the next transfer on this comm stalled when it came round to that slot. */
  while ((recvd < nmsg || sent < nmsg) && now_s() - t0 < 60) {
    if (sposted < nmsg && sposted - sent < INFLIGHT && sreq[sposted % INFLIGHT] == NULL) {
      int k = sposted % INFLIGHT;
      fill(src[k], sizes[sposted], (unsigned)sposted);
      EXPECT(net->isend(s, src[k], sizes[sposted], sposted % 2, &sreq[k]) == ncclSuccess);
      if (sreq[k]) sposted++;
    }
    if (rposted < nmsg && rposted - recvd < INFLIGHT && rreq[rposted % INFLIGHT] == NULL) {
      int k = rposted % INFLIGHT;
      void* bufs[2] = {dst[k][0], dst[k][1]};
      size_t caps[2] = {maxsz, maxsz};
      int tags[2] = {0, 1};
      EXPECT(net->irecv(r, 2, bufs, caps, tags, &rreq[k]) == ncclSuccess);
      if (rreq[k]) rposted++;
    }
    if (sent < sposted) {
      int done = 0, k = sent % INFLIGHT;
      size_t sz[1];
      EXPECT(net->test(sreq[k], &done, sz) == ncclSuccess);
      if (done) {
        EXPECT_EQ_INT(sz[0], sizes[sent]);
        sreq[k] = NULL;
        sent++;
      }
    }
    if (recvd < rposted) {
      int done = 0, k = recvd % INFLIGHT;
      size_t sz[2];
      EXPECT(net->test(rreq[k], &done, sz) == ncclSuccess);
      if (done) {
        int t = recvd % 2;
        EXPECT_EQ_INT(sz[t], sizes[recvd]);
        EXPECT(sz[1 - t] == SIZE_MAX);
        unsigned char* want = malloc(sizes[recvd] + 1);
        fill(want, sizes[recvd], (unsigned)recvd);
        if (memcmp(want, dst[k][t], sizes[recvd]) != 0) bad++;
        free(want);
        rreq[k] = NULL;
        recvd++;
      }
    }
  }
  EXPECT_EQ_INT(recvd, nmsg);
  EXPECT_EQ_INT(sent, nmsg);
  EXPECT_EQ_INT(bad, 0);
  for (int k = 0; k < INFLIGHT; k++) {
    free(src[k]);
    free(dst[k][0]);
    free(dst[k][1]);
  }
}

static void run_layout(const char* nthreads, const char* nsocks) {
  setenv("NCCL_SOCKET_NTHREADS", nthreads, 1);
  setenv("NCCL_NSOCKS_PERTHREAD", nsocks, 1);
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "connect/accept with %s threads x %s sockets", nthreads, nsocks);
    return;
  }
  static const size_t sizes[] = {1,     7,      16,      4096,    65535,    65536, 65537,
                                 99999, 262144, 1 << 20, 3000001, 16 << 20, 8,     0};
  transfer(s, r, sizes, (int)(sizeof(sizes) / sizeof(sizes[0])));
  size_t many[200];
  for (int i = 0; i < 200; i++) many[i] = (size_t)((i * 7919) % 300000);
  transfer(s, r, many, 200);
  net->close_send(s);
  net->close_recv(r);
  printf("layout %s thread(s) x %s socket(s): ok\n", nthreads, nsocks);
}

/* The receiver vanishes while the sender streams: the sender's test fails, nothing hangs. */
static void run_peer_lost(void) {
  setenv("NCCL_SOCKET_NTHREADS", "2", 1);
  setenv("NCCL_NSOCKS_PERTHREAD", "1", 1);
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT(0);
    return;
  }
  net->close_recv(r);
  size_t n = 8 << 20;
  char* buf = calloc(1, n);
  ncclResult_t res = ncclSuccess;
  double t0 = now_s();
  while (res == ncclSuccess && now_s() - t0 < 10) {
    void* req = NULL;
    res = net->isend(s, buf, n, 0, &req);
    int done = 0;
    while (res == ncclSuccess && req && !done && now_s() - t0 < 10) res = net->test(req, &done, NULL);
  }
  EXPECT_MSG(res == ncclRemoteError || res == ncclSystemError, "send to a closed peer gave %d", res);
  EXPECT(now_s() - t0 < 10);
  net->close_send(s);
  free(buf);
}

/* A sender that goes away is an error for a receiver still expecting data (orderly closes are
 * announced by the layer above). */
static void run_sender_gone(void) {
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT(0);
    return;
  }
  net->close_send(s);
  char buf[64];
  void* bufs[1] = {buf};
  size_t caps[1] = {sizeof(buf)};
  int tags[1] = {0};
  void* req = NULL;
  EXPECT(net->irecv(r, 1, bufs, caps, tags, &req) == ncclSuccess && req != NULL);
  int done = 0;
  ncclResult_t res = ncclSuccess;
  double t0 = now_s();
  while (res == ncclSuccess && !done && now_s() - t0 < 5) res = net->test(req, &done, NULL);
  EXPECT_MSG(res == ncclRemoteError && !done, "receive from a closed sender gave %d (done %d)", res, done);
  net->close_recv(r);
}

/* A sender that sends one message and closes (as the proxy does after its goodbye): the
 * receive holding the message completes, even when the receives posted after it are flushed by
 * the close before the first is tested; the next one fails. */
static void run_orderly_close(void) {
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT(0);
    return;
  }
  char in[3][64], out[64] = "goodbye";
  void* rreq[3] = {0};
  for (int k = 0; k < 3; k++) {
    void* bufs[1] = {in[k]};
    size_t caps[1] = {sizeof(in[k])};
    int tags[1] = {5};
    EXPECT(net->irecv(r, 1, bufs, caps, tags, &rreq[k]) == ncclSuccess && rreq[k] != NULL);
  }
  void* sreq = NULL;
  int done = 0;
  double t0 = now_s();
  while (sreq == NULL && now_s() - t0 < 5) EXPECT(net->isend(s, out, 8, 5, &sreq) == ncclSuccess);
  while (sreq && !done && now_s() - t0 < 5) EXPECT(net->test(sreq, &done, NULL) == ncclSuccess);
  EXPECT(done);
  net->close_send(s);
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL); /* the close reaches the receiver before it looks */
  size_t got[1] = {0};
  done = 0;
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && !done && now_s() - t0 < 5) res = net->test(rreq[0], &done, got);
  EXPECT_MSG(res == ncclSuccess && done && got[0] == 8 && strcmp(in[0], "goodbye") == 0,
             "%s: the message before the close gave %d (done %d, %zu bytes)", net->name, res, done, got[0]);
  done = 0;
  res = ncclSuccess;
  while (res == ncclSuccess && !done && now_s() - t0 < 10) res = net->test(rreq[1], &done, got);
  EXPECT_MSG(res != ncclSuccess && !done, "%s: a receive after the close gave %d (done %d)", net->name, res,
             done);
  net->close_recv(r);
}

static void run_network(const struct weft_net_ops* which) {
  net = which;
  if (net->init() != ncclSuccess) {
    EXPECT_MSG(0, "network %s does not start", net->name);
    return;
  }
  int ndev = 0;
  EXPECT(net->devices(&ndev) == ncclSuccess && ndev >= 1);
  struct weft_net_props props;
  EXPECT(net->get_properties(0, &props) == ncclSuccess);
  EXPECT(net->get_properties(ndev, &props) != ncclSuccess);
  printf("network %s, device 0: %s\n", net->name, props.name);
  run_layout("0", "1");
  run_layout("1", "1");
  run_layout("2", "2");
  run_layout("4", "1");
  run_peer_lost();
  run_sender_gone();
  run_orderly_close();
}

int main(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  if (weft_net_socket_ops.init() != ncclSuccess) test_skip("no loopback interface for sockets");
  struct weft_net_props props;
  EXPECT(weft_net_socket_ops.get_properties(0, &props) == ncclSuccess && strncmp(props.name, "lo", 2) == 0);
  run_network(&weft_net_socket_ops);
  if (net_use_test_verbs()) {
    run_network(&weft_net_ib_ops);
    /* Messages taking turns over three queue pairs, then each split over four. */
    setenv("NCCL_IB_QPS_PER_CONNECTION", "3", 1);
    run_network(&weft_net_ib_ops);
    setenv("NCCL_IB_QPS_PER_CONNECTION", "4", 1);
    setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "1", 1);
    run_network(&weft_net_ib_ops);
  } else
    printf("IB network not tested: no test verbs provider built (needs libibverbs-dev)\n");
  return test_finish("test_net");
}
