/* sendrecv_perf: each rank sends count elements to rank+1 and receives from rank-1 in one group;
 * busbw = algbw. The in-place row is not checked (N/A), as in nccl-tests. */
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

static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  perf_fill(d, expected, c->recv, (rank - 1 + d->nranks) % d->nranks, 0);
}

static ncclResult_t start(const struct perf_call* k) {
  ncclResult_t res = ncclGroupStart();
  if (res != ncclSuccess) return res;
  res = ncclSend(k->send, k->count, k->type, (k->rank + 1) % k->nranks, k->comm, k->stream);
  if (res == ncclSuccess)
    res = ncclRecv(k->recv, k->count, k->type, (k->rank - 1 + k->nranks) % k->nranks, k->comm, k->stream);
  ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

const struct perf_coll perf_this_coll = {.name = "sendrecv",
                                         .ops = PERF_OPS_LABEL,
                                         .check_inplace = 0,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start = start};

int main(int argc, char** argv) { return perf_main(argc, argv); }
