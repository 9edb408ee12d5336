/* Builds the node graph from NCCL topology XML: CPUs, PCI trees, GPUs with NVLinks / C2C, NICs and
 * their NET ports. Lenient with the files found in the wild (missing classes, fake bus ids, NICs
 * under a CPU, NVSwitches as one pseudo bus id, self-targeted NVLinks, several hosts). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "graph/topo.h"
#include "util/check.h"

struct build {
  struct weft_topo_system* sys;
  int64_t fake_id; /* ids for nodes without a usable bus id */
  struct weft_xml_node* gpu_xml[WEFT_TOPO_CAP_GPU];
  int rank_attr[WEFT_TOPO_CAP_GPU];
};

static int host_of(struct weft_topo_system* sys, const char* hash) {
  uint64_t h = hash ? strtoull(hash, NULL, 0) : 0;
  for (int i = 0; i < sys->nhosts; i++)
    if (sys->host_hash[i] == h) return i;
  if (sys->count[WEFT_NODE_CPU] == 0 && sys->nhosts == 1) { /* first CPU defines host 0 */
    sys->host_hash[0] = h;
    return 0;
  }
  if (sys->nhosts >= WEFT_TOPO_CAP_CPU) return sys->nhosts - 1;
  sys->host_hash[sys->nhosts] = h;
  return sys->nhosts++;
}

static int guess_sm(long long device) {
  switch (device) {
    case 0x1db1:
    case 0x1db5:
    case 0x1db6:
      return 70;
    case 0x20b0:
    case 0x20b2:
    case 0x20b5:
    case 0x20f1:
      return 80;
    case 0x2204:
    case 0x2230:
    case 0x2236:
    case 0x2237:
      return 86;
    case 0x2684:
    case 0x26b1:
      return 89;
    case 0x2330:
    case 0x2331:
    case 0x2335:
    case 0x2324:
      return 90;
    case 0x2901:
      return 100;
    case 0x3182:
    case 0x31c2:
      return 103;
    default:
      return 80;
  }
}

static int cpu_vendor(const char* v) {
  if (v == NULL) return WEFT_CPU_VENDOR_OTHER;
  if (strcmp(v, "GenuineIntel") == 0) return WEFT_CPU_VENDOR_INTEL;
  if (strcmp(v, "AuthenticAMD") == 0 || strcmp(v, "HygonGenuine") == 0) return WEFT_CPU_VENDOR_AMD;
  if (strstr(v, "Shanghai") || strstr(v, "Centaur")) return WEFT_CPU_VENDOR_ZHAOXIN;
  return WEFT_CPU_VENDOR_OTHER;
}

static int cpu_arch(const char* a) {
  if (a == NULL || strcmp(a, "x86_64") == 0) return WEFT_CPU_ARCH_X86;
  if (strcmp(a, "arm64") == 0 || strcmp(a, "aarch64") == 0) return WEFT_CPU_ARCH_ARM;
  if (strncmp(a, "ppc", 3) == 0) return WEFT_CPU_ARCH_POWER;
  return WEFT_CPU_ARCH_OTHER;
}

static struct weft_xml_node* child_named(const struct weft_xml_node* x, const char* name) {
  for (int i = 0; i < x->nchildren; i++)
    if (strcmp(x->children[i]->name, name) == 0) return x->children[i];
  return NULL;
}

static int64_t node_id(struct build* b, const struct weft_xml_node* x) {
  int64_t id = weft_topo_busid_parse(weft_xml_get(x, "busid"));
  return id >= 0 ? id : b->fake_id++;
}

