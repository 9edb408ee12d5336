/* InfiniBand / RoCE network: the ports it may use (discovery, NCCL_IB_HCA, the GID each uses).
 * Connections and the data path: net_ib_comm.h. */
#ifndef WEFT_TRANSPORT_NET_IB_H
#define WEFT_TRANSPORT_NET_IB_H

#include <stdint.h>

#include "nccl.h"
#include "util/ibverbs.h"

#define WEFT_IB_MAX_PORTS 32

/* One active port of one device: what NCCL calls an IB device. */
struct weft_ib_port {
  char name[64]; /* the device's name ("mlx5_0") */
  int port;      /* 1-based, as verbs counts */
  int ethernet;  /* 1: RoCE (link layer Ethernet), 0: InfiniBand */
  int speed_mbps;
  int mtu; /* active MTU in bytes */
  uint16_t lid;
  int gid_index;
  uint8_t gid[16];
  char pci_path[256]; /* the device's PCI path in sysfs, "" when unknown (containers, test providers) */
#if WEFT_IBVERBS_HEADERS
  struct ibv_context* ctx; /* shared by the ports of one device; open for the life of the process */
#endif
};

/* One network device of the IB network: a port, or with NCCL_IB_MERGE_NICS (default 1) the ports
 * of one card's PCI functions (mlx5 shows a dual-port card as two verbs devices whose PCI paths
 * differ only in the function), merged as NCCL does. A connection on a merged device has queue
 * pairs on every member, each member with its own protection domain and keys. */
#define WEFT_IB_MAX_MEMBERS 4
struct weft_ib_device {
  char name[64]; /* "mlx5_0:1" for one port; "mlx5_0+mlx5_1" merged */
  int nmembers;
  const struct weft_ib_port* member[WEFT_IB_MAX_MEMBERS];
  int speed_mbps; /* the members' sum */
};

/* The ports NCCL_IB_HCA selects among the active ones of every device, in device order; none
 * (ncclSuccess, *n = 0) when libibverbs is missing or NCCL_IB_DISABLE=1, with an INFO saying why.
 * Done once per process: later calls return the same list. */
ncclResult_t weft_ib_ports(const struct weft_ib_port** ports, int* n);
/* The network devices those ports make (merged as NCCL_IB_MERGE_NICS says), in the order of their
 * first ports; with the same once-per-process discovery. */
ncclResult_t weft_ib_devices(const struct weft_ib_device** devs, int* n);

/* Whether the kernel module that lets a verbs device register GPU addresses (nvidia-peermem, or
 * its older names) is loaded; root prefixes the sysfs paths (weft-doctor's fake trees, "" for
 * this machine's). */
int weft_ib_peermem_loaded(const char* root);

/* Link speed from verbs' width and speed codes (ibv_port_attr.active_width / active_speed). */
int weft_ib_speed_mbps(int active_width, int active_speed);

#endif
