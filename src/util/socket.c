/* TCP helpers: addresses, NCCL's interface choice, and connect/send/recv loops that wait in
 * short poll() slices so an abort flag or a deadline always ends them. */
#include "util/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"
#include "util/log.h"
#include "util/name_list.h"
#include "util/param.h"

int64_t weft_socket_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t weft_socket_deadline(int64_t seconds) {
  if (seconds <= 0 || seconds > 100LL * 365 * 24 * 3600) return WEFT_SOCKET_NO_DEADLINE;
  return weft_socket_now_ns() + seconds * 1000000000LL;
}

/* Milliseconds to wait in one poll: at most WEFT_SOCKET_POLL_MS, never past the deadline. */
static int slice_ms(int64_t deadline) {
  if (deadline == WEFT_SOCKET_NO_DEADLINE) return WEFT_SOCKET_POLL_MS;
  int64_t left = deadline - weft_socket_now_ns();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000;
  return ms < WEFT_SOCKET_POLL_MS ? (int)ms : WEFT_SOCKET_POLL_MS;
}

socklen_t weft_socket_addr_len(const union weft_socket_addr* addr) {
  return addr->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int weft_socket_addr_port(const union weft_socket_addr* addr) {
  if (addr->sa.sa_family == AF_INET6) return ntohs(addr->sin6.sin6_port);
  if (addr->sa.sa_family == AF_INET) return ntohs(addr->sin.sin_port);
  return -1;
}

void weft_socket_addr_set_port(union weft_socket_addr* addr, int port) {
  if (addr->sa.sa_family == AF_INET6)
    addr->sin6.sin6_port = htons((uint16_t)port);
  else
    addr->sin.sin_port = htons((uint16_t)port);
}

int weft_socket_addr_equal(const union weft_socket_addr* a, const union weft_socket_addr* b) {
  if (a->sa.sa_family != b->sa.sa_family) return 0;
  if (a->sa.sa_family == AF_INET)
    return a->sin.sin_port == b->sin.sin_port && a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
  if (a->sa.sa_family == AF_INET6)
    return a->sin6.sin6_port == b->sin6.sin6_port &&
           memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof(struct in6_addr)) == 0;
  return 0;
}

const char* weft_socket_addr_str(const union weft_socket_addr* addr, char* buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->sa.sa_family == AF_INET)
    inet_ntop(AF_INET, &addr->sin.sin_addr, host, sizeof(host));
  else if (addr->sa.sa_family == AF_INET6)
    inet_ntop(AF_INET6, &addr->sin6.sin6_addr, host, sizeof(host));
  snprintf(buf, len, "%s<%d>", host, weft_socket_addr_port(addr));
  return buf;
}

int weft_socket_addr_valid(const union weft_socket_addr* addr) {
  sa_family_t family = addr->sa.sa_family;
  return (family == AF_INET || family == AF_INET6) && weft_socket_addr_port(addr) > 0;
}

int weft_socket_split_host_port(const char* text, char* host, size_t hostlen, long* port) {
  const char* colon;
  if (text[0] == '[') {
    const char* close = strchr(text, ']');
    if (close == NULL || close[1] != ':') return 0;
    if ((size_t)(close - text - 1) >= hostlen) return 0;
    memcpy(host, text + 1, close - text - 1);
    host[close - text - 1] = '\0';
    colon = close + 1;
  } else {
    colon = strrchr(text, ':');
    if (colon == NULL || strchr(text, ':') != colon) return 0; /* bare IPv6 needs brackets */
    if ((size_t)(colon - text) >= hostlen || colon == text) return 0;
    memcpy(host, text, colon - text);
    host[colon - text] = '\0';
  }
  char* end;
  errno = 0;
  *port = strtol(colon + 1, &end, 10);
  return colon[1] != '\0' && *end == '\0' && errno == 0 && *port >= 0 && *port <= 65535;
}

ncclResult_t weft_socket_addr_parse(const char* text, int family, union weft_socket_addr* out) {
  char host[256];
  long port;
  if (text == NULL || !weft_socket_split_host_port(text, host, sizeof(host), &port)) {
    WEFT_WARN("Invalid address \"%s\": expected host:port, [ipv6]:port or hostname:port",
              text ? text : "(null)");
    return ncclInvalidArgument;
  }
  struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM};
  struct addrinfo* res = NULL;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || res == NULL) {
    WEFT_WARN("Cannot resolve \"%s\" of address \"%s\": %s", host, text, gai_strerror(rc));
    return ncclInvalidArgument;
  }
  memset(out, 0, sizeof(*out));
  memcpy(out, res->ai_addr, res->ai_addrlen < sizeof(*out) ? res->ai_addrlen : sizeof(*out));
  freeaddrinfo(res);
  weft_socket_addr_set_port(out, (int)port);
  return ncclSuccess;
}

