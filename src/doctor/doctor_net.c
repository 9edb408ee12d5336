/* The socket interfaces a job will use: NCCL_SOCKET_IFNAME that matches nothing, interfaces of
 * different MTUs, and (with -H) other hosts that cannot be reached from the chosen interface. A
 * probe is a TCP connect bound to the interface: an answer, even a refusal, proves a route. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor/doctor.h"
#include "util/param.h"
#include "util/socket.h"

#define MAX_IFS 64
#define DEFAULT_PORT 1 /* tcpmux: closed nearly everywhere, so a live host answers with a refusal */

static const char* ifname_spec(void) {
  const char* spec = weft_param_str("NCCL_SOCKET_IFNAME");
  return spec && spec[0] ? spec : NULL;
}

static void list_names(const struct weft_socket_if* ifs, int n, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < n && used + 1 < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", ifs[i].name);
}

static int if_mtu(const char* name) {
  char path[160], line[32];
  snprintf(path, sizeof(path), "/sys/class/net/%.*s/mtu", IF_NAMESIZE, name);
  return weft_doctor_read_line(path, line, sizeof(line)) == 0 ? atoi(line) : -1;
}

static void check_mtu(const struct weft_socket_if* pick, int n, struct weft_doctor_report* r) {
  int first = -1;
  char seen[512] = "";
  size_t used = 0;
  int differ = 0;
  for (int i = 0; i < n; i++) {
    int mtu = if_mtu(pick[i].name);
    if (mtu <= 0) continue;
    if (first < 0) first = mtu;
    differ |= mtu != first;
    if (used + 1 < sizeof(seen))
      used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%s%s mtu %d", used ? ", " : "",
                               pick[i].name, mtu);
  }
  if (first < 0) return;
  if (differ)
    weft_doctor_add(
        r, "net.mtu", WEFT_DOCTOR_WARN,
        "Give every interface of NCCL_SOCKET_IFNAME the same MTU on every host (ip link set DEV mtu N), "
        "or name only the ones that match",
        "the selected interfaces have different MTUs (%s): ranks talking across them see dropped or "
        "fragmented large packets where a switch port in between keeps the smaller one",
        seen);
  else
    weft_doctor_add(r, "net.mtu", WEFT_DOCTOR_OK, NULL, "%s", seen);
}

/* Which interfaces the library picks: NCCL_SOCKET_IFNAME, else its default order. */
static int check_ifname(struct weft_socket_if* pick, int max, struct weft_doctor_report* r) {
  struct weft_socket_if all[MAX_IFS];
  int nall = weft_socket_list_ifs(weft_socket_family(), all, MAX_IFS);
  const char* spec = ifname_spec();
  int n = weft_socket_select_ifs(all, nall, spec, NULL, pick, max);
  char names[512], chosen[512];
  list_names(all, nall, names, sizeof(names));
  list_names(pick, n, chosen, sizeof(chosen));
  if (n == 0) {
    struct weft_doctor_finding* f = weft_doctor_add(
        r, "net.ifname", WEFT_DOCTOR_BLOCK, NULL,
        "NCCL_SOCKET_IFNAME=%s matches no interface that is up with an address (up: %s): init fails with 'no "
        "usable socket interface'",
        spec ? spec : "(unset)", nall ? names : "none");
    if (f)
      snprintf(f->fix, sizeof(f->fix),
               "Set NCCL_SOCKET_IFNAME to one of: %s (a prefix, =exact, or ^ to exclude)",
               nall ? names : "(no interface is up: bring one up)");
  } else {
    weft_doctor_add(r, "net.ifname", WEFT_DOCTOR_OK, NULL, "%s selects %s",
                    spec ? "NCCL_SOCKET_IFNAME" : "the default order (NCCL_SOCKET_IFNAME unset)", chosen);
  }
  return n;
}

