/* Socket helpers: NCCL's default interface order, address parsing and
 * printing, and the blocking loops' retry, deadline and abort behaviour on loopback. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "util/log.h"
#include "util/socket.h"

static struct weft_socket_if make_if(const char* name, const char* ip, const char* mask) {
  struct weft_socket_if itf;
  memset(&itf, 0, sizeof(itf));
  snprintf(itf.name, sizeof(itf.name), "%s", name);
  int fam = strchr(ip, ':') ? AF_INET6 : AF_INET;
  itf.addr.sa.sa_family = itf.mask.sa.sa_family = fam;
  if (fam == AF_INET) {
    inet_pton(AF_INET, ip, &itf.addr.sin.sin_addr);
    inet_pton(AF_INET, mask, &itf.mask.sin.sin_addr);
  } else {
    inet_pton(AF_INET6, ip, &itf.addr.sin6.sin6_addr);
    inet_pton(AF_INET6, mask, &itf.mask.sin6.sin6_addr);
  }
  return itf;
}

/* Selects from a synthetic list and returns the first chosen name (or "" when none). */
static const char* pick(const struct weft_socket_if* all, int n, const char* spec, const char* near_ip) {
  static struct weft_socket_if out[8];
  union weft_socket_addr near;
  if (near_ip) EXPECT(weft_socket_addr_parse(near_ip, AF_UNSPEC, &near) == ncclSuccess);
  int k = weft_socket_select_ifs(all, n, spec, near_ip ? &near : NULL, out, 8);
  return k > 0 ? out[0].name : "";
}

static void test_select_order(void) {
  struct weft_socket_if all[] = {
      make_if("lo", "127.0.0.1", "255.0.0.0"),
      make_if("docker0", "172.17.0.1", "255.255.0.0"),
      make_if("virbr0", "192.168.122.1", "255.255.255.0"),
      make_if("eth0", "10.1.0.5", "255.255.0.0"),
      make_if("eth1", "10.2.0.5", "255.255.0.0"),
      make_if("ib0", "10.9.0.5", "255.255.0.0"),
  };
  int n = (int)(sizeof(all) / sizeof(all[0]));
  EXPECT(strcmp(pick(all, n, NULL, NULL), "ib0") == 0);
  EXPECT(strcmp(pick(all, n - 1, NULL, NULL), "eth0") == 0);
  EXPECT(strcmp(pick(all, n - 1, NULL, "10.2.3.4:1"), "eth1") == 0); /* subnet of NCCL_COMM_ID */
  EXPECT(strcmp(pick(all, n - 1, NULL, "10.7.3.4:1"), "eth0") == 0); /* no subnet match: default */
  EXPECT(strcmp(pick(all, 3, NULL, NULL), "docker0") == 0);
  EXPECT(strcmp(pick(all, 1, NULL, NULL), "lo") == 0);
  EXPECT(strcmp(pick(all + 2, 1, NULL, NULL), "virbr0") == 0);
  EXPECT(strcmp(pick(all, n, "eth1", NULL), "eth1") == 0);
  EXPECT(strcmp(pick(all, n, "^lo,docker,ib", NULL), "virbr0") == 0);
  EXPECT(strcmp(pick(all, n, "=eth", NULL), "") == 0);
  EXPECT(strcmp(pick(all, n, "^=lo", NULL), "docker0") == 0);
  struct weft_socket_if out[8];
  EXPECT_EQ_INT(weft_socket_select_ifs(all, n, "eth", NULL, out, 8), 2);
  /* All interfaces of the first non-empty group are returned, in list order. */
  EXPECT_EQ_INT(weft_socket_select_ifs(all, n - 1, NULL, NULL, out, 8), 2);
  EXPECT(strcmp(out[1].name, "eth1") == 0);
  struct weft_socket_if v6 = make_if("eth9", "fd00::2", "ffff:ffff:ffff:ffff::");
  union weft_socket_addr a;
  EXPECT(weft_socket_addr_parse("[fd00::77]:5", AF_UNSPEC, &a) == ncclSuccess);
  EXPECT(weft_socket_same_subnet(&v6, &a));
  EXPECT(weft_socket_addr_parse("[fd01::77]:5", AF_UNSPEC, &a) == ncclSuccess);
  EXPECT(!weft_socket_same_subnet(&v6, &a));
}

