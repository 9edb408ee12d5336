/* TCP helpers shared by the bootstrap and the socket network: IPv4/IPv6 addresses, interface
 * choice (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY) and waits that poll an abort flag and a deadline. */
#ifndef WEFT_UTIL_SOCKET_H
#define WEFT_UTIL_SOCKET_H

#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "nccl.h"

union weft_socket_addr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
};

/* Sent after the magic on every connection; NCCL's numbering. */
enum weft_socket_type {
  WEFT_SOCKET_BOOTSTRAP = 1,
  WEFT_SOCKET_PROXY = 2,
  WEFT_SOCKET_NET = 3,
  WEFT_SOCKET_NET_IB = 4,
  WEFT_SOCKET_RAS = 5
};

/* "1.2.3.4<5678>" or "fd00::1<5678>", NCCL's way of printing an address. */
#define WEFT_SOCKET_ADDR_STRLEN (INET6_ADDRSTRLEN + 10)
/* Longest single wait inside the blocking helpers: bounds how late an abort is noticed. */
#define WEFT_SOCKET_POLL_MS 20
#define WEFT_SOCKET_NO_DEADLINE INT64_MAX

struct weft_socket_if {
  char name[IF_NAMESIZE];
  union weft_socket_addr addr;
  union weft_socket_addr mask;
};

/* Monotonic clock in nanoseconds, and the deadline `seconds` from now (<= 0: none). */
int64_t weft_socket_now_ns(void);
int64_t weft_socket_deadline(int64_t seconds);
static inline int weft_socket_aborted(volatile uint32_t* flag) {
  return flag != NULL && __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0;
}

socklen_t weft_socket_addr_len(const union weft_socket_addr* addr);
int weft_socket_addr_port(const union weft_socket_addr* addr);
void weft_socket_addr_set_port(union weft_socket_addr* addr, int port);
int weft_socket_addr_equal(const union weft_socket_addr* a, const union weft_socket_addr* b);
/* Writes the address into buf (WEFT_SOCKET_ADDR_STRLEN bytes) and returns buf. */
const char* weft_socket_addr_str(const union weft_socket_addr* addr, char* buf, size_t len);
/* An address a peer sent that can be connected to: IPv4 or IPv6 with a port. */
int weft_socket_addr_valid(const union weft_socket_addr* addr);
/* Split "host:port" / "[v6]:port" into host (hostlen bytes) and port; 0 on a malformed text. */
int weft_socket_split_host_port(const char* text, char* host, size_t hostlen, long* port);
/* "host:port", "[ipv6]:port" or "hostname:port"; family AF_UNSPEC takes the first address. */
ncclResult_t weft_socket_addr_parse(const char* text, int family, union weft_socket_addr* out);

/* NCCL_SOCKET_FAMILY as AF_INET, AF_INET6 or AF_UNSPEC. */
int weft_socket_family(void);
int weft_socket_same_subnet(const struct weft_socket_if* itf, const union weft_socket_addr* addr);
/* The machine's interfaces that are up and have an address of family (AF_UNSPEC: IPv4 first,
 * then IPv6), one address per interface, IPv6 link-local skipped. Returns the count. */
int weft_socket_list_ifs(int family, struct weft_socket_if* out, int max);
/* Choose among `all` as NCCL does: spec (NCCL_SOCKET_IFNAME) when non-empty; otherwise the
 * first non-empty group of: ib*, the subnet of near (may be NULL), anything but docker/lo/virbr,
 * docker*, lo*, virbr*. Returns the count written to out. */
int weft_socket_select_ifs(const struct weft_socket_if* all, int nall, const char* spec,
                           const union weft_socket_addr* near, struct weft_socket_if* out, int max);
/* Interfaces for sockets by the environment (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY). */
int weft_socket_find_ifs(const union weft_socket_addr* near, struct weft_socket_if* out, int max);
/* The bootstrap interface: with NCCL_COMM_ID set (and no NCCL_SOCKET_IFNAME) the one in the
 * same subnet as its address, else the first weft_socket_find_ifs gives. Cached per setting. */
ncclResult_t weft_socket_bootstrap_if(struct weft_socket_if* out);

/* Bind a listening socket to addr (port 0 picks one; addr gets the real port). */
ncclResult_t weft_socket_listen(union weft_socket_addr* addr, int* fd);
/* Connect, retrying refusals NCCL_SOCKET_RETRY_CNT times with growing pauses of
 * NCCL_SOCKET_RETRY_SLEEP_MSEC; who names the peer in WARNs ("rank 3", "the root"). */
ncclResult_t weft_socket_connect(const union weft_socket_addr* addr, const char* who,
                                 volatile uint32_t* abort_flag, int64_t deadline, int* fd);
/* The same; listening != 0 says the peer surely listens already, so a refusal means it is gone
 * and is not retried (unreachable hosts and timeouts still are). */
ncclResult_t weft_socket_connect_listening(const union weft_socket_addr* addr, const char* who, int listening,
                                           volatile uint32_t* abort_flag, int64_t deadline, int* fd);
/* Whether a peer that listened at addr now refuses connections (1): its process exited or closed
 * the socket. 0 when it answers or cannot be told within timeout_ms (a host that went away). */
int weft_socket_refuses(const union weft_socket_addr* addr, int timeout_ms);
/* Full transfers on a non-blocking fd. Abort gives ncclInternalError (INFO only), a deadline
 * ncclRemoteError, a closed or reset peer ncclRemoteError, other failures ncclSystemError. */
ncclResult_t weft_socket_send_all(int fd, const void* buf, size_t len, const char* who,
                                  volatile uint32_t* abort_flag, int64_t deadline);
ncclResult_t weft_socket_recv_all(int fd, void* buf, size_t len, const char* who,
                                  volatile uint32_t* abort_flag, int64_t deadline);

/* One non-blocking attempt, no logging: bytes moved (0: would block), WEFT_SOCKET_CLOSED when
 * the peer closed (recv), WEFT_SOCKET_ERROR with errno set otherwise. */
#define WEFT_SOCKET_CLOSED (-1)
#define WEFT_SOCKET_ERROR (-2)
ssize_t weft_socket_try_send(int fd, const void* buf, size_t len);
ssize_t weft_socket_try_recv(int fd, void* buf, size_t len);
/* Accept one pending connection as a non-blocking fd; -1 when none (errno EAGAIN) or on error. */
int weft_socket_try_accept(int listen_fd, union weft_socket_addr* peer);
/* Wait up to timeout_ms for events on fd; returns revents (0 on timeout). */
short weft_socket_poll_one(int fd, short events, int timeout_ms);
void weft_socket_close(int fd);

#endif
