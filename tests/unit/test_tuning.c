/* Tuning model: NCCL_ALGO / NCCL_PROTO syntax, predictions that grow with size and approach the
 * graph's bandwidth, choices that follow the model and the overrides, host-backend use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/graph.h"

static const char* const algos[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                    "NVLSTree", "PAT"};
static const char* const protos[] = {"LL", "LL128", "Simple"};
#define BIT(x) (1u << (x))

static void check_parse(void) {
  unsigned m;
  EXPECT(weft_tuning_parse_list(NULL, algos, 7, WEFT_FUNC_ALLREDUCE, &m) == ncclSuccess && m == 0x7f);
  EXPECT(weft_tuning_parse_list("ring,tree", algos, 7, WEFT_FUNC_ALLREDUCE, &m) == ncclSuccess &&
         m == (BIT(WEFT_ALGO_RING) | BIT(WEFT_ALGO_TREE)));
  EXPECT(weft_tuning_parse_list("RING", algos, 7, WEFT_FUNC_BROADCAST, &m) == ncclSuccess &&
         m == BIT(WEFT_ALGO_RING));
  EXPECT(weft_tuning_parse_list("^LL128", protos, 3, WEFT_FUNC_ALLREDUCE, &m) == ncclSuccess &&
         m == (BIT(WEFT_PROTO_LL) | BIT(WEFT_PROTO_SIMPLE)));
  EXPECT(weft_tuning_parse_list("^ll, simple", protos, 3, 0, &m) == ncclSuccess &&
         m == BIT(WEFT_PROTO_LL128));
  const char* per = "allreduce:tree;broadcast:ring";
  EXPECT(weft_tuning_parse_list(per, algos, 7, WEFT_FUNC_ALLREDUCE, &m) == ncclSuccess &&
         m == BIT(WEFT_ALGO_TREE));
  EXPECT(weft_tuning_parse_list(per, algos, 7, WEFT_FUNC_BROADCAST, &m) == ncclSuccess &&
         m == BIT(WEFT_ALGO_RING));
  EXPECT(weft_tuning_parse_list(per, algos, 7, WEFT_FUNC_ALLGATHER, &m) == ncclSuccess && m == 0x7f);
  EXPECT(weft_tuning_parse_list("ring;allreduce:^ring", algos, 7, WEFT_FUNC_ALLREDUCE, &m) == ncclSuccess &&
         m == (0x7fu & ~BIT(WEFT_ALGO_RING)));
  EXPECT(weft_tuning_parse_list("ring;allreduce:^ring", algos, 7, WEFT_FUNC_REDUCE, &m) == ncclSuccess &&
         m == BIT(WEFT_ALGO_RING));
  EXPECT(weft_tuning_parse_list("bogus", algos, 7, 0, &m) == ncclInvalidUsage);
  EXPECT(weft_tuning_parse_list("allreduce:tree;ring", algos, 7, 0, &m) == ncclInvalidUsage);
  EXPECT(weft_tuning_parse_list("allgathr:ring", algos, 7, 0, &m) == ncclInvalidUsage);
}

static struct weft_topo_graph* search(const char* file, int nnodes, struct weft_topo_graph** tree) {
  char path[256];
  snprintf(path, sizeof(path), "tests/data/topo/%s", file);
  struct weft_topo_system* sys = NULL;
  struct weft_topo_graph* ring = malloc(sizeof(*ring));
  *tree = malloc(sizeof(**tree));
  EXPECT(weft_topo_load_file(path, &sys) == ncclSuccess);
  EXPECT(sys && weft_topo_search_all(sys, 0, nnodes, ring, *tree) == ncclSuccess);
  weft_topo_system_destroy(sys);
  return ring;
}

static void init(struct weft_tuning* t, int arch, struct weft_topo_graph* ring, struct weft_topo_graph* tree,
                 int nnodes, float copy_bw) {
  struct weft_tuning_input in = {.arch = arch,
                                 .nranks = ring->nlocal * nnodes,
                                 .nnodes = nnodes,
                                 .nchannels = 2 * ring->nchannels,
                                 .ring = ring,
                                 .tree = tree,
                                 .host_copy_bw = copy_bw};
  EXPECT(weft_tuning_init(t, &in) == ncclSuccess);
}

static void check_gpu_model(void) {
  struct weft_topo_graph* tree;
  struct weft_topo_graph* ring = search("a100-nvswitch-8gpu-8nic.xml", 1, &tree);
  struct weft_tuning* t = malloc(sizeof(*t));
  init(t, WEFT_ARCH_AMPERE, ring, tree, 1, 0);
  /* Time grows with size for every enabled pair. */
  for (int f = 0; f < WEFT_FUNC_COUNT; f++)
    for (int a = 0; a < WEFT_ALGO_COUNT; a++)
      for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
        float prev = 0;
        for (size_t b = 8; b <= ((size_t)1 << 32); b *= 8) {
          float us = weft_tuning_predict(t, f, a, p, b, 8, 1, t->in.nchannels);
          if (!t->enabled[f][a][p]) {
            EXPECT(us < 0);
            break;
          }
          EXPECT_MSG(us > prev, "%s/%s/%s not increasing at %zu", weft_func_name(f), algos[a], protos[p], b);
          prev = us;
        }
      }
  /* Only ring for broadcast; tree only for all-reduce; LL128 allowed inside an NVLink node. */
  EXPECT(!t->enabled[WEFT_FUNC_BROADCAST][WEFT_ALGO_TREE][WEFT_PROTO_SIMPLE]);
  EXPECT(t->enabled[WEFT_FUNC_ALLREDUCE][WEFT_ALGO_TREE][WEFT_PROTO_SIMPLE]);
  EXPECT(t->enabled[WEFT_FUNC_ALLREDUCE][WEFT_ALGO_RING][WEFT_PROTO_LL128]);
  EXPECT(!t->enabled[WEFT_FUNC_ALLREDUCE][WEFT_ALGO_NVLS][WEFT_PROTO_SIMPLE]);
  /* At 1 GiB ring Simple runs at the graph's bandwidth: 12 channels x 20 GB/s = 240 bus GB/s. */
  float bus = weft_tuning_busbw(t, WEFT_FUNC_ALLREDUCE, WEFT_ALGO_RING, WEFT_PROTO_SIMPLE, (size_t)1 << 30, 8,
                                1, t->in.nchannels);
  EXPECT_MSG(bus > 235 && bus <= 240, "ring simple busbw %.1f", bus);
  /* Small messages: a low-latency protocol on few channels; large: Simple on all channels. */
  struct weft_tuning_choice c;
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_ALLREDUCE, 8, &c) == ncclSuccess);
  EXPECT(c.proto == WEFT_PROTO_LL && c.nchannels == 1 && c.time_us > 0);
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_ALLREDUCE, (size_t)1 << 30, &c) == ncclSuccess);
  EXPECT(c.proto == WEFT_PROTO_SIMPLE && c.algo == WEFT_ALGO_RING && c.nchannels == t->in.nchannels);
  /* The choice is the minimum of the predictions. */
  for (int a = 0; a < WEFT_ALGO_COUNT; a++)
    for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
      float us = weft_tuning_predict(t, WEFT_FUNC_ALLREDUCE, a, p, (size_t)1 << 30, 8, 1, t->in.nchannels);
      if (us > 0) EXPECT(us >= c.time_us - 1e-3f);
    }
  /* Overrides. */
  setenv("NCCL_ALGO", "allreduce:tree", 1);
  setenv("NCCL_PROTO", "^LL,LL128", 1);
  init(t, WEFT_ARCH_AMPERE, ring, tree, 1, 0);
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_ALLREDUCE, 8, &c) == ncclSuccess);
  EXPECT(c.algo == WEFT_ALGO_TREE && c.proto == WEFT_PROTO_SIMPLE);
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_BROADCAST, 8, &c) == ncclSuccess && c.algo == WEFT_ALGO_RING);
  setenv("NCCL_ALGO", "tree", 1);
  init(t, WEFT_ARCH_AMPERE, ring, tree, 1, 0);
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_BROADCAST, 8, &c) == ncclInvalidUsage); /* tree cannot broadcast */
  setenv("NCCL_ALGO", "nonsense", 1);
  struct weft_tuning_input in = {.arch = WEFT_ARCH_AMPERE, .nranks = 8, .nnodes = 1, .ring = ring};
  EXPECT(weft_tuning_init(t, &in) == ncclInvalidUsage);
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  weft_topo_graph_fini(ring);
  free(ring);
  weft_topo_graph_fini(tree);
  free(tree);
  /* Across nodes through a PCI path that crosses the CPU, LL128 is off (auto rule). */
  ring = search("pcie-8gpu-2switch-2socket.xml", 2, &tree);
  init(t, WEFT_ARCH_AMPERE, ring, tree, 2, 0);
  EXPECT(!t->enabled[WEFT_FUNC_ALLREDUCE][WEFT_ALGO_RING][WEFT_PROTO_LL128]);
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_ALLGATHER, (size_t)1 << 30, &c) == ncclSuccess);
  EXPECT(c.algo == WEFT_ALGO_RING && c.busbw_gbs > 0 &&
         c.busbw_gbs <= ring->nchannels * ring->bw_inter + 1e-3f);
  weft_topo_graph_fini(ring);
  free(ring);
  weft_topo_graph_fini(tree);
  free(tree);
  free(t);
}

