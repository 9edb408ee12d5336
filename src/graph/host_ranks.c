/* Host-backend ranks: CPU ranks placed on NUMA nodes, each linked to its CPU by a local link whose
 * bandwidth is the measured copy bandwidth, so the same search and tuning serve the host backend;
 * and where such ranks should go, from the NUMA nodes' cpusets and the CPUs the process may use. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "graph/topo.h"
#include "util/check.h"

static ncclResult_t host_cpu(struct weft_topo_system* sys, int host, int numa, struct weft_topo_node** out) {
  struct weft_topo_node* first = NULL;
  for (int i = 0; i < sys->count[WEFT_NODE_CPU]; i++) {
    struct weft_topo_node* c = &sys->nodes[WEFT_NODE_CPU][i];
    if (c->host != host) continue;
    if (first == NULL) first = c;
    if (c->id == numa) {
      *out = c;
      return ncclSuccess;
    }
  }
  if (first) {
    *out = first;
    return ncclSuccess;
  }
  /* A system without CPUs (e.g. an empty file): give the ranks one NUMA node. */
  WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_CPU, host, 0, out));
  (*out)->cpu = (*out)->index;
  snprintf((*out)->name, sizeof((*out)->name), "0");
  return ncclSuccess;
}

ncclResult_t weft_topo_add_host_ranks(struct weft_topo_system* sys, int host, int nranks, const int* numa,
                                      float copy_bw_gbs) {
  if (host < 0 || host >= sys->nhosts || nranks <= 0) {
    WEFT_WARN("topology: cannot place %d host ranks on host %d (hosts %d)", nranks, host, sys->nhosts);
    return ncclInvalidUsage;
  }
  /* The host backend runs on CPUs: GPUs of this host stay in the graph but stop being ranks. */
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->host == host && !g->u.gpu.host_rank) g->u.gpu.rank = -1;
    if (g->host == host && g->u.gpu.host_rank) {
      WEFT_WARN("topology: host %d already has host ranks", host);
      return ncclInvalidUsage;
    }
  }
  float bw = copy_bw_gbs > 0 ? copy_bw_gbs : 10.0f;
  /* Before any CPU is added (host_cpu may add one) or any node pointer is taken. */
  WEFT_CHECK(weft_topo_node_reserve(sys, WEFT_NODE_GPU, nranks));
  for (int r = 0; r < nranks; r++) {
    struct weft_topo_node *cpu, *g;
    WEFT_CHECK(host_cpu(sys, host, numa ? numa[r] : 0, &cpu));
    WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_GPU, host, ((int64_t)1 << 62) + r, &g));
    g->cpu = cpu->index;
    g->u.gpu.host_rank = 1;
    g->u.gpu.rank = r;
    g->u.gpu.dev = r;
    snprintf(g->name, sizeof(g->name), "cpu-rank-%d", r);
    WEFT_CHECK(weft_topo_connect_new(g, cpu, WEFT_LINK_LOC, bw));
  }
  sys->host_copy_bw = bw;
  weft_topo_free_paths(sys);
  WEFT_INFO(WEFT_GRAPH, "Placed %d host ranks on host %d, copy bandwidth %.1f GB/s", nranks, host, bw);
  return ncclSuccess;
}

/* NCCL's affinity text ("ffff0000,0000ffff": 32-bit hex words, most significant first) into set;
 * returns the number of CPUs, -1 when the text is not such a mask. */
static int parse_affinity(const char* text, cpu_set_t* set) {
  CPU_ZERO(set);
  size_t n = strlen(text), words = 1;
  for (size_t i = 0; i < n; i++) words += text[i] == ',';
  const char* p = text;
  for (size_t w = words; w-- > 0;) {
    char* end;
    unsigned long v = strtoul(p, &end, 16);
    if (end == p || (*end != ',' && *end != 0)) return -1;
    for (int b = 0; b < 32; b++)
      if ((v >> b & 1) && w * 32 + b < CPU_SETSIZE) CPU_SET((int)(w * 32 + b), set);
    p = *end ? end + 1 : end;
  }
  return CPU_COUNT(set);
}

/* The cpuset of CPU node c as its <cpu affinity> says; -1 when the file gives none. */
static int cpu_affinity(const struct weft_topo_system* sys, const struct weft_topo_node* c, cpu_set_t* set) {
  for (int i = 0; sys->xml && i < sys->xml->nchildren; i++) {
    const struct weft_xml_node* x = sys->xml->children[i];
    const char* hash = weft_xml_get(x, "host_hash");
    if (strcmp(x->name, "cpu") != 0 || weft_xml_get_int(x, "numaid", -1) != c->id) continue;
    if (hash && sys->nhosts > 1 && strtoull(hash, NULL, 0) != sys->host_hash[c->host]) continue;
    const char* aff = weft_xml_get(x, "affinity");
    return aff ? parse_affinity(aff, set) : -1;
  }
  return -1;
}

ncclResult_t weft_topo_place_host_ranks(const struct weft_topo_system* sys, int host, int nranks,
                                        const cpu_set_t* allowed, int* numa) {
  if (host < 0 || host >= sys->nhosts || nranks <= 0) {
    WEFT_WARN("topology: cannot place %d host ranks on host %d (hosts %d)", nranks, host, sys->nhosts);
    return ncclInvalidArgument;
  }
  int weight[WEFT_TOPO_CAP_CPU], ids[WEFT_TOPO_CAP_CPU], n = 0, total = 0;
  for (int i = 0; i < sys->count[WEFT_NODE_CPU] && n < WEFT_TOPO_CAP_CPU; i++) {
    const struct weft_topo_node* c = &sys->nodes[WEFT_NODE_CPU][i];
    cpu_set_t set;
    if (c->host != host) continue;
    int w = cpu_affinity(sys, c, &set);
    if (w >= 0 && allowed) {
      CPU_AND(&set, &set, allowed);
      w = CPU_COUNT(&set);
    }
    ids[n] = (int)c->id;
    weight[n] = w < 0 ? 1 : w; /* no cpuset known: every node counts the same */
    total += weight[n++];
  }
  if (total == 0) {
    WEFT_WARN("topology: none of host %d's NUMA nodes has a CPU this process may use", host);
    return ncclInvalidUsage;
  }
  /* Contiguous blocks, each node's share in proportion to its usable CPUs: rank r sits where the
   * middle of its share of all usable CPUs falls. */
  for (int r = 0; r < nranks; r++) {
    long long at = ((2LL * r + 1) * total) / (2LL * nranks), sum = 0;
    int k = 0;
    while (k < n - 1 && (sum += weight[k]) <= at) k++;
    numa[r] = n > 0 ? ids[k] : 0;
  }
  return ncclSuccess;
}