int weft_socket_family(void) {
  const char* fam = weft_param_str("NCCL_SOCKET_FAMILY");
  if (fam == NULL || fam[0] == '\0') return AF_UNSPEC;
  if (strcmp(fam, "AF_INET") == 0) return AF_INET;
  if (strcmp(fam, "AF_INET6") == 0) return AF_INET6;
  WEFT_INFO(WEFT_ENV | WEFT_NET, "NCCL_SOCKET_FAMILY=%s is neither AF_INET nor AF_INET6: ignored", fam);
  return AF_UNSPEC;
}

int weft_socket_same_subnet(const struct weft_socket_if* itf, const union weft_socket_addr* addr) {
  if (itf->addr.sa.sa_family != addr->sa.sa_family) return 0;
  if (addr->sa.sa_family == AF_INET) {
    uint32_t mask = itf->mask.sin.sin_addr.s_addr;
    return (itf->addr.sin.sin_addr.s_addr & mask) == (addr->sin.sin_addr.s_addr & mask);
  }
  if (addr->sa.sa_family == AF_INET6) {
    const uint8_t* a = itf->addr.sin6.sin6_addr.s6_addr;
    const uint8_t* b = addr->sin6.sin6_addr.s6_addr;
    const uint8_t* m = itf->mask.sin6.sin6_addr.s6_addr;
    for (int i = 0; i < 16; i++)
      if ((a[i] & m[i]) != (b[i] & m[i])) return 0;
    return 1;
  }
  return 0;
}

static int have_if(const struct weft_socket_if* ifs, int n, const char* name) {
  for (int i = 0; i < n; i++)
    if (strcmp(ifs[i].name, name) == 0) return 1;
  return 0;
}

int weft_socket_list_ifs(int family, struct weft_socket_if* out, int max) {
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0) {
    WEFT_WARN("getifaddrs failed: %s", strerror(errno));
    return 0;
  }
  int n = 0;
  /* IPv4 first so an interface with both families is used through IPv4 unless told otherwise. */
  for (int pass = 0; pass < 2; pass++) {
    int fam = pass == 0 ? AF_INET : AF_INET6;
    if (family != AF_UNSPEC && family != fam) continue;
    for (struct ifaddrs* ifa = list; ifa != NULL && n < max; ifa = ifa->ifa_next) {
      if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != fam || !(ifa->ifa_flags & IFF_UP)) continue;
      if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6*)ifa->ifa_addr)->sin6_addr))
        continue;
      if (have_if(out, n, ifa->ifa_name)) continue;
      struct weft_socket_if* itf = &out[n++];
      memset(itf, 0, sizeof(*itf));
      snprintf(itf->name, sizeof(itf->name), "%s", ifa->ifa_name);
      size_t len = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
      memcpy(&itf->addr, ifa->ifa_addr, len);
      if (ifa->ifa_netmask) memcpy(&itf->mask, ifa->ifa_netmask, len);
    }
  }
  freeifaddrs(list);
  return n;
}

/* Selection groups of NCCL's default order, tried until one yields an interface. */
enum { GROUP_IB, GROUP_SUBNET, GROUP_OTHER, GROUP_DOCKER, GROUP_LO, GROUP_VIRBR, NGROUPS };

static int in_group(const struct weft_socket_if* itf, int group, const union weft_socket_addr* near) {
  switch (group) {
    case GROUP_IB:
      return strncmp(itf->name, "ib", 2) == 0;
    case GROUP_SUBNET:
      return near != NULL && weft_socket_same_subnet(itf, near);
    case GROUP_OTHER:
      return weft_name_list_match("^docker,lo,virbr", itf->name, 0);
    case GROUP_DOCKER:
      return strncmp(itf->name, "docker", 6) == 0;
    case GROUP_LO:
      return strncmp(itf->name, "lo", 2) == 0;
    default:
      return strncmp(itf->name, "virbr", 5) == 0;
  }
}

