/* broadcast_perf: ncclBroadcast of count elements from the root; busbw = algbw (the root's link). */
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

/* Non-roots get their own data too, so an in-place buffer that is not overwritten is caught. */
static void fill(const struct perf_data* d, const struct perf_counts* c, int rank, void* send) {
  perf_fill(d, send, c->send, rank, 0);
}

static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  (void)rank;
  perf_fill(d, expected, c->recv, d->root, 0);
}

static ncclResult_t start(const struct perf_call* k) {
  return ncclBroadcast(k->send, k->recv, k->count, k->type, k->root, k->comm, k->stream);
}

const struct perf_coll perf_this_coll = {.name = "broadcast",
                                         .ops = PERF_OPS_NONE,
                                         .rooted = 1,
                                         .check_inplace = 1,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start = start};

int main(int argc, char** argv) { return perf_main(argc, argv); }
