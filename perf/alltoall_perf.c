/* alltoall_perf: ncclAlltoAll of base elements per peer; busbw = algbw x (n-1)/n. The in-place row
 * passes the same buffer twice and is not checked (N/A), as in nccl-tests. */
#include "common.h"

static void counts(size_t count, size_t es, int n, struct perf_counts* c) {
  size_t base = perf_base_count(count, es, n);
  *c = (struct perf_counts){base * (size_t)n, base * (size_t)n, base, 0, 0};
}

static void bw(size_t count, size_t es, int n, double sec, double* algbw, double* busbw) {
  perf_bw((double)(count * es) * n, (double)(n - 1) / n, sec, algbw, busbw);
}

static void fill(const struct perf_data* d, const struct perf_counts* c, int rank, void* send) {
  perf_fill(d, send, c->send, rank, 0);
}

/* Block s of rank r's output is block r of rank s's input. */
static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  for (int s = 0; s < d->nranks; s++)
    perf_fill(d, (char*)expected + (size_t)s * c->param * (size_t)d->t->size, c->param, s,
              (size_t)rank * c->param);
}

static ncclResult_t start(const struct perf_call* k) {
  return ncclAlltoAll(k->send, k->recv, k->count, k->type, k->comm, k->stream);
}

const struct perf_coll perf_this_coll = {.name = "alltoall",
                                         .ops = PERF_OPS_NONE,
                                         .check_inplace = 0,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start = start};

int main(int argc, char** argv) { return perf_main(argc, argv); }
