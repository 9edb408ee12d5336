/* graph/: what the rest of the library calls for topology, rings/trees and tuning.
 *
 * Typical use at communicator init (core/ or collectives/):
 *
 *   struct weft_topo_system* sys;
 *   weft_topo_get_system(&sys);                 // NCCL_TOPO_FILE, else detection; NCCL_TOPO_DUMP_FILE
 *   weft_topo_add_host_ranks(sys, 0, n, numa, copy_bw);   // host backend only: ranks on NUMA nodes
 *   struct weft_topo_graph ring, tree;
 *   weft_topo_search_all(sys, 0, nnodes, &ring, &tree);   // NCCL_GRAPH_FILE / NCCL_GRAPH_DUMP_FILE
 *   struct weft_topo_channels* ch;
 *   weft_topo_connect_channels(&ring, &tree, nnodes, &ch); // per-channel ring order + tree links
 *   struct weft_tuning tun;
 *   weft_tuning_init(&tun, &(struct weft_tuning_input){...});   // NCCL_ALGO / NCCL_PROTO
 *   weft_tuning_choose(&tun, WEFT_FUNC_ALLREDUCE, nbytes, &choice);  // per collective
 *   ... weft_topo_channels_destroy(ch); weft_topo_system_destroy(sys);
 *
 * Ranks. Inside one node the search orders "rank nodes": GPUs, or for the host backend CPU ranks
 * added with weft_topo_add_host_ranks. Graph channels list local ranks (the GPU's `rank` attribute,
 * else its position). Across nodes, rank = node * nlocal + local rank (nodes identical, as in a
 * homogeneous job); weft_topo_connect_channels builds the global rings and double binary trees.
 * Nothing here touches hardware except weft_topo_detect (hwloc or sysfs, dlopen'ed NVML, never required). */
#ifndef WEFT_GRAPH_GRAPH_H
#define WEFT_GRAPH_GRAPH_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"

/* Node, link and path types keep NCCL's numbering so logs and XML read the same. */
enum weft_node_type {
  WEFT_NODE_GPU = 0,
  WEFT_NODE_PCI = 1,
  WEFT_NODE_NVS = 2,
  WEFT_NODE_CPU = 3,
  WEFT_NODE_NIC = 4,
  WEFT_NODE_NET = 5,
  WEFT_NODE_TYPES = 6
};
enum weft_link_type {
  WEFT_LINK_LOC = 0,
  WEFT_LINK_NVL = 1,
  WEFT_LINK_C2C = 3,
  WEFT_LINK_PCI = 4,
  WEFT_LINK_SYS = 9,
  WEFT_LINK_NET = 10
};
enum weft_path_type {
  WEFT_PATH_LOC = 0,
  WEFT_PATH_NVL = 1,
  WEFT_PATH_NVB = 2,
  WEFT_PATH_C2C = 3,
  WEFT_PATH_PIX = 4,
  WEFT_PATH_PXB = 5,
  WEFT_PATH_P2C = 6,
  WEFT_PATH_PXN = 7,
  WEFT_PATH_PHB = 8,
  WEFT_PATH_SYS = 9,
  WEFT_PATH_NET = 10,
  WEFT_PATH_DIS = 11,
  WEFT_PATH_TYPES = 12
};
/* Search patterns, NCCL's values. */
enum weft_pattern {
  WEFT_PATTERN_BALANCED_TREE = 1, /* NIC traffic split: parent + one child on GPU a, other child on b */
  WEFT_PATTERN_SPLIT_TREE = 2,    /* parent on GPU a, children on GPU b */
  WEFT_PATTERN_TREE = 3,          /* all NIC traffic on one GPU */
  WEFT_PATTERN_RING = 4
};

#define WEFT_MAX_CHANNELS 64
/* Ranks per node the backtracking search orders one by one. Beyond it the search would cost
 * seconds per rank (every rank of a thread-rank job builds the model), so a host with more host
 * ranks gets a NUMA-ordered ring instead (search_numa.c), still priced by the model's links; GPU
 * hosts never have that many ranks. */
