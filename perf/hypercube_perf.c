/* hypercube_perf: an all-gather built from log2(n) rounds of grouped ncclSend/ncclRecv with peer
 * rank^mask, each round moving mask blocks; busbw = algbw over base x (n-1) elements. */
#include "common.h"

static void counts(size_t count, size_t es, int n, struct perf_counts* c) {
  size_t base = perf_base_count(count, es, n);
  *c = (struct perf_counts){base, base * (size_t)n, base, base, 0};
}

static void bw(size_t count, size_t es, int n, double sec, double* algbw, double* busbw) {
  perf_bw((double)(count * es) * (n - 1), 1, sec, algbw, busbw);
}

static void fill(const struct perf_data* d, const struct perf_counts* c, int rank, void* send) {
  perf_fill(d, send, c->send, rank, 0);
}

static void expect(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected) {
  (void)rank;
  for (int s = 0; s < d->nranks; s++)
    perf_fill(d, (char*)expected + (size_t)s * c->param * (size_t)d->t->size, c->param, s, 0);
}

/* Round k sends data received in round k-1, so each round is its own group across the local ranks
 * (one outer group would let the rounds overlap). */
static ncclResult_t start_all(const struct perf_call* calls, int g, size_t es) {
  int n = calls[0].nranks;
  size_t chunk = calls[0].count * es;
  for (int i = 0; i < g; i++) {
    char* own = (char*)calls[i].recv + (size_t)calls[i].rank * chunk;
    if (own != calls[i].send) perf_mem_copy_async(calls[i].stream, own, calls[i].send, chunk);
  }
  for (int mask = 1; mask < n; mask <<= 1) {
    ncclResult_t res = ncclGroupStart();
    for (int i = 0; i < g && res == ncclSuccess; i++) {
      const struct perf_call* k = &calls[i];
      int mine = k->rank & ~(mask - 1), theirs = mine ^ mask;
      res = ncclSend((char*)k->recv + (size_t)mine * chunk, k->count * (size_t)mask, k->type, k->rank ^ mask,
                     k->comm, k->stream);
      if (res == ncclSuccess)
        res = ncclRecv((char*)k->recv + (size_t)theirs * chunk, k->count * (size_t)mask, k->type,
                       k->rank ^ mask, k->comm, k->stream);
    }
    ncclResult_t end = ncclGroupEnd();
    if (res != ncclSuccess || end != ncclSuccess) return res != ncclSuccess ? res : end;
  }
  return ncclSuccess;
}

static const char* check_nranks(int n) {
  return n & (n - 1) ? "hypercube_perf needs a power-of-two number of ranks" : NULL;
}

const struct perf_coll perf_this_coll = {.name = "hypercube",
                                         .ops = PERF_OPS_EMPTY,
                                         .check_inplace = 1,
                                         .no_outer_group = 1,
                                         .counts = counts,
                                         .bw = bw,
                                         .fill = fill,
                                         .expect = expect,
                                         .start_all = start_all,
                                         .check_nranks = check_nranks};

int main(int argc, char** argv) { return perf_main(argc, argv); }