static void test_addresses(void) {
  union weft_socket_addr a, b;
  char text[WEFT_SOCKET_ADDR_STRLEN];
  EXPECT(weft_socket_addr_parse("127.0.0.1:1234", AF_UNSPEC, &a) == ncclSuccess);
  EXPECT(a.sa.sa_family == AF_INET && weft_socket_addr_port(&a) == 1234);
  EXPECT(strcmp(weft_socket_addr_str(&a, text, sizeof(text)), "127.0.0.1<1234>") == 0);
  EXPECT(weft_socket_addr_parse("[::1]:80", AF_UNSPEC, &b) == ncclSuccess);
  EXPECT(b.sa.sa_family == AF_INET6 && weft_socket_addr_port(&b) == 80);
  EXPECT(strcmp(weft_socket_addr_str(&b, text, sizeof(text)), "::1<80>") == 0);
  EXPECT(!weft_socket_addr_equal(&a, &b));
  EXPECT(weft_socket_addr_parse("localhost:99", AF_INET, &b) == ncclSuccess);
  EXPECT(b.sa.sa_family == AF_INET && weft_socket_addr_port(&b) == 99);
  weft_socket_addr_set_port(&b, 1234);
  EXPECT(weft_socket_addr_equal(&a, &b));
  const char* bad[] = {"127.0.0.1", "::1:80", "[::1]80", "host:99999", "127.0.0.1:x", ":5", "[::1]:", NULL};
  for (int i = 0; bad[i]; i++)
    EXPECT_MSG(weft_socket_addr_parse(bad[i], AF_UNSPEC, &a) != ncclSuccess, "%s", bad[i]);
}

static void test_interfaces(void) {
  struct weft_socket_if ifs[16];
  int n = weft_socket_list_ifs(AF_UNSPEC, ifs, 16);
  EXPECT(n >= 1);
  for (int i = 0; i < n; i++)
    EXPECT(ifs[i].addr.sa.sa_family == AF_INET || ifs[i].addr.sa.sa_family == AF_INET6);
  struct weft_socket_if itf;
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  EXPECT(weft_socket_bootstrap_if(&itf) == ncclSuccess);
  EXPECT(strcmp(itf.name, "lo") == 0 && itf.addr.sa.sa_family == AF_INET);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  if (weft_socket_list_ifs(AF_INET6, ifs, 16) > 0 && weft_socket_bootstrap_if(&itf) == ncclSuccess)
    EXPECT(itf.addr.sa.sa_family == AF_INET6);
  unsetenv("NCCL_SOCKET_FAMILY");
  setenv("NCCL_SOCKET_IFNAME", "no_such_if", 1);
  EXPECT(weft_socket_bootstrap_if(&itf) == ncclSystemError);
  EXPECT(strstr(weft_log_last_error(), "no_such_if") != NULL);
  unsetenv("NCCL_SOCKET_IFNAME");
  EXPECT(weft_socket_bootstrap_if(&itf) == ncclSuccess);
  /* NCCL_COMM_ID on loopback: the interface in its subnet is lo, whatever else is up. */
  setenv("NCCL_COMM_ID", "127.0.0.1:5555", 1);
  EXPECT(weft_socket_bootstrap_if(&itf) == ncclSuccess);
  EXPECT(strcmp(itf.name, "lo") == 0);
  int v6 = weft_socket_list_ifs(AF_INET6, ifs, 16), lo6 = 0;
  for (int i = 0; i < v6; i++) lo6 |= strcmp(ifs[i].name, "lo") == 0;
  if (lo6) { /* an IPv6 root gives an IPv6 interface */
    setenv("NCCL_COMM_ID", "[::1]:5555", 1);
    EXPECT(weft_socket_bootstrap_if(&itf) == ncclSuccess);
    EXPECT(strcmp(itf.name, "lo") == 0 && itf.addr.sa.sa_family == AF_INET6);
  }
  unsetenv("NCCL_COMM_ID");
}

static void loopback(union weft_socket_addr* a) {
  EXPECT(weft_socket_addr_parse("127.0.0.1:0", AF_INET, a) == ncclSuccess);
}

struct setter {
  volatile uint32_t* flag;
  int delay_ms;
};

static void* set_later(void* p) {
  struct setter* s = p;
  usleep(s->delay_ms * 1000);
  __atomic_store_n(s->flag, 1, __ATOMIC_RELEASE);
  return NULL;
}

struct send_job {
  int fd;
  const char* buf;
  size_t len;
  ncclResult_t res;
};

static void* send_main(void* p) {
  struct send_job* j = p;
  j->res = weft_socket_send_all(j->fd, j->buf, j->len, "the receiver", NULL, weft_socket_deadline(20));
  return NULL;
}

static double secs_since(int64_t t0) { return (weft_socket_now_ns() - t0) / 1e9; }

/* A connected pair on loopback: *c from connect, *s from accept. */
static void make_pair(int* lfd, int* c, int* s) {
  union weft_socket_addr a;
  loopback(&a);
  *s = -1;
  EXPECT(weft_socket_listen(&a, lfd) == ncclSuccess);
  EXPECT(weft_socket_addr_port(&a) > 0);
  EXPECT(weft_socket_connect(&a, "self", NULL, weft_socket_deadline(5), c) == ncclSuccess);
  for (int i = 0; i < 1000 && *s < 0; i++) {
    *s = weft_socket_try_accept(*lfd, NULL);
    if (*s < 0) weft_socket_poll_one(*lfd, POLLIN, 10);
  }
  EXPECT(*s >= 0);
}