static ncclResult_t add_nets(struct build* b, struct weft_topo_node* nic, const struct weft_xml_node* x,
                             float* total) {
  struct weft_topo_system* sys = b->sys;
  for (int i = 0; i < x->nchildren; i++) {
    const struct weft_xml_node* n = x->children[i];
    if (strcmp(n->name, "net") != 0) continue;
    int64_t dev = weft_xml_get_int(n, "dev", sys->count[WEFT_NODE_NET]);
    if (weft_topo_node_find(sys, WEFT_NODE_NET, nic->host, dev)) {
      WEFT_INFO(WEFT_GRAPH, "topology line %d: NET dev %lld repeated, ignored", n->line, (long long)dev);
      continue;
    }
    struct weft_topo_node* net;
    WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_NET, nic->host, dev, &net));
    net->cpu = nic->cpu;
    double speed = weft_xml_get_double(n, "speed", 0);
    net->u.net.dev = (int)dev;
    net->u.net.speed_bw = (float)((speed > 0 ? speed : 10000) / 8000.0);
    net->u.net.port = (int)weft_xml_get_int(n, "port", 0);
    net->u.net.gdr = (int)weft_xml_get_int(n, "gdr", 0);
    net->u.net.maxconn = (int)weft_xml_get_int(n, "maxconn", 0);
    net->u.net.latency = (float)weft_xml_get_double(n, "latency", 0);
    net->u.net.guid = (uint64_t)weft_xml_get_int(n, "guid", dev);
    net->u.net.asic = net->index;
    for (int k = 0; k < net->index; k++) {
      struct weft_topo_node* o = &sys->nodes[WEFT_NODE_NET][k];
      if (o->host == net->host && o->u.net.guid == net->u.net.guid) net->u.net.asic = o->u.net.asic;
    }
    snprintf(net->name, sizeof(net->name), "%s", weft_xml_get(n, "name") ? weft_xml_get(n, "name") : "net");
    WEFT_CHECK(weft_topo_connect(nic, net, WEFT_LINK_NET, net->u.net.speed_bw));
    *total += net->u.net.speed_bw;
  }
  return ncclSuccess;
}

static ncclResult_t add_nic(struct build* b, struct weft_topo_node* parent, const struct weft_xml_node* pci,
                            const struct weft_xml_node* nicx, float bw) {
  struct weft_topo_node* nic;
  WEFT_CHECK(
      weft_topo_node_add(b->sys, WEFT_NODE_NIC, parent->host, pci ? node_id(b, pci) : b->fake_id++, &nic));
  nic->cpu = parent->type == WEFT_NODE_CPU ? parent->index : parent->cpu;
  snprintf(nic->name, sizeof(nic->name), "%s",
           pci && weft_xml_get(pci, "busid") ? weft_xml_get(pci, "busid") : "nic");
  float total = 0;
  if (nicx) WEFT_CHECK(add_nets(b, nic, nicx, &total));
  if (bw <= 0) bw = total > 12 ? total : 12; /* NIC without PCI data: do not let the link limit it */
  return weft_topo_connect(parent, nic, WEFT_LINK_PCI, bw);
}

static ncclResult_t add_gpu(struct build* b, struct weft_topo_node* parent, const struct weft_xml_node* pci,
                            float bw) {
  struct weft_topo_system* sys = b->sys;
  struct weft_topo_node* g;
  WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_GPU, parent->host, node_id(b, pci), &g));
  g->cpu = parent->type == WEFT_NODE_CPU ? parent->index : parent->cpu;
  snprintf(g->name, sizeof(g->name), "%s", weft_xml_get(pci, "busid") ? weft_xml_get(pci, "busid") : "gpu");
  struct weft_xml_node* gx = child_named(pci, "gpu");
  int nlocal = weft_topo_nlocal(sys, g->host) - 1;
  g->u.gpu.dev = gx ? (int)weft_xml_get_int(gx, "dev", nlocal) : nlocal;
  g->u.gpu.sm = gx ? (int)weft_xml_get_int(gx, "sm", 0) : 0;
  if (g->u.gpu.sm <= 0) g->u.gpu.sm = guess_sm(weft_xml_get_int(pci, "device", 0));
  g->u.gpu.gdr = gx ? (int)weft_xml_get_int(gx, "gdr", 1) : 1;
  /* p2p is Weft's attribute (NCCL asks the driver at run time); without it, the board's id says. */
  int p2p = weft_topo_gpu_p2p(weft_xml_get_int(pci, "device", 0));
  g->u.gpu.p2p = gx ? (int)weft_xml_get_int(gx, "p2p", p2p) != 0 : p2p;
  b->gpu_xml[g->index] = gx;
  b->rank_attr[g->index] = gx ? (int)weft_xml_get_int(gx, "rank", -1) : -1;
  return weft_topo_connect(parent, g, WEFT_LINK_PCI, bw);
}