/* 0 when host:port answered (connected or refused), else the errno of the failure. */
static int probe(const struct weft_socket_if* itf, const union weft_socket_addr* to, int timeout_ms,
                 int* bound_dev) {
  int fd = socket(to->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  /* Binding the device keeps the kernel from answering through another interface; it needs
   * CAP_NET_RAW, so without it the interface's address is bound instead (a weaker test). */
  *bound_dev = setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, itf->name, (socklen_t)strlen(itf->name)) == 0;
  if (!*bound_dev && itf->addr.sa.sa_family == to->sa.sa_family) {
    union weft_socket_addr local = itf->addr;
    weft_socket_addr_set_port(&local, 0);
    if (bind(fd, &local.sa, weft_socket_addr_len(&local)) != 0) {
      int err = errno;
      close(fd);
      return err;
    }
  }
  int err = 0;
  if (connect(fd, &to->sa, weft_socket_addr_len(to)) != 0) err = errno;
  if (err == EINPROGRESS) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n = poll(&p, 1, timeout_ms);
    socklen_t len = sizeof(err);
    if (n <= 0)
      err = ETIMEDOUT;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
      err = errno;
  }
  close(fd);
  return err == ECONNREFUSED ? 0 : err;
}

static int resolve(const char* host, int port, union weft_socket_addr* out) {
  char h[256];
  snprintf(h, sizeof(h), "%s", host);
  size_t n = strlen(h);
  if (n > 1 && h[0] == '[' && h[n - 1] == ']') memmove(h, h + 1, n - 2), h[n - 2] = 0;
  struct addrinfo hints = {.ai_family = weft_socket_family(), .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(h, NULL, &hints, &res);
  if (rc != 0) return rc;
  memset(out, 0, sizeof(*out));
  memcpy(out, res->ai_addr, res->ai_addrlen <= sizeof(*out) ? res->ai_addrlen : sizeof(*out));
  weft_socket_addr_set_port(out, port);
  freeaddrinfo(res);
  return 0;
}

static void check_host(const char* host, const struct weft_doctor_opts* o, const struct weft_socket_if* pick,
                       int npick, struct weft_doctor_report* r) {
  union weft_socket_addr to;
  int port = o->port > 0 ? o->port : DEFAULT_PORT;
  int rc = resolve(host, port, &to);
  if (rc != 0) {
    weft_doctor_add(r, "net.reach", WEFT_DOCTOR_BLOCK, "Use a name every host resolves, or an address",
                    "host %s does not resolve: %s", host, gai_strerror(rc));
    return;
  }
  char addr[WEFT_SOCKET_ADDR_STRLEN];
  weft_socket_addr_str(&to, addr, sizeof(addr));
  const char* spec = ifname_spec();
  /* Unset, the library prefers an interface in the peer's subnet (as for NCCL_COMM_ID's). */
  struct weft_socket_if near[MAX_IFS];
  int nnear = spec ? 0 : weft_socket_find_ifs(&to, near, MAX_IFS);
  if (nnear > 0) pick = near, npick = nnear;
  for (int i = 0; i < npick; i++) {
    int bound_dev = 0, err = probe(&pick[i], &to, o->timeout_ms > 0 ? o->timeout_ms : 2000, &bound_dev);
    const char* how = bound_dev ? "" : " (bound by address: no CAP_NET_RAW for SO_BINDTODEVICE)";
    if (err == 0) {
      weft_doctor_add(r, "net.reach", WEFT_DOCTOR_OK, NULL, "%s (%s) answers through %s%s", host, addr,
                      pick[i].name, how);
      continue;
    }
    /* The first interface carries the bootstrap; a later one only some network connections. */
    struct weft_doctor_finding* f =
        weft_doctor_add(r, "net.reach", i == 0 ? WEFT_DOCTOR_BLOCK : WEFT_DOCTOR_WARN, NULL,
                        "%s (%s) cannot be reached through %s (NCCL_SOCKET_IFNAME=%s): %s%s; a job across "
                        "these hosts fails at init or waits until its timeout",
                        host, addr, pick[i].name, spec ? spec : "unset",
                        err == ETIMEDOUT ? "no answer (dropped)" : strerror(err), how);
    if (f)
      snprintf(
          f->fix, sizeof(f->fix),
          "Set NCCL_SOCKET_IFNAME to an interface in a network %s is on (ip route get %s shows which the "
          "kernel would use), or fix the route/firewall between the hosts",
          host, host);
  }
}

void weft_doctor_check_net(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  struct weft_socket_if pick[MAX_IFS];
  int n = check_ifname(pick, MAX_IFS, r);
  check_mtu(pick, n, r);
  if (o->hosts == NULL || n == 0) return;
  char* list = strdup(o->hosts);
  if (list == NULL) return;
  char* save = NULL;
  for (char* h = strtok_r(list, ", \n", &save); h; h = strtok_r(NULL, ", \n", &save))
    check_host(h, o, pick, n, r);
  free(list);
}
