/* Strangers on the socket network's listener: a hello with a made-up answer, one answered with
 * the wrong key (the challenge itself is no secret: it crosses the bootstrap in the handle) and a
 * silent connection arrive before the real connector. The listener drops the first two, builds
 * no connection from any of them, and the real connection (control + 2 data sockets) then
 * carries a large and a small message intact. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "stranger.h"
#include "transport/net.h"
#include "util/auth.h"
#include "util/param.h"

static const struct weft_net_ops* net = &weft_net_socket_ops;

/* The socket network's wire format as a stranger would learn it from the source. */
#define NET_MAGIC 0x5745465453434b54ull
#define HANDLE_ADDR_OFFSET 8
#define HANDLE_NONCE_OFFSET 48
struct hello {
  uint64_t magic, id;
  uint32_t index, nsocks;
};
struct opening {
  uint8_t mac[WEFT_AUTH_MAC_BYTES];
  struct hello h;
};

static int stranger_hello(const char* handle, const struct weft_auth_key* key) {
  union weft_socket_addr addr;
  memcpy(&addr, handle + HANDLE_ADDR_OFFSET, sizeof(addr));
  int fd = stranger_connect(&addr);
  struct opening o;
  memset(&o, 0, sizeof(o));
  o.h = (struct hello){.magic = NET_MAGIC, .id = 42, .index = 0, .nsocks = 2};
  if (key) {
    uint8_t challenge[WEFT_AUTH_NONCE_BYTES] = {0};
    memcpy(challenge, handle + HANDLE_NONCE_OFFSET, 16);
    weft_auth_mac(key, WEFT_AUTH_LABEL_NET, challenge, &o.h, sizeof(o.h), o.mac);
  } else {
    weft_auth_random(o.mac, sizeof(o.mac));
  }
  EXPECT(send(fd, &o, sizeof(o), MSG_NOSIGNAL) == (ssize_t)sizeof(o));
  return fd;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One message s -> r; 1 when it arrives intact within 10 s. */
static int transfer_ok(void* s, void* r, size_t size) {
  unsigned char* src = malloc(size);
  unsigned char* dst = calloc(1, size);
  for (size_t i = 0; i < size; i++) src[i] = (unsigned char)(i * 7 + (i >> 10));
  void *sreq = NULL, *rreq = NULL;
  void* bufs[1] = {dst};
  size_t sizes[1] = {size}, got[1] = {0};
  int tags[1] = {5}, sdone = 0, rdone = 0, ok = 1;
  double t0 = now_s();
  while ((!sdone || !rdone) && ok && now_s() - t0 < 10) {
    if (!sreq && net->isend(s, src, size, 5, &sreq) != ncclSuccess) ok = 0;
    if (!rreq && net->irecv(r, 1, bufs, sizes, tags, &rreq) != ncclSuccess) ok = 0;
    size_t ssz[1];
    if (sreq && !sdone && net->test(sreq, &sdone, ssz) != ncclSuccess) ok = 0;
    if (rreq && !rdone && net->test(rreq, &rdone, got) != ncclSuccess) ok = 0;
  }
  ok = ok && sdone && rdone && got[0] == size && memcmp(src, dst, size) == 0;
  free(src);
  free(dst);
  return ok;
}

int main(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_NTHREADS", "1", 1);
  setenv("NCCL_NSOCKS_PERTHREAD", "2", 1);
  weft_param_reload();
  if (net->init() != ncclSuccess) {
    printf("SKIP: no loopback interface for the socket network\n");
    return 77;
  }
  struct weft_auth_key key, wrong;
  weft_auth_random(key.bytes, sizeof(key.bytes));
  weft_auth_random(wrong.bytes, sizeof(wrong.bytes));
  char handle[WEFT_NET_HANDLE_BYTES];
  void *l = NULL, *s = NULL, *r = NULL;
  EXPECT(net->listen(0, &key, handle, &l) == ncclSuccess);
  int forged = stranger_hello(handle, NULL), foreign = stranger_hello(handle, &wrong);
  union weft_socket_addr addr;
  memcpy(&addr, handle + HANDLE_ADDR_OFFSET, sizeof(addr));
  int silent = stranger_connect(&addr);
  /* The listener sees all three and must neither fail nor build a connection from them. */
  for (double t0 = now_s(); now_s() - t0 < 0.3 && r == NULL;) EXPECT(net->accept(l, &r) == ncclSuccess);
  EXPECT_MSG(r == NULL, "the listener accepted a stranger's connection");
  EXPECT_MSG(stranger_dropped(forged, 2000, 0, NULL), "a hello with a made-up answer was kept");
  EXPECT_MSG(stranger_dropped(foreign, 2000, 0, NULL), "a hello answered with the wrong key was kept");
  /* The real connector (its own handle copy, as net.c gives it) gets in. */
  char copy[WEFT_NET_HANDLE_BYTES];
  memcpy(copy, handle, sizeof(copy));
  for (double t0 = now_s(); (s == NULL || r == NULL) && now_s() - t0 < 10;) {
    if (s == NULL) EXPECT(net->connect(0, &key, copy, &s) == ncclSuccess);
    if (r == NULL) EXPECT(net->accept(l, &r) == ncclSuccess);
  }
  EXPECT_MSG(s != NULL && r != NULL, "the real connection did not complete");
  if (s && r) {
    EXPECT_MSG(transfer_ok(s, r, 3 << 20), "a 3 MiB message over the data sockets arrived damaged");
    EXPECT_MSG(transfer_ok(s, r, 100), "a small message arrived damaged");
  }
  close(forged);
  close(foreign);
  close(silent);
  if (s) net->close_send(s);
  if (r) net->close_recv(r);
  net->close_listen(l);
  return test_finish("test_net_stranger");
}
