/* Hundreds to a thousand host ranks on one host (weftrun -n 256, thread ranks): the model places
 * them, rings list every rank once with each NUMA node's ranks together, trees are trees, paths
 * read the same as a small host's, and the tuning model answers. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/topo.h"

static struct weft_topo_system* load(void) {
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_load_file("tests/data/topo/cpu-2numa-2nic.xml", &sys) == ncclSuccess);
  return sys;
}

/* Every channel lists every local rank once; returns how often a channel changes NUMA node. */
static int ring_valid(struct weft_topo_system* sys, const struct weft_topo_graph* g, int n) {
  int changes = -1;
  char* seen = malloc((size_t)n);
  EXPECT(g->nlocal == n && g->nchannels >= 1 && g->intra != NULL);
  for (int c = 0; c < g->nchannels && seen; c++) {
    const int* row = weft_topo_graph_row(g, c);
    int k = 0;
    memset(seen, 0, (size_t)n);
    for (int i = 0; i < n; i++) {
      EXPECT_MSG(row[i] >= 0 && row[i] < n && !seen[row[i]], "channel %d position %d: rank %d", c, i, row[i]);
      if (row[i] < 0 || row[i] >= n || seen[row[i]]) break;
      seen[row[i]] = 1;
      k += weft_topo_rank_path(sys, 0, row[i], row[(i + 1) % n], NULL) != WEFT_PATH_LOC;
    }
    if (changes < 0) changes = k;
  }
  free(seen);
  return changes;
}

/* Rings: next/prev are inverse permutations forming one cycle; trees: one root per channel, every
 * other rank's parent lists it as a child, the root is reached from every rank. */
static void channels_valid(const struct weft_topo_channels* ch) {
  int n = ch->nranks;
  for (int c = 0; c < ch->nchannels; c++) {
    const int *next = &ch->ring_next[c * n], *prev = &ch->ring_prev[c * n], *up = &ch->tree_up[c * n];
    int len = 0, x = 0, roots = 0, bad = 0;
    do {
      bad += prev[next[x]] != x;
      x = next[x];
      len++;
    } while (x != 0 && len <= n);
    EXPECT_MSG(len == n && bad == 0, "channel %d: ring of %d of %d ranks, %d bad links", c, len, n, bad);
    for (int r = 0; r < n; r++) {
      if (up[r] < 0) {
        roots++;
        continue;
      }
      const int* d = &ch->tree_down[(c * n + up[r]) * 3];
      bad += d[0] != r && d[1] != r && d[2] != r;
    }
    EXPECT_MSG(roots == 1 && bad == 0, "channel %d: %d tree roots, %d parents missing a child", c, roots,
               bad);
  }
  EXPECT(ch->tree_depth >= 1 && ch->tree_depth < n);
}

static void check(int n, int nnodes) {
  struct weft_topo_system* sys = load();
  if (sys == NULL) return;
  int* numa = malloc(sizeof(int) * (size_t)n);
  EXPECT(weft_topo_place_host_ranks(sys, 0, n, NULL, numa) == ncclSuccess);
  EXPECT(numa[0] == 0 && numa[n - 1] == 1); /* two equal NUMA nodes: half each */
  /* Interleave the NUMA nodes (thread ranks land where the scheduler runs them): the ring must
   * still keep each node's ranks together. */
  for (int r = 0; r < n; r++) numa[r] = r % 2;
  EXPECT_MSG(weft_topo_add_host_ranks(sys, 0, n, numa, 10.0f) == ncclSuccess, "%d host ranks", n);
  EXPECT_EQ_INT(weft_topo_nlocal(sys, 0), n);
  EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 2, NULL), WEFT_PATH_LOC);
  EXPECT_EQ_INT(weft_topo_rank_path(sys, 0, 0, 1, NULL), WEFT_PATH_SYS);
  float bw = 0;
  EXPECT(weft_topo_rank_path(sys, 0, 1, 3, &bw) == WEFT_PATH_LOC && bw > 9.99f && bw < 10.01f);
  struct weft_topo_graph ring, tree;
  EXPECT_MSG(weft_topo_search_all(sys, 0, nnodes, &ring, &tree) == ncclSuccess, "%d ranks x %d", n, nnodes);
  int changes = ring_valid(sys, &ring, n);
  ring_valid(sys, &tree, n);
  /* The ring (read round, closing hop included) leaves each of the two NUMA nodes once. */
  EXPECT_MSG(changes == 2, "%d ranks x %d nodes: ring changes NUMA node %d times", n, nnodes, changes);
  EXPECT(ring.bw_intra > 0.1f && ring.bw_intra <= 10.01f && ring.type_intra == WEFT_PATH_SYS);
  EXPECT(nnodes == 1 || (ring.inter && ring.bw_inter > 0.1f && ring.inter_net[0][0] >= 0));
  struct weft_topo_channels* ch = NULL;
  EXPECT(weft_topo_connect_channels(&ring, &tree, nnodes, &ch) == ncclSuccess);
  if (ch) {
    EXPECT_EQ_INT(ch->nranks, n * nnodes);
    channels_valid(ch);
  }
  struct weft_tuning tun;
  struct weft_tuning_input in = {.arch = WEFT_ARCH_HOST,
                                 .nranks = n * nnodes,
                                 .nnodes = nnodes,
                                 .nchannels = ch ? ch->nchannels : 1,
                                 .ring = &ring,
                                 .tree = &tree,
                                 .host_copy_bw = 10.0f,
                                 .env_given = 1};
  EXPECT(weft_tuning_init(&tun, &in) == ncclSuccess);
  struct weft_tuning_choice small, big;
  EXPECT(weft_tuning_choose(&tun, WEFT_FUNC_ALLREDUCE, 8, &small) == ncclSuccess && small.time_us > 0);
  EXPECT(weft_tuning_choose(&tun, WEFT_FUNC_ALLREDUCE, 1 << 30, &big) == ncclSuccess &&
         big.time_us > small.time_us);
  EXPECT(weft_tuning_choose(&tun, WEFT_FUNC_ALLGATHER, 1 << 20, &small) == ncclSuccess &&
         small.busbw_gbs > 0);
  weft_topo_channels_destroy(ch);
  weft_topo_graph_fini(&ring);
  weft_topo_graph_fini(&tree);
  free(numa);
  weft_topo_system_destroy(sys);
}

int main(void) {
  check(65, 1);
  check(256, 1);
  check(1024, 1);
  check(256, 2);
  check(1024, 4);
  return test_finish("test_graph_scale");
}
