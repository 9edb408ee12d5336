/* InfiniBand / RoCE discovery: every active port of every verbs device that NCCL_IB_HCA selects,
 * with its speed, MTU and the GID its connections will use (NCCL's choice for RoCE: the address
 * family, subnet and RoCE version asked for), and the network devices they make (the ports of one
 * card's functions merged, NCCL_IB_MERGE_NICS). */
#include "transport/net_ib.h"

#include <arpa/inet.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/name_list.h"
#include "util/param.h"
#include "util/sysfs.h"

int weft_ib_speed_mbps(int active_width, int active_speed) {
  int lanes = 0, per_lane = 0; /* verbs' codes: one bit each */
  switch (active_width) {
    case 1:
      lanes = 1;
      break;
    case 2:
      lanes = 4;
      break;
    case 4:
      lanes = 8;
      break;
    case 8:
      lanes = 12;
      break;
    case 16:
      lanes = 2;
      break;
  }
  switch (active_speed) {
    case 1:
      per_lane = 2500;
      break; /* SDR */
    case 2:
      per_lane = 5000;
      break; /* DDR */
    case 4:
      per_lane = 10000;
      break; /* QDR */
    case 8:
      per_lane = 10000;
      break; /* FDR10 */
    case 16:
      per_lane = 14000;
      break; /* FDR */
    case 32:
      per_lane = 25000;
      break; /* EDR */
    case 64:
      per_lane = 50000;
      break; /* HDR */
    case 128:
      per_lane = 100000;
      break; /* NDR */
    case 256:
      per_lane = 200000;
      break; /* XDR */
  }
  return lanes * per_lane;
}

#if WEFT_IBVERBS_HEADERS

/* What a RoCE GID should look like: NCCL_IB_ADDR_FAMILY, NCCL_IB_ADDR_RANGE, NCCL_IB_ROCE_VERSION_NUM. */
struct gid_want {
  int family;
  uint8_t prefix[16]; /* the range's address as a GID would carry it */
  int prefix_bits;    /* 0: any address */
  int version;
};

static int gid_family(const uint8_t* g) {
  static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g, v4_mapped, 12) == 0 ? AF_INET : AF_INET6;
}

/* Unset (all zero) and link-local (fe80::/64 with nothing after) GIDs route nowhere. */
static int gid_usable(const uint8_t* g) {
  static const uint8_t zero[16];
  static const uint8_t link_local[8] = {0xfe, 0x80};
  if (memcmp(g, zero, 16) == 0) return 0;
  return memcmp(g, link_local, 8) != 0;
}

static int gid_in_range(const struct gid_want* w, const uint8_t* g) {
  int bits = w->prefix_bits;
  for (int i = 0; bits > 0; i++, bits -= 8) {
    uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
    if ((g[i] ^ w->prefix[i]) & mask) return 0;
  }
  return 1;
}

static void read_gid_want(struct gid_want* w) {
  memset(w, 0, sizeof(*w));
  const char* fam = weft_param_str("NCCL_IB_ADDR_FAMILY");
  w->family = fam && strcmp(fam, "AF_INET6") == 0 ? AF_INET6 : AF_INET;
  w->version = (int)weft_param_int("NCCL_IB_ROCE_VERSION_NUM");
  const char* range = weft_param_str("NCCL_IB_ADDR_RANGE");
  char addr[128];
  if (range == NULL || sscanf(range, "%127[^/]/%d", addr, &w->prefix_bits) != 2) return;
  int limit = w->family == AF_INET ? 32 : 128;
  int ok =
      w->family == AF_INET ? inet_pton(AF_INET, addr, w->prefix + 12) : inet_pton(AF_INET6, addr, w->prefix);
  if (ok != 1 || w->prefix_bits < 0 || w->prefix_bits > limit) {
    WEFT_WARN("NCCL_IB_ADDR_RANGE=%s is not a %s subnet (address/bits): ignored", range,
              w->family == AF_INET ? "IPv4" : "IPv6");
    w->prefix_bits = 0;
    return;
  }
  if (w->family == AF_INET) {
    w->prefix[10] = w->prefix[11] = 0xff; /* IPv4 GIDs are IPv4-mapped IPv6 addresses */
    w->prefix_bits += 96;
  }
}

/* The RoCE version of a GID: from verbs when the library says, else from sysfs; 0 unknown. */
static int gid_version(const struct weft_ibv_fns* ibv, struct ibv_context* ctx, const char* dev, int port,
                       int index) {
  if (ibv->query_gid_ex != NULL) {
    struct ibv_gid_entry e;
    if (ibv->query_gid_ex(ctx, (uint32_t)port, (uint32_t)index, &e, 0, sizeof(e)) == 0)
      return e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 2 : 1;
  }
  char path[PATH_MAX], type[32];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, index);
  if (weft_read_line(path, type, sizeof(type)) < 0) return 0;
  return strstr(type, "v2") ? 2 : 1;
}

/* NCCL's choice of a RoCE GID: the first usable one of the family and range asked for, preferring
 * the RoCE version asked for; index 0 when none fits. NCCL_IB_GID_INDEX overrides. */