#define WEFT_GRAPH_SEARCH_LOCAL 64

struct weft_topo_system; /* the model; layout in graph/topo.h (graph-internal) */

/* Name of a path type ("NVL", "PHB", ...) and the reverse; -1 for unknown text. Numeric legacy
 * values 0..5 of NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL are accepted by weft_topo_path_type_parse. */
const char* weft_topo_path_name(int type);
int weft_topo_path_type_parse(const char* text);
const char* weft_topo_node_name(int type);

/* ---- System: load, dump, detect ---- */

/* Parses NCCL topology XML (text need not be NUL-terminated). `what` names the source in errors. */
ncclResult_t weft_topo_load_text(const char* text, size_t len, const char* what,
                                 struct weft_topo_system** out);
ncclResult_t weft_topo_load_file(const char* path, struct weft_topo_system** out);
/* Detects this machine: through dlopen'ed hwloc when it loads (CPUs/NUMA nodes with cpusets, PCI
 * tree with switches and link speeds, GPUs, NICs and their RDMA devices), else from sysfs; NVLinks
 * from dlopen'ed NVML when present. WEFT_TOPO_DETECT=hwloc|sysfs pins the path; WEFT_HWLOC_XML or
 * HWLOC_XMLFILE make hwloc read a file instead. Never fails for lack of devices. */
ncclResult_t weft_topo_detect(struct weft_topo_system** out);
/* weft_topo_detect once per process: later calls with the same detection settings
 * (WEFT_TOPO_DETECT, WEFT_TOPO_SYSFS, WEFT_HWLOC_XML, WEFT_HWLOC_LIB, HWLOC_XMLFILE) rebuild the
 * model from the tree the first one read; the host hash (WEFT_HOSTID) is taken each time. */
ncclResult_t weft_topo_detect_shared(struct weft_topo_system** out);
/* Detection once per host (core/topo_share.c carries the text between processes): a copy of the
 * <system> tree weft_topo_detect_shared keeps (read now when it keeps none under this process's
 * settings), a hash of those settings and how it was read ("hwloc" or "sysfs"); free *text. */
ncclResult_t weft_topo_detect_text(char** text, size_t* len, uint64_t* settings, const char** method);
/* Keeps a tree another process of this host read as if this process had, when it was read under
 * the same settings (hash); returns whether it was kept. */
int weft_topo_detect_adopt(const char* text, size_t len, uint64_t settings, const char* method);
/* "hwloc" or "sysfs": how this thread's last weft_topo_detect read the machine ("none" before). */
const char* weft_topo_detect_method(void);
/* The same model from an hwloc XML file (source 1, arg = path) or synthetic description (source 2,
 * e.g. "pack:2 numa:2 core:16 pu:2"); see util/hwloc.h. Needs hwloc at run time. */
ncclResult_t weft_topo_detect_hwloc(int source, const char* arg, struct weft_topo_system** out);
/* Fuses the XML views of a node's local ranks (as exchanged by an intra-node all-gather of
 * weft_topo_dump_string texts) into one system: elements matched by identity (cpu by host_hash +
 * numaid, pci by busid, net by name + dev, nvlink by target), attributes and children united. */
ncclResult_t weft_topo_fuse_text(const char* const* texts, const size_t* lens, int n,
                                 struct weft_topo_system** out);
/* The topology file a communicator reads instead of detecting the machine (NCCL_TOPO_FILE), or
 * NULL: the one place that decides between the two. */
const char* weft_topo_file(void);
/* For a communicator: weft_topo_file() if set, else detection; then NCCL_TOPO_DUMP_FILE if set. */
ncclResult_t weft_topo_get_system(struct weft_topo_system** out);
/* Writes the topology in NCCL's XML format (what was loaded or detected). */
ncclResult_t weft_topo_dump_file(const struct weft_topo_system* sys, const char* path);
ncclResult_t weft_topo_dump_string(const struct weft_topo_system* sys, char** out); /* free() it */
void weft_topo_system_destroy(struct weft_topo_system* sys);                        /* NULL-safe */

