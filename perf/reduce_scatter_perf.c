/* reduce_scatter_perf: ncclReduceScatter to base elements per rank; busbw = algbw x (n-1)/n. */
#include "common.h"

static void counts(size_t count, size_t es, int n, struct perf_counts* c) {
  size_t base = perf_base_count(count, es, n);
  *c = (struct perf_counts){base * (size_t)n, base, base, 0, base};
}

static void bw(size_t count, size_t es, int n, double sec, double* algbw, double* busbw) {
  perf_bw((double)(count * es) * n, (double)(n - 1) / n, sec, algbw, busbw);
}

static void fill(const struct perf_data* d, const struct perf_counts* c, int rank, void* send) {
  perf_fill(d, send, c->send, rank, 0);
}

static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  perf_fill_reduced(d, expected, c->recv, (size_t)rank * c->param);
}

static ncclResult_t start(const struct perf_call* k) {
  return ncclReduceScatter(k->send, k->recv, k->count, k->type, k->op, k->comm, k->stream);
}

const struct perf_coll perf_this_coll = {.name = "reduce_scatter",
                                         .ops = PERF_OPS_REDUCE,
                                         .check_inplace = 1,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start = start};

int main(int argc, char** argv) { return perf_main(argc, argv); }