static int choose_roce_gid(const struct weft_ibv_fns* ibv, struct ibv_context* ctx, const char* dev, int port,
                           int table_len) {
  int forced = (int)weft_param_int("NCCL_IB_GID_INDEX");
  if (forced >= 0) return forced;
  struct gid_want w;
  read_gid_want(&w);
  int fallback = -1;
  for (int i = 0; i < table_len; i++) {
    union ibv_gid g;
    if (ibv->query_gid(ctx, (uint8_t)port, i, &g) != 0) continue;
    if (!gid_usable(g.raw) || gid_family(g.raw) != w.family || !gid_in_range(&w, g.raw)) continue;
    if (gid_version(ibv, ctx, dev, port, i) == w.version) return i;
    if (fallback < 0) fallback = i;
  }
  return fallback >= 0 ? fallback : 0;
}

/* The device's PCI path: its sysfs directory (libibverbs' ibdev_path, /sys/class/infiniband/<dev>)
 * holds a "device" link to it. A provider that names no directory is looked up by name. */
static void read_pci_path(struct ibv_device* d, const char* dev, char* out, size_t size) {
  char link[PATH_MAX], real[PATH_MAX];
  if (d->ibdev_path[0] != 0)
    snprintf(link, sizeof(link), "%.*s/device", (int)sizeof(d->ibdev_path), d->ibdev_path);
  else
    snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device", dev);
  out[0] = 0;
  if (realpath(link, real) != NULL) snprintf(out, size, "%.255s", real);
}

/* Fills p for one active, selected port; 0 when the port is down, of another link layer, or
 * not selected. */
static int describe_port(const struct weft_ibv_fns* ibv, struct ibv_context* ctx, const char* dev, int port,
                         const char* hca, const char* pci_path, struct weft_ib_port* p) {
  struct ibv_port_attr a;
  memset(&a, 0, sizeof(a));
  if (ibv->query_port(ctx, (uint8_t)port, &a) != 0) {
    WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: %s port %d cannot be queried: skipped", dev, port);
    return 0;
  }
  if (a.state != IBV_PORT_ACTIVE) return 0;
  if (a.link_layer != IBV_LINK_LAYER_INFINIBAND && a.link_layer != IBV_LINK_LAYER_ETHERNET) return 0;
  if (!weft_name_list_match(hca, dev, port)) return 0;
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "%s", dev);
  p->port = port;
  p->ethernet = a.link_layer == IBV_LINK_LAYER_ETHERNET;
  p->speed_mbps = weft_ib_speed_mbps(a.active_width, a.active_speed);
  p->mtu = 128 << a.active_mtu; /* IBV_MTU_256 is 1 */
  p->lid = a.lid;
  p->gid_index = p->ethernet ? choose_roce_gid(ibv, ctx, dev, port, a.gid_tbl_len) : 0;
  union ibv_gid g;
  if (ibv->query_gid(ctx, (uint8_t)port, p->gid_index, &g) == 0) memcpy(p->gid, g.raw, 16);
  snprintf(p->pci_path, sizeof(p->pci_path), "%s", pci_path);
  p->ctx = ctx;
  return 1;
}

static struct weft_ib_port found[WEFT_IB_MAX_PORTS];
static int nfound;
static pthread_once_t discover_once = PTHREAD_ONCE_INIT;

/* The selected ports of one device; the device is closed again when none is. */
static void add_device(const struct weft_ibv_fns* ibv, struct ibv_device* d, const char* hca) {
  const char* dev = ibv->get_device_name(d);
  struct ibv_context* ctx = ibv->open_device(d);
  struct ibv_device_attr attr;
  if (ctx == NULL || ibv->query_device(ctx, &attr) != 0) {
    WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: cannot open %s: skipped", dev ? dev : "a device");
    if (ctx) ibv->close_device(ctx);
    return;
  }
  char pci_path[sizeof(found[0].pci_path)];
  read_pci_path(d, dev, pci_path, sizeof(pci_path));
  int before = nfound;
  for (int port = 1; port <= attr.phys_port_cnt && nfound < WEFT_IB_MAX_PORTS; port++)
    nfound += describe_port(ibv, ctx, dev, port, hca, pci_path, &found[nfound]);
  if (nfound == before) ibv->close_device(ctx);
}

/* ---- network devices: ports merged by card (NCCL_IB_MERGE_NICS) ---- */

static struct weft_ib_device devices[WEFT_IB_MAX_PORTS];
static int ndevices;

/* How much of a PCI path names the card: all but the function of its last component
 * (".../0000:1a:00.1" -> ".../0000:1a:00"); 0 when the path is unknown. */
static size_t card_len(const char* pci_path) {
  const char* last = strrchr(pci_path, '/');
  const char* dot = strrchr(pci_path, '.');
  if (pci_path[0] == 0) return 0;
  return dot != NULL && (last == NULL || dot > last) ? (size_t)(dot - pci_path) : strlen(pci_path);
}

/* Whether port p may join device d: another function of the same card (one port per verbs device:
 * a device's own ports stay apart), of the same link layer, with room left. */
