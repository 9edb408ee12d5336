/* reduce_perf: ncclReduce of count elements to the root; busbw = algbw (the root's link). */
#include "common.h"

static void counts(size_t count, size_t es, int n, struct perf_counts* c) {
  (void)es;
  (void)n;
  *c = (struct perf_counts){count, count, count, 0, 0};
}

static void bw(size_t count, size_t es, int n, double sec, double* algbw, double* busbw) {
  (void)n;
  perf_bw((double)(count * es), 1, sec, algbw, busbw);
}

static void fill(const struct perf_data* d, const struct perf_counts* c, int rank, void* send) {
  perf_fill(d, send, c->send, rank, 0);
}

/* Non-roots must leave their receive buffer untouched. */
static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  if (rank == d->root) perf_fill_reduced(d, expected, c->recv, 0);
}

static ncclResult_t start(const struct perf_call* k) {
  return ncclReduce(k->send, k->recv, k->count, k->type, k->op, k->root, k->comm, k->stream);
}

const struct perf_coll perf_this_coll = {.name = "reduce",
                                         .ops = PERF_OPS_REDUCE,
                                         .rooted = 1,
                                         .check_inplace = 1,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start = start};

int main(int argc, char** argv) { return perf_main(argc, argv); }
