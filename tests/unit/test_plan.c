/* The one planner (collectives/plan.c) for both executors: NCCL_PROTO / NCCL_ALGO / channel bounds
 * as weft_plan_read_env reads them, a call's selection, the executor's algorithms (an executor
 * that runs Ring only gets never Tree, whatever NCCL_ALGO, the call or the tuning model prefer;
 * cuda_params is the CUDA backend's channel rule with such an executor, as the CUDA kernel was
 * before it ran trees), each backend's channel rule, and the chunk and channel split both
 * executors use. The model is a real
 * one (graph/tuning.c over a topology file) behind a communicator that holds nothing else. */
#include <stdlib.h>
#include <string.h>

/* The model's headers name an enum weft_proto of their own (three protocols, NCCL's numbering)
 * beside the executors' (collectives/dev_types.h); renamed here, where both are needed. */
#define weft_proto weft_model_proto
#define WEFT_PROTO_LL WEFT_MODEL_PROTO_LL
#define WEFT_PROTO_LL128 WEFT_MODEL_PROTO_LL128
#define WEFT_PROTO_SIMPLE WEFT_MODEL_PROTO_SIMPLE
#define WEFT_PROTO_COUNT WEFT_MODEL_PROTO_COUNT
#include "core/topology.h"
#undef weft_proto
#undef WEFT_PROTO_LL
#undef WEFT_PROTO_LL128
#undef WEFT_PROTO_SIMPLE
#undef WEFT_PROTO_COUNT

#include "check.h"
#include "collectives/plan.h"
#include "collectives/tuned.h"

#define RING WEFT_TUNED_ALGO_RING
#define TREE WEFT_TUNED_ALGO_TREE
#define LL WEFT_TUNED_PROTO_LL
#define SIMPLE WEFT_TUNED_PROTO_SIMPLE
#define KIB ((size_t)1024)
#define MIB ((size_t)1 << 20)

/* The executors' planner inputs, environment read as each backend reads it at init. */
static struct weft_plan_params host_params(int nchannels) {
  struct weft_plan_params pp = {.nranks = 4,
                                .rank = 1,
                                .nchannels = nchannels,
                                .simple_slot = 512 * KIB,
                                .ll_slot = 32 * KIB,
                                .nnodes = 1};
  weft_plan_read_env(&pp);
  return pp;
}

static struct weft_plan_params cuda_params(int nchannels) {
  struct weft_plan_params pp = host_params(nchannels);
  pp.impl_algos = RING; /* an executor without Tree (the CUDA kernel's, before it ran trees) */
  pp.bytes_per_channel = 256 * KIB;
  return pp;
}

static void expect_choice(const char* what, const struct weft_plan_params* pp, int coll, size_t bytes,
                          const struct weft_call_opts* o, int algo, int proto, int nch) {
  int a = -1, p = -1, n = -1;
  EXPECT(weft_plan_choose(pp, coll, bytes, o, &a, &p, &n) == ncclSuccess);
  EXPECT_MSG(a == algo && p == proto && n == nch,
             "%s: coll %d, %zu bytes: %s/%s on %d channel(s), want %s/%s on %d", what, coll, bytes,
             a == WEFT_PLAN_TREE ? "Tree" : "Ring", p == WEFT_PROTO_LL ? "LL" : "Simple", n,
             algo == WEFT_PLAN_TREE ? "Tree" : "Ring", proto == WEFT_PROTO_LL ? "LL" : "Simple", nch);
}

static void clear_env(void) {
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_MIN_NCHANNELS");
  unsetenv("NCCL_MAX_NCHANNELS");
}

