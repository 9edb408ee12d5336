/* Topology XML: fixtures load into the expected nodes and links, dump -> load -> dump is a fixed
 * point, malformed input fails with a line number, and real machines' files load. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/topo.h"
#include "util/log.h"

#define FIX "tests/data/topo/"

static struct weft_topo_system* load(const char* name) {
  char path[512];
  snprintf(path, sizeof(path), FIX "%s", name);
  struct weft_topo_system* sys = NULL;
  ncclResult_t r = weft_topo_load_file(path, &sys);
  EXPECT_MSG(r == ncclSuccess && sys, "loading %s", name);
  return sys;
}

static const struct weft_topo_link* link_to(const struct weft_topo_node* a, int type, int index) {
  for (int i = 0; i < a->nlinks; i++)
    if (a->links[i].remote->type == type && a->links[i].remote->index == index) return &a->links[i];
  return NULL;
}

static int near(float a, float b) { return fabsf(a - b) < 0.01f; }

struct expect {
  const char* file;
  int gpu, cpu, nic, net, nvs, hosts;
  float gpu_nvs_bw; /* 0: no NVSwitch */
};

static void check_counts(void) {
  /* NVSwitch bandwidth = links x per-link rate of the GPU generation: A100 12 x 20, H100 18 x 20.6. */
  static const struct expect ex[] = {
      {"a100-nvswitch-8gpu-8nic.xml", 8, 2, 8, 8, 1, 1, 240.0f},
      {"h100-nvswitch-8gpu-8nic.xml", 8, 2, 8, 8, 1, 1, 370.8f},
      {"v100-hybrid-cube-mesh-8gpu.xml", 8, 2, 4, 4, 0, 1, 0},
      {"pcie-8gpu-2switch-2socket.xml", 8, 2, 1, 1, 0, 1, 0},
      {"pcie-4gpu-1switch.xml", 4, 1, 1, 1, 0, 1, 0},
      {"nvlink-bridge-2gpu.xml", 2, 1, 0, 0, 0, 1, 0},
      {"two-hosts-4gpu-nvswitch.xml", 8, 2, 8, 8, 2, 2, 370.8f},
      {"cpu-2numa-2nic.xml", 0, 2, 2, 2, 0, 1, 0},
  };
  for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
    struct weft_topo_system* sys = load(ex[i].file);
    if (!sys) continue;
    EXPECT_EQ_INT(sys->count[WEFT_NODE_GPU], ex[i].gpu);
    EXPECT_EQ_INT(sys->count[WEFT_NODE_CPU], ex[i].cpu);
    EXPECT_EQ_INT(sys->count[WEFT_NODE_NIC], ex[i].nic);
    EXPECT_EQ_INT(sys->count[WEFT_NODE_NET], ex[i].net);
    EXPECT_EQ_INT(sys->count[WEFT_NODE_NVS], ex[i].nvs);
    EXPECT_EQ_INT(sys->nhosts, ex[i].hosts);
    if (ex[i].gpu_nvs_bw > 0) {
      const struct weft_topo_link* l = link_to(&sys->nodes[WEFT_NODE_GPU][0], WEFT_NODE_NVS, 0);
      EXPECT_MSG(l && near(l->bw_full, ex[i].gpu_nvs_bw), "%s: GPU0->NVS bw %.1f", ex[i].file,
                 l ? l->bw_full : -1);
    }
    /* Local ranks are 0..n-1 on every host. */
    for (int h = 0; h < sys->nhosts; h++)
      for (int r = 0; r < weft_topo_nlocal(sys, h); r++) EXPECT(weft_topo_rank_node(sys, h, r) != NULL);
    weft_topo_system_destroy(sys);
  }
}

