/* all_reduce_perf: ncclAllReduce of count elements; busbw = algbw x 2(n-1)/n. */
#include "common.h"

static void counts(size_t count, size_t es, int n, struct perf_counts* c) {
  (void)es;
  (void)n;
  *c = (struct perf_counts){count, count, count, 0, 0};
}

static void bw(size_t count, size_t es, int n, double sec, double* algbw, double* busbw) {
  perf_bw((double)(count * es), 2.0 * (n - 1) / n, sec, algbw, busbw);
}

static void fill(const struct perf_data* d, const struct perf_counts* c, int rank, void* send) {
  perf_fill(d, send, c->send, rank, 0);
}

static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  (void)rank;
  perf_fill_reduced(d, expected, c->recv, 0);
}

static ncclResult_t start(const struct perf_call* k) {
  return ncclAllReduce(k->send, k->recv, k->count, k->type, k->op, k->comm, k->stream);
}

const struct perf_coll perf_this_coll = {.name = "all_reduce",
                                         .ops = PERF_OPS_REDUCE,
                                         .check_inplace = 1,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start = start};

int main(int argc, char** argv) { return perf_main(argc, argv); }
