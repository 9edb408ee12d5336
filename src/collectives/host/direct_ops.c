/* Data movement of the direct paths: the small all-reduce through the boards (every rank reduces
 * every input, in rank order, so all results are bit-identical) and the zero-copy all-reduce
 * (rank r reduces block r of every input and writes it into every output: each input byte is
 * read once and each output byte written once, the least memory traffic there is), with the
 * copy and slice-reduction helpers the other zero-copy collectives (direct_colls.c) share. */
#include <string.h>

#include "collectives/host/direct_impl.h"
#include "collectives/host/reduce.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_NT_STORES 1
#endif

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

void weft_direct_copy(void* dst, const void* src, size_t n, int nt) {
  if (nt)
    copy_nt(dst, src, n);
  else
    memcpy(dst, src, n);
}

void weft_direct_store_fence(void) {
#ifdef HAVE_NT_STORES
  _mm_sfence(); /* streaming stores are not ordered by the release that publishes them */
#endif
}

void weft_direct_slice(size_t count, size_t es, int k, int r, size_t* lo, size_t* hi) {
  size_t align = ALIGN_BYTES / es, bs = ((count + k - 1) / k + align - 1) / align * align;
  *lo = weft_min_sz(count, (size_t)r * bs);
  *hi = weft_min_sz(count, *lo + bs);
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

/* Operation seq's mark, with the low half of its call's tag: a peer's lines of another call (or
 * of the operation before last, which used the same lines) do not carry it. Never 0 (seq > 0). */
static uint64_t line_mark(uint64_t seq, uint64_t tag) { return seq << 32 | (uint32_t)tag; }

static void post_lines(struct weft_line* lines, const unsigned char* src, size_t bytes, uint64_t mark) {
  size_t off = 0;
  for (; off + WEFT_LINE_DATA <= bytes; off += WEFT_LINE_DATA, lines++) {
    memcpy(lines->data, src + off, WEFT_LINE_DATA); /* a fixed size: a few moves, no call */
    __atomic_store_n(&lines->mark, mark, __ATOMIC_RELEASE);
  }
  if (off < bytes) {
    memcpy(lines->data, src + off, bytes - off);
    __atomic_store_n(&lines->mark, mark, __ATOMIC_RELEASE);
  }
}

/* Whether every line of a peer's input carries mark within a short burst of polls (one look when
 * ranks outnumber CPUs: the peer may need this one's CPU, which the fallback wait yields). The last
 * line is written last: the others are looked at once it has come. */
static int lines_landed(const struct weft_line* lines, size_t n, uint64_t mark, int polls) {
  for (int i = 0; i < polls; i++) {
    if (__atomic_load_n(&lines[n - 1].mark, __ATOMIC_ACQUIRE) != mark) continue;
    for (size_t l = 0; l + 1 < n; l++)
      if (__atomic_load_n(&lines[l].mark, __ATOMIC_ACQUIRE) != mark) return 0;
    return 1;
  }
  return 0;
}

/* The input of lines gathered into dst. */
static void gather_lines(void* dst, const struct weft_line* lines, size_t bytes) {
  size_t off = 0;
  for (; off + WEFT_LINE_DATA <= bytes; off += WEFT_LINE_DATA, lines++)
    memcpy((unsigned char*)dst + off, lines->data, WEFT_LINE_DATA);
  if (off < bytes) memcpy((unsigned char*)dst + off, lines->data, bytes - off);
}

void weft_direct_small_post(struct weft_direct* d, const struct weft_task* t, uint64_t seq) {
  size_t bytes = t->count * weft_dt_size(t->dtype);
  int par = (int)(seq & 1);
  if (bytes <= WEFT_DIRECT_LINED_MAX)
    post_lines(d->mine->lines[par], t->sendbuff, bytes, line_mark(seq, d->tag));
  else
    memcpy(d->mine->slot[par], t->sendbuff, bytes);
}

ncclResult_t weft_direct_small_reduce(struct weft_direct* d, const struct weft_task* t,
                                      const struct weft_dev_redop* op, struct weft_waiter* w, uint64_t seq) {
  int k = d->nranks;
  size_t bytes = t->count * weft_dt_size(t->dtype);
  int par = (int)(seq & 1), lined = bytes <= WEFT_DIRECT_LINED_MAX;
  size_t nlines = (bytes + WEFT_LINE_DATA - 1) / WEFT_LINE_DATA;
  uint64_t mark = line_mark(seq, d->tag);
  const void* src[1] = {NULL};
  /* This rank's own input comes from sendbuff, not from its own lines or slot (2 processes, time
   * per call: 256 B 0.88x, 512 B 0.91x, 1 KiB 0.73x), unless recvbuff is sendbuff and was written
   * before this rank's turn (at rank 0 by a PreMulSum, else at rank 1; in that turn each element is
   * read before it is written). */
  int own_from_sendbuff = t->sendbuff != t->recvbuff || d->rank <= (op->kind == WEFT_RED_PREMULSUM ? 0 : 1);
  for (int p = 0; p < k; p++) {
    struct weft_board* b = d->boards[p];
    if (p != d->rank && !(lined && lines_landed(b->lines[par], nlines, mark, w->oversub ? 1 : 512))) {
      ncclResult_t res = weft_host_wait_counter(w, &b->arrive, seq, &b->arrive_sleepers, &b->failed, &b->cpu,
                                                p, "its input");
      /* Before reading its input. Equal tags are taken as the same call: the input is read from
       * the board, so a hash collision (2^-32) cannot read past a buffer, as it could on the
       * paths that read peers' buffers (they compare whole fingerprints). */
      if (res == ncclSuccess && b->tag[seq & 1] != d->tag) res = weft_direct_check_peer(d, p, seq);
      if (res != ncclSuccess) return res;
    }
    const void* in = b->slot[par];
    if (p == d->rank && own_from_sendbuff) {
      in = t->sendbuff;
    } else if (lined) { /* two gathered inputs at a time: the first is kept until the second comes */
      in = (unsigned char*)d->tmp + (p & 1) * WEFT_DIRECT_LINED_MAX;
      gather_lines((void*)in, b->lines[par], bytes);
    }
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

/* Whether the reduction may accumulate straight in dst: no source but the first lives there (the
 * first is read before it is written; the API refuses partial overlaps). */
static int may_accumulate_in(const void* dst, const void* const* src, int k, int first) {
  for (int p = 0; p < k; p++)
    if (p != first && src[p] == dst) return 0;
  return 1;
}

void weft_direct_reduce_into(struct weft_direct* d, int dt, const struct weft_dev_redop* op,
                             const void* const* src, int first, void* const* dst, int ndst, size_t lo,
                             size_t hi, int nt) {
  int k = d->nranks;
  size_t es = weft_dt_size(dt), chunk = WEFT_DIRECT_CHUNK / es;
  /* With streaming stores (or an in-place source read late), through the L1-sized tmp. */
  int in_dst = !nt && may_accumulate_in(dst[ndst - 1], src, k, first);
  const void* at[k];
  for (size_t o = lo; o < hi; o += chunk) {
    size_t m = weft_min_sz(chunk, hi - o), off = o * es;
    for (int p = 0; p < k; p++) at[p] = (const char*)src[p] + off;
    char* acc = in_dst ? (char*)dst[ndst - 1] + off : d->tmp;
    reduce_all(dt, op, acc, at, k, first, m);
    for (int j = 0; j < ndst; j++)
      if (!in_dst || j != ndst - 1) weft_direct_copy((char*)dst[j] + off, acc, m * es, nt);
  }
}

void weft_direct_allreduce(struct weft_direct* d, const struct weft_task* t, const struct weft_dev_redop* op,
                           int nt) {
  int k = d->nranks, r = d->rank;
  size_t lo, hi;
  weft_direct_slice(t->count, weft_dt_size(t->dtype), k, r, &lo, &hi);
  void* dst[k];
  /* Own output last: peers' lines go out while they are hot. */
  for (int q = 1; q <= k; q++) dst[q - 1] = d->out[(r + q) % k];
  weft_direct_reduce_into(d, t->dtype, op, (const void* const*)d->in, r, dst, k, lo, hi, nt);
}
