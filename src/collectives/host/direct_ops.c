/* Data movement of the direct paths: the small all-reduce through the boards (every rank reduces
 * every input, in rank order, so all results are bit-identical) and the zero-copy all-reduce
 * (rank r reduces block r of every input and writes it into every output: each input byte is
 * read once and each output byte written once, the least memory traffic there is). */
#include <string.h>

#include "collectives/host/direct_impl.h"
#include "collectives/host/reduce.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_NT_STORES 1
#endif

/* From this size on the outputs are written with streaming stores: they do not fit in the
 * caches anyway, and skipping the read-for-ownership saves a third of the memory traffic. */
#define NT_MIN_BYTES (4u << 20)
#define ALIGN_BYTES 256 /* blocks of different ranks never share a cache line */

static void copy_nt(void* dst, const void* src, size_t n) {
#ifdef HAVE_NT_STORES
  char* d = dst;
  const char* s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)s), b = _mm_loadu_si128((const __m128i*)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(s + 32)), e = _mm_loadu_si128((const __m128i*)(s + 48));
    _mm_stream_si128((__m128i*)d, a);
    _mm_stream_si128((__m128i*)(d + 16), b);
    _mm_stream_si128((__m128i*)(d + 32), c);
    _mm_stream_si128((__m128i*)(d + 48), e);
  }
  memcpy(d, s, n);
#else
  memcpy(dst, src, n);
#endif
}

static void store_fence(void) {
#ifdef HAVE_NT_STORES
  _mm_sfence(); /* streaming stores are not ordered by the release that publishes them */
#endif
}

/* acc = post(pre(src[order[0]]) op ... op pre(src[order[k-1]])) over n elements, where order
 * starts at `first` and wraps. acc may be src[first] (in place). */
static void reduce_all(int dt, const struct weft_dev_redop* op, void* acc, const void* const* src, int k,
                       int first, size_t n) {
  int q = 1;
  if (op->kind == WEFT_RED_PREMULSUM) {
    weft_host_preop(dt, op, acc, src[first], n);
  } else {
    weft_host_reduce(dt, op, acc, src[first], src[(first + 1) % k], n);
    q = 2;
  }
  for (; q < k; q++) weft_host_reduce(dt, op, acc, acc, src[(first + q) % k], n);
  weft_host_postop(dt, op, acc, n);
}

void weft_direct_small_post(struct weft_direct* d, const struct weft_task* t, uint64_t seq) {
  size_t bytes = t->count * weft_dt_size(t->dtype);
  int par = (int)(seq & 1);
  memcpy(bytes <= WEFT_DIRECT_INLINE ? d->mine->inl[par] : d->mine->slot[par], t->sendbuff, bytes);
}

ncclResult_t weft_direct_small_reduce(struct weft_direct* d, const struct weft_task* t,
                                      const struct weft_dev_redop* op, struct weft_waiter* w, uint64_t seq) {
  int k = d->nranks;
  size_t bytes = t->count * weft_dt_size(t->dtype);
  int inl = bytes <= WEFT_DIRECT_INLINE, par = (int)(seq & 1);
  const void* src[1] = {NULL};
  for (int p = 0; p < k; p++) {
    struct weft_board* b = d->boards[p];
    if (p != d->rank) {
      ncclResult_t res = weft_host_wait_counter(w, &b->arrive, seq, &b->arrive_sleepers, &b->failed, &b->cpu,
                                                p, "its input");
      if (res == ncclSuccess) res = weft_direct_check_peer(d, p, seq); /* before reading its input */
      if (res != ncclSuccess) return res;
    }
    const void* in = inl ? (const void*)b->inl[par] : (const void*)b->slot[par];
    /* Rank order on every rank; the board copies keep an in-place recvbuff safe to write. */
    if (p == 0 && op->kind == WEFT_RED_PREMULSUM) {
      weft_host_preop(t->dtype, op, t->recvbuff, in, t->count);
    } else if (p == 0) {
      src[0] = in;
    } else if (p == 1 && op->kind != WEFT_RED_PREMULSUM) {
      weft_host_reduce(t->dtype, op, t->recvbuff, src[0], in, t->count);
    } else {
      weft_host_reduce(t->dtype, op, t->recvbuff, t->recvbuff, in, t->count);
    }
  }
  weft_host_postop(t->dtype, op, t->recvbuff, t->count);
  return ncclSuccess;
}

ncclResult_t weft_direct_allreduce(struct weft_direct* d, const struct weft_task* t,
                                   const struct weft_dev_redop* op, struct weft_waiter* w, uint64_t seq) {
  int k = d->nranks, r = d->rank, dt = t->dtype;
  size_t es = weft_dt_size(dt), count = t->count;
  size_t align = ALIGN_BYTES / es, bs = ((count + k - 1) / k + align - 1) / align * align;
  size_t lo = weft_min_sz(count, (size_t)r * bs), hi = weft_min_sz(count, lo + bs);
  size_t chunk = WEFT_DIRECT_CHUNK / es;
  int nt = count * es >= NT_MIN_BYTES;
  const void* src[k];
  for (size_t o = lo; o < hi; o += chunk) {
    size_t m = weft_min_sz(chunk, hi - o), off = o * es;
    for (int p = 0; p < k; p++) src[p] = (const char*)d->in[p] + off;
    /* Without streaming stores, reduce straight into this rank's output (in place is safe: own
     * input comes first and is read before it is written). */
    char* acc = nt ? d->tmp : (char*)d->out[r] + off;
    reduce_all(dt, op, acc, src, k, r, m);
    for (int q = 1; q <= k; q++) {
      int p = (r + q) % k; /* own output last: peers' lines go out while they are hot */
      if (nt)
        copy_nt((char*)d->out[p] + off, acc, m * es);
      else if (p != r)
        memcpy((char*)d->out[p] + off, acc, m * es);
    }
  }
  if (nt) store_fence();
  weft_host_post_counter(&d->mine->done, &d->mine->done_sleepers, seq);
  return weft_direct_wait_all(d, w, 1, seq);
}
