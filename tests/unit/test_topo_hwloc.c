/* Detection through hwloc: an hwloc XML file (tests/data/hwloc) becomes the same model NCCL's XML
 * would (NUMA cpusets, PCI switch chain with link speeds, GPUs, NICs with their RDMA and netdev
 * names); WEFT_HWLOC_XML / HWLOC_XMLFILE select it; on this machine hwloc and sysfs give the same
 * model; host ranks are spread over synthetic topologies' NUMA nodes by allowed CPUs; bad input
 * is a clear error. Skips when libhwloc.so.15 is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/topo.h"
#include "util/hwloc.h"
#include "util/log.h"

#define XML_FILE "tests/data/hwloc/2socket-switch-gpu-nic.xml"

static struct weft_topo_node* net_named(struct weft_topo_system* sys, const char* name) {
  for (int i = 0; i < sys->count[WEFT_NODE_NET]; i++)
    if (strcmp(sys->nodes[WEFT_NODE_NET][i].name, name) == 0) return &sys->nodes[WEFT_NODE_NET][i];
  return NULL;
}

/* Hops from a GPU up to its CPU, each a PCI link of bandwidth bw. */
static int pci_hops_to_cpu(struct weft_topo_node* n, float bw) {
  int hops = 0;
  while (n && n->type != WEFT_NODE_CPU && hops < 10) {
    struct weft_topo_node* up = NULL;
    for (int l = 0; l < n->nlinks; l++) {
      struct weft_topo_node* r = n->links[l].remote;
      if (n->links[l].type != WEFT_LINK_PCI || (r->type != WEFT_NODE_PCI && r->type != WEFT_NODE_CPU))
        continue;
      if (fabsf(n->links[l].bw_full - bw) > 0.01f) return -1;
      if (r->type == WEFT_NODE_CPU || r->nlinks > 0) up = r;
      /* the parent is the one listed first: links are added parent to child */
      if (up) break;
    }
    n = up;
    hops++;
  }
  return n ? hops : -1;
}

static const char* cpu_attr(struct weft_topo_system* sys, int numa, const char* name) {
  for (int i = 0; i < sys->xml->nchildren; i++)
    if (weft_xml_get_int(sys->xml->children[i], "numaid", -1) == numa)
      return weft_xml_get(sys->xml->children[i], name);
  return NULL;
}

