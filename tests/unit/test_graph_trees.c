/* Double binary trees and communicator channels: every rank once per ring and per tree, trees
 * binary across nodes, depth bounded, complementary leaves, NCCL's tree shape. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/topo.h"

static int ilog2_ceil(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

/* Tree t over n nodes: one root, parents and children agree, all nodes reachable. */
static void check_dtree(int n) {
  int interior[2][256] = {{0}};
  for (int t = 0; t < 2; t++) {
    int roots = 0;
    for (int r = 0; r < n; r++) {
      int p, a, b;
      weft_topo_dtree(n, r, t, &p, &a, &b);
      if (p < 0)
        roots++;
      else {
        int pp, pa, pb;
        weft_topo_dtree(n, p, t, &pp, &pa, &pb);
        EXPECT_MSG(pa == r || pb == r, "n=%d tree %d: %d's parent %d does not list it", n, t, r, p);
      }
      interior[t][r] = a >= 0 || b >= 0;
      int depth = 0;
      for (int x = r; depth <= n; depth++) {
        int q, c0, c1;
        weft_topo_dtree(n, x, t, &q, &c0, &c1);
        if (q < 0) break;
        x = q;
      }
      EXPECT_MSG(depth <= ilog2_ceil(n), "n=%d tree %d rank %d depth %d", n, t, r, depth);
    }
    EXPECT_EQ_INT(roots, 1);
  }
  /* Complementary: at most one node (two for odd n) has children in both trees. */
  int both = 0;
  for (int r = 0; r < n; r++) both += interior[0][r] && interior[1][r];
  EXPECT_MSG(both <= (n % 2 ? 2 : 1) || n <= 2, "n=%d: %d nodes interior in both trees", n, both);
}

static void check_shape(void) {
  /* NCCL's in-order tree over 16 nodes: root 0 -> 8, 8 -> {4, 12}, 4 -> {2, 6}, 2 -> {1, 3}. */
  int p, a, b;
  weft_topo_dtree(16, 0, 0, &p, &a, &b);
  EXPECT(p == -1 && a == -1 && b == 8);
  weft_topo_dtree(16, 8, 0, &p, &a, &b);
  EXPECT(p == 0 && a == 4 && b == 12);
  weft_topo_dtree(16, 4, 0, &p, &a, &b);
  EXPECT(p == 8 && a == 2 && b == 6);
  weft_topo_dtree(16, 3, 0, &p, &a, &b);
  EXPECT(p == 2 && a == -1 && b == -1);
  /* Tree 1 mirrors tree 0 for even n: 15 is the root. */
  weft_topo_dtree(16, 15, 1, &p, &a, &b);
  EXPECT(p == -1 && b == 7);
}

