/* Detection from a fake sysfs tree (WEFT_TOPO_SYSFS): NUMA nodes, CPU model, a NIC with its PCI
 * bridge and speed on the right NUMA node, an NVIDIA GPU, virtual interfaces ignored; and the
 * real machine's detection gives a usable CPU/NIC graph. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "graph/topo.h"

static char root[256];

static void mkdirs(const char* rel) {
  char p[512];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  for (char* s = p + strlen(root) + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(p, 0755);
      *s = '/';
    }
  mkdir(p, 0755);
}

static void put(const char* rel, const char* text) {
  char p[512];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  char dir[512];
  snprintf(dir, sizeof(dir), "%s", rel);
  char* slash = strrchr(dir, '/');
  if (slash) {
    *slash = 0;
    mkdirs(dir);
  }
  FILE* f = fopen(p, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static void link_to(const char* rel, const char* target) {
  char p[512], dir[512];
  snprintf(dir, sizeof(dir), "%s", rel);
  *strrchr(dir, '/') = 0;
  mkdirs(dir);
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  EXPECT(symlink(target, p) == 0);
}

static void pci(const char* rel, const char* cls, const char* vendor, const char* device, const char* numa) {
  char p[512];
  const char* files[][2] = {{"class", cls},
                            {"vendor", vendor},
                            {"device", device},
                            {"numa_node", numa},
                            {"max_link_speed", "16.0 GT/s PCIe"},
                            {"max_link_width", "16"}};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    snprintf(p, sizeof(p), "%s/%s", rel, files[i][0]);
    put(p, files[i][1]);
  }
}

static void build_tree(void) {
  put("sys/devices/system/node/node0/cpumap", "0000ffff\n");
  put("sys/devices/system/node/node1/cpumap", "ffff0000\n");
  put("proc/cpuinfo",
      "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
      "model name\t: Fake\n");
  const char* br = "sys/devices/pci0000:80/0000:80:01.0";
  pci(br, "0x060400", "0x8086", "0x1234", "1");
  pci("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", "0x020000", "0x15b3", "0x101b", "1");
  put("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/net/eth5/speed", "100000\n");
  link_to("sys/class/net/eth5", "../../devices/pci0000:80/0000:80:01.0/0000:81:00.0/net/eth5");
  put("sys/devices/virtual/net/veth0/speed", "10000\n");
  link_to("sys/class/net/veth0", "../../devices/virtual/net/veth0");
  pci("sys/devices/pci0000:00/0000:00:02.0", "0x060400", "0x8086", "0x1235", "0");
  pci("sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0", "0x030200", "0x10de", "0x20b0", "0");
  link_to("sys/bus/pci/devices/0000:02:00.0", "../../../devices/pci0000:00/0000:00:02.0/0000:02:00.0");
}

static void check_fake(void) {
  setenv("WEFT_TOPO_SYSFS", root, 1);
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_detect(&sys) == ncclSuccess);
  unsetenv("WEFT_TOPO_SYSFS");
  if (sys == NULL) return;
  EXPECT_EQ_INT(sys->count[WEFT_NODE_CPU], 2);
  EXPECT_EQ_INT(sys->count[WEFT_NODE_NET], 1); /* veth0 is virtual */
  EXPECT_EQ_INT(sys->count[WEFT_NODE_GPU], 1);
  struct weft_topo_node* cpu0 = &sys->nodes[WEFT_NODE_CPU][0];
  EXPECT_EQ_INT(cpu0->u.cpu.model, 143);
  EXPECT(cpu0->nlinks > 0);
  int sys_ok = 0;
  for (int l = 0; l < cpu0->nlinks; l++)
    sys_ok |= cpu0->links[l].type == WEFT_LINK_SYS && fabsf(cpu0->links[l].bw_full - 22) < 0.01f; /* SPR */
  EXPECT(sys_ok);
  if (sys->count[WEFT_NODE_NET] == 1) {
    struct weft_topo_node* net = &sys->nodes[WEFT_NODE_NET][0];
    EXPECT(strcmp(net->name, "eth5") == 0 && fabsf(net->u.net.speed_bw - 12.5f) < 0.01f);
    EXPECT_EQ_INT(sys->nodes[WEFT_NODE_CPU][net->cpu].id, 1); /* NUMA node of the NIC */
  }
  if (sys->count[WEFT_NODE_GPU] == 1) EXPECT_EQ_INT(sys->nodes[WEFT_NODE_GPU][0].u.gpu.sm, 80);
  EXPECT_EQ_INT(sys->count[WEFT_NODE_PCI], 2);
  /* The detected XML dumps and loads back to the same graph. */
  char *t1 = NULL, *t2 = NULL;
  struct weft_topo_system* again = NULL;
  EXPECT(weft_topo_dump_string(sys, &t1) == ncclSuccess);
  EXPECT(t1 && weft_topo_load_text(t1, strlen(t1), "detected", &again) == ncclSuccess);
  EXPECT(again && weft_topo_dump_string(again, &t2) == ncclSuccess && strcmp(t1, t2) == 0);
  for (int t = 0; again && t < WEFT_NODE_TYPES; t++) EXPECT_EQ_INT(again->count[t], sys->count[t]);
  free(t1);
  free(t2);
  weft_topo_system_destroy(again);
  weft_topo_system_destroy(sys);
}

