/* Topology model: node and link storage, bandwidth rules for NVLink / PCI / inter-CPU links,
 * type names, and the system's lifetime. */
#include "graph/topo.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/check.h"
#include "util/param.h"

static const char* const path_names[WEFT_PATH_TYPES] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB",
                                                        "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
static const char* const node_names[WEFT_NODE_TYPES] = {"GPU", "PCI", "NVS", "CPU", "NIC", "NET"};
static const int caps[WEFT_NODE_TYPES] = {WEFT_TOPO_CAP_GPU, WEFT_TOPO_CAP_PCI, WEFT_TOPO_CAP_NVS,
                                          WEFT_TOPO_CAP_CPU, WEFT_TOPO_CAP_NIC, WEFT_TOPO_CAP_NET};

const char* weft_topo_path_name(int type) {
  return type >= 0 && type < WEFT_PATH_TYPES ? path_names[type] : "???";
}

const char* weft_topo_node_name(int type) {
  return type >= 0 && type < WEFT_NODE_TYPES ? node_names[type] : "???";
}

int weft_topo_path_type_parse(const char* text) {
  if (text == NULL || text[0] == 0) return -1;
  for (int i = 0; i < WEFT_PATH_TYPES; i++)
    if (strcasecmp(text, path_names[i]) == 0) return i;
  /* NCCL's legacy numeric levels. */
  static const int legacy[] = {WEFT_PATH_LOC, WEFT_PATH_PIX, WEFT_PATH_PXB,
                               WEFT_PATH_PHB, WEFT_PATH_SYS, WEFT_PATH_SYS};
  char* end;
  long v = strtol(text, &end, 10);
  if (*end == 0 && v >= 0) return v <= 5 ? legacy[v] : WEFT_PATH_SYS;
  return -1;
}

ncclResult_t weft_topo_system_alloc(struct weft_topo_system** out) {
  struct weft_topo_system* sys = calloc(1, sizeof(*sys));
  if (sys == NULL) goto oom;
  for (int t = 0; t < WEFT_NODE_TYPES; t++) {
    sys->cap[t] = caps[t];
    sys->nodes[t] = calloc(caps[t], sizeof(struct weft_topo_node));
    if (sys->nodes[t] == NULL) goto oom;
  }
  sys->nhosts = 1;
  *out = sys;
  return ncclSuccess;
oom:
  weft_topo_system_destroy(sys);
  WEFT_WARN("topology: out of memory allocating the system");
  return ncclSystemError;
}

void weft_topo_system_destroy(struct weft_topo_system* sys) {
  if (sys == NULL) return;
  weft_topo_free_paths(sys);
  for (int t = 0; t < WEFT_NODE_TYPES; t++) {
    for (int i = 0; sys->nodes[t] && i < sys->count[t]; i++) free(sys->nodes[t][i].links);
    free(sys->nodes[t]);
  }
  weft_xml_free(sys->xml);
  free(sys);
}

ncclResult_t weft_topo_node_add(struct weft_topo_system* sys, int type, int host, int64_t id,
                                struct weft_topo_node** out) {
  if (sys->count[type] >= sys->cap[type]) {
    WEFT_WARN("topology: more than %d %s nodes", sys->cap[type], node_names[type]);
    return ncclInvalidUsage;
  }
  struct weft_topo_node* n = &sys->nodes[type][sys->count[type]];
  memset(n, 0, sizeof(*n));
  n->type = type;
  n->index = sys->count[type]++;
  n->host = host;
  n->id = id;
  n->cpu = -1;
  *out = n;
  return ncclSuccess;
}

ncclResult_t weft_topo_node_reserve(struct weft_topo_system* sys, int type, int n) {
  if (sys->count[type] + n <= sys->cap[type]) return ncclSuccess;
  int cap = sys->count[type] + n;
  struct weft_topo_node* old = sys->nodes[type];
  struct weft_topo_node* grown = calloc((size_t)cap, sizeof(*grown));
  if (grown == NULL) {
    WEFT_WARN("topology: out of memory for %d %s nodes", cap, node_names[type]);
    return ncclSystemError;
  }
  weft_topo_free_paths(sys);
  memcpy(grown, old, (size_t)sys->count[type] * sizeof(*grown));
  /* Links name their remote by address: move the ones into this array. */
  for (int t = 0; t < WEFT_NODE_TYPES; t++) {
    struct weft_topo_node* nodes = t == type ? grown : sys->nodes[t];
    for (int i = 0; i < sys->count[t]; i++) {
      struct weft_topo_node* x = &nodes[i];
      for (int l = 0; l < x->nlinks; l++)
        if (x->links[l].remote >= old && x->links[l].remote < old + sys->count[type])
          x->links[l].remote = grown + (x->links[l].remote - old);
      if (x->mem.remote >= old && x->mem.remote < old + sys->count[type]) x->mem.remote = x;
    }
  }
  free(old);
  sys->nodes[type] = grown;
  sys->cap[type] = cap;
  return ncclSuccess;
}

