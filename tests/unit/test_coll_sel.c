/* Per-call selections (ncclCollConfig_t.algSelection and CTA bounds): the parser of the selection
 * text, and the planner (plan.c, without a tuning model) meeting what a call selected. */
#include <string.h>

#include "check.h"
#include "collectives/coll_config.h"
#include "collectives/plan.h"
#include "collectives/tuned.h"

#define ALGOS WEFT_TUNED_ALGO_ALL
#define PROTOS WEFT_TUNED_PROTO_ALL
#define RING WEFT_TUNED_ALGO_RING
#define TREE WEFT_TUNED_ALGO_TREE
#define LL WEFT_TUNED_PROTO_LL
#define LL128 WEFT_TUNED_PROTO_LL128
#define SIMPLE WEFT_TUNED_PROTO_SIMPLE

static void parse_ok(const char* text, unsigned want_a, unsigned want_p) {
  unsigned a = 0, p = 0;
  char why[256] = "";
  int r = weft_coll_sel_parse(text, &a, &p, why, sizeof(why));
  EXPECT_MSG(r == 0 && a == want_a && p == want_p,
             "\"%s\": %d, algos 0x%x (want 0x%x), protos 0x%x (want 0x%x) %s", text ? text : "(null)", r, a,
             want_a, p, want_p, why);
}

static void parse_bad(const char* text, const char* reason) {
  unsigned a = 0, p = 0;
  char why[256] = "";
  int r = weft_coll_sel_parse(text, &a, &p, why, sizeof(why));
  EXPECT_MSG(r == -1 && strstr(why, reason) != NULL, "\"%s\": %d, why \"%s\" (want \"%s\")", text, r, why,
             reason);
}

static void test_parse(void) {
  parse_ok(NULL, ALGOS, PROTOS);
  parse_ok("", ALGOS, PROTOS);
  parse_ok(" , ,", ALGOS, PROTOS);
  parse_ok("Ring", RING, PROTOS);
  parse_ok("rInG", RING, PROTOS);
  parse_ok(" ring , ,", RING, PROTOS);
  parse_ok("RING,Tree", RING | TREE, PROTOS);
  parse_ok("ring, simple", RING, SIMPLE);
  parse_ok("LL,LL128", ALGOS, LL | LL128);
  parse_ok("^Tree", ALGOS & ~TREE, PROTOS);
  parse_ok(" ^LL", ALGOS, PROTOS & ~LL);
  parse_ok("^tree,LL", ALGOS & ~TREE, PROTOS & ~LL);
  parse_ok("NVLSTree,PAT,CollNetDirect,CollNetChain,NVLS", ALGOS & ~(RING | TREE), PROTOS);
  parse_bad("^", "excludes nothing");
  parse_bad("^ , ", "excludes nothing");
  parse_bad("bogus", "'bogus'");
  parse_bad("ring,bogus", "'bogus'");
  parse_bad("ring;tree", "NCCL_ALGO");
  parse_bad("allreduce:ring", "NCCL_ALGO");
  parse_bad("Ring^", "'Ring^'");
}

static struct weft_plan_params params(void) {
  return (struct weft_plan_params){.nranks = 4,
                                   .rank = 1,
                                   .nchannels = 4,
                                   .simple_slot = 512 * 1024,
                                   .ll_slot = 32 * 1024,
                                   .nnodes = 1,
                                   .ring_ok = 1,
                                   .tree_ok = 1,
                                   .ll_ok = 1,
                                   .simple_ok = 1};
}

static void expect_choice(const struct weft_plan_params* pp, int coll, size_t bytes,
                          const struct weft_call_opts* o, int algo, int proto, int nch) {
  int a = -1, p = -1, n = -1;
  EXPECT(weft_plan_choose(pp, coll, bytes, o, &a, &p, &n) == ncclSuccess);
  EXPECT_MSG(a == algo && p == proto && n == nch,
             "coll %d, %zu bytes: algo %d proto %d %d channel(s), want %d %d %d", coll, bytes, a, p, n, algo,
             proto, nch);
}