/* Host backend: places nranks CPU ranks on host `host`; numa[i] is rank i's NUMA node id (the
 * cpu numaid; -1 or unknown = first CPU). copy_bw_gbs is the measured memcpy bandwidth (GB/s) a
 * rank can sustain: it bounds channels x bandwidth of rings and trees among these ranks. GPUs of
 * that host stay in the graph but stop being ranks; placing host ranks twice is ncclInvalidUsage. */
ncclResult_t weft_topo_add_host_ranks(struct weft_topo_system* sys, int host, int nranks, const int* numa,
                                      float copy_bw_gbs);

/* Where nranks host ranks of host `host` should run: numa[r] receives a NUMA id, nodes taking
 * contiguous blocks of ranks in proportion to the CPUs of theirs (the <cpu affinity> cpusets)
 * that `allowed` holds (NULL: all); nodes without any get no rank. ncclInvalidUsage when no node
 * has an allowed CPU. */
ncclResult_t weft_topo_place_host_ranks(const struct weft_topo_system* sys, int host, int nranks,
                                        const cpu_set_t* allowed, int* numa);

/* Counts for reports: nodes of a type; hosts in the file; rank nodes on one host. */
int weft_topo_count(const struct weft_topo_system* sys, int node_type);
int weft_topo_nhosts(const struct weft_topo_system* sys);
int weft_topo_nlocal(const struct weft_topo_system* sys, int host);
/* NUMA ids of the CPUs of a host, in file order (at most max); returns how many. */
int weft_topo_cpu_numa_ids(const struct weft_topo_system* sys, int host, int* ids, int max);
/* Lowest compute capability among a host's GPU ranks (0 for host ranks or none). */
int weft_topo_min_sm(const struct weft_topo_system* sys, int host);
/* 1 when the host's first CPU is AMD (network overhead per step in tuning), else 0. */
int weft_topo_cpu_is_amd(const struct weft_topo_system* sys, int host);
/* Printable one-line-per-node description of the system (free() it). */
ncclResult_t weft_topo_describe(struct weft_topo_system* sys, char** out);

/* ---- Paths ---- */

/* Computes the best path (type, bottleneck bandwidth, links) between every pair of GPUs, CPUs,
 * NETs and NVSwitches, honouring NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL and NCCL_NVB_DISABLE. Search
 * calls it when needed; call it again after changing the system. */
ncclResult_t weft_topo_compute_paths(struct weft_topo_system* sys);
/* Path between two rank nodes of one host by local rank (type, GB/s); -1 when out of range. */
int weft_topo_rank_path(struct weft_topo_system* sys, int host, int local_a, int local_b, float* bw);
/* Whether the GPUs with these PCI bus ids (weft_topo_busid_parse's numbers) on host may talk peer
 * to peer: the path between them within NCCL_P2P_LEVEL (default PXB; LOC under
 * NCCL_P2P_DISABLE), NVLink whatever the level unless LOC, never over PCIe for a GPU without P2P.
 * 1 yes, 0 no, -1 unknown (either GPU not in the model, or no path). Computes paths if needed. */
int weft_topo_p2p_between(struct weft_topo_system* sys, int host, int64_t bus_a, int64_t bus_b);
/* The P2P level in force: NCCL_P2P_LEVEL as a path type (PXB when unset or not a path type), LOC
 * under NCCL_P2P_DISABLE=1. The model warns about a bad value; this does not. */
int weft_topo_p2p_level(void);

/* ---- The NICs near each rank (near_nets.c) ---- */