/* Without a model: each backend's defaults, and the environment over them. */
static void test_defaults(void) {
  clear_env();
  struct weft_plan_params host = host_params(4), cuda = cuda_params(16);
  /* LL up to 64 KiB; a channel per MiB on the host, per 256 KiB on the GPU, up to the connected. */
  expect_choice("host", &host, WEFT_COLL_ALLREDUCE, 64 * KIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL, 1);
  expect_choice("host", &host, WEFT_COLL_ALLREDUCE, 64 * KIB + 1, NULL, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE, 1);
  expect_choice("host", &host, WEFT_COLL_ALLREDUCE, 3 * MIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE, 4);
  expect_choice("cuda", &cuda, WEFT_COLL_ALLREDUCE, 3 * MIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE, 13);
  expect_choice("cuda", &cuda, WEFT_COLL_ALLREDUCE, 64 * MIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE, 16);
  expect_choice("cuda", &cuda, WEFT_COLL_ALLGATHER, 300 * KIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE, 2);

  /* NCCL_PROTO. */
  setenv("NCCL_PROTO", "Simple", 1);
  host = host_params(4), cuda = cuda_params(16);
  expect_choice("host PROTO=Simple", &host, WEFT_COLL_ALLREDUCE, 1 * KIB, NULL, WEFT_PLAN_RING,
                WEFT_PROTO_SIMPLE, 1);
  expect_choice("cuda PROTO=Simple", &cuda, WEFT_COLL_BROADCAST, 1 * KIB, NULL, WEFT_PLAN_RING,
                WEFT_PROTO_SIMPLE, 1);
  setenv("NCCL_PROTO", "LL", 1);
  host = host_params(4), cuda = cuda_params(16);
  expect_choice("host PROTO=LL", &host, WEFT_COLL_ALLREDUCE, 8 * MIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL, 4);
  expect_choice("cuda PROTO=LL", &cuda, WEFT_COLL_REDUCE, 8 * MIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL, 16);
  unsetenv("NCCL_PROTO");

  /* NCCL_ALGO: Tree runs on the host; an executor with only Ring gets Ring. */
  setenv("NCCL_ALGO", "Tree", 1);
  host = host_params(4), cuda = cuda_params(16);
  expect_choice("host ALGO=Tree", &host, WEFT_COLL_ALLREDUCE, 1 * KIB, NULL, WEFT_PLAN_TREE, WEFT_PROTO_LL,
                2);
  expect_choice("cuda ALGO=Tree", &cuda, WEFT_COLL_ALLREDUCE, 1 * KIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL,
                1);
  EXPECT(!weft_plan_can_meet(&cuda, WEFT_COLL_ALLREDUCE, TREE, WEFT_TUNED_PROTO_ALL));
  EXPECT(weft_plan_can_meet(&host, WEFT_COLL_ALLREDUCE, TREE, WEFT_TUNED_PROTO_ALL));
  unsetenv("NCCL_ALGO");

  /* NCCL_MIN/MAX_NCHANNELS over the size's count, within the connected channels. */
  setenv("NCCL_MIN_NCHANNELS", "3", 1);
  host = host_params(4), cuda = cuda_params(16);
  expect_choice("host MIN=3", &host, WEFT_COLL_ALLREDUCE, 1 * KIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL, 3);
  expect_choice("cuda MIN=3", &cuda, WEFT_COLL_ALLREDUCE, 1 * KIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL, 3);
  setenv("NCCL_MIN_NCHANNELS", "8", 1);
  host = host_params(4);
  expect_choice("host MIN=8", &host, WEFT_COLL_ALLREDUCE, 1 * KIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL, 4);
  unsetenv("NCCL_MIN_NCHANNELS");
  setenv("NCCL_MAX_NCHANNELS", "5", 1);
  cuda = cuda_params(16);
  expect_choice("cuda MAX=5", &cuda, WEFT_COLL_ALLREDUCE, 64 * MIB, NULL, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE,
                5);
  clear_env();
}