static int nets_shared(const char* sysfs, const char* hostid, uint64_t* host_hash) {
  setenv("WEFT_TOPO_SYSFS", sysfs, 1);
  setenv("WEFT_HOSTID", hostid, 1);
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_detect_shared(&sys) == ncclSuccess);
  unsetenv("WEFT_TOPO_SYSFS");
  unsetenv("WEFT_HOSTID");
  if (sys == NULL) return -1;
  int n = sys->count[WEFT_NODE_NET];
  *host_hash = sys->host_hash[0];
  weft_topo_system_destroy(sys);
  return n;
}

/* Communicators detect once per process: a second detection under the same settings builds the
 * model from the first one's tree (the NIC removed in between is still there), with its own host
 * hash; other settings detect again. */
static void check_shared(void) {
  char net[300], alt[300];
  uint64_t h1 = 0, h2 = 0, h3 = 0;
  snprintf(net, sizeof(net), "%s/sys/class/net/eth5", root);
  snprintf(alt, sizeof(alt), "%s/.", root);
  EXPECT_EQ_INT(nets_shared(root, "host-a", &h1), 1);
  EXPECT(unlink(net) == 0);
  EXPECT_EQ_INT(nets_shared(root, "host-b", &h2), 1);
  EXPECT(h1 != h2);
  EXPECT_EQ_INT(nets_shared(alt, "host-a", &h3), 0);
  EXPECT(h3 == h1);
  link_to("sys/class/net/eth5", "../../devices/pci0000:80/0000:80:01.0/0000:81:00.0/net/eth5");
}

static void check_real(void) {
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_detect(&sys) == ncclSuccess);
  if (sys == NULL) return;
  EXPECT(sys->count[WEFT_NODE_CPU] >= 1);
  if (weft_topo_nlocal(sys, 0) == 0) {
    int numa[2] = {0, 0};
    struct weft_topo_graph* g = malloc(sizeof(*g));
    EXPECT(weft_topo_add_host_ranks(sys, 0, 2, numa, 5) == ncclSuccess);
    EXPECT(weft_topo_search(sys, 0, 1, WEFT_PATTERN_RING, g) == ncclSuccess && g->nchannels >= 1);
    weft_topo_graph_fini(g);
    free(g);
  }
  /* NCCL_TOPO_DUMP_FILE through the communicator entry point. */
  char dump[300];
  snprintf(dump, sizeof(dump), "%s/dump.xml", root);
  setenv("NCCL_TOPO_DUMP_FILE", dump, 1);
  struct weft_topo_system* s2 = NULL;
  EXPECT(weft_topo_get_system(&s2) == ncclSuccess);
  unsetenv("NCCL_TOPO_DUMP_FILE");
  setenv("NCCL_TOPO_FILE", dump, 1);
  struct weft_topo_system* s3 = NULL;
  EXPECT(weft_topo_get_system(&s3) == ncclSuccess);
  EXPECT(s3 && s3->count[WEFT_NODE_CPU] == sys->count[WEFT_NODE_CPU]);
  unsetenv("NCCL_TOPO_FILE");
  weft_topo_system_destroy(s2);
  weft_topo_system_destroy(s3);
  weft_topo_system_destroy(sys);
}

int main(void) {
  setenv("NCCL_DEBUG", "WARN", 0);
  snprintf(root, sizeof(root), "/tmp/weft-detect-XXXXXX");
  if (mkdtemp(root) == NULL) test_skip("cannot create a temporary directory");
  build_tree();
  check_fake();
  check_shared();
  check_real();
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return test_finish("test_topo_detect");
}