static void check_links(void) {
  struct weft_topo_system* sys = load("v100-hybrid-cube-mesh-8gpu.xml");
  if (sys) {
    struct weft_topo_node* g = sys->nodes[WEFT_NODE_GPU];
    /* Doubled pair 0-3 = 2 x 20 GB/s, single pair 0-1 = 20, pair 0-5 not linked. */
    const struct weft_topo_link* l03 = link_to(&g[0], WEFT_NODE_GPU, 3);
    const struct weft_topo_link* l01 = link_to(&g[0], WEFT_NODE_GPU, 1);
    EXPECT(l03 && near(l03->bw_full, 40) && l03->type == WEFT_LINK_NVL);
    EXPECT(l01 && near(l01->bw_full, 20));
    EXPECT(link_to(&g[0], WEFT_NODE_GPU, 5) == NULL);
    /* PCIe Gen3 x16 = 16 x 60 / 80 = 12 GB/s; Skylake (model 85) socket link 10 GB/s. */
    const struct weft_topo_link* up = NULL;
    for (int i = 0; i < g[0].nlinks; i++)
      if (g[0].links[i].type == WEFT_LINK_PCI) up = &g[0].links[i];
    EXPECT(up && near(up->bw_full, 12));
    const struct weft_topo_link* s = link_to(&sys->nodes[WEFT_NODE_CPU][0], WEFT_NODE_CPU, 1);
    EXPECT(s && s->type == WEFT_LINK_SYS && near(s->bw_full, 10));
    weft_topo_system_destroy(sys);
  }
  sys = load("nvlink-bridge-2gpu.xml");
  if (sys) {
    const struct weft_topo_link* l = link_to(&sys->nodes[WEFT_NODE_GPU][0], WEFT_NODE_GPU, 1);
    EXPECT(l && near(l->bw_full, 240));
    weft_topo_system_destroy(sys);
  }
  /* A NIC straight under a CPU: linked to that CPU; 25 Gb/s port = 3.125 GB/s. */
  sys = load("cpu-2numa-2nic.xml");
  if (sys) {
    struct weft_topo_node* nic = &sys->nodes[WEFT_NODE_NIC][1];
    EXPECT(link_to(nic, WEFT_NODE_CPU, 1) != NULL);
    EXPECT(near(sys->nodes[WEFT_NODE_NET][1].u.net.speed_bw, 3.125f));
    weft_topo_system_destroy(sys);
  }
}

static int fixed_point(const char* path) {
  struct weft_topo_system *a = NULL, *b = NULL;
  char *t1 = NULL, *t2 = NULL;
  int ok = 0;
  if (weft_topo_load_file(path, &a) != ncclSuccess) goto out;
  if (weft_topo_dump_string(a, &t1) != ncclSuccess) goto out;
  if (weft_topo_load_text(t1, strlen(t1), "dump", &b) != ncclSuccess) goto out;
  if (weft_topo_dump_string(b, &t2) != ncclSuccess) goto out;
  ok = strcmp(t1, t2) == 0;
  for (int t = 0; t < WEFT_NODE_TYPES; t++) ok = ok && a->count[t] == b->count[t];
  for (int t = 0; t < WEFT_NODE_TYPES && ok; t++)
    for (int i = 0; i < a->count[t]; i++) ok = ok && a->nodes[t][i].nlinks == b->nodes[t][i].nlinks;
out:
  free(t1);
  free(t2);
  weft_topo_system_destroy(a);
  weft_topo_system_destroy(b);
  return ok;
}

static void check_dir(const char* dir, int* nfiles) {
  DIR* d = opendir(dir);
  if (d == NULL) return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".xml") != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    EXPECT_MSG(fixed_point(path), "dump -> load -> dump of %s", path);
    struct weft_topo_system* sys = NULL;
    if (weft_topo_load_file(path, &sys) == ncclSuccess) {
      EXPECT_MSG(weft_topo_compute_paths(sys) == ncclSuccess, "paths of %s", path);
      weft_topo_system_destroy(sys);
    }
    (*nfiles)++;
  }
  closedir(d);
}

