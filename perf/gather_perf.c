/* gather_perf: ncclGather of base elements per rank to the root; busbw = algbw x (n-1)/n. */
#include "common.h"

static void counts(size_t count, size_t es, int n, struct perf_counts* c) {
  size_t base = perf_base_count(count, es, n);
  *c = (struct perf_counts){base, base * (size_t)n, base, base, 0};
}

static void bw(size_t count, size_t es, int n, double sec, double* algbw, double* busbw) {
  perf_bw((double)(count * es) * n, (double)(n - 1) / n, sec, algbw, busbw);
}

static void fill(const struct perf_data* d, const struct perf_counts* c, int rank, void* send) {
  perf_fill(d, send, c->send, rank, 0);
}

/* Only the root's receive buffer changes. */
static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  if (rank != d->root) return;
  for (int s = 0; s < d->nranks; s++)
    perf_fill(d, (char*)expected + (size_t)s * c->param * (size_t)d->t->size, c->param, s, 0);
}

static ncclResult_t start(const struct perf_call* k) {
  return ncclGather(k->send, k->recv, k->count, k->type, k->root, k->comm, k->stream);
}

const struct perf_coll perf_this_coll = {.name = "gather",
                                         .ops = PERF_OPS_NONE,
                                         .rooted = 1,
                                         .check_inplace = 1,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start = start};

int main(int argc, char** argv) { return perf_main(argc, argv); }
