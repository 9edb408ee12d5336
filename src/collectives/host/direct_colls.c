/* Zero-copy all-gather, reduce-scatter, broadcast and reduce: every rank's buffers are mapped
 * here (direct.c's arrive), and each output byte is written once, straight from the inputs it
 * depends on, each read once per output byte that needs it, with no staging copy.
 *
 * All-gather pulls: rank r copies every peer's input into its own output. Pushing (r writing its
 * input into every peer's output) moves the same bytes, but pulling keeps each output written by
 * one rank only, its owner: its lines stay in the owner's cache or NUMA node, no two ranks write
 * neighbouring lines of one buffer, and an in-place rank's own block needs no care. Reduce-scatter
 * and reduce split the reduction by slices as all-reduce does. Broadcast splits too: rank r copies
 * slice r of the root's input into every output, so every rank's CPU copies (one core's copy
 * speed, not the memory, bounds a lone copier here) and each input byte is read once.
 * Every rank's buffers are read or written by peers: each waits for their done counters. */
#include "collectives/host/direct_impl.h"

void weft_direct_extent_of(const struct weft_task* t, int nranks, int rank, struct weft_direct_extent* e) {
  size_t bytes = t->count * weft_dt_size(t->dtype), all = bytes * (size_t)nranks;
  e->in_bytes = e->out_bytes = bytes;
  if (t->coll == WEFT_COLL_ALLGATHER) e->out_bytes = all;
  if (t->coll == WEFT_COLL_REDUCESCATTER) e->in_bytes = all;
  if (t->coll == WEFT_COLL_BROADCAST && rank != t->root) e->in_bytes = 0;
  if (t->coll == WEFT_COLL_REDUCE && rank != t->root) e->out_bytes = 0;
}

/* Streaming stores once the call's largest buffer outgrows the caches. */
static int use_nt(const struct weft_direct* d, const struct weft_task* t) {
  struct weft_direct_extent e;
  weft_direct_extent_of(t, d->nranks, d->rank, &e);
  return (e.in_bytes > e.out_bytes ? e.in_bytes : e.out_bytes) >= WEFT_DIRECT_NT_MIN;
}

/* Every peer's block into this rank's output, the next rank's first: at each step every input is
 * read by one rank. In place, the own block is already there. */
static void allgather(struct weft_direct* d, const struct weft_task* t, int nt) {
  int k = d->nranks, r = d->rank;
  size_t bytes = t->count * weft_dt_size(t->dtype);
  for (int q = 1; q <= k; q++) {
    int p = (r + q) % k;
    char* dst = (char*)d->out[r] + (size_t)p * bytes;
    if (dst != d->in[p]) weft_direct_copy(dst, d->in[p], bytes, nt);
  }
}

/* This rank's block of every peer's input, reduced into its output (in place: the output is the
 * own input's block, which only this rank reads). Folded in the ring's order, from the next
 * rank round to this one, so that WEFT_DETERMINISTIC's bytes do not depend on the path. */
static void reducescatter(struct weft_direct* d, const struct weft_task* t, const struct weft_dev_redop* op,
                          int nt) {
  int k = d->nranks, r = d->rank;
  size_t block = t->count * weft_dt_size(t->dtype);
  const void* src[k];
  for (int p = 0; p < k; p++) src[p] = (const char*)d->in[p] + (size_t)r * block;
  void* dst[1] = {d->out[r]};
  weft_direct_reduce_into(d, t->dtype, op, src, (r + 1) % k, dst, 1, 0, t->count, nt);
}

/* This rank's slice of every input, reduced into the root's output, folded in the ring's order
 * (the rank after the root first, the root last), as reducescatter. */
static void reduce(struct weft_direct* d, const struct weft_task* t, const struct weft_dev_redop* op,
                   int nt) {
  size_t lo, hi;
  weft_direct_slice(t->count, weft_dt_size(t->dtype), d->nranks, d->rank, &lo, &hi);
  void* dst[1] = {d->out[t->root]};
  int first = (t->root + 1) % d->nranks;
  weft_direct_reduce_into(d, t->dtype, op, (const void* const*)d->in, first, dst, 1, lo, hi, nt);
}

/* Slice r of the root's input into every rank's output (the root's own skipped in place), piece by
 * piece so that each piece is read from memory once. */
static void broadcast(struct weft_direct* d, const struct weft_task* t, int nt) {
  int k = d->nranks, r = d->rank;
  size_t es = weft_dt_size(t->dtype), lo, hi;
  weft_direct_slice(t->count, es, k, r, &lo, &hi);
  const char* src = (const char*)d->in[t->root];
  for (size_t o = lo * es; o < hi * es; o += WEFT_DIRECT_CHUNK) {
    size_t m = weft_min_sz(WEFT_DIRECT_CHUNK, hi * es - o);
    for (int q = 1; q <= k; q++) {
      char* dst = (char*)d->out[(r + q) % k] + o;
      if (dst != src + o) weft_direct_copy(dst, src + o, m, nt);
    }
  }
}

ncclResult_t weft_direct_run_coll(struct weft_direct* d, const struct weft_task* t,
                                  const struct weft_dev_redop* op, struct weft_waiter* w, uint64_t seq) {
  int nt = use_nt(d, t);
  if (t->coll == WEFT_COLL_ALLREDUCE) weft_direct_allreduce(d, t, op, nt);
  if (t->coll == WEFT_COLL_ALLGATHER) allgather(d, t, nt);
  if (t->coll == WEFT_COLL_REDUCESCATTER) reducescatter(d, t, op, nt);
  if (t->coll == WEFT_COLL_REDUCE) reduce(d, t, op, nt);
  if (t->coll == WEFT_COLL_BROADCAST) broadcast(d, t, nt);
  if (nt) weft_direct_store_fence();
  weft_host_post_counter(&d->mine->done, &d->mine->done_sleepers, seq);
  return weft_direct_wait_all(d, w, 1, seq);
}