static void check_malformed(void) {
  static const struct {
    const char* text;
    int line;
  } bad[] = {
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n  </gpu>\n</system>\n", 3},
      {"<system version=\"1\">\n<cpu numaid=\"0\n", 2},
      {"<system>\n<!-- never closed\n", 2},
      {"", 1},
      {"<system></system><system></system>", 1},
      {"<system>\n\n<cpu numaid=0></cpu></system>", 3},
      {"<gpus><gpu/></gpus>", 1},
      {"<system><cpu>", 1},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct weft_topo_system* sys = (void*)1;
    ncclResult_t r = weft_topo_load_text(bad[i].text, strlen(bad[i].text), "bad.xml", &sys);
    EXPECT_MSG(r == ncclInvalidUsage && sys == NULL, "case %zu loads (%d)", i, (int)r);
    char want[32];
    snprintf(want, sizeof(want), "line %d", bad[i].line);
    const char* err = weft_log_last_error();
    EXPECT_MSG(err && strstr(err, want) && strstr(err, "bad.xml"), "case %zu error '%s' lacks '%s'", i,
               err ? err : "", want);
  }
  /* Lenient cases: comments everywhere, no trailing newline, empty and missing attributes. */
  const char* ok =
      "<?xml version=\"1.0\"?><!-- c --><system version='1'><!-- in -->"
      "<cpu numaid=\"0\" arch=\"\"><pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"\" "
      "link_width=\"0\"><gpu dev=\"0\"/></pci><pci busid=\"weird\"/></cpu></system><!-- end -->";
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_load_text(ok, strlen(ok), "ok.xml", &sys) == ncclSuccess);
  if (sys) {
    EXPECT_EQ_INT(sys->count[WEFT_NODE_GPU], 1);
    weft_topo_system_destroy(sys);
  }
}

/* Two ranks' partial views of one node fuse into the whole node. */
static void check_fuse(void) {
  const char* a =
      "<system version=\"1\"><cpu host_hash=\"0x1\" numaid=\"0\" vendor=\"GenuineIntel\" modelid=\"143\">"
      "<pci busid=\"0000:10:00.0\" class=\"0x060400\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">"
      "<pci busid=\"0000:11:00.0\" class=\"0x030200\" device=\"0x2330\"><gpu dev=\"0\" sm=\"90\" rank=\"0\">"
      "<nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"/></gpu></pci>"
      "<pci busid=\"0000:12:00.0\" class=\"0x020700\"><nic><net name=\"mlx5_0\" dev=\"0\" speed=\"400000\"/>"
      "</nic></pci></pci></cpu></system>";
  const char* b =
      "<system version=\"1\"><cpu host_hash=\"0x1\" numaid=\"0\" vendor=\"GenuineIntel\" modelid=\"143\">"
      "<pci busid=\"0000:10:00.0\" class=\"0x060400\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">"
      "<pci busid=\"0000:13:00.0\" class=\"0x030200\" device=\"0x2330\"><gpu dev=\"1\" sm=\"90\" rank=\"1\">"
      "<nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"/></gpu></pci>"
      "<pci busid=\"0000:12:00.0\" class=\"0x020700\"><nic><net name=\"mlx5_0\" dev=\"0\" speed=\"400000\"/>"
      "</nic></pci></pci></cpu></system>";
  const char* texts[2] = {a, b};
  size_t lens[2] = {strlen(a), strlen(b)};
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_fuse_text(texts, lens, 2, &sys) == ncclSuccess);
  if (sys) {
    EXPECT_EQ_INT(sys->count[WEFT_NODE_GPU], 2);
    EXPECT_EQ_INT(sys->count[WEFT_NODE_PCI], 1);
    EXPECT_EQ_INT(sys->count[WEFT_NODE_NET], 1); /* the shared NIC once */
    EXPECT_EQ_INT(sys->count[WEFT_NODE_NVS], 1);
    EXPECT_EQ_INT(weft_topo_nlocal(sys, 0), 2);
    weft_topo_system_destroy(sys);
  }
  const char* bad[2] = {a, "<graphs/>"};
  size_t badlens[2] = {strlen(a), 9};
  EXPECT(weft_topo_fuse_text(bad, badlens, 2, &sys) == ncclInvalidUsage && sys == NULL);
}

int main(void) {
  setenv("NCCL_DEBUG", "WARN", 0);
  check_counts();
  check_links();
  check_malformed();
  check_fuse();
  int nfix = 0, nreal = 0;
  check_dir("tests/data/topo", &nfix);
  EXPECT(nfix >= 8);
  const char* real = getenv("WEFT_TOPO_REAL_DIR") ? getenv("WEFT_TOPO_REAL_DIR") : "../shared/data/topo-real";
  check_dir(real, &nreal);
  printf("fixtures %d, real files %d%s\n", nfix, nreal,
         nreal ? "" : " (real-file directory absent: skipped)");
  return test_finish("test_topo_xml");
}
