/* A verbs provider of our own for tests (these machines have no RDMA hardware and no kernel
 * InfiniBand): devices, ports and GID tables described by WEFT_FAKE_IB_DEVICES, and reliable
 * connected queue pairs between processes over TCP (fake_fabric.c), so the IB transport's
 * discovery and data path run against something. Loaded by the library in place of
 * libibverbs.so.1 through WEFT_IBVERBS_LIB.
 *
 * WEFT_FAKE_IB_DEVICES: comma-separated name[@BUS.F][:ib|eth[:ports[:down]]], e.g. "mlx5_0,mlx5_1:eth:2".
 * @BUS.F makes the device PCI function F of the card at bus BUS (hex), as mlx5 shows each port of a
 * dual-port card: "mlx5_0@1a.0:eth,mlx5_1@1a.1:eth" are the two functions of one card. While a
 * device list is held, each device's ibdev_path is a directory of a tree made for it under
 * $TMPDIR (the sysfs directory libibverbs names there), whose "device" link points at a fake PCI
 * path ending in 0000:BUS:00.F; a device without @ has no link (PCI path unknown).
 * A device's address A is WEFT_FAKE_IB_ADDR (an IPv4 address of this host, or the name of an
 * interface whose address to take: namespace hosts), else 127.0.D+1.1 (D: device index). InfiniBand ports: 4x
 * HDR, MTU 4096, one GID fe80::D+1:P ending in A. Ethernet ports: 4x EDR, MTU 1024, GIDs [0] link-local, [1]
 * A RoCE v1, [2] A RoCE v2, [3] fd00::D:P v2, [4] 192.168.D.P v2 (P: port). Every port's LID is the TCP port
 * of the device's listener: a queue pair reaches its peer at (the GID's last 4 bytes, the LID). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake.h"

#define FAKE_ETH_GIDS 5

static struct fake_device devices[FAKE_MAX_DEVICES];
static int ndevices;
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

static void parse_entry(char* entry) {
  if (ndevices == FAKE_MAX_DEVICES || entry[0] == 0) return;
  struct fake_device* d = &devices[ndevices];
  char* save = NULL;
  char* name = strtok_r(entry, ":", &save);
  char* at = strchr(name, '@');
  if (at != NULL) { /* @BUS.F */
    *at++ = 0;
    const char* fn = strchr(at, '.');
    snprintf(d->pci, sizeof(d->pci), "0000:%.2s:00.%.1s", at, fn ? fn + 1 : "0");
  }
  const char* kind = strtok_r(NULL, ":", &save);
  const char* ports = strtok_r(NULL, ":", &save);
  const char* state = strtok_r(NULL, ":", &save);
  snprintf(d->dev.name, sizeof(d->dev.name), "%s", name);
  snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", ndevices);
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;
  d->index = ndevices++;
  d->ethernet = kind && strcmp(kind, "eth") == 0;
  d->ports = ports ? atoi(ports) : 1;
  d->down = state && strcmp(state, "down") == 0;
}

static void parse(void) {
  const char* spec = getenv("WEFT_FAKE_IB_DEVICES");
  if (spec == NULL) return;
  char* copy = strdup(spec);
  char* save = NULL;
  for (char* e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) parse_entry(e);
  free(copy);
}

int fake_ndevices(void) {
  pthread_once(&parse_once, parse);
  return ndevices;
}

/* ---- the devices' sysfs directories (ibdev_path), made while a device list is held ---- */

static pthread_mutex_t tree_mu = PTHREAD_MUTEX_INITIALIZER;
static char tree[256]; /* the tree's root; "" while none */
static int tree_users;