static void check_xml_model(struct weft_topo_system* sys) {
  EXPECT_EQ_INT(sys->count[WEFT_NODE_CPU], 2);
  EXPECT_EQ_INT(sys->count[WEFT_NODE_GPU], 2);
  EXPECT_EQ_INT(sys->count[WEFT_NODE_NIC], 2);
  EXPECT_EQ_INT(sys->count[WEFT_NODE_NET], 3);
  EXPECT_EQ_INT(sys->count[WEFT_NODE_PCI], 6); /* 2 root ports + switch up/2 down on socket 0, 2 root ports */
  if (sys->count[WEFT_NODE_CPU] != 2 || sys->count[WEFT_NODE_GPU] != 2) return;
  /* cpusets: the allowed CPUs only (CPU 7 is disallowed in the file), Sapphire Rapids ids */
  const char* aff0 = cpu_attr(sys, 0, "affinity");
  const char* aff1 = cpu_attr(sys, 1, "affinity");
  EXPECT(aff0 && strcmp(aff0, "0000000f") == 0);
  EXPECT(aff1 && strcmp(aff1, "00000070") == 0);
  EXPECT_EQ_INT(sys->nodes[WEFT_NODE_CPU][0].u.cpu.model, 143);
  EXPECT_EQ_INT(sys->nodes[WEFT_NODE_CPU][0].u.cpu.vendor, WEFT_CPU_VENDOR_INTEL);
  /* GPU 0 behind the switch: GPU -> down port -> up port -> root port -> CPU, Gen4 x16 = 24 GB/s */
  struct weft_topo_node* g0 = &sys->nodes[WEFT_NODE_GPU][0];
  struct weft_topo_node* g1 = &sys->nodes[WEFT_NODE_GPU][1];
  EXPECT(strcmp(g0->name, "0000:03:00.0") == 0 && g0->u.gpu.sm == 90);
  EXPECT_EQ_INT(pci_hops_to_cpu(g0, 24.0f), 4);
  EXPECT(strcmp(g1->name, "0000:81:00.0") == 0);
  EXPECT_EQ_INT(pci_hops_to_cpu(g1, 24.0f), 2);
  EXPECT_EQ_INT(sys->nodes[WEFT_NODE_CPU][g1->cpu].id, 1);
  /* NICs: RDMA devices first (gdr), then netdevs in name order (as the sysfs path numbers them):
   * eth2 of the Ethernet NIC on socket 1 at Gen3 x16, then ib0 of the ConnectX */
  struct weft_topo_node *mlx = net_named(sys, "mlx5_0"), *ib = net_named(sys, "ib0"),
                        *eth = net_named(sys, "eth2");
  EXPECT(mlx && mlx->u.net.dev == 0 && mlx->u.net.gdr == 1);
  EXPECT(eth && eth->u.net.dev == 1 && eth->u.net.gdr == 0);
  EXPECT(ib && ib->u.net.dev == 2 && ib->u.net.gdr == 0);
  if (mlx) EXPECT_EQ_INT(sys->nodes[WEFT_NODE_CPU][mlx->cpu].id, 0);
  if (eth) EXPECT_EQ_INT(sys->nodes[WEFT_NODE_CPU][eth->cpu].id, 1);
  struct weft_topo_node* nic1 = &sys->nodes[WEFT_NODE_NIC][1];
  EXPECT(nic1->nlinks > 0 && fabsf(nic1->links[0].bw_full - 12.0f) < 0.01f);
}

static char* dump(struct weft_topo_system* sys) {
  char* t = NULL;
  EXPECT(sys && weft_topo_dump_string(sys, &t) == ncclSuccess);
  return t;
}

static void check_xml_inputs(void) {
  struct weft_topo_system *direct = NULL, *by_env = NULL, *by_hwloc_env = NULL;
  EXPECT(weft_topo_detect_hwloc(WEFT_HWLOC_XML, XML_FILE, &direct) == ncclSuccess);
  if (direct) check_xml_model(direct);
  setenv("WEFT_HWLOC_XML", XML_FILE, 1);
  EXPECT(weft_topo_detect(&by_env) == ncclSuccess);
  unsetenv("WEFT_HWLOC_XML");
  setenv("HWLOC_XMLFILE", XML_FILE, 1);
  EXPECT(weft_topo_detect(&by_hwloc_env) == ncclSuccess);
  unsetenv("HWLOC_XMLFILE");
  char *a = dump(direct), *b = dump(by_env), *c = dump(by_hwloc_env);
  EXPECT(a && b && c && strcmp(a, b) == 0 && strcmp(a, c) == 0);
  /* The XML it made loads back (as NCCL_TOPO_FILE would) to the same graph. */
  struct weft_topo_system* again = NULL;
  EXPECT(a && weft_topo_load_text(a, strlen(a), "hwloc-made", &again) == ncclSuccess);
  if (again) check_xml_model(again);
  free(a), free(b), free(c);
  weft_topo_system_destroy(again);
  weft_topo_system_destroy(direct);
  weft_topo_system_destroy(by_env);
  weft_topo_system_destroy(by_hwloc_env);
}