static ncclResult_t add_pci(struct build* b, struct weft_topo_node* parent, const struct weft_xml_node* x);

static ncclResult_t add_children(struct build* b, struct weft_topo_node* parent,
                                 const struct weft_xml_node* x) {
  for (int i = 0; i < x->nchildren; i++) {
    const struct weft_xml_node* c = x->children[i];
    if (strcmp(c->name, "pci") == 0)
      WEFT_CHECK(add_pci(b, parent, c));
    else if (strcmp(c->name, "nic") == 0)
      WEFT_CHECK(add_nic(b, parent, NULL, c, 0));
  }
  return ncclSuccess;
}

static ncclResult_t add_pci(struct build* b, struct weft_topo_node* parent, const struct weft_xml_node* x) {
  long long cls = weft_xml_get_int(x, "class", -1);
  float bw = weft_topo_pci_bw(weft_xml_get(x, "link_speed"), (int)weft_xml_get_int(x, "link_width", 0));
  struct weft_xml_node* nicx = child_named(x, "nic");
  if (child_named(x, "gpu") || (cls >> 16) == 0x03) return add_gpu(b, parent, x, bw);
  if (nicx || (cls >> 16) == 0x02) return add_nic(b, parent, x, nicx, bw);
  if (x->nchildren == 0 && cls != 0x060400) {
    WEFT_INFO(WEFT_GRAPH, "topology line %d: PCI device %s of unknown use ignored", x->line,
              weft_xml_get(x, "busid") ? weft_xml_get(x, "busid") : "?");
    return ncclSuccess;
  }
  int64_t id = node_id(b, x);
  struct weft_topo_node* p = weft_topo_node_find(b->sys, WEFT_NODE_PCI, parent->host, id);
  if (p == NULL) {
    WEFT_CHECK(weft_topo_node_add(b->sys, WEFT_NODE_PCI, parent->host, id, &p));
    p->cpu = parent->type == WEFT_NODE_CPU ? parent->index : parent->cpu;
    snprintf(p->name, sizeof(p->name), "%s", weft_xml_get(x, "busid") ? weft_xml_get(x, "busid") : "pci");
    WEFT_CHECK(weft_topo_connect(parent, p, WEFT_LINK_PCI, bw));
  }
  return add_children(b, p, x);
}

static ncclResult_t add_cpu(struct build* b, const struct weft_xml_node* x) {
  struct weft_topo_system* sys = b->sys;
  int host = host_of(sys, weft_xml_get(x, "host_hash"));
  int64_t numa = weft_xml_get_int(x, "numaid", -1);
  if (numa < 0) numa = weft_xml_get_int(x, "id", sys->count[WEFT_NODE_CPU]);
  struct weft_topo_node* c = weft_topo_node_find(sys, WEFT_NODE_CPU, host, numa);
  if (c == NULL) {
    WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_CPU, host, numa, &c));
    c->cpu = c->index;
    c->u.cpu.arch = cpu_arch(weft_xml_get(x, "arch"));
    c->u.cpu.vendor = cpu_vendor(weft_xml_get(x, "vendor"));
    c->u.cpu.model = (int)weft_xml_get_int(x, "modelid", 0);
    snprintf(c->name, sizeof(c->name), "%lld", (long long)numa);
  }
  return add_children(b, c, x);
}

static ncclResult_t get_nvs(struct weft_topo_system* sys, int host, struct weft_topo_node** out) {
  for (int i = 0; i < sys->count[WEFT_NODE_NVS]; i++)
    if (sys->nodes[WEFT_NODE_NVS][i].host == host) {
      *out = &sys->nodes[WEFT_NODE_NVS][i];
      return ncclSuccess;
    }
  WEFT_CHECK(weft_topo_node_add(sys, WEFT_NODE_NVS, host, 0, out));
  snprintf((*out)->name, sizeof((*out)->name), "nvswitch");
  return ncclSuccess;
}