static int mkdirs(char* path) {
  for (char* p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int bad = mkdir(path, 0700) != 0 && errno != EEXIST;
    *p = '/';
    if (bad) return -1;
  }
  return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* <root>/class/<name>, with device -> <root>/devices/pci0000:00/0000:00:01.0/<its PCI address>. */
static void make_device_dir(struct fake_device* d) {
  char dir[sizeof(d->dev.ibdev_path)], target[512], link[600];
  snprintf(dir, sizeof(dir), "%.180s/class/%.60s", tree, d->dev.name);
  memcpy(d->dev.ibdev_path, dir, sizeof(dir));
  if (mkdirs(dir) != 0 || d->pci[0] == 0) return;
  snprintf(target, sizeof(target), "%s/devices/pci0000:00/0000:00:01.0/%s", tree, d->pci);
  snprintf(link, sizeof(link), "%s/device", dir);
  if (mkdirs(target) == 0 && symlink(target, link) != 0) unlink(link); /* no link: PCI path unknown */
}

/* Removes what make_device_dir made, then the directories above (best effort). */
static void remove_device_dir(const struct fake_device* d) {
  char path[600];
  snprintf(path, sizeof(path), "%s/class/%s/device", tree, d->dev.name);
  unlink(path);
  snprintf(path, sizeof(path), "%s/class/%s", tree, d->dev.name);
  rmdir(path);
  if (d->pci[0] == 0) return;
  snprintf(path, sizeof(path), "%s/devices/pci0000:00/0000:00:01.0/%s", tree, d->pci);
  rmdir(path);
}

static void remove_tree_dirs(void) {
  static const char* const dirs[] = {"/devices/pci0000:00/0000:00:01.0", "/devices/pci0000:00", "/devices",
                                     "/class", ""};
  char path[600];
  for (int i = 0; i < ndevices; i++) remove_device_dir(&devices[i]);
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    snprintf(path, sizeof(path), "%s%s", tree, dirs[i]);
    rmdir(path);
  }
}

static void make_tree(void) {
  pthread_mutex_lock(&tree_mu);
  if (tree_users++ == 0) {
    const char* tmp = getenv("TMPDIR");
    snprintf(tree, sizeof(tree), "%s/weft-fake-ib.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(tree) == NULL) tree[0] = 0;
    for (int i = 0; tree[0] && i < ndevices; i++) make_device_dir(&devices[i]);
  }
  pthread_mutex_unlock(&tree_mu);
}

static void remove_tree(void) {
  pthread_mutex_lock(&tree_mu);
  if (--tree_users == 0 && tree[0]) {
    remove_tree_dirs();
    tree[0] = 0;
    for (int i = 0; i < ndevices; i++) devices[i].dev.ibdev_path[0] = 0;
  }
  pthread_mutex_unlock(&tree_mu);
}

/* Exported names are parenthesized: verbs.h defines several of them as macros. */
struct ibv_device**(ibv_get_device_list)(int* num) {
  pthread_once(&parse_once, parse);
  struct ibv_device** list = calloc((size_t)ndevices + 1, sizeof(*list));
  for (int i = 0; list && i < ndevices; i++) list[i] = &devices[i].dev;
  if (num) *num = list ? ndevices : 0;
  if (list) make_tree();
  return list;
}

void(ibv_free_device_list)(struct ibv_device** list) {
  if (list) remove_tree();
  free(list);
}

const char*(ibv_get_device_name)(struct ibv_device* dev) { return dev->name; }

/* WEFT_FAKE_IB_ADDR as an address, or an interface's IPv4 address; dflt when unset. */
static int device_address(const char* want, const char* dflt, uint32_t* ip) {
  if (want == NULL) want = dflt;
  if (inet_pton(AF_INET, want, ip) == 1) return 0;
  struct ifaddrs *all, *i;
  if (getifaddrs(&all) != 0) return -1;
  int found = -1;
  for (i = all; i && found; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, want) != 0) continue;
    *ip = ((struct sockaddr_in*)i->ifa_addr)->sin_addr.s_addr;
    found = 0;
  }
  freeifaddrs(all);
  return found;
}

struct ibv_context*(ibv_open_device)(struct ibv_device* dev) {
  struct fake_context* fc = calloc(1, sizeof(*fc));
  if (fc == NULL) return NULL;
  fc->ctx.device = dev;
  fc->ctx.cmd_fd = fc->ctx.async_fd = -1;
  pthread_mutex_init(&fc->ctx.mutex, NULL);
  const char* addr = getenv("WEFT_FAKE_IB_ADDR");
  char dflt[32];
  snprintf(dflt, sizeof(dflt), "127.0.%d.1", ((struct fake_device*)dev)->index + 1);
  if (device_address(addr, dflt, &fc->ip) != 0 || fake_fabric_open(fc) != 0) {
    free(fc);
    return NULL;
  }
  return &fc->ctx;
}