struct weft_topo_node* weft_topo_node_find(struct weft_topo_system* sys, int type, int host, int64_t id) {
  for (int i = 0; i < sys->count[type]; i++) {
    struct weft_topo_node* n = &sys->nodes[type][i];
    if (n->host == host && n->id == id) return n;
  }
  return NULL;
}

/* Appends link a->b (none of that type exists), kept sorted by bandwidth. */
static ncclResult_t link_add(struct weft_topo_node* a, struct weft_topo_node* b, int type, float bw) {
  if (a->nlinks == a->max_links) {
    int cap = a->max_links ? 2 * a->max_links : 4;
    struct weft_topo_link* grown = realloc(a->links, (size_t)cap * sizeof(*grown));
    if (grown == NULL) {
      WEFT_WARN("topology: out of memory for the links of %s %s", node_names[a->type], a->name);
      return ncclSystemError;
    }
    a->links = grown;
    a->max_links = cap;
  }
  struct weft_topo_link* l = &a->links[a->nlinks++];
  *l = (struct weft_topo_link){.type = type, .bw = bw, .bw_full = bw, .remote = b};
  /* Keep links sorted by bandwidth, highest first: searches try the fastest neighbours first. */
  for (int i = a->nlinks - 1; i > 0 && a->links[i].bw_full > a->links[i - 1].bw_full; i--) {
    struct weft_topo_link tmp = a->links[i];
    a->links[i] = a->links[i - 1];
    a->links[i - 1] = tmp;
  }
  return ncclSuccess;
}

ncclResult_t weft_topo_connect_one(struct weft_topo_node* a, struct weft_topo_node* b, int type, float bw) {
  int i = 0;
  while (i < a->nlinks && !(a->links[i].remote == b && a->links[i].type == type)) i++;
  if (i == a->nlinks) return link_add(a, b, type, bw);
  a->links[i].bw_full += bw;
  a->links[i].bw = a->links[i].bw_full;
  for (; i > 0 && a->links[i].bw_full > a->links[i - 1].bw_full; i--) {
    struct weft_topo_link tmp = a->links[i];
    a->links[i] = a->links[i - 1];
    a->links[i - 1] = tmp;
  }
  return ncclSuccess;
}

ncclResult_t weft_topo_connect(struct weft_topo_node* a, struct weft_topo_node* b, int type, float bw) {
  WEFT_CHECK(weft_topo_connect_one(a, b, type, bw));
  return weft_topo_connect_one(b, a, type, bw);
}

ncclResult_t weft_topo_connect_new(struct weft_topo_node* a, struct weft_topo_node* b, int type, float bw) {
  WEFT_CHECK(link_add(a, b, type, bw));
  return link_add(b, a, type, bw);
}

void weft_topo_reset_bw(struct weft_topo_system* sys) {
  for (int t = 0; t < WEFT_NODE_TYPES; t++)
    for (int i = 0; i < sys->count[t]; i++) {
      struct weft_topo_node* n = &sys->nodes[t][i];
      for (int l = 0; l < n->nlinks; l++) n->links[l].bw = n->links[l].bw_full;
      n->mem.bw = n->mem.bw_full;
    }
}

/* Memory bandwidth a NUMA node gives to DMA from PCIe devices, as a round figure per platform:
 * what its DDR channels sustain for device traffic, not their peak. AMD EPYC splits a socket's
 * channels between its NUMA nodes (NPS2/NPS4: two channels a node), so a host's 100 GB/s is
 * shared by its nodes; measured 4x RTX 4090 all-reduce on an NPS4 Rome host (12.6 GB/s busbw)
 * is what 25 GB/s a node gives. Overridable where it is known. */
float weft_topo_mem_bw(int arch, int vendor, int model, int host_numa_nodes) {
  int64_t given = weft_param_is_set("WEFT_TOPO_HOST_MEM_BW") ? weft_param_int("WEFT_TOPO_HOST_MEM_BW") : 0;
  if (given > 0) return (float)given;
  if (arch == WEFT_CPU_ARCH_ARM || arch == WEFT_CPU_ARCH_POWER) return 100;
  if (vendor == WEFT_CPU_VENDOR_INTEL) return model >= 0x8F ? 150 : model >= 0x55 ? 80 : 50;
  if (vendor == WEFT_CPU_VENDOR_AMD) {
    float per = 100.0f / (host_numa_nodes > 0 ? host_numa_nodes : 1);
    return per < 25 ? 25 : per;
  }
  return 50;
}