static void check_channels(const char* file, int nnodes) {
  char path[256];
  snprintf(path, sizeof(path), "tests/data/topo/%s", file);
  struct weft_topo_system* sys = NULL;
  if (weft_topo_load_file(path, &sys) != ncclSuccess) {
    EXPECT_MSG(0, "load %s", file);
    return;
  }
  struct weft_topo_graph *ring = malloc(sizeof(*ring)), *tree = malloc(sizeof(*tree));
  struct weft_topo_channels* ch = NULL;
  EXPECT(weft_topo_search_all(sys, 0, nnodes, ring, tree) == ncclSuccess);
  EXPECT(weft_topo_connect_channels(ring, tree, nnodes, &ch) == ncclSuccess);
  if (ch) {
    int n = ch->nranks, L = ch->nlocal;
    EXPECT_EQ_INT(n, nnodes * L);
    EXPECT_EQ_INT(ch->nchannels,
                  ring->nchannels * 2 > WEFT_MAX_CHANNELS ? WEFT_MAX_CHANNELS : ring->nchannels * 2);
    for (int c = 0; c < ch->nchannels; c++) {
      char* seen = calloc(n, 1);
      EXPECT_EQ_INT(ch->ring[c * n], 0);
      for (int i = 0; i < n; i++) {
        int r = ch->ring[c * n + i];
        EXPECT(r >= 0 && r < n && !seen[r]);
        if (r >= 0 && r < n) seen[r] = 1;
        EXPECT_EQ_INT(ch->ring_next[c * n + r], ch->ring[c * n + (i + 1) % n]);
        EXPECT_EQ_INT(ch->ring_prev[ch->ring_next[c * n + r] + c * n], r);
      }
      /* Tree: one root, each rank's parent lists it as a child, children across nodes <= 2. */
      int roots = 0;
      for (int r = 0; r < n; r++) {
        int up = ch->tree_up[c * n + r], remote = 0;
        if (up < 0)
          roots++;
        else {
          int found = 0;
          for (int k = 0; k < 3; k++) found += ch->tree_down[(c * n + up) * 3 + k] == r;
          EXPECT_EQ_INT(found, 1);
        }
        for (int k = 0; k < 3; k++) {
          int d = ch->tree_down[(c * n + r) * 3 + k];
          if (d >= 0) {
            EXPECT_EQ_INT(ch->tree_up[c * n + d], r);
            remote += d / L != r / L;
          }
        }
        EXPECT(remote <= 2);
      }
      EXPECT_EQ_INT(roots, 1);
      free(seen);
    }
    /* Depth: the chain inside a node plus one hop per tree level (two for split placement). */
    int per_level = tree->pattern == WEFT_PATTERN_TREE ? 1 : 2;
    EXPECT_MSG(ch->tree_depth <= (L - 1) + per_level * ilog2_ceil(nnodes), "%s x%d: depth %d", file, nnodes,
               ch->tree_depth);
  }
  weft_topo_channels_destroy(ch);
  weft_topo_graph_fini(ring);
  free(ring);
  weft_topo_graph_fini(tree);
  free(tree);
  weft_topo_system_destroy(sys);
}

int main(void) {
  setenv("NCCL_DEBUG", "WARN", 0);
  for (int n = 1; n <= 130; n++) check_dtree(n);
  check_shape();
  const char* files[] = {"a100-nvswitch-8gpu-8nic.xml", "h100-nvswitch-8gpu-8nic.xml",
                         "pcie-4gpu-1switch.xml", "v100-hybrid-cube-mesh-8gpu.xml", "cpu-2numa-2nic.xml"};
  int nodes[] = {1, 2, 3, 5, 8, 16};
  for (size_t f = 0; f < 4; f++)
    for (size_t k = 0; k < sizeof(nodes) / sizeof(nodes[0]); k++) check_channels(files[f], nodes[k]);
  (void)files[4];
  /* NCCL_MIN/MAX_NCHANNELS clamp the communicator's channels. */
  setenv("NCCL_MAX_NCHANNELS", "3", 1);
  struct weft_topo_graph* g = calloc(1, sizeof(*g));
  g->nchannels = 4;
  EXPECT(weft_topo_graph_alloc(g, 2) == ncclSuccess);
  for (int c = 0; c < 4; c++) {
    weft_topo_graph_row(g, c)[0] = 0;
    weft_topo_graph_row(g, c)[1] = 1;
  }
  struct weft_topo_channels* ch = NULL;
  EXPECT(weft_topo_connect_channels(g, NULL, 3, &ch) == ncclSuccess && ch && ch->nchannels == 3);
  weft_topo_channels_destroy(ch);
  unsetenv("NCCL_MAX_NCHANNELS");
  setenv("NCCL_MIN_NCHANNELS", "20", 1);
  EXPECT(weft_topo_connect_channels(g, NULL, 3, &ch) == ncclSuccess && ch && ch->nchannels == 20);
  weft_topo_channels_destroy(ch);
  unsetenv("NCCL_MIN_NCHANNELS");
  weft_topo_graph_fini(g);
  free(g);
  return test_finish("test_graph_trees");
}
