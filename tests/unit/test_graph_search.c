/* Ring and tree search on the fixtures: expected channel counts and bandwidths (what the links
 * allow, reasons inline), NVLink use, socket crossings, graph file round trip, host ranks. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/topo.h"

#define FIX "tests/data/topo/"

static struct weft_topo_system* load(const char* name) {
  char path[512];
  snprintf(path, sizeof(path), FIX "%s", name);
  struct weft_topo_system* sys = NULL;
  EXPECT_MSG(weft_topo_load_file(path, &sys) == ncclSuccess, "loading %s", name);
  return sys;
}

static int near(float a, float b) { return fabsf(a - b) < 0.01f; }

/* Each channel lists each local rank exactly once. */
static int channels_valid(const struct weft_topo_graph* g) {
  for (int c = 0; c < g->nchannels; c++) {
    char seen[256] = {0};
    for (int i = 0; i < g->nlocal; i++) {
      int r = weft_topo_graph_row(g, c)[i];
      if (r < 0 || r >= g->nlocal || r >= (int)sizeof(seen) || seen[r]) return 0;
      seen[r] = 1;
    }
  }
  return g->nchannels > 0;
}

/* Socket crossings of one ring channel (hops whose path is SYS). */
static int sys_hops(struct weft_topo_system* sys, const struct weft_topo_graph* g, int c) {
  int n = 0;
  for (int i = 0; i < g->nlocal; i++)
    n += weft_topo_rank_path(sys, 0, weft_topo_graph_row(g, c)[i],
                             weft_topo_graph_row(g, c)[(i + 1) % g->nlocal], NULL) == WEFT_PATH_SYS;
  return n;
}

struct expect {
  const char* file;
  int nnodes, nch;
  float bw;
  int type_intra; /* worst path type inside the node */
  const char* why;
};

static const struct expect cases[] = {
    {"a100-nvswitch-8gpu-8nic.xml", 1, 12, 20, WEFT_PATH_NVL,
     "6 channels x 40 GB/s fill the 240 GB/s NVSwitch link (12 x 20), then split in two (>= 25 GB/s)"},
    {"h100-nvswitch-8gpu-8nic.xml", 1, 12, 30, WEFT_PATH_NVL,
     "6 x 60 GB/s fit in 18 x 20.6 = 370.8 GB/s (7 would not), split in two since 60 >= 50"},
    {"v100-hybrid-cube-mesh-8gpu.xml", 1, 6, 20, WEFT_PATH_NVL,
     "6 NVLinks of 20 GB/s per GPU, no Hamiltonian ring on doubled links only: 6 rings x 20"},
    {"nvlink-bridge-2gpu.xml", 1, 12, 20, WEFT_PATH_NVL, "240 GB/s bridge: 6 x 40, split in two"},
    {"pcie-4gpu-1switch.xml", 1, 2, 12, WEFT_PATH_PIX,
     "PCIe Gen4 x16 = 24 GB/s per GPU: 2 x 12 (20 fits once)"},
    {"pcie-8gpu-2switch-2socket.xml", 1, 1, 10, WEFT_PATH_SYS,
     "the ring crosses the 10 GB/s Ice Lake socket link once each way: 1 x 10"},
    {"two-hosts-4gpu-nvswitch.xml", 1, 12, 30, WEFT_PATH_NVL, "like the H100 node: 6 x 60 split in two"},
    {"a100-nvswitch-8gpu-8nic.xml", 2, 8, 24, WEFT_PATH_NVL,
     "8 NICs of 25 GB/s, each behind a 24 GB/s PCIe Gen4 link: one channel per NIC at 24"},
    {"h100-nvswitch-8gpu-8nic.xml", 2, 8, 48, WEFT_PATH_NVL,
     "8 NICs of 50 GB/s behind 48 GB/s PCIe Gen5 links"},
    {"v100-hybrid-cube-mesh-8gpu.xml", 2, 4, 12, WEFT_PATH_NVL,
     "4 NICs of 12.5 GB/s behind 12 GB/s PCIe Gen3"},
    {"pcie-4gpu-1switch.xml", 2, 1, 24, WEFT_PATH_PIX, "one 25 GB/s NIC; in and out each use a 24 GB/s link"},
    {"pcie-8gpu-2switch-2socket.xml", 2, 1, 10, WEFT_PATH_SYS, "the socket link (10 GB/s) is still crossed"},
    {"two-hosts-4gpu-nvswitch.xml", 2, 8, 24, WEFT_PATH_NVL,
     "4 NICs of 50 GB/s behind 48 GB/s PCIe Gen5: 4 x 48, split in two (>= 25 GB/s, only 4 channels)"},
};

