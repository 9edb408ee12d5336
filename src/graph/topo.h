/* The topology model inside graph/: typed nodes (GPU or host rank, PCI switch, NVSwitch, CPU/NUMA,
 * NIC, NET) joined by directed, bandwidth-annotated links, plus the paths computed between them. */
#ifndef WEFT_GRAPH_TOPO_H
#define WEFT_GRAPH_TOPO_H

#include <stdint.h>

#include "graph/graph.h"
#include "graph/xml.h"

#define WEFT_TOPO_MAX_HOPS 32
#define WEFT_TOPO_LOC_BW 5000.0f

/* Capacity per node type (GPU, PCI, NVS, CPU, NIC, NET). */
#define WEFT_TOPO_CAP_GPU 128 /* GPUs in a file; host ranks grow it (weft_topo_node_reserve) */
#define WEFT_TOPO_CAP_PCI 512
#define WEFT_TOPO_CAP_NVS 32
#define WEFT_TOPO_CAP_CPU 64
#define WEFT_TOPO_CAP_NIC 128
#define WEFT_TOPO_CAP_NET 256

struct weft_topo_node;

struct weft_topo_link {
  int type; /* enum weft_link_type */
  float bw; /* GB/s still available in this direction (search reserves from it) */
  float bw_full;
  struct weft_topo_node* remote;
};

struct weft_topo_path {
  int type; /* enum weft_path_type; WEFT_PATH_DIS when unreachable */
  float bw;
  int nhops;
  /* GPU to GPU: 1 when NCCL_P2P_LEVEL and both GPUs let the pair go peer to peer over the path
   * found (apply_p2p_level, which reroutes the others through the CPU); 0 otherwise. */
  int p2p;
  struct weft_topo_link* hops[WEFT_TOPO_MAX_HOPS];
};

struct weft_topo_node {
  int type;   /* enum weft_node_type */
  int index;  /* position in its type's array */
  int host;   /* host index inside the system (several hosts may share one file) */
  int64_t id; /* bus id as a number (GPU/PCI/NIC), numa id (CPU), dev (NET) */
  int cpu;    /* index of the CPU (NUMA node) this node hangs below, -1 if none */
  union {
    struct {
      int dev, rank, sm, gdr;
      int host_rank; /* 1: a host-backend rank placed on a CPU, not a device */
      int p2p;       /* 0: no PCIe peer-to-peer (GeForce cards, <gpu p2p="0">): via host memory */
    } gpu;
    struct {
      int dev, port, gdr, maxconn;
      float speed_bw; /* GB/s */
      float latency;
      uint64_t guid;
      int asic; /* NETs with the same guid share one NIC ASIC */
    } net;
    struct {
      int arch, vendor, model;
    } cpu;
  } u;
  char name[64]; /* NET: device name; others: bus id text */
  /* Grown as links are added (a CPU under a thousand host ranks has a thousand): paths point
   * into it, so links are only added before paths are computed. */
  struct weft_topo_link* links;
  int nlinks, max_links;
  /* CPU only: its memory as a resource of traffic staged there (GPU pairs without P2P, NICs
   * without GPUDirect); every staged byte is written and read once, so bw is half the memory's
   * DMA bandwidth. Not in links[]: paths never go through it, staged paths end with it. */
  struct weft_topo_link mem;
  /* Paths from this node to every node of types GPU, CPU, NET, NVS (NULL until computed). */
  struct weft_topo_path* paths[WEFT_NODE_TYPES];
};

struct weft_topo_system {
  struct weft_topo_node* nodes[WEFT_NODE_TYPES];
  int count[WEFT_NODE_TYPES];
  int cap[WEFT_NODE_TYPES];
  int nhosts;
  uint64_t host_hash[WEFT_TOPO_CAP_CPU];
  struct weft_xml_node* xml; /* the tree loaded or detected; NCCL_TOPO_DUMP_FILE writes it */
  float host_copy_bw;        /* GB/s of a host rank's memory copies (host ranks only) */
  int paths_ready;
};