static int joins(const struct weft_ib_device* d, const struct weft_ib_port* p) {
  const struct weft_ib_port* first = d->member[0];
  size_t len = card_len(p->pci_path);
  if (d->nmembers == WEFT_IB_MAX_MEMBERS || first->ethernet != p->ethernet || len == 0) return 0;
  if (card_len(first->pci_path) != len || strncmp(first->pci_path, p->pci_path, len) != 0) return 0;
  for (int i = 0; i < d->nmembers; i++)
    if (strcmp(d->member[i]->name, p->name) == 0) return 0;
  return 1;
}

/* "mlx5_0:1" for one port; members' device names joined by '+' (NCCL's), each with its port when
 * one of them is not port 1, so that no two merged devices share a name. */
static void name_device(struct weft_ib_device* d) {
  if (d->nmembers == 1) {
    snprintf(d->name, sizeof(d->name), "%.50s:%d", d->member[0]->name, d->member[0]->port);
    return;
  }
  int ports = 0;
  for (int i = 0; i < d->nmembers; i++) ports |= d->member[i]->port != 1;
  size_t len = 0;
  d->name[0] = 0;
  for (int i = 0; i < d->nmembers && len < sizeof(d->name); i++) {
    const struct weft_ib_port* m = d->member[i];
    len += (size_t)snprintf(d->name + len, sizeof(d->name) - len, "%s%.14s", i ? "+" : "", m->name);
    if (ports && len < sizeof(d->name))
      len += (size_t)snprintf(d->name + len, sizeof(d->name) - len, ":%d", m->port);
  }
}

static void log_merged(const struct weft_ib_device* d) {
  char members[256];
  size_t len = 0;
  for (int i = 0; i < d->nmembers && len < sizeof(members); i++)
    len += (size_t)snprintf(members + len, sizeof(members) - len, "%s%s:%d", i ? ", " : "",
                            d->member[i]->name, d->member[i]->port);
  WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: merged device %s: %d ports of one card (%s), %s %d Mb/s", d->name,
            d->nmembers, members, d->member[0]->ethernet ? "RoCE" : "IB", d->speed_mbps);
}

/* Each port joins the first device it may (NCCL_IB_MERGE_NICS=1), else makes its own. */
static void group_ports(void) {
  int merge = weft_param_int("NCCL_IB_MERGE_NICS") != 0;
  for (int i = 0; i < nfound; i++) {
    struct weft_ib_device* d = NULL;
    for (int j = 0; merge && j < ndevices && d == NULL; j++)
      if (joins(&devices[j], &found[i])) d = &devices[j];
    if (d == NULL) d = &devices[ndevices++];
    d->member[d->nmembers++] = &found[i];
    d->speed_mbps += found[i].speed_mbps;
  }
  for (int j = 0; j < ndevices; j++) {
    name_device(&devices[j]);
    if (devices[j].nmembers > 1) log_merged(&devices[j]);
  }
}

static void discover(void) {
  if (weft_param_int("NCCL_IB_DISABLE") == 1) {
    WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: disabled by NCCL_IB_DISABLE=1");
    return;
  }
  const char* why;
  const struct weft_ibv_fns* ibv = weft_ibv_load(&why);
  if (ibv == NULL) {
    WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: no verbs library (%s)", why);
    return;
  }
  const char* hca = weft_param_str("NCCL_IB_HCA");
  if (hca != NULL && hca[0] == 0) hca = NULL;
  int ndev = 0;
  struct ibv_device** list = ibv->get_device_list(&ndev);
  for (int i = 0; list != NULL && i < ndev; i++) add_device(ibv, list[i], hca);
  if (list) ibv->free_device_list(list);
  for (int i = 0; i < nfound; i++) {
    char gid[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, found[i].gid, gid, sizeof(gid));
    WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: %s:%d %s %d Mb/s MTU %d GID %d %s", found[i].name, found[i].port,
              found[i].ethernet ? "RoCE" : "IB", found[i].speed_mbps, found[i].mtu, found[i].gid_index, gid);
  }
  if (nfound == 0)
    WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: no active port%s%s", hca ? " selected by NCCL_IB_HCA=" : "",
              hca ? hca : "");
  group_ports();
}

ncclResult_t weft_ib_ports(const struct weft_ib_port** ports, int* n) {
  pthread_once(&discover_once, discover);
  *ports = found;
  *n = nfound;
  return ncclSuccess;
}

ncclResult_t weft_ib_devices(const struct weft_ib_device** devs, int* n) {
  pthread_once(&discover_once, discover);
  *devs = devices;
  *n = ndevices;
  return ncclSuccess;
}

#else

ncclResult_t weft_ib_ports(const struct weft_ib_port** ports, int* n) {
  WEFT_INFO(WEFT_NET | WEFT_INIT, "NET/IB: built without <infiniband/verbs.h>");
  *ports = NULL;
  *n = 0;
  return ncclSuccess;
}

ncclResult_t weft_ib_devices(const struct weft_ib_device** devs, int* n) {
  *devs = NULL;
  *n = 0;
  return ncclSuccess;
}

#endif