static void check_case(const struct expect* e) {
  struct weft_topo_system* sys = load(e->file);
  if (!sys) return;
  struct weft_topo_graph *ring = malloc(sizeof(*ring)), *tree = malloc(sizeof(*tree));
  EXPECT(weft_topo_search_all(sys, 0, e->nnodes, ring, tree) == ncclSuccess);
  EXPECT_MSG(ring->nchannels == e->nch && near(ring->bw_intra, e->bw),
             "%s x%d: %d x %.2f, expected %d x %.2f (%s)", e->file, e->nnodes, ring->nchannels,
             ring->bw_intra, e->nch, e->bw, e->why);
  EXPECT_MSG(ring->type_intra == e->type_intra, "%s x%d: ring type %s", e->file, e->nnodes,
             weft_topo_path_name(ring->type_intra));
  EXPECT(channels_valid(ring));
  EXPECT(channels_valid(tree));
  EXPECT_EQ_INT(ring->inter, e->nnodes > 1);
  if (e->nnodes > 1) {
    EXPECT_MSG(ring->type_inter <= WEFT_PATH_PXB || e->type_intra == WEFT_PATH_SYS, "%s: NIC path %s",
               e->file, weft_topo_path_name(ring->type_inter));
    for (int c = 0; c < ring->nchannels; c++)
      EXPECT(ring->inter_net[c][0] >= 0 && ring->inter_net[c][1] >= 0);
  }
  /* A ring leaves a socket once and comes back once when GPUs of a socket can reach each other. */
  if (e->nnodes == 1 && e->type_intra == WEFT_PATH_SYS)
    for (int c = 0; c < ring->nchannels; c++) EXPECT_EQ_INT(sys_hops(sys, ring, c), 2);
  /* Graph file round trip keeps every channel. */
  const struct weft_topo_graph* gs[2] = {ring, tree};
  char *t1 = NULL, *t2 = NULL;
  EXPECT(weft_topo_graphs_to_string(sys, 0, gs, 2, &t1) == ncclSuccess);
  struct weft_topo_graph *r2 = malloc(sizeof(*r2)), *tr2 = malloc(sizeof(*tr2));
  EXPECT(weft_topo_graph_copy(r2, ring) == ncclSuccess && weft_topo_graph_copy(tr2, tree) == ncclSuccess);
  size_t cells = (size_t)ring->nchannels * ring->nlocal;
  memset(r2->intra, 0, cells * sizeof(int));
  struct weft_topo_graph* back[2] = {r2, tr2};
  EXPECT(t1 && weft_topo_graphs_from_string(sys, 0, t1, strlen(t1), back, 2) == ncclSuccess);
  EXPECT(memcmp(r2->intra, ring->intra, cells * sizeof(int)) == 0 && r2->nchannels == ring->nchannels);
  const struct weft_topo_graph* gs2[2] = {r2, tr2};
  EXPECT(weft_topo_graphs_to_string(sys, 0, gs2, 2, &t2) == ncclSuccess);
  EXPECT(t1 && t2 && strcmp(t1, t2) == 0);
  free(t1);
  free(t2);
  weft_topo_graph_fini(r2);
  weft_topo_graph_fini(tr2);
  weft_topo_graph_fini(ring);
  weft_topo_graph_fini(tree);
  free(r2);
  free(tr2);
  free(ring);
  free(tree);
  weft_topo_system_destroy(sys);
}