int(ibv_close_device)(struct ibv_context* ctx) {
  fake_fabric_close(fake_ctx_of(ctx));
  pthread_mutex_destroy(&ctx->mutex);
  free(ctx);
  return 0;
}

int(ibv_query_device)(struct ibv_context* ctx, struct ibv_device_attr* attr) {
  memset(attr, 0, sizeof(*attr));
  snprintf(attr->fw_ver, sizeof(attr->fw_ver), "weft-fake-1");
  attr->phys_port_cnt = (uint8_t)fake_dev_of(ctx)->ports;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = 1 << 15;
  attr->max_sge = 30;
  attr->max_cqe = 1 << 22;
  attr->max_mr_size = UINT64_MAX;
  return 0;
}

/* The exported function takes the compat layout; the caller's buffer is the full one, a prefix
 * of which is what every version of libibverbs fills. */
int(ibv_query_port)(struct ibv_context* ctx, uint8_t port, struct _compat_ibv_port_attr* compat) {
  struct fake_device* d = fake_dev_of(ctx);
  if (port < 1 || port > d->ports) return EINVAL;
  struct ibv_port_attr* a = (struct ibv_port_attr*)compat;
  a->state = d->down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = d->ethernet ? IBV_MTU_1024 : IBV_MTU_4096;
  a->gid_tbl_len = d->ethernet ? FAKE_ETH_GIDS : 1;
  a->lid = fake_ctx_of(ctx)->tcp_port;
  a->active_width = 2;                     /* 4x */
  a->active_speed = d->ethernet ? 32 : 64; /* EDR, HDR */
  a->phys_state = d->down ? 3 : 5;         /* disabled, link up */
  a->link_layer = d->ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

/* One GID of the tables described at the top, with its RoCE version (0 for InfiniBand). */
static int fake_gid(struct ibv_context* ctx, int port, int index, union ibv_gid* gid, int* version) {
  struct fake_device* d = fake_dev_of(ctx);
  memset(gid, 0, sizeof(*gid));
  *version = 0;
  if (port < 1 || port > d->ports || index < 0 || index >= (d->ethernet ? FAKE_ETH_GIDS : 1)) return EINVAL;
  char text[64], ip[INET_ADDRSTRLEN];
  uint32_t a = ntohl(fake_ctx_of(ctx)->ip);
  inet_ntop(AF_INET, &fake_ctx_of(ctx)->ip, ip, sizeof(ip));
  switch (d->ethernet ? index : -1) {
    case -1:
      snprintf(text, sizeof(text), "fe80::%x:%x:%x:%x", d->index + 1, port, a >> 16, a & 0xffff);
      break;
    case 0:
      snprintf(text, sizeof(text), "fe80::%x:%x", d->index + 1, port);
      break;
    case 1:
    case 2:
      snprintf(text, sizeof(text), "::ffff:%s", ip);
      break;
    case 3:
      snprintf(text, sizeof(text), "fd00::%x:%x", d->index, port);
      break;
    default:
      snprintf(text, sizeof(text), "::ffff:192.168.%d.%d", d->index, port);
      break;
  }
  inet_pton(AF_INET6, text, gid->raw);
  if (d->ethernet) *version = index == 1 ? 1 : 2;
  return 0;
}

int(ibv_query_gid)(struct ibv_context* ctx, uint8_t port, int index, union ibv_gid* gid) {
  int version;
  return fake_gid(ctx, port, index, gid, &version);
}

int _ibv_query_gid_ex(struct ibv_context* ctx, uint32_t port, uint32_t index, struct ibv_gid_entry* e,
                      uint32_t flags, size_t size) {
  (void)flags;
  if (size < sizeof(*e)) return EINVAL;
  memset(e, 0, sizeof(*e));
  int version;
  int rc = fake_gid(ctx, (int)port, (int)index, &e->gid, &version);
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = version == 2 ? IBV_GID_TYPE_ROCE_V2 : version == 1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_IB;
  return rc;
}

const char*(ibv_wc_status_str)(enum ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_WR_FLUSH_ERR:
      return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "RNR retry counter exceeded";
    default:
      return "unknown";
  }
}