static void test_choose(void) {
  struct weft_plan_params pp = params();
  struct weft_call_opts o;
  /* Plain calls: a NULL or zero selection is automatic. */
  memset(&o, 0, sizeof(o));
  expect_choice(&pp, WEFT_COLL_ALLREDUCE, 1024, NULL, WEFT_PLAN_RING, WEFT_PROTO_LL, 1);
  expect_choice(&pp, WEFT_COLL_ALLREDUCE, 1024, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 1);
  expect_choice(&pp, WEFT_COLL_ALLREDUCE, 3u << 20, &o, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE, 4);
  /* Algorithms and protocols. */
  o.algos = TREE;
  expect_choice(&pp, WEFT_COLL_ALLREDUCE, 1024, &o, WEFT_PLAN_TREE, WEFT_PROTO_LL, 2);
  o.protos = SIMPLE;
  expect_choice(&pp, WEFT_COLL_ALLREDUCE, 1024, &o, WEFT_PLAN_TREE, WEFT_PROTO_SIMPLE, 2);
  o.algos = ALGOS & ~TREE;
  o.protos = LL | LL128;
  expect_choice(&pp, WEFT_COLL_ALLREDUCE, 3u << 20, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 4);
  /* Channel bounds come last: over the tree's two channels, the size's, the connected ones. */
  memset(&o, 0, sizeof(o));
  o.algos = TREE;
  o.max_channels = 1;
  expect_choice(&pp, WEFT_COLL_ALLREDUCE, 1024, &o, WEFT_PLAN_TREE, WEFT_PROTO_LL, 1);
  memset(&o, 0, sizeof(o));
  o.min_channels = 3;
  expect_choice(&pp, WEFT_COLL_BROADCAST, 1024, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 3);
  o.min_channels = 8;
  expect_choice(&pp, WEFT_COLL_BROADCAST, 1024, &o, WEFT_PLAN_RING, WEFT_PROTO_LL, 4);
  o.min_channels = 0;
  o.max_channels = 2;
  expect_choice(&pp, WEFT_COLL_ALLGATHER, 3u << 20, &o, WEFT_PLAN_RING, WEFT_PROTO_SIMPLE, 2);
  EXPECT_EQ_INT(weft_plan_bound_channels(NULL, 0, 4), 1);
  EXPECT_EQ_INT(weft_plan_bound_channels(&o, 3, 4), 2);
  EXPECT_EQ_INT(weft_plan_bound_channels(&o, 3, 1), 1);
}

static void test_can_meet(void) {
  struct weft_plan_params pp = params();
  EXPECT(weft_plan_can_meet(&pp, WEFT_COLL_ALLREDUCE, TREE, PROTOS));
  EXPECT(weft_plan_can_meet(&pp, WEFT_COLL_ALLREDUCE, RING | TREE, SIMPLE));
  pp.impl_algos = RING; /* an executor without Tree */
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_ALLREDUCE, TREE, PROTOS));
  pp.impl_algos = 0;
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_BROADCAST, TREE, PROTOS));
  EXPECT(weft_plan_can_meet(&pp, WEFT_COLL_BROADCAST, ALGOS & ~TREE, PROTOS));
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_ALLREDUCE, ALGOS & ~(RING | TREE), PROTOS)); /* NVLS, PAT... */
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_ALLREDUCE, ALGOS, LL128));
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_SEND, ALGOS, PROTOS)); /* nothing to select */
  pp.ll_ok = 0;                                                    /* NCCL_PROTO=Simple */
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_REDUCE, ALGOS, LL));
  pp.tree_ok = 0; /* NCCL_ALGO=Ring */
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_ALLREDUCE, TREE, PROTOS));
  pp = params();
  pp.nranks = 1; /* one rank has no tree to run */
  EXPECT(!weft_plan_can_meet(&pp, WEFT_COLL_ALLREDUCE, TREE, PROTOS));
}

static void test_text(void) {
  char buf[192];
  weft_coll_sel_text(0, buf, sizeof(buf));
  EXPECT(strcmp(buf, "automatic") == 0);
  uint64_t sig = 1ull << 63 | RING | (uint64_t)LL << 8 | 2ull << 16 | 3ull << 24;
  weft_coll_sel_text(sig, buf, sizeof(buf));
  EXPECT_MSG(strstr(buf, "algorithms Ring, protocols LL, channels 2..3") != NULL, "%s", buf);
}

int main(void) {
  test_parse();
  test_choose();
  test_can_meet();
  test_text();
  return test_finish("test_coll_sel");
}