static void check_host_model(void) {
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_load_file("tests/data/topo/cpu-2numa-2nic.xml", &sys) == ncclSuccess);
  if (!sys) return;
  int numa[4] = {0, 0, 1, 1};
  EXPECT(weft_topo_add_host_ranks(sys, 0, 4, numa, 8.0f) == ncclSuccess);
  struct weft_topo_graph *ring = malloc(sizeof(*ring)), *tree = malloc(sizeof(*tree));
  EXPECT(weft_topo_search_all(sys, 0, 1, ring, tree) == ncclSuccess);
  struct weft_tuning* t = malloc(sizeof(*t));
  init(t, WEFT_ARCH_HOST, ring, tree, 1, 8.0f);
  for (int f = 0; f < WEFT_FUNC_COUNT; f++)
    for (int a = 0; a < WEFT_ALGO_COUNT; a++) EXPECT(!t->enabled[f][a][WEFT_PROTO_LL128]);
  struct weft_tuning_choice c;
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_ALLREDUCE, (size_t)1 << 30, &c) == ncclSuccess);
  /* The copy bandwidth bounds the bus bandwidth. */
  EXPECT_MSG(c.busbw_gbs > 4 && c.busbw_gbs <= 8.0f, "host busbw %.2f", c.busbw_gbs);
  EXPECT(weft_tuning_choose(t, WEFT_FUNC_ALLREDUCE, 64, &c) == ncclSuccess);
  EXPECT(c.proto == WEFT_PROTO_LL && c.time_us < 10 && c.nchannels == 1);
  /* A faster copy predicts a faster large all-reduce. */
  float slow =
      weft_tuning_predict(t, WEFT_FUNC_ALLREDUCE, WEFT_ALGO_RING, WEFT_PROTO_SIMPLE, 1 << 26, 4, 1, 2);
  weft_topo_system_destroy(sys);
  sys = NULL;
  weft_topo_graph_fini(ring);
  weft_topo_graph_fini(tree);
  EXPECT(weft_topo_load_file("tests/data/topo/cpu-2numa-2nic.xml", &sys) == ncclSuccess);
  EXPECT(sys && weft_topo_add_host_ranks(sys, 0, 4, numa, 16.0f) == ncclSuccess);
  EXPECT(sys && weft_topo_search_all(sys, 0, 1, ring, tree) == ncclSuccess);
  init(t, WEFT_ARCH_HOST, ring, tree, 1, 16.0f);
  float fast =
      weft_tuning_predict(t, WEFT_FUNC_ALLREDUCE, WEFT_ALGO_RING, WEFT_PROTO_SIMPLE, 1 << 26, 4, 1, 2);
  EXPECT_MSG(fast < slow, "copy 16 GB/s %.1f us vs 8 GB/s %.1f us", fast, slow);
  weft_topo_system_destroy(sys);
  weft_topo_graph_fini(ring);
  free(ring);
  weft_topo_graph_fini(tree);
  free(tree);
  free(t);
}

int main(void) {
  setenv("NCCL_DEBUG", "WARN", 0);
  check_parse();
  check_gpu_model();
  check_host_model();
  return test_finish("test_tuning");
}