int weft_socket_select_ifs(const struct weft_socket_if* all, int nall, const char* spec,
                           const union weft_socket_addr* near, struct weft_socket_if* out, int max) {
  int n = 0;
  if (spec != NULL && spec[0] != '\0') {
    for (int i = 0; i < nall && n < max; i++)
      if (weft_name_list_match(spec, all[i].name, 0)) out[n++] = all[i];
    return n;
  }
  for (int g = 0; g < NGROUPS && n == 0; g++)
    for (int i = 0; i < nall && n < max; i++)
      if (in_group(&all[i], g, near)) out[n++] = all[i];
  return n;
}

#define MAX_IFS 64

int weft_socket_find_ifs(const union weft_socket_addr* near, struct weft_socket_if* out, int max) {
  struct weft_socket_if all[MAX_IFS];
  int nall = weft_socket_list_ifs(weft_socket_family(), all, MAX_IFS);
  return weft_socket_select_ifs(all, nall, weft_param_str("NCCL_SOCKET_IFNAME"), near, out, max);
}

/* The bootstrap interface is chosen once per combination of the settings it depends on. */
static pthread_mutex_t bootstrap_if_lock = PTHREAD_MUTEX_INITIALIZER;
static char bootstrap_if_key[768];
static struct weft_socket_if bootstrap_if_cached;
static int bootstrap_if_valid;

static ncclResult_t choose_bootstrap_if(const char* spec, const char* comm_id, struct weft_socket_if* out) {
  struct weft_socket_if all[MAX_IFS], pick[1];
  int nall = weft_socket_list_ifs(weft_socket_family(), all, MAX_IFS);
  int n = 0;
  if ((spec == NULL || spec[0] == '\0') && comm_id != NULL) {
    union weft_socket_addr root;
    WEFT_CHECK(weft_socket_addr_parse(comm_id, weft_socket_family(), &root));
    /* Look at the root's family only: an interface listed through IPv4 may share an IPv6 subnet. */
    struct weft_socket_if same[MAX_IFS];
    int nsame = weft_socket_list_ifs(root.sa.sa_family, same, MAX_IFS);
    for (int i = 0; i < nsame && n == 0; i++)
      if (weft_socket_same_subnet(&same[i], &root)) pick[n++] = same[i];
    if (n == 0)
      WEFT_INFO(WEFT_BOOTSTRAP, "No interface in the subnet of NCCL_COMM_ID=%s; using the default order",
                comm_id);
  }
  if (n == 0) n = weft_socket_select_ifs(all, nall, spec, NULL, pick, 1);
  if (n == 0) {
    WEFT_WARN(
        "Bootstrap: no usable socket interface (NCCL_SOCKET_IFNAME=%s, NCCL_SOCKET_FAMILY=%s, %d interfaces "
        "up); weft-doctor (check net.ifname) lists the interfaces to choose from",
        spec ? spec : "unset",
        weft_param_str("NCCL_SOCKET_FAMILY") ? weft_param_str("NCCL_SOCKET_FAMILY") : "unset", nall);
    return ncclSystemError;
  }
  *out = pick[0];
  weft_socket_addr_set_port(&out->addr, 0);
  char text[WEFT_SOCKET_ADDR_STRLEN];
  WEFT_INFO(WEFT_BOOTSTRAP | WEFT_INIT, "Bootstrap: Using %s:%s", out->name,
            weft_socket_addr_str(&out->addr, text, sizeof(text)));
  return ncclSuccess;
}

ncclResult_t weft_socket_bootstrap_if(struct weft_socket_if* out) {
  const char* spec = weft_param_str("NCCL_SOCKET_IFNAME");
  const char* fam = weft_param_str("NCCL_SOCKET_FAMILY");
  const char* comm_id = weft_param_str("NCCL_COMM_ID");
  char key[sizeof(bootstrap_if_key)];
  snprintf(key, sizeof(key), "%s|%s|%s", spec ? spec : "-", fam ? fam : "-", comm_id ? comm_id : "-");
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&bootstrap_if_lock);
  if (!bootstrap_if_valid || strcmp(key, bootstrap_if_key) != 0) {
    res = choose_bootstrap_if(spec, comm_id, &bootstrap_if_cached);
    bootstrap_if_valid = res == ncclSuccess;
    snprintf(bootstrap_if_key, sizeof(bootstrap_if_key), "%s", key);
  }
  if (res == ncclSuccess) *out = bootstrap_if_cached;
  pthread_mutex_unlock(&bootstrap_if_lock);
  return res;
}

static int make_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void weft_socket_close(int fd) {
  if (fd >= 0) close(fd);
}