#define WEFT_TOPO_MAX_NEAR_NETS 16
struct weft_topo_near_nets {
  int n;                            /* 0: the topology places none of the devices named */
  int dev[WEFT_TOPO_MAX_NEAR_NETS]; /* indexes into names, all equally near, in names' order */
  int rail;                         /* this rank's turn among the ranks whose nearest start alike */
  int sharers;                      /* how many ranks those are */
  uint32_t gdr;                     /* bit i: dev[i] takes the rank's GPU memory directly (GDR) */
};
/* For each of nlocal ranks of host (by bus id when bus_ids is given, GPU ranks; else host ranks
 * by local index), the network devices named names[0..nnames) (the network's own names, "mlx5_0:1"
 * or "eth0", matched with the NETs' name and port) with the most bandwidth from the rank, then the
 * best path type (NCCL's rule). A device the topology lacks is near no rank. Computes paths. */
ncclResult_t weft_topo_near_nets(struct weft_topo_system* sys, int host, const char* const* names, int nnames,
                                 const int64_t* bus_ids, int nlocal, struct weft_topo_near_nets* out);
/* NCCL_NET_GDR_LEVEL: the farthest GPU-NIC path type GPUDirect RDMA takes (default PXB). */
int weft_topo_gdr_level(void);

/* ---- Search ---- */

struct weft_topo_graph {
  int id;      /* 0 ring, 1 tree (NCCL's graph ids) */
  int pattern; /* enum weft_pattern */
  int cross_nic;
  int nchannels;
  int min_channels, max_channels;
  float bw_intra, bw_inter;   /* GB/s per channel inside a node / to the network */
  float latency_inter;        /* µs, from the NETs' latency attribute */
  int type_intra, type_inter; /* worst path type the channels use */
  int same_channels;          /* every channel has the same order */
  int nlocal;                 /* ranks per node */
  int inter;                  /* 1 when the graph enters and leaves the node through NETs */
  /* Local ranks in channel order: row c is intra + c * nlocal, WEFT_MAX_CHANNELS rows (sized
   * per node, so a thousand ranks per host cost no more than they use). Owned: a graph filled by
   * the search or weft_topo_graph_copy is released with weft_topo_graph_fini; the search treats
   * its output as uninitialized. NULL in the tuning model's copies (it needs only the figures). */
  int* intra;
  int64_t inter_net[WEFT_MAX_CHANNELS][2]; /* NET dev in, out (-1 single node) */
};

static inline int* weft_topo_graph_row(const struct weft_topo_graph* g, int c) {
  return g->intra + (size_t)c * (size_t)g->nlocal;
}
/* Allocates intra for nlocal ranks (not zeroed); the other fields are left as they are. */
ncclResult_t weft_topo_graph_alloc(struct weft_topo_graph* g, int nlocal);
/* dst (uninitialized) becomes a copy of src with its own intra. */
ncclResult_t weft_topo_graph_copy(struct weft_topo_graph* dst, const struct weft_topo_graph* src);
void weft_topo_graph_fini(struct weft_topo_graph* g); /* frees intra; NULL-safe */

/* Searches one pattern on host `host` for a job of nnodes identical nodes (nnodes > 1 makes
 * channels start and end at a NET). Honours NCCL_MIN/MAX_NCHANNELS, NCCL_CROSS_NIC. Always
 * produces at least one channel (fallback: rank order, bw 0.1, type SYS) unless no rank exists.
 * More than WEFT_GRAPH_SEARCH_LOCAL host ranks: the NUMA-ordered ring of search_numa.c. out is
 * overwritten (not freed first); weft_topo_graph_fini releases it. */
ncclResult_t weft_topo_search(struct weft_topo_system* sys, int host, int nnodes, int pattern,
                              struct weft_topo_graph* out);
/* Ring and tree for a communicator: NCCL_GRAPH_FILE replaces the search, NCCL_GRAPH_DUMP_FILE
 * receives the result; the tree search tries BALANCED_TREE, SPLIT_TREE and TREE (multi-node).
 * Logs "Pattern ..." and one line per channel under NCCL_DEBUG_SUBSYS=GRAPH. ring and tree are
 * overwritten; weft_topo_graph_fini releases each. */