int weft_topo_gpu_p2p(long long device) {
  /* GeForce RTX 30/40/50 boards: the driver offers no PCIe P2P (NVML reports it unsupported), so
   * NCCL moves their data through host memory (SHM). Data-centre and workstation cards keep it. */
  static const long long none[] = {0x2204, 0x2203, 0x2206, 0x2208, 0x2216, 0x2482, 0x2484, 0x2486, 0x2487,
                                   0x2488, 0x2489, 0x2503, 0x2504, 0x2684, 0x2702, 0x2704, 0x2705, 0x2782,
                                   0x2783, 0x2786, 0x2803, 0x2860, 0x2b85, 0x2b87, 0x2c02, 0x2c05};
  for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
    if (device == none[i]) return 0;
  return 1;
}

float weft_topo_nvlink_bw(int sm) {
  if (sm >= 100) return 40.1f;
  if (sm >= 90) return 20.6f;
  if (sm == 86 || sm == 87 || sm == 89) return 12.0f;
  if (sm >= 70) return 20.0f;
  return 18.0f;
}

/* GB/s of a PCI link: width x per-lane rate / 80 (per-lane in 100 Mb/s units, after encoding). */
float weft_topo_pci_bw(const char* link_speed, int width) {
  double gts = link_speed ? strtod(link_speed, NULL) : 0;
  int lane = 60;
  if (gts > 0) {
    if (gts < 4)
      lane = 15;
    else if (gts < 7)
      lane = 30;
    else if (gts < 12)
      lane = 60;
    else if (gts < 24)
      lane = 120;
    else if (gts < 48)
      lane = 240;
    else
      lane = 480;
  }
  if (width <= 0) width = 16;
  return (float)width * lane / 80.0f;
}

float weft_topo_sys_bw(int arch, int vendor, int model) {
  if (arch == WEFT_CPU_ARCH_POWER) return 32;
  if (arch == WEFT_CPU_ARCH_ARM) return 6;
  if (vendor == WEFT_CPU_VENDOR_AMD) return 16;
  if (vendor == WEFT_CPU_VENDOR_ZHAOXIN) return 6;
  if (vendor == WEFT_CPU_VENDOR_INTEL) {
    if (model >= 0xCF) return 40;
    if (model >= 0x8F) return 22;
    if (model >= 0x55) return 10;
    return 6;
  }
  return 6;
}

/* "dddd:bb:dd.f" -> number; fake or odd bus ids ("fffffff:ff:ff.0") parse too. -1 on junk. */
int64_t weft_topo_busid_parse(const char* busid) {
  if (busid == NULL || busid[0] == 0) return -1;
  int64_t v = 0;
  int digits = 0;
  for (const char* p = busid; *p; p++) {
    int d;
    if (*p >= '0' && *p <= '9')
      d = *p - '0';
    else if (*p >= 'a' && *p <= 'f')
      d = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F')
      d = *p - 'A' + 10;
    else if (*p == ':' || *p == '.')
      continue;
    else
      return -1;
    if (++digits > 15) return -1;
    v = v * 16 + d;
  }
  return digits ? v : -1;
}

int weft_topo_count(const struct weft_topo_system* sys, int node_type) {
  return node_type >= 0 && node_type < WEFT_NODE_TYPES ? sys->count[node_type] : 0;
}

int weft_topo_nhosts(const struct weft_topo_system* sys) { return sys->nhosts; }

int weft_topo_nlocal(const struct weft_topo_system* sys, int host) {
  int n = 0;
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++)
    n += sys->nodes[WEFT_NODE_GPU][i].host == host && sys->nodes[WEFT_NODE_GPU][i].u.gpu.rank >= 0;
  return n;
}

int weft_topo_cpu_numa_ids(const struct weft_topo_system* sys, int host, int* ids, int max) {
  int n = 0;
  for (int i = 0; i < sys->count[WEFT_NODE_CPU] && n < max; i++)
    if (sys->nodes[WEFT_NODE_CPU][i].host == host) ids[n++] = (int)sys->nodes[WEFT_NODE_CPU][i].id;
  return n;
}

int weft_topo_min_sm(const struct weft_topo_system* sys, int host) {
  int sm = 0;
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    const struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->host != host || g->u.gpu.host_rank) continue;
    if (sm == 0 || g->u.gpu.sm < sm) sm = g->u.gpu.sm;
  }
  return sm;
}

int weft_topo_cpu_is_amd(const struct weft_topo_system* sys, int host) {
  for (int i = 0; i < sys->count[WEFT_NODE_CPU]; i++)
    if (sys->nodes[WEFT_NODE_CPU][i].host == host)
      return sys->nodes[WEFT_NODE_CPU][i].u.cpu.vendor == WEFT_CPU_VENDOR_AMD;
  return 0;
}