ncclResult_t weft_socket_listen(union weft_socket_addr* addr, int* fd_out) {
  char text[WEFT_SOCKET_ADDR_STRLEN];
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    WEFT_WARN("socket() for listening on %s failed: %s", weft_socket_addr_str(addr, text, sizeof(text)),
              strerror(errno));
    return ncclSystemError;
  }
  int one = 1;
  /* A fixed port (NCCL_COMM_ID) must be reusable while old connections sit in TIME_WAIT. */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = weft_socket_addr_len(addr);
  if (bind(fd, &addr->sa, len) != 0 || listen(fd, SOMAXCONN) != 0 || getsockname(fd, &addr->sa, &len) != 0) {
    int err = errno;
    close(fd);
    WEFT_WARN("Cannot listen on %s: %s", weft_socket_addr_str(addr, text, sizeof(text)), strerror(err));
    return ncclSystemError;
  }
  *fd_out = fd;
  return ncclSuccess;
}

/* Sleep ms in poll slices; returns ncclInvalidUsage when aborted (the caller's own abort, as the
 * collectives report it), ncclRemoteError at deadline. */
static ncclResult_t pause_ms(int64_t ms, volatile uint32_t* abort_flag, int64_t deadline) {
  int64_t until = weft_socket_now_ns() + ms * 1000000LL;
  while (weft_socket_now_ns() < until) {
    if (weft_socket_aborted(abort_flag)) return ncclInvalidUsage;
    if (weft_socket_now_ns() >= deadline) return ncclRemoteError;
    poll(NULL, 0, slice_ms(until < deadline ? until : deadline));
  }
  return ncclSuccess;
}

/* One connect attempt: 0 connected, else the errno that ended it (ETIMEDOUT at the deadline,
 * ECANCELED when aborted). */
static int try_connect(int fd, const union weft_socket_addr* addr, volatile uint32_t* abort_flag,
                       int64_t deadline) {
  if (connect(fd, &addr->sa, weft_socket_addr_len(addr)) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  for (;;) {
    if (weft_socket_aborted(abort_flag)) return ECANCELED;
    if (weft_socket_now_ns() >= deadline) return ETIMEDOUT;
    short ev = weft_socket_poll_one(fd, POLLOUT, slice_ms(deadline));
    if (ev == 0) continue;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
  }
}

/* A route problem is what weft-doctor's reachability check finds before a job starts. */
static const char* unreachable_hint(int err, const union weft_socket_addr* addr, char* buf, size_t size) {
  if (err != EHOSTUNREACH && err != ENETUNREACH && err != ETIMEDOUT) return "";
  char host[INET6_ADDRSTRLEN] = "";
  const void* a =
      addr->sa.sa_family == AF_INET6 ? (const void*)&addr->sin6.sin6_addr : (const void*)&addr->sin.sin_addr;
  inet_ntop(addr->sa.sa_family, a, host, sizeof(host));
  snprintf(
      buf, size,
      "; weft-doctor -H %s (check net.reach) tells whether the interfaces of NCCL_SOCKET_IFNAME reach that "
      "host",
      host);
  return buf;
}

ncclResult_t weft_socket_connect(const union weft_socket_addr* addr, const char* who,
                                 volatile uint32_t* abort_flag, int64_t deadline, int* fd_out) {
  return weft_socket_connect_listening(addr, who, 0, abort_flag, deadline, fd_out);
}

ncclResult_t weft_socket_connect_listening(const union weft_socket_addr* addr, const char* who, int listening,
                                           volatile uint32_t* abort_flag, int64_t deadline, int* fd_out) {
  char text[WEFT_SOCKET_ADDR_STRLEN];
  weft_socket_addr_str(addr, text, sizeof(text));
  int64_t retries = weft_param_int("NCCL_SOCKET_RETRY_CNT");
  int64_t sleep_ms = weft_param_int("NCCL_SOCKET_RETRY_SLEEP_MSEC");
  for (int64_t attempt = 1;; attempt++) {
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      WEFT_WARN("socket() for connecting to %s at %s failed: %s", who, text, strerror(errno));
      return ncclSystemError;
    }
    int err = try_connect(fd, addr, abort_flag, deadline);
    if (err == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *fd_out = fd;
      return ncclSuccess;
    }
    close(fd);
    if (err == ECANCELED) {
      WEFT_INFO(WEFT_BOOTSTRAP | WEFT_NET, "Connect to %s at %s: abort flag set", who, text);
      return ncclInvalidUsage;
    }
    int retryable = (err == ECONNREFUSED && !listening) || err == ETIMEDOUT || err == EHOSTUNREACH;
    if (!retryable || attempt > retries || weft_socket_now_ns() >= deadline) {
      char hint[160];
      WEFT_WARN("Connect to %s at %s failed after %lld attempt(s): %s%s", who, text, (long long)attempt,
                strerror(err), unreachable_hint(err, addr, hint, sizeof(hint)));
      /* A refusal from a peer that surely listened: it is gone, a remote failure. */
      return retryable || (err == ECONNREFUSED && listening) ? ncclRemoteError : ncclSystemError;
    }
    WEFT_TRACE(WEFT_BOOTSTRAP | WEFT_NET, "Connect to %s at %s: %s, retry %lld", who, text, strerror(err),
               (long long)attempt);
    ncclResult_t res = pause_ms(sleep_ms * attempt, abort_flag, deadline);
    if (res == ncclInvalidUsage) {
      WEFT_INFO(WEFT_BOOTSTRAP | WEFT_NET, "Connect to %s at %s: abort flag set", who, text);
      return res;
    }
    if (res != ncclSuccess) {
      WEFT_WARN("Connect to %s at %s: still %s when the deadline passed", who, text, strerror(err));
      return res;
    }
  }
}