static void test_transfers(void) {
  int lfd, cfd, afd;
  make_pair(&lfd, &cfd, &afd);
  size_t len = 3 << 20; /* larger than the socket buffers: the sender must wait for the reader */
  char* out = malloc(len);
  char* in = malloc(len);
  for (size_t i = 0; i < len; i++) out[i] = (char)(i * 7 + i / 1000);
  struct send_job job = {cfd, out, len, ncclInternalError};
  pthread_t t;
  pthread_create(&t, NULL, send_main, &job);
  EXPECT(weft_socket_recv_all(afd, in, len, "the sender", NULL, weft_socket_deadline(20)) == ncclSuccess);
  pthread_join(t, NULL);
  EXPECT(job.res == ncclSuccess);
  EXPECT(memcmp(in, out, len) == 0);

  /* Nothing arrives: the deadline ends the wait with ncclRemoteError naming the peer. */
  int64_t t0 = weft_socket_now_ns();
  EXPECT(weft_socket_recv_all(afd, in, 10, "peer-xyz", NULL, t0 + 300000000LL) == ncclRemoteError);
  EXPECT(secs_since(t0) >= 0.29 && secs_since(t0) < 2.0);
  EXPECT(strstr(weft_log_last_error(), "peer-xyz") != NULL);

  /* The abort flag set from another thread ends the wait promptly with ncclInvalidUsage (the caller's own
   * abort). */
  volatile uint32_t flag = 0;
  struct setter s = {&flag, 100};
  pthread_create(&t, NULL, set_later, &s);
  t0 = weft_socket_now_ns();
  EXPECT(weft_socket_recv_all(afd, in, 10, "peer", &flag, weft_socket_deadline(30)) == ncclInvalidUsage);
  EXPECT(secs_since(t0) < 0.5);
  pthread_join(t, NULL);

  /* The peer closes: the receive fails with ncclRemoteError instead of waiting. */
  weft_socket_close(cfd);
  EXPECT(weft_socket_recv_all(afd, in, 10, "peer", NULL, weft_socket_deadline(30)) == ncclRemoteError);
  free(out);
  free(in);
  weft_socket_close(afd);
  weft_socket_close(lfd);
}

static void test_connect_retry(void) {
  union weft_socket_addr a;
  loopback(&a);
  int lfd, fd;
  EXPECT(weft_socket_listen(&a, &lfd) == ncclSuccess);
  weft_socket_close(lfd); /* nothing listens there now: every attempt is refused */
  setenv("NCCL_SOCKET_RETRY_CNT", "3", 1);
  setenv("NCCL_SOCKET_RETRY_SLEEP_MSEC", "20", 1);
  int64_t t0 = weft_socket_now_ns();
  EXPECT(weft_socket_connect(&a, "nobody", NULL, weft_socket_deadline(30), &fd) == ncclRemoteError);
  /* Pauses grow: 20 + 40 + 60 ms before the fourth attempt fails. */
  EXPECT(secs_since(t0) >= 0.11 && secs_since(t0) < 3.0);
  EXPECT(strstr(weft_log_last_error(), "nobody") != NULL);
  EXPECT(strstr(weft_log_last_error(), "refused") != NULL);

  /* A deadline shorter than the retries ends them early. */
  setenv("NCCL_SOCKET_RETRY_CNT", "1000", 1);
  t0 = weft_socket_now_ns();
  EXPECT(weft_socket_connect(&a, "nobody", NULL, t0 + 300000000LL, &fd) == ncclRemoteError);
  EXPECT(secs_since(t0) >= 0.29 && secs_since(t0) < 2.0);

  /* Abort while retrying. */
  volatile uint32_t flag = 0;
  struct setter s = {&flag, 100};
  pthread_t t;
  pthread_create(&t, NULL, set_later, &s);
  t0 = weft_socket_now_ns();
  EXPECT(weft_socket_connect(&a, "nobody", &flag, weft_socket_deadline(30), &fd) == ncclInvalidUsage);
  EXPECT(secs_since(t0) < 0.5);
  pthread_join(t, NULL);

  /* A listener that appears while we retry is reached. */
  setenv("NCCL_SOCKET_RETRY_SLEEP_MSEC", "10", 1);
  union weft_socket_addr b = a;
  EXPECT(weft_socket_listen(&b, &lfd) == ncclSuccess);
  EXPECT(weft_socket_connect(&a, "listener", NULL, weft_socket_deadline(5), &fd) == ncclSuccess);
  weft_socket_close(fd);
  weft_socket_close(lfd);
  unsetenv("NCCL_SOCKET_RETRY_CNT");
  unsetenv("NCCL_SOCKET_RETRY_SLEEP_MSEC");
}

int main(void) {
  test_select_order();
  test_addresses();
  test_interfaces();
  test_transfers();
  test_connect_retry();
  return test_finish("test_socket");
}