enum { WEFT_CPU_ARCH_X86, WEFT_CPU_ARCH_ARM, WEFT_CPU_ARCH_POWER, WEFT_CPU_ARCH_OTHER };
enum { WEFT_CPU_VENDOR_INTEL, WEFT_CPU_VENDOR_AMD, WEFT_CPU_VENDOR_ZHAOXIN, WEFT_CPU_VENDOR_OTHER };

/* topo.c */
ncclResult_t weft_topo_system_alloc(struct weft_topo_system** out);
ncclResult_t weft_topo_node_add(struct weft_topo_system* sys, int type, int host, int64_t id,
                                struct weft_topo_node** out);
/* Room for n more nodes of a type: a larger array when needed, every link, path and CPU memory
 * link moved over (paths are freed). Pointers to nodes held elsewhere go stale. */
ncclResult_t weft_topo_node_reserve(struct weft_topo_system* sys, int type, int n);
struct weft_topo_node* weft_topo_node_find(struct weft_topo_system* sys, int type, int host, int64_t id);
/* Adds or widens the link a->b and b->a (bandwidths add up per (remote, type)). */
ncclResult_t weft_topo_connect(struct weft_topo_node* a, struct weft_topo_node* b, int type, float bw);
/* The same for a node just added (no link to or from it yet): no search of b's links for one to
 * widen, which a CPU under a thousand host ranks would do for each. */
ncclResult_t weft_topo_connect_new(struct weft_topo_node* a, struct weft_topo_node* b, int type, float bw);
ncclResult_t weft_topo_connect_one(struct weft_topo_node* a, struct weft_topo_node* b, int type, float bw);
/* Restores every link's available bandwidth (after a search). */
void weft_topo_reset_bw(struct weft_topo_system* sys);
float weft_topo_nvlink_bw(int sm);
float weft_topo_pci_bw(const char* link_speed, int width);
float weft_topo_sys_bw(int arch, int vendor, int model);
/* GB/s of a NUMA node's memory for DMA-staged traffic (WEFT_TOPO_HOST_MEM_BW, else an estimate
 * from the CPU and how many NUMA nodes its host has). */
float weft_topo_mem_bw(int arch, int vendor, int model, int host_numa_nodes);
/* 0 for GPUs known to lack PCIe peer-to-peer (GeForce cards), 1 otherwise. */
int weft_topo_gpu_p2p(long long pci_device);
int64_t weft_topo_busid_parse(const char* busid);

/* topo_xml.c: build the node graph from a <system> tree (the tree stays owned by sys). */
ncclResult_t weft_topo_from_xml(struct weft_topo_system* sys);

/* paths.c */
struct weft_topo_node* weft_topo_rank_node(struct weft_topo_system* sys, int host, int local);
/* The GPU (not a host rank) of host with this PCI bus id; NULL when the model has none. */
struct weft_topo_node* weft_topo_gpu_by_busid(struct weft_topo_system* sys, int host, int64_t busid);
/* Whether GPU rank (not a host rank) and NET net may use GPUDirect RDMA over path p (paths
 * computed): both support it and p is within NCCL_NET_GDR_LEVEL. */
int weft_topo_net_gdr(const struct weft_topo_node* rank, const struct weft_topo_node* net,
                      const struct weft_topo_path* p);
void weft_topo_free_paths(struct weft_topo_system* sys);
/* The path from a host rank that keeps none of its own (a host with more than
 * WEFT_GRAPH_SEARCH_LOCAL host ranks) to node index of type: its link to its CPU, then the CPU's
 * path; to a NET staged in the CPU's memory (type at least PHB), as weft_topo_compute_paths
 * routes host ranks. Returns 0 when paths are not ready. */
int weft_topo_host_rank_path(struct weft_topo_system* sys, const struct weft_topo_node* from, int type,
                             int index, struct weft_topo_path* out);
struct weft_topo_path* weft_topo_path(struct weft_topo_system* sys, const struct weft_topo_node* from,
                                      int type, int index);

#endif