ncclResult_t weft_topo_search_all(struct weft_topo_system* sys, int host, int nnodes,
                                  struct weft_topo_graph* ring, struct weft_topo_graph* tree);
void weft_topo_graph_log(struct weft_topo_system* sys, const struct weft_topo_graph* g);

/* Graph files (NCCL's <graphs version="1"><graph ...><channel><net/><gpu/></channel></graph>). */
ncclResult_t weft_topo_graphs_dump(struct weft_topo_system* sys, int host,
                                   const struct weft_topo_graph* const* graphs, int ngraphs,
                                   const char* path);
ncclResult_t weft_topo_graphs_load(struct weft_topo_system* sys, int host, const char* path,
                                   struct weft_topo_graph* const* graphs, int ngraphs);
ncclResult_t weft_topo_graphs_to_string(struct weft_topo_system* sys, int host,
                                        const struct weft_topo_graph* const* graphs, int ngraphs, char** out);
ncclResult_t weft_topo_graphs_from_string(struct weft_topo_system* sys, int host, const char* text,
                                          size_t len, struct weft_topo_graph* const* graphs, int ngraphs);

/* ---- Channels across nodes ---- */

struct weft_topo_channels {
  int nranks, nnodes, nlocal;
  int nchannels;  /* communicator channels: 2 x search channels, clamped (NCCL's rule) */
  int* ring;      /* [c * nranks + i]: i-th rank of channel c's ring, starting at rank 0 */
  int* ring_prev; /* [c * nranks + r] */
  int* ring_next; /* [c * nranks + r] */
  int* tree_up;   /* [c * nranks + r]: parent rank or -1 */
  int* tree_down; /* [(c * nranks + r) * 3 + k]: children or -1 */
  int tree_depth; /* deepest rank of any tree */
};

/* Builds the communicator's channels from per-node graphs (identical nodes): rings joined node
 * after node, trees as intra-node chains joined by the double binary tree over nodes (channel c
 * uses tree 0, channel c + nch tree 1), then clamps to NCCL_MIN/MAX_NCHANNELS. Logs "Channel
 * cc/NN : ..." and "Trees [c] ..." under GRAPH. tree may be NULL (then rings only). */
ncclResult_t weft_topo_connect_channels(const struct weft_topo_graph* ring,
                                        const struct weft_topo_graph* tree, int nnodes,
                                        struct weft_topo_channels** out);
void weft_topo_channels_destroy(struct weft_topo_channels* ch);

/* NCCL's double binary tree over n nodes: parent and children of node r in tree t (0 or 1);
 * -1 means none. */
void weft_topo_dtree(int n, int r, int t, int* parent, int* child0, int* child1);

/* ---- Tuning ---- */

/* Functions in the same order as enum weft_coll in collectives/task.h (castable). */
enum weft_func {
  WEFT_FUNC_BROADCAST = 0,
  WEFT_FUNC_REDUCE = 1,
  WEFT_FUNC_ALLGATHER = 2,
  WEFT_FUNC_REDUCESCATTER = 3,
  WEFT_FUNC_ALLREDUCE = 4,
  WEFT_FUNC_COUNT = 5
};
enum weft_algo {
  WEFT_ALGO_TREE = 0,
  WEFT_ALGO_RING = 1,
  WEFT_ALGO_COLLNET_DIRECT = 2,
  WEFT_ALGO_COLLNET_CHAIN = 3,
  WEFT_ALGO_NVLS = 4,
  WEFT_ALGO_NVLS_TREE = 5,
  WEFT_ALGO_PAT = 6,
  WEFT_ALGO_COUNT = 7
};
enum weft_proto { WEFT_PROTO_LL = 0, WEFT_PROTO_LL128 = 1, WEFT_PROTO_SIMPLE = 2, WEFT_PROTO_COUNT = 3 };
/* Model family: the host backend (CPU ranks, shared memory) or a GPU generation. */
enum weft_arch {
  WEFT_ARCH_HOST = 0,
  WEFT_ARCH_VOLTA,
  WEFT_ARCH_AMPERE,
  WEFT_ARCH_HOPPER,
  WEFT_ARCH_BLACKWELL
};