/* A call's selection narrows for that call only; its CTA bounds come last. */
static void test_call_opts(void) {
  clear_env();
  struct weft_plan_params host = host_params(4), cuda = cuda_params(16);
  struct weft_call_opts o;
  memset(&o, 0, sizeof(o));
  o.protos = SIMPLE;
  expect_choice("cuda call Simple", &cuda, WEFT_COLL_ALLREDUCE, 1 * KIB, &o, WEFT_PLAN_RING,
                WEFT_PROTO_SIMPLE, 1);
  o.protos = LL;
  expect_choice("cuda call LL", &cuda, WEFT_COLL_ALLREDUCE, 2 * MIB, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 9);
  o.protos = 0;
  o.algos = TREE;
  expect_choice("host call Tree", &host, WEFT_COLL_ALLREDUCE, 1 * KIB, &o, WEFT_PLAN_TREE, WEFT_PROTO_LL, 2);
  expect_choice("cuda call Tree", &cuda, WEFT_COLL_ALLREDUCE, 1 * KIB, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 1);
  memset(&o, 0, sizeof(o));
  o.min_channels = 6;
  expect_choice("cuda minCTAs 6", &cuda, WEFT_COLL_ALLREDUCE, 1 * KIB, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 6);
  expect_choice("host minCTAs 6", &host, WEFT_COLL_ALLREDUCE, 1 * KIB, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 4);
  o.min_channels = 0;
  o.max_channels = 2;
  expect_choice("cuda maxCTAs 2", &cuda, WEFT_COLL_ALLREDUCE, 64 * MIB, &o, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE,
                2);
}

/* A communicator holding only a tuning model, as core/topology.c sets it up (Ring and Tree, LL and
 * Simple), over a two-host PCI machine whose all-reduce the model gives to Tree at some sizes. */
static struct ncclComm* model_comm(struct weft_topo_graph* ring, struct weft_topo_graph* tree) {
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_load_file("tests/data/topo/pcie-8gpu-2switch-2socket.xml", &sys) == ncclSuccess);
  EXPECT(sys && weft_topo_search_all(sys, 0, 2, ring, tree) == ncclSuccess);
  weft_topo_system_destroy(sys);
  struct ncclComm* comm = calloc(1, sizeof(*comm));
  struct weft_comm_topo* t = calloc(1, sizeof(*t));
  comm->ctx.topo = t;
  struct weft_tuning_input in = {.arch = WEFT_ARCH_AMPERE,
                                 .nranks = ring->nlocal * 2,
                                 .nnodes = 2,
                                 .nchannels = 2 * ring->nchannels,
                                 .ring = ring,
                                 .tree = tree,
                                 .algo_impl = RING | TREE,
                                 .proto_impl = LL | SIMPLE};
  EXPECT(weft_tuning_init(&t->tuning, &in) == ncclSuccess);
  return comm;
}

/* With a model: the model's pick among what the executor runs. Where the model prefers Tree the
 * host runs Tree and the CUDA backend the model's best Ring pair. */