static void check_paths(void) {
  struct weft_topo_system* sys = load("v100-hybrid-cube-mesh-8gpu.xml");
  if (sys) {
    float bw;
    EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 3, &bw), WEFT_PATH_NVL);
    EXPECT(near(bw, 40));
    EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 5, &bw), WEFT_PATH_NVB); /* via GPU 1 or 4 */
    setenv("NCCL_NVB_DISABLE", "1", 1);
    weft_topo_compute_paths(sys);
    EXPECT(weft_topo_rank_path(sys, 0, 0, 5, &bw) >= WEFT_PATH_PHB);
    unsetenv("NCCL_NVB_DISABLE");
    weft_topo_system_destroy(sys);
  }
  /* PXN: GPU 1 reaches NIC 0 (under GPU 0's switch) through GPU 0 over NVLink, not the CPU. */
  sys = load("h100-nvswitch-8gpu-8nic.xml");
  if (sys) {
    EXPECT(weft_topo_compute_paths(sys) == ncclSuccess);
    struct weft_topo_node* g1 = weft_topo_rank_node(sys, 0, 1);
    struct weft_topo_node* g0 = weft_topo_rank_node(sys, 0, 0);
    EXPECT_EQ_INT(g1->paths[WEFT_NODE_NET][0].type, WEFT_PATH_PXN);
    EXPECT(near(g1->paths[WEFT_NODE_NET][0].bw, 48));
    EXPECT_EQ_INT(g0->paths[WEFT_NODE_NET][0].type, WEFT_PATH_PIX);
    setenv("NCCL_PXN_DISABLE", "1", 1);
    EXPECT(weft_topo_compute_paths(sys) == ncclSuccess);
    EXPECT_EQ_INT(g1->paths[WEFT_NODE_NET][0].type, WEFT_PATH_PHB);
    unsetenv("NCCL_PXN_DISABLE");
    weft_topo_system_destroy(sys);
  }
  /* P2C: a GPU with a C2C link to its CPU reaches a NIC behind that CPU over C2C. */
  const char* c2c =
      "<system version=\"1\"><cpu numaid=\"0\" arch=\"arm64\"><pci busid=\"0000:01:00.0\" "
      "class=\"0x030200\"><gpu dev=\"0\" sm=\"90\"><c2c bw=\"40000\" count=\"10\"/></gpu></pci>"
      "<pci busid=\"0000:02:00.0\" class=\"0x020000\"><nic><net name=\"n\" dev=\"0\" "
      "speed=\"400000\" gdr=\"1\"/></nic></pci></cpu></system>";
  sys = NULL;
  EXPECT(weft_topo_load_text(c2c, strlen(c2c), "c2c", &sys) == ncclSuccess);
  if (sys) {
    EXPECT(weft_topo_compute_paths(sys) == ncclSuccess);
    setenv("NCCL_NET_GDR_LEVEL", "P2C", 1);
    EXPECT(weft_topo_compute_paths(sys) == ncclSuccess);
    EXPECT_EQ_INT(sys->nodes[WEFT_NODE_GPU][0].paths[WEFT_NODE_NET][0].type, WEFT_PATH_P2C);
    unsetenv("NCCL_NET_GDR_LEVEL");
    weft_topo_system_destroy(sys);
  }
  sys = load("pcie-8gpu-2switch-2socket.xml");
  if (sys) {
    EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 1, NULL), WEFT_PATH_PIX);
    EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 4, NULL), WEFT_PATH_SYS);
    weft_topo_system_destroy(sys);
  }
}

static void check_host_ranks(void) {
  struct weft_topo_system* sys = load("cpu-2numa-2nic.xml");
  if (!sys) return;
  int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT(weft_topo_add_host_ranks(sys, 0, 8, numa, 10.0f) == ncclSuccess);
  struct weft_topo_graph *ring = malloc(sizeof(*ring)), *tree = malloc(sizeof(*tree));
  EXPECT(weft_topo_search_all(sys, 0, 1, ring, tree) == ncclSuccess);
  /* One rank copies at 10 GB/s: one channel at 10; the ring crosses the socket twice. */
  EXPECT_MSG(ring->nchannels == 1 && near(ring->bw_intra, 10), "host ring %d x %.2f", ring->nchannels,
             ring->bw_intra);
  EXPECT(channels_valid(ring));
  EXPECT_EQ_INT(sys_hops(sys, ring, 0), 2);
  EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 1, NULL), WEFT_PATH_LOC);
  EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 5, NULL), WEFT_PATH_SYS);
  /* Multi-node host ranks leave through the NICs (200G under socket 0, 25G under socket 1). */
  weft_topo_graph_fini(ring);
  EXPECT(weft_topo_search(sys, 0, 2, WEFT_PATTERN_RING, ring) == ncclSuccess);
  EXPECT(ring->nchannels >= 1 && ring->bw_inter > 0.1f && channels_valid(ring));
  EXPECT(weft_topo_add_host_ranks(sys, 0, 2, NULL, 10) == ncclInvalidUsage); /* already placed */
  weft_topo_graph_fini(ring);
  free(ring);
  weft_topo_graph_fini(tree);
  free(tree);
  weft_topo_system_destroy(sys);
  /* Host backend on a GPU machine: the CPUs carry the ranks, the GPUs are left out. */
  sys = load("pcie-8gpu-2switch-2socket.xml");
  ring = malloc(sizeof(*ring));
  tree = malloc(sizeof(*tree));
  int numa3[3] = {0, 1, 1};
  EXPECT(sys && weft_topo_add_host_ranks(sys, 0, 3, numa3, 6.0f) == ncclSuccess);
  EXPECT(sys && weft_topo_nlocal(sys, 0) == 3);
  EXPECT(sys && weft_topo_search_all(sys, 0, 1, ring, tree) == ncclSuccess);
  EXPECT(ring->nlocal == 3 && ring->nchannels == 1 && near(ring->bw_intra, 6) && channels_valid(ring));
  weft_topo_graph_fini(ring);
  free(ring);
  weft_topo_graph_fini(tree);
  free(tree);
  weft_topo_system_destroy(sys);
}