const char* weft_func_name(int func);
const char* weft_algo_name(int algo);
const char* weft_proto_name(int proto);
/* Architecture from a compute capability (70, 80, 90, 100); 0 gives HOST. */
int weft_arch_from_sm(int sm);

struct weft_tuning_input {
  int arch;       /* enum weft_arch */
  int cpu_vendor; /* 0 Intel/other, 1 AMD: network overhead per step */
  int nranks, nnodes;
  int nchannels;                      /* communicator channels (weft_topo_channels.nchannels) */
  const struct weft_topo_graph* ring; /* required */
  const struct weft_topo_graph* tree; /* NULL: no tree algorithm */
  float host_copy_bw; /* GB/s, HOST arch: caps the per-channel bandwidth (0: use the graph's) */
  /* Algorithms/protocols the executor implements (bit per enum value); 0 means ring+tree and
   * LL+Simple (+LL128 on GPUs). */
  unsigned algo_impl, proto_impl;
  /* NCCL_ALGO / NCCL_PROTO as agreed by the communicator's ranks; read during weft_tuning_init
   * only. env_given 0: read this process's parameters. */
  int env_given;
  const char *algo_env, *proto_env;
};

struct weft_tuning {
  struct weft_tuning_input in;
  struct weft_topo_graph ring, tree; /* copies, so callers may free theirs */
  int has_tree;
  /* enabled[func][algo][proto]: after validity, implementation, LL128 rules and NCCL_ALGO/PROTO. */
  unsigned char enabled[WEFT_FUNC_COUNT][WEFT_ALGO_COUNT][WEFT_PROTO_COUNT];
  /* why[func][algo][proto]: the first rule that disabled the pair (enum weft_tuning_why), kept so
   * the choice can be explained (tuning_explain.c). */
  unsigned char why[WEFT_FUNC_COUNT][WEFT_ALGO_COUNT][WEFT_PROTO_COUNT];
};

/* Why an (algorithm, protocol) is not a candidate, in the order the rules are checked. */
enum weft_tuning_why {
  WEFT_WHY_CANDIDATE = 0,
  WEFT_WHY_UNMODELLED, /* CollNet, NVLS, PAT; Tree for collectives other than all-reduce */
  WEFT_WHY_NOT_IMPL,   /* the backend does not run it */
  WEFT_WHY_NO_TREE,    /* no tree was searched */
  WEFT_WHY_NCCL_ALGO,  /* excluded by NCCL_ALGO */
  WEFT_WHY_NCCL_PROTO, /* excluded by NCCL_PROTO */
  WEFT_WHY_LL128_RULE, /* LL128 off: the links cannot keep 128-byte stores in order */
  WEFT_WHY_CALL,       /* excluded by the call's own selection (nccl*Config algSelection) */
  WEFT_WHY_COUNT
};

struct weft_tuning_choice {
  int algo, proto, nchannels;
  float time_us;   /* predicted */
  float busbw_gbs; /* predicted bus bandwidth (nccl-tests' definition) */
};

/* Reads NCCL_ALGO and NCCL_PROTO (WARN and ncclInvalidUsage on a bad list); logs the table of
 * predictions at a few sizes under NCCL_DEBUG_SUBSYS=TUNING when enabled. */
ncclResult_t weft_tuning_init(struct weft_tuning* t, const struct weft_tuning_input* in);
/* Predicted time in µs of one call, or a negative value when (func, algo, proto) is not
 * available (invalid, not implemented or excluded). */
float weft_tuning_predict(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes,
                          int nranks, int nnodes, int nchannels);