static void test_model(void) {
  clear_env();
  struct weft_topo_graph *ring = malloc(sizeof(*ring)), *tree = malloc(sizeof(*tree));
  struct ncclComm* comm = model_comm(ring, tree);
  struct weft_plan_params host = host_params(4), cuda = cuda_params(16);
  host.comm = cuda.comm = &comm->ctx;
  host.nranks = cuda.nranks = comm->ctx.topo->tuning.in.nranks;
  host.nnodes = cuda.nnodes = 2;
  size_t tree_bytes = 0;
  for (size_t b = 1 * KIB; b <= 1024 * MIB && !tree_bytes; b *= 2) {
    struct weft_tuned tu;
    if (weft_comm_tuned_choice(&comm->ctx, WEFT_COLL_ALLREDUCE, b, WEFT_TUNED_ALGO_ALL, WEFT_TUNED_PROTO_ALL,
                               &tu) &&
        tu.tree)
      tree_bytes = b;
  }
  EXPECT_MSG(tree_bytes > 0, "the model never prefers Tree: the checks below prove nothing");
  if (tree_bytes == 0) return;
  int a, p, n;
  EXPECT(weft_plan_choose(&host, WEFT_COLL_ALLREDUCE, tree_bytes, NULL, &a, &p, &n) == ncclSuccess);
  EXPECT_MSG(a == WEFT_PLAN_TREE, "host at %zu bytes: algo %d, want the model's Tree", tree_bytes, a);
  struct weft_tuned ring_best;
  EXPECT(weft_comm_tuned_choice(&comm->ctx, WEFT_COLL_ALLREDUCE, tree_bytes, RING, WEFT_TUNED_PROTO_ALL,
                                &ring_best));
  int want_n = ring_best.nchannels < 16 ? ring_best.nchannels : 16;
  expect_choice("cuda, model prefers Tree", &cuda, WEFT_COLL_ALLREDUCE, tree_bytes, NULL, WEFT_PLAN_RING,
                ring_best.ll ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE, want_n);
  /* The call asks for Tree only: the host follows, the CUDA backend cannot (the config layer
   * drops such a selection; the planner still never hands the kernel a Tree). */
  struct weft_call_opts o;
  memset(&o, 0, sizeof(o));
  o.algos = TREE;
  EXPECT(weft_plan_choose(&cuda, WEFT_COLL_ALLREDUCE, tree_bytes, &o, &a, &p, &n) == ncclSuccess);
  EXPECT_MSG(a == WEFT_PLAN_RING, "cuda, call selects Tree: algo %d", a);
  EXPECT(!weft_plan_can_meet(&cuda, WEFT_COLL_ALLREDUCE, TREE, WEFT_TUNED_PROTO_ALL));
  EXPECT(weft_plan_can_meet(&cuda, WEFT_COLL_ALLREDUCE, RING, WEFT_TUNED_PROTO_ALL));
  EXPECT(weft_plan_can_meet(&host, WEFT_COLL_ALLREDUCE, TREE, WEFT_TUNED_PROTO_ALL));
  /* The call's protocol and CTA bounds narrow the model's pick. */
  o.algos = 0;
  o.protos = LL;
  o.max_channels = 1;
  expect_choice("cuda, call LL on 1 CTA", &cuda, WEFT_COLL_ALLREDUCE, tree_bytes, &o, WEFT_PLAN_RING,
                WEFT_PROTO_LL, 1);
  /* NCCL_ALGO=Tree in the model too (read at its init): still Ring on the CUDA backend. */
  setenv("NCCL_ALGO", "Tree", 1);
  weft_topo_graph_fini(ring); /* searched into anew: the search takes its output as uninitialized */
  weft_topo_graph_fini(tree);
  struct ncclComm* tree_comm = model_comm(ring, tree);
  cuda = cuda_params(16);
  cuda.comm = &tree_comm->ctx;
  cuda.nranks = tree_comm->ctx.topo->tuning.in.nranks;
  EXPECT(weft_plan_choose(&cuda, WEFT_COLL_ALLREDUCE, tree_bytes, NULL, &a, &p, &n) == ncclSuccess);
  EXPECT_MSG(a == WEFT_PLAN_RING, "cuda, NCCL_ALGO=Tree with a model: algo %d", a);
  clear_env();
  free(tree_comm->ctx.topo);
  free(tree_comm);
  free(comm->ctx.topo);
  free(comm);
  weft_topo_graph_fini(ring);
  weft_topo_graph_fini(tree);
  free(ring);
  free(tree);
}

/* One step and one channel split for both executors. */
static void test_chunks(void) {
  struct weft_plan_params pp = {.simple_slot = 512 * KIB, .ll_slot = 32 * KIB};
  EXPECT_EQ_INT(weft_plan_chunk_elems(&pp, WEFT_PROTO_SIMPLE, 4), 128 * KIB);
  EXPECT_EQ_INT(weft_plan_chunk_elems(&pp, WEFT_PROTO_LL, 4), 4 * KIB); /* half of each 16-byte line */
  EXPECT_EQ_INT(weft_plan_chunk_elems(&pp, WEFT_PROTO_LL, 8), 2 * KIB);
  /* Ranges cover the count once, in order, multiples of 64 but the last. */
  size_t counts[] = {0, 1, 63, 64, 65, 1000, 4096, 100003};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
    for (int nch = 1; nch <= 5; nch++) {
      size_t next = 0;
      for (int c = 0; c < nch; c++) {
        size_t off, cnt = weft_channel_range(counts[i], nch, c, &off);
        EXPECT_MSG(cnt == 0 || off == next, "count %zu on %d: channel %d at %zu, want %zu", counts[i], nch, c,
                   off, next);
        if (cnt && off + cnt < counts[i])
          EXPECT_MSG(cnt % 64 == 0, "count %zu on %d: channel %d has %zu", counts[i], nch, c, cnt);
        next += cnt;
      }
      EXPECT_MSG(next == counts[i], "count %zu on %d channels: %zu covered", counts[i], nch, next);
    }
  size_t off, cnt = weft_channel_range(1000, 4, 1, &off);
  EXPECT(off == 256 && cnt == 256);
  cnt = weft_channel_range(1000, 4, 3, &off);
  EXPECT(off == 768 && cnt == 232);
}