static ncclResult_t add_nvlink(struct build* b, struct weft_topo_node* g, const struct weft_xml_node* l) {
  struct weft_topo_system* sys = b->sys;
  const char* target = weft_xml_get(l, "target");
  int64_t tid = weft_topo_busid_parse(target);
  long long tclass = weft_xml_get_int(l, "tclass", -1);
  int count = (int)weft_xml_get_int(l, "count", 1);
  if (count <= 0) return ncclSuccess;
  float bw = count * weft_topo_nvlink_bw(g->u.gpu.sm);
  if (tid == g->id) {
    WEFT_INFO(WEFT_GRAPH, "topology line %d: NVLink of GPU %s targets itself, ignored", l->line, g->name);
    return ncclSuccess;
  }
  struct weft_topo_node* peer = tid >= 0 ? weft_topo_node_find(sys, WEFT_NODE_GPU, g->host, tid) : NULL;
  if (peer) return weft_topo_connect_one(g, peer, WEFT_LINK_NVL, bw); /* the peer lists the reverse */
  if (tclass == 0x068001 && g->cpu >= 0)
    return weft_topo_connect(g, &sys->nodes[WEFT_NODE_CPU][g->cpu], WEFT_LINK_NVL, bw);
  if ((tclass >> 16) == 0x03) {
    WEFT_INFO(WEFT_GRAPH, "topology line %d: NVLink target GPU %s not in the file, ignored", l->line,
              target ? target : "?");
    return ncclSuccess;
  }
  struct weft_topo_node* nvs;
  WEFT_CHECK(get_nvs(sys, g->host, &nvs));
  return weft_topo_connect(g, nvs, WEFT_LINK_NVL, bw);
}

static ncclResult_t add_gpu_links(struct build* b, struct weft_topo_node* g) {
  const struct weft_xml_node* gx = b->gpu_xml[g->index];
  if (gx == NULL) return ncclSuccess;
  for (int i = 0; i < gx->nchildren; i++) {
    const struct weft_xml_node* l = gx->children[i];
    if (strcmp(l->name, "nvlink") == 0) {
      WEFT_CHECK(add_nvlink(b, g, l));
    } else if (strcmp(l->name, "c2c") == 0 && g->cpu >= 0) {
      float bw = (float)(weft_xml_get_double(l, "bw", 0) * weft_xml_get_int(l, "count", 1) / 1000.0);
      if (bw > 0) WEFT_CHECK(weft_topo_connect(g, &b->sys->nodes[WEFT_NODE_CPU][g->cpu], WEFT_LINK_C2C, bw));
    }
  }
  return ncclSuccess;
}

/* Each CPU's memory as the resource staged traffic shares: half its bandwidth, since every
 * staged byte is written and then read. */
static void set_memory(struct weft_topo_system* sys) {
  for (int i = 0; i < sys->count[WEFT_NODE_CPU]; i++) {
    struct weft_topo_node* c = &sys->nodes[WEFT_NODE_CPU][i];
    int nodes = 0;
    for (int j = 0; j < sys->count[WEFT_NODE_CPU]; j++) nodes += sys->nodes[WEFT_NODE_CPU][j].host == c->host;
    c->mem.type = WEFT_LINK_LOC;
    c->mem.remote = c;
    c->mem.bw = c->mem.bw_full = weft_topo_mem_bw(c->u.cpu.arch, c->u.cpu.vendor, c->u.cpu.model, nodes) / 2;
  }
}

/* Graph files name GPUs by dev: repeated devs on a host become the local ranks. */
static void unique_devs(struct weft_topo_system* sys, int h) {
  struct weft_topo_node* g = sys->nodes[WEFT_NODE_GPU];
  int dup = 0;
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++)
    for (int j = i + 1; j < sys->count[WEFT_NODE_GPU]; j++)
      dup |= g[i].host == h && g[j].host == h && g[i].u.gpu.dev == g[j].u.gpu.dev;
  if (!dup) return;
  WEFT_INFO(WEFT_GRAPH, "topology: GPU dev numbers repeat on host %d, using local ranks instead", h);
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++)
    if (g[i].host == h) g[i].u.gpu.dev = g[i].u.gpu.rank;
}