/* On this machine hwloc and sysfs must describe the same graph (cpuset text aside). */
static void check_this_machine(void) {
  struct weft_topo_system *hw = NULL, *fs = NULL;
  char *dh = NULL, *ds = NULL;
  setenv("WEFT_TOPO_DETECT", "hwloc", 1);
  EXPECT(weft_topo_detect(&hw) == ncclSuccess);
  setenv("WEFT_TOPO_DETECT", "sysfs", 1);
  EXPECT(weft_topo_detect(&fs) == ncclSuccess);
  unsetenv("WEFT_TOPO_DETECT");
  EXPECT(hw && weft_topo_describe(hw, &dh) == ncclSuccess);
  EXPECT(fs && weft_topo_describe(fs, &ds) == ncclSuccess);
  EXPECT_MSG(dh && ds && strcmp(dh, ds) == 0, "hwloc:\n%s\nsysfs:\n%s", dh ? dh : "", ds ? ds : "");
  EXPECT(hw && hw->count[WEFT_NODE_CPU] >= 1);
  free(dh), free(ds);
  weft_topo_system_destroy(hw);
  weft_topo_system_destroy(fs);
}

static void check_placement(void) {
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_detect_hwloc(WEFT_HWLOC_SYNTHETIC, "pack:2 numa:2 core:4 pu:2", &sys) == ncclSuccess);
  if (sys == NULL) return;
  EXPECT_EQ_INT(sys->count[WEFT_NODE_CPU], 4);
  int numa[16];
  EXPECT(weft_topo_place_host_ranks(sys, 0, 8, NULL, numa) == ncclSuccess);
  for (int r = 0; r < 8; r++) EXPECT_EQ_INT(numa[r], r / 2);
  /* Allowed: NUMA node 1 (CPUs 8-15) whole, and one CPU of node 3: 8 ranks as 7 + 1. */
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  for (int c = 8; c < 16; c++) CPU_SET(c, &allowed);
  CPU_SET(30, &allowed);
  EXPECT(weft_topo_place_host_ranks(sys, 0, 9, &allowed, numa) == ncclSuccess);
  for (int r = 0; r < 9; r++) EXPECT_EQ_INT(numa[r], r < 8 ? 1 : 3);
  EXPECT(weft_topo_add_host_ranks(sys, 0, 9, numa, 5) == ncclSuccess);
  CPU_ZERO(&allowed);
  CPU_SET(200, &allowed); /* a CPU the machine does not have */
  EXPECT(weft_topo_place_host_ranks(sys, 0, 2, &allowed, numa) == ncclInvalidUsage);
  EXPECT(weft_topo_place_host_ranks(sys, 0, 0, NULL, numa) == ncclInvalidArgument);
  weft_topo_system_destroy(sys);
}

static void check_bad_input(void) {
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_detect_hwloc(WEFT_HWLOC_XML, "tests/data/hwloc/no-such-file.xml", &sys) ==
         ncclInvalidArgument);
  EXPECT(strstr(weft_log_last_error(), "no-such-file.xml") != NULL);
  EXPECT(weft_topo_detect_hwloc(WEFT_HWLOC_SYNTHETIC, "pack:2 bogus:x", &sys) == ncclInvalidArgument);
  EXPECT(weft_topo_detect_hwloc(WEFT_HWLOC_SYNTHETIC, "", &sys) == ncclInvalidArgument);
  EXPECT(weft_topo_detect_hwloc(7, "x", &sys) == ncclInvalidArgument && sys == NULL);
  setenv("WEFT_HOSTID", "x", 1);
  setenv("WEFT_TOPO_DETECT", "lstopo", 1);
  EXPECT(weft_topo_detect(&sys) == ncclInvalidArgument && sys == NULL);
  EXPECT(strstr(weft_log_last_error(), "WEFT_TOPO_DETECT=lstopo") != NULL);
  unsetenv("WEFT_TOPO_DETECT");
  setenv("WEFT_HWLOC_XML", "tests/data/hwloc/no-such-file.xml", 1);
  EXPECT(weft_topo_detect(&sys) == ncclInvalidArgument && sys == NULL); /* no silent fallback */
  unsetenv("WEFT_HWLOC_XML");
}

int main(void) {
  const char* why;
  setenv("NCCL_DEBUG", "WARN", 0);
  if (!weft_hwloc_available(&why)) test_skip(why);
  check_xml_inputs();
  check_this_machine();
  check_placement();
  check_bad_input();
  return test_finish("test_topo_hwloc");
}
