/* A stranger on loopback written with raw sockets: it knows everything about the job but its key
 * (address, magic, wire formats) and tries to join or redirect it. Shared by tests/security. */
#ifndef WEFT_TESTS_SECURITY_STRANGER_H
#define WEFT_TESTS_SECURITY_STRANGER_H

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/socket.h"

/* Blocking connect (retried for a few seconds while the listener is not up yet); -1 on failure. */
static inline int stranger_connect(const union weft_socket_addr* addr) {
  for (int attempt = 0; attempt < 200; attempt++) {
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, &addr->sa, weft_socket_addr_len(addr)) == 0) return fd;
    if (fd >= 0) close(fd);
    usleep(20000);
  }
  return -1;
}

/* Read up to len bytes within ms; returns the count (less on EOF or timeout). */
static inline size_t stranger_read(int fd, void* buf, size_t len, int ms) {
  size_t got = 0;
  while (got < len) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) break;
    ssize_t n = recv(fd, (char*)buf + got, len - got, 0);
    if (n <= 0) break;
    got += (size_t)n;
  }
  return got;
}

/* Whether the peer closed fd within ms, having sent at most `allowed` more bytes (kept in extra,
 * which holds 64 bytes). */
static inline int stranger_dropped(int fd, int ms, size_t allowed, void* extra) {
  char buf[4096];
  size_t total = 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) return 0; /* still open: not dropped in time */
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) return errno == ECONNRESET && total <= allowed;
    if (n == 0) return total <= allowed;
    if (extra && total + (size_t)n <= 64) memcpy((char*)extra + total, buf, (size_t)n);
    total += (size_t)n;
  }
}

/* A listener the stranger would like the job to connect to; it must stay untouched. */
static inline int stranger_listen(union weft_socket_addr* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sin.sin_family = AF_INET;
  addr->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd;
  return weft_socket_listen(addr, &fd) == ncclSuccess ? fd : -1;
}

/* Whether anybody connected to the stranger's listener. */
static inline int stranger_was_contacted(int listen_fd) {
  int fd = weft_socket_try_accept(listen_fd, NULL);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}

#endif