/* Bus bandwidth (GB/s) the model gives this case, 0 when unavailable. */
float weft_tuning_busbw(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes, int nranks,
                        int nnodes, int nchannels);
/* Fastest enabled (algo, proto) for nbytes (per-rank buffer size as NCCL counts it: the full
 * buffer for all-reduce/broadcast/reduce, the gathered size for all-gather/reduce-scatter),
 * then the channel count reduced for small messages. ncclInvalidUsage when nothing is enabled. */
ncclResult_t weft_tuning_choose(const struct weft_tuning* t, int func, size_t nbytes,
                                struct weft_tuning_choice* out);
/* The same among the algorithms and protocols whose bits (1 << WEFT_ALGO_*, 1 << WEFT_PROTO_*)
 * are set: a per-call selection (nccl*Config) narrows what NCCL_ALGO / NCCL_PROTO allow. */
ncclResult_t weft_tuning_choose_in(const struct weft_tuning* t, int func, size_t nbytes, unsigned algos,
                                   unsigned protos, struct weft_tuning_choice* out);
/* Whether some enabled (algo, proto) of func has its bits set in the masks. */
int weft_tuning_allows(const struct weft_tuning* t, int func, unsigned algos, unsigned protos);
/* Parses an NCCL_ALGO / NCCL_PROTO value for one function: "ring,tree", "^LL128",
 * "allreduce:tree;broadcast:ring". Sets bit i of *mask for names[i] allowed. Returns
 * ncclInvalidUsage (with a WARN) on unknown names. text NULL or empty allows all. */
ncclResult_t weft_tuning_parse_list(const char* text, const char* const* names, int nnames, int func,
                                    unsigned* mask);
/* Writes the prediction table (rows: func x algo x proto; columns: sizes) to f. */
void weft_tuning_print_table(const struct weft_tuning* t, FILE* f);
/* The model's time in µs for a pair whether or not it is enabled (to show what an exclusion
 * costs); negative where the model describes no such pair. */
float weft_tuning_model_time(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes,
                             int nchannels);

/* The constants a tuner plugin (v5+) is shown, as this model uses them for GPUs: base and per-hop
 * latencies [NVLink, PCI, network][algo][proto] in µs, then per-channel caps in GB/s [LL max, ring
 * LL128, tree LL128, tree, NVLS tree][Volta..Blackwell][1, 2, 4+ nodes]; 0 where it has none. */
void weft_tuning_plugin_constants(double base[WEFT_ALGO_COUNT][WEFT_PROTO_COUNT],
                                  double hw[3][WEFT_ALGO_COUNT][WEFT_PROTO_COUNT], double caps[5][4][3]);

/* ---- Explaining a choice (tuning_explain.c): the same lines in the log and in weft-topo ---- */

/* The question: func moving nbytes, narrowed by a call's selection and what the backend runs
 * (bit masks 1 << WEFT_ALGO_* / 1 << WEFT_PROTO_*; ~0u: no narrowing). */
struct weft_tuning_query {
  int func;
  size_t nbytes;
  unsigned call_algos, call_protos;
  unsigned impl_algos, impl_protos;
};
/* The answer that runs. algo < 0: the model's own choice (weft_tuning_choose_in), as offline. */
struct weft_tuning_pick {
  int algo, proto, nchannels;
  float time_us;             /* predicted for this pick (<0: none) */
  const char* rule;          /* non-NULL: a rule, not the model, chose algorithm and protocol */
  const char* channels_note; /* non-NULL: why the channel count is not the model's */
};
/* Three lines, each passed to emit: the candidates with predicted times, the exclusions with
 * why, and the choice with its reason (the model, NCCL_ALGO/NCCL_PROTO, the call, or the rule). */
void weft_tuning_explain(const struct weft_tuning* t, const struct weft_tuning_query* q,
                         const struct weft_tuning_pick* pick, void (*emit)(void* arg, const char* line),
                         void* arg);

#endif
