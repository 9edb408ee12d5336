/* A verbs provider of our own for tests (these machines have no RDMA hardware and no kernel
 * InfiniBand): devices, ports and GID tables described by WEFT_FAKE_IB_DEVICES, so the IB
 * transport's discovery, NCCL_IB_HCA and GID choice run against something. Loaded by the library
 * in place of libibverbs.so.1 through WEFT_IBVERBS_LIB.
 *
 * WEFT_FAKE_IB_DEVICES: comma-separated name[:ib|eth[:ports[:down]]], e.g. "mlx5_0,mlx5_1:eth:2".
 * InfiniBand ports: 4x HDR, MTU 4096, LID 1 + device index, one GID. Ethernet ports: 4x EDR,
 * MTU 1024, GIDs [0] link-local, [1] 10.0.D.P RoCE v1, [2] 10.0.D.P RoCE v2, [3] fd00::D:P v2,
 * [4] 192.168.D.P v2 (D device index, P port). Queue pairs and memory are not emulated yet. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#define FAKE_MAX_DEVICES 16
#define FAKE_ETH_GIDS 5

struct fake_device {
  struct ibv_device dev; /* first: the library hands out &dev */
  int index, ethernet, ports, down;
};

static struct fake_device devices[FAKE_MAX_DEVICES];
static int ndevices;
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

static void parse_entry(char* entry) {
  if (ndevices == FAKE_MAX_DEVICES || entry[0] == 0) return;
  struct fake_device* d = &devices[ndevices];
  char* save = NULL;
  const char* name = strtok_r(entry, ":", &save);
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

struct ibv_device**(ibv_get_device_list)(int* num) {
  pthread_once(&parse_once, parse);
  struct ibv_device** list = calloc((size_t)ndevices + 1, sizeof(*list));
  for (int i = 0; list && i < ndevices; i++) list[i] = &devices[i].dev;
  if (num) *num = list ? ndevices : 0;
  return list;
}

void(ibv_free_device_list)(struct ibv_device** list) { free(list); }

const char*(ibv_get_device_name)(struct ibv_device* dev) { return dev->name; }

static struct fake_device* of(struct ibv_context* ctx) { return (struct fake_device*)ctx->device; }

struct ibv_context*(ibv_open_device)(struct ibv_device* dev) {
  struct ibv_context* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) return NULL;
  ctx->device = dev;
  ctx->cmd_fd = ctx->async_fd = -1;
  pthread_mutex_init(&ctx->mutex, NULL);
  return ctx;
}

int(ibv_close_device)(struct ibv_context* ctx) {
  pthread_mutex_destroy(&ctx->mutex);
  free(ctx);
  return 0;
}

int(ibv_query_device)(struct ibv_context* ctx, struct ibv_device_attr* attr) {
  memset(attr, 0, sizeof(*attr));
  snprintf(attr->fw_ver, sizeof(attr->fw_ver), "weft-fake-1");
  attr->phys_port_cnt = (uint8_t)of(ctx)->ports;
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
  struct fake_device* d = of(ctx);
  if (port < 1 || port > d->ports) return EINVAL;
  struct ibv_port_attr* a = (struct ibv_port_attr*)compat;
  a->state = d->down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = d->ethernet ? IBV_MTU_1024 : IBV_MTU_4096;
  a->gid_tbl_len = d->ethernet ? FAKE_ETH_GIDS : 1;
  a->lid = d->ethernet ? 0 : (uint16_t)(1 + d->index);
  a->active_width = 2;                     /* 4x */
  a->active_speed = d->ethernet ? 32 : 64; /* EDR, HDR */
  a->phys_state = d->down ? 3 : 5;         /* disabled, link up */
  a->link_layer = d->ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

/* One GID of the tables described at the top, with its RoCE version (0 for InfiniBand). */
static int fake_gid(struct fake_device* d, int port, int index, union ibv_gid* gid, int* version) {
  memset(gid, 0, sizeof(*gid));
  *version = 0;
  if (port < 1 || port > d->ports || index < 0 || index >= (d->ethernet ? FAKE_ETH_GIDS : 1)) return EINVAL;
  char text[64];
  switch (d->ethernet ? index : -1) {
    case -1: /* InfiniBand: the default GID, the subnet prefix then the port's GUID */
    case 0:
      snprintf(text, sizeof(text), "fe80::%x:%x", d->index + 1, port);
      break;
    case 1:
    case 2:
      snprintf(text, sizeof(text), "::ffff:10.0.%d.%d", d->index, port);
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
  return fake_gid(of(ctx), port, index, gid, &version);
}

int _ibv_query_gid_ex(struct ibv_context* ctx, uint32_t port, uint32_t index, struct ibv_gid_entry* e,
                      uint32_t flags, size_t size) {
  (void)flags;
  if (size < sizeof(*e)) return EINVAL;
  memset(e, 0, sizeof(*e));
  int version;
  int rc = fake_gid(of(ctx), (int)port, (int)index, &e->gid, &version);
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = version == 2 ? IBV_GID_TYPE_ROCE_V2 : version == 1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_IB;
  return rc;
}

/* Not emulated yet: the calls exist so the library's table loads, and fail plainly. */
struct ibv_pd*(ibv_alloc_pd)(struct ibv_context* ctx) {
  (void)ctx;
  return NULL;
}
int(ibv_dealloc_pd)(struct ibv_pd* pd) {
  (void)pd;
  return EINVAL;
}
struct ibv_mr*(ibv_reg_mr)(struct ibv_pd* pd, void* addr, size_t length, int access) {
  (void)pd, (void)addr, (void)length, (void)access;
  return NULL;
}
int(ibv_dereg_mr)(struct ibv_mr* mr) {
  (void)mr;
  return EINVAL;
}
struct ibv_cq*(ibv_create_cq)(struct ibv_context* ctx, int cqe, void* cq_context, struct ibv_comp_channel* ch,
                              int vector) {
  (void)ctx, (void)cqe, (void)cq_context, (void)ch, (void)vector;
  return NULL;
}
int(ibv_destroy_cq)(struct ibv_cq* cq) {
  (void)cq;
  return EINVAL;
}
struct ibv_qp*(ibv_create_qp)(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  (void)pd, (void)attr;
  return NULL;
}
int(ibv_modify_qp)(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask) {
  (void)qp, (void)attr, (void)mask;
  return EINVAL;
}
int(ibv_destroy_qp)(struct ibv_qp* qp) {
  (void)qp;
  return EINVAL;
}
const char*(ibv_wc_status_str)(enum ibv_wc_status status) {
  return status == IBV_WC_SUCCESS ? "success" : "error";
}