/* Local ranks 0..n-1 per host: by the file's rank attribute when present, else in file order. */
static void assign_ranks(struct build* b) {
  struct weft_topo_system* sys = b->sys;
  for (int h = 0; h < sys->nhosts; h++) {
    int local = 0;
    for (;;) {
      int best = -1;
      for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
        struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
        if (g->host != h || g->u.gpu.rank >= 0) continue;
        unsigned key = (unsigned)b->rank_attr[i];
        if (best < 0 || key < (unsigned)b->rank_attr[best]) best = i;
      }
      if (best < 0) break;
      sys->nodes[WEFT_NODE_GPU][best].u.gpu.rank = local++;
    }
    unique_devs(sys, h);
  }
}

ncclResult_t weft_topo_from_xml(struct weft_topo_system* sys) {
  struct weft_xml_node* root = sys->xml;
  if (root == NULL || strcmp(root->name, "system") != 0) {
    WEFT_WARN("topology XML line %d: top element is <%s>, expected <system>", root ? root->line : 0,
              root ? root->name : "");
    return ncclInvalidUsage;
  }
  struct build* b = calloc(1, sizeof(*b));
  if (b == NULL) {
    WEFT_WARN("topology: out of memory");
    return ncclSystemError;
  }
  b->sys = sys;
  b->fake_id = (int64_t)1 << 60;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < root->nchildren && res == ncclSuccess; i++)
    if (strcmp(root->children[i]->name, "cpu") == 0) res = add_cpu(b, root->children[i]);
  for (int i = 0; i < sys->count[WEFT_NODE_GPU] && res == ncclSuccess; i++) {
    sys->nodes[WEFT_NODE_GPU][i].u.gpu.rank = -1;
    res = add_gpu_links(b, &sys->nodes[WEFT_NODE_GPU][i]);
  }
  /* CPUs of one host are joined by the inter-socket link. */
  for (int i = 0; i < sys->count[WEFT_NODE_CPU] && res == ncclSuccess; i++)
    for (int j = i + 1; j < sys->count[WEFT_NODE_CPU] && res == ncclSuccess; j++) {
      struct weft_topo_node *a = &sys->nodes[WEFT_NODE_CPU][i], *c = &sys->nodes[WEFT_NODE_CPU][j];
      if (a->host != c->host) continue;
      float bw = weft_topo_sys_bw(a->u.cpu.arch, a->u.cpu.vendor, a->u.cpu.model);
      res = weft_topo_connect(a, c, WEFT_LINK_SYS, bw);
    }
  if (res == ncclSuccess) set_memory(sys);
  if (res == ncclSuccess) assign_ranks(b);
  free(b);
  return res;
}

ncclResult_t weft_topo_load_text(const char* text, size_t len, const char* what,
                                 struct weft_topo_system** out) {
  struct weft_topo_system* sys;
  *out = NULL;
  WEFT_CHECK(weft_topo_system_alloc(&sys));
  ncclResult_t res = weft_xml_parse(text, len, what, &sys->xml);
  if (res == ncclSuccess && strcmp(sys->xml->name, "system") != 0) {
    WEFT_WARN("topology %s line %d: top element is <%s>, expected <system>", what ? what : "", sys->xml->line,
              sys->xml->name);
    res = ncclInvalidUsage;
  }
  if (res == ncclSuccess) res = weft_topo_from_xml(sys);
  if (res != ncclSuccess) {
    weft_topo_system_destroy(sys);
    return res;
  }
  WEFT_INFO(WEFT_GRAPH, "Loaded topology %s: %d GPUs, %d CPUs, %d NICs, %d NETs, %d host(s)",
            what ? what : "", sys->count[WEFT_NODE_GPU], sys->count[WEFT_NODE_CPU], sys->count[WEFT_NODE_NIC],
            sys->count[WEFT_NODE_NET], sys->nhosts);
  *out = sys;
  return ncclSuccess;
}