static void check_channel_limits(void) {
  struct weft_topo_system* sys = load("a100-nvswitch-8gpu-8nic.xml");
  if (!sys) return;
  struct weft_topo_graph* g = malloc(sizeof(*g));
  setenv("NCCL_MAX_NCHANNELS", "4", 1);
  EXPECT(weft_topo_search(sys, 0, 1, WEFT_PATTERN_RING, g) == ncclSuccess);
  EXPECT_MSG(g->nchannels <= 4 && g->nchannels >= 1, "max 4 channels gave %d", g->nchannels);
  unsetenv("NCCL_MAX_NCHANNELS");
  setenv("NCCL_CROSS_NIC", "0", 1);
  weft_topo_graph_fini(g);
  EXPECT(weft_topo_search(sys, 0, 2, WEFT_PATTERN_RING, g) == ncclSuccess);
  for (int c = 0; c < g->nchannels; c++) EXPECT(g->inter_net[c][0] == g->inter_net[c][1]);
  unsetenv("NCCL_CROSS_NIC");
  weft_topo_graph_fini(g);
  free(g);
  weft_topo_system_destroy(sys);
}

/* Real machines' files (when present): every search and channel build is valid. */
static void check_real_files(void) {
  const char* dir = getenv("WEFT_TOPO_REAL_DIR") ? getenv("WEFT_TOPO_REAL_DIR") : "../shared/data/topo-real";
  DIR* d = opendir(dir);
  if (d == NULL) {
    printf("real-file directory %s absent: skipped\n", dir);
    return;
  }
  struct dirent* e;
  int n = 0;
  struct weft_topo_graph *ring = calloc(1, sizeof(*ring)), *tree = calloc(1, sizeof(*tree));
  while ((e = readdir(d)) != NULL) {
    if (!strstr(e->d_name, ".xml")) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    struct weft_topo_system* sys = NULL;
    EXPECT_MSG(weft_topo_load_file(path, &sys) == ncclSuccess, "%s", path);
    if (sys == NULL || weft_topo_nlocal(sys, 0) == 0) {
      weft_topo_system_destroy(sys);
      continue;
    }
    for (int nodes = 1; nodes <= 4; nodes *= 2) {
      struct weft_topo_channels* ch = NULL;
      EXPECT_MSG(weft_topo_search_all(sys, 0, nodes, ring, tree) == ncclSuccess, "%s x%d", path, nodes);
      EXPECT_MSG(channels_valid(ring) && channels_valid(tree), "%s x%d", path, nodes);
      EXPECT(weft_topo_connect_channels(ring, tree, nodes, &ch) == ncclSuccess && ch);
      weft_topo_channels_destroy(ch);
      weft_topo_graph_fini(ring);
      weft_topo_graph_fini(tree);
    }
    /* NVLink machines keep their rings on NVLink. */
    int nvl = 0;
    for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++)
      for (int l = 0; l < sys->nodes[WEFT_NODE_GPU][i].nlinks; l++)
        nvl |= sys->nodes[WEFT_NODE_GPU][i].links[l].type == WEFT_LINK_NVL &&
               sys->nodes[WEFT_NODE_GPU][i].links[l].remote->type == WEFT_NODE_NVS;
    if (nvl) {
      EXPECT(weft_topo_search_all(sys, 0, 1, ring, tree) == ncclSuccess);
      EXPECT_MSG(ring->type_intra == WEFT_PATH_NVL, "%s: ring type %s", path,
                 weft_topo_path_name(ring->type_intra));
      weft_topo_graph_fini(ring);
      weft_topo_graph_fini(tree);
    }
    weft_topo_system_destroy(sys);
    n++;
  }
  closedir(d);
  weft_topo_graph_fini(ring);
  free(ring);
  weft_topo_graph_fini(tree);
  free(tree);
  printf("searched %d real files\n", n);
}

int main(void) {
  setenv("NCCL_DEBUG", "WARN", 0);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_case(&cases[i]);
  check_paths();
  check_host_ranks();
  check_channel_limits();
  check_real_files();
  return test_finish("test_graph_search");
}