int weft_socket_refuses(const union weft_socket_addr* addr, int timeout_ms) {
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int err = try_connect(fd, addr, NULL, weft_socket_now_ns() + timeout_ms * 1000000LL);
  close(fd);
  return err == ECONNREFUSED;
}

ssize_t weft_socket_try_send(int fd, const void* buf, size_t len) {
  ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) return n;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  return WEFT_SOCKET_ERROR;
}

ssize_t weft_socket_try_recv(int fd, void* buf, size_t len) {
  if (len == 0) return 0;
  ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
  if (n > 0) return n;
  if (n == 0) return WEFT_SOCKET_CLOSED;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  return WEFT_SOCKET_ERROR;
}

int weft_socket_try_accept(int listen_fd, union weft_socket_addr* peer) {
  union weft_socket_addr tmp;
  socklen_t len = sizeof(tmp);
  int fd = accept4(listen_fd, &tmp.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (peer) *peer = tmp;
  return fd;
}

short weft_socket_poll_one(int fd, short events, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = events};
  int rc = poll(&p, 1, timeout_ms);
  return rc > 0 ? p.revents : 0;
}

/* Shared loop of send_all/recv_all: move len bytes, waiting in poll slices. */
static ncclResult_t transfer_all(int fd, char* buf, size_t len, int is_send, const char* who,
                                 volatile uint32_t* abort_flag, int64_t deadline) {
  size_t done = 0;
  if (make_nonblocking(fd) != 0) {
    WEFT_WARN("fcntl on the socket to %s failed: %s", who, strerror(errno));
    return ncclSystemError;
  }
  while (done < len) {
    ssize_t n = is_send ? weft_socket_try_send(fd, buf + done, len - done)
                        : weft_socket_try_recv(fd, buf + done, len - done);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == WEFT_SOCKET_CLOSED) {
      WEFT_WARN("Connection to %s closed after %zu of %zu bytes were received", who, done, len);
      return ncclRemoteError;
    }
    if (n == WEFT_SOCKET_ERROR) {
      int err = errno;
      WEFT_WARN("%s %zu bytes %s %s failed: %s", is_send ? "Sending" : "Receiving", len,
                is_send ? "to" : "from", who, strerror(err));
      return err == ECONNRESET || err == EPIPE ? ncclRemoteError : ncclSystemError;
    }
    if (weft_socket_aborted(abort_flag)) {
      WEFT_INFO(WEFT_BOOTSTRAP | WEFT_NET, "%s %s: abort flag set", is_send ? "Send to" : "Receive from",
                who);
      return ncclInvalidUsage;
    }
    if (weft_socket_now_ns() >= deadline) {
      WEFT_WARN("Timed out %s %s after %zu of %zu bytes", is_send ? "sending to" : "receiving from", who,
                done, len);
      return ncclRemoteError;
    }
    weft_socket_poll_one(fd, is_send ? POLLOUT : POLLIN, slice_ms(deadline));
  }
  return ncclSuccess;
}

ncclResult_t weft_socket_send_all(int fd, const void* buf, size_t len, const char* who,
                                  volatile uint32_t* abort_flag, int64_t deadline) {
  return transfer_all(fd, (char*)buf, len, 1, who, abort_flag, deadline);
}

ncclResult_t weft_socket_recv_all(int fd, void* buf, size_t len, const char* who,
                                  volatile uint32_t* abort_flag, int64_t deadline) {
  return transfer_all(fd, (char*)buf, len, 0, who, abort_flag, deadline);
}