/* weft_plan_coll through a memo answers each call as weft_plan_choose does: a repeated call from the
 * memo, and a call that differs in size, collective or selection asks again. */
static void expect_plan(const char* what, const struct weft_plan_params* pp, struct weft_plan_memo* memo,
                        int coll, size_t count, const struct weft_call_opts* o) {
  struct weft_task t = {.coll = coll, .count = count, .dtype = ncclFloat32, .root = 0};
  if (o != NULL) t.opts = *o;
  struct weft_plan plan;
  int a = -1, p = -1, n = -1;
  EXPECT(weft_plan_coll(pp, memo, &t, &plan) == ncclSuccess);
  EXPECT(weft_plan_choose(pp, coll, weft_plan_task_bytes(&t, pp->nranks), &t.opts, &a, &p, &n) ==
         ncclSuccess);
  EXPECT_MSG(plan.algo == a && plan.proto == p && plan.nchannels == n,
             "%s: coll %d, %zu floats: planned %d/%d on %d channel(s), the planner chooses %d/%d on %d", what,
             coll, count, plan.algo, plan.proto, plan.nchannels, a, p, n);
}

static void test_memo(void) {
  clear_env();
  struct weft_plan_params host = host_params(4);
  struct weft_plan_memo memo = {0};
  struct weft_call_opts simple = {.protos = SIMPLE}, two = {.max_channels = 2};
  expect_plan("first", &host, &memo, WEFT_COLL_ALLREDUCE, 16, NULL);
  EXPECT(memo.valid);
  expect_plan("again", &host, &memo, WEFT_COLL_ALLREDUCE, 16, NULL);
  expect_plan("larger", &host, &memo, WEFT_COLL_ALLREDUCE, MIB, NULL); /* Simple on 4, not LL on 1 */
  expect_plan("smaller", &host, &memo, WEFT_COLL_ALLREDUCE, 16, NULL);
  expect_plan("all-gather", &host, &memo, WEFT_COLL_ALLGATHER, 256 * KIB, NULL); /* 4 ranks: 4 MiB */
  expect_plan("all-reduce", &host, &memo, WEFT_COLL_ALLREDUCE, 256 * KIB, NULL);
  expect_plan("LL", &host, &memo, WEFT_COLL_ALLREDUCE, 16, NULL);
  expect_plan("Simple, small", &host, &memo, WEFT_COLL_ALLREDUCE, 16, &simple);
  expect_plan("4 MiB", &host, &memo, WEFT_COLL_ALLREDUCE, MIB, NULL);
  expect_plan("2 channels", &host, &memo, WEFT_COLL_ALLREDUCE, MIB, &two);
  /* The same bytes, another collective: across 3 hosts a small all-reduce takes the trees. */
  struct weft_plan_params hosts3 = host_params(4);
  hosts3.nnodes = 3;
  memo = (struct weft_plan_memo){0};
  expect_plan("3 hosts, all-reduce", &hosts3, &memo, WEFT_COLL_ALLREDUCE, 16, NULL);
  EXPECT(memo.algo == WEFT_PLAN_TREE);
  expect_plan("3 hosts, broadcast", &hosts3, &memo, WEFT_COLL_BROADCAST, 16, NULL);
}

int main(void) {
  setenv("NCCL_DEBUG", "WARN", 0);
  test_defaults();
  test_call_opts();
  test_model();
  test_chunks();
  test_memo();
  return test_finish("test_plan");
}
