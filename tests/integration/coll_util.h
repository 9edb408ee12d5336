/* Shared by the collective integration tests (header only: these programs link the public
 * library and tests/common only). Input values, an independent reference for every collective,
 * datatype and op, the case runner, and launchers for ranks as threads or as processes. */
#ifndef WEFT_TESTS_COLL_UTIL_H
#define WEFT_TESTS_COLL_UTIL_H

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include "nccl.h"
#include "uid.h"

/* ---- datatypes: our own codecs, independent of the library's ---- */

struct dt_info {
  const char* name;
  int size;
  int is_float, is_signed;
  int ebits, mbits; /* floats */
  double sum_range; /* |inputs| of sums: every partial sum of 8 ranks stays exact */
  double big_range; /* |inputs| of max/min and data movement: exact in the type */
};

static const struct dt_info dt_table[ncclNumTypes] = {
    [ncclInt8] = {"int8", 1, 0, 1, 0, 0, 8, 100},
    [ncclUint8] = {"uint8", 1, 0, 0, 0, 0, 8, 200},
    [ncclInt32] = {"int32", 4, 0, 1, 0, 0, 1000, 1e6},
    [ncclUint32] = {"uint32", 4, 0, 0, 0, 0, 1000, 3e9},
    [ncclInt64] = {"int64", 8, 0, 1, 0, 0, 1000, 1e12},
    [ncclUint64] = {"uint64", 8, 0, 0, 0, 0, 1000, 1e13},
    [ncclFloat16] = {"float16", 2, 1, 1, 5, 10, 200, 2048},
    [ncclFloat32] = {"float32", 4, 1, 1, 8, 23, 1000, 1e6},
    [ncclFloat64] = {"float64", 8, 1, 1, 11, 52, 1000, 1e12},
    [ncclBfloat16] = {"bfloat16", 2, 1, 1, 8, 7, 30, 256},
    [ncclFloat8e4m3] = {"float8e4m3", 1, 1, 1, 4, 3, 2, 16},
    [ncclFloat8e5m2] = {"float8e5m2", 1, 1, 1, 5, 2, 1, 8},
};

static inline double small_decode(uint32_t bits, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1;
  uint32_t e = (bits >> mbits) & ((1u << ebits) - 1), m = bits & ((1u << mbits) - 1);
  if (ebits == 4 && e == 15 && m == 7) return NAN; /* e4m3: the only NaN, no infinity */
  if (ebits != 4 && e == (1u << ebits) - 1)
    return m ? NAN : ((bits >> (ebits + mbits)) & 1 ? -INFINITY : INFINITY);
  double v = e ? ldexp(1.0 + ldexp(m, -mbits), (int)e - bias) : ldexp(m, 1 - bias - mbits);
  return (bits >> (ebits + mbits)) & 1 ? -v : v;
}

/* v must be exactly representable (our inputs are small integers): no rounding here. */
static inline uint32_t small_encode(double v, int ebits, int mbits) {
  uint32_t sign = signbit(v) ? 1u << (ebits + mbits) : 0;
  double a = fabs(v);
  if (a == 0) return sign;
  int bias = (1 << (ebits - 1)) - 1, e;
  frexp(a, &e);
  int exp = e - 1;
  uint32_t bits;
  if (exp + bias <= 0) {
    bits = (uint32_t)ldexp(a, bias - 1 + mbits);
  } else {
    bits = (uint32_t)(exp + bias) << mbits | (uint32_t)ldexp(a / ldexp(1, exp) - 1, mbits);
  }
  bits |= sign;
  if (small_decode(bits, ebits, mbits) != v) {
    fprintf(stderr, "test bug: %g is not exact with %d/%d bits\n", v, ebits, mbits);
    abort();
  }
  return bits;
}

static inline double dt_get(const void* buf, size_t i, ncclDataType_t dt) {
  const char* p = (const char*)buf + i * dt_table[dt].size;
  switch (dt) {
    case ncclInt8:
      return *(const int8_t*)p;
    case ncclUint8:
      return *(const uint8_t*)p;
    case ncclInt32:
      return *(const int32_t*)p;
    case ncclUint32:
      return *(const uint32_t*)p;
    case ncclInt64:
      return (double)*(const int64_t*)p;
    case ncclUint64:
      return (double)*(const uint64_t*)p;
    case ncclFloat32:
      return *(const float*)p;
    case ncclFloat64:
      return *(const double*)p;
    case ncclFloat16:
    case ncclBfloat16:
      return small_decode(*(const uint16_t*)p, dt_table[dt].ebits, dt_table[dt].mbits);
    default:
      return small_decode(*(const uint8_t*)p, dt_table[dt].ebits, dt_table[dt].mbits);
  }
}

static inline void dt_set(void* buf, size_t i, ncclDataType_t dt, double v) {
  char* p = (char*)buf + i * dt_table[dt].size;
  switch (dt) {
    case ncclInt8:
      *(int8_t*)p = (int8_t)v;
      break;
    case ncclUint8:
      *(uint8_t*)p = (uint8_t)v;
      break;
    case ncclInt32:
      *(int32_t*)p = (int32_t)v;
      break;
    case ncclUint32:
      *(uint32_t*)p = (uint32_t)v;
      break;
    case ncclInt64:
      *(int64_t*)p = (int64_t)v;
      break;
    case ncclUint64:
      *(uint64_t*)p = (uint64_t)v;
      break;
    case ncclFloat32:
      *(float*)p = (float)v;
      break;
    case ncclFloat64:
      *(double*)p = v;
      break;
    case ncclFloat16:
    case ncclBfloat16:
      *(uint16_t*)p = (uint16_t)small_encode(v, dt_table[dt].ebits, dt_table[dt].mbits);
      break;
    default:
      *(uint8_t*)p = (uint8_t)small_encode(v, dt_table[dt].ebits, dt_table[dt].mbits);
      break;
  }
}

/* ---- cases ---- */

enum coll_kind {
  C_ALLREDUCE,
  C_BROADCAST,
  C_REDUCE,
  C_ALLGATHER,
  C_REDUCESCATTER,
  C_ALLTOALL,
  C_GATHER,
  C_SCATTER,
  C_SENDRECV,
  C_COUNT
};
static const char* coll_names[C_COUNT] = {"AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                          "AlltoAll",  "Gather",    "Scatter", "SendRecv"};
static inline int coll_has_op(int coll) {
  return coll == C_ALLREDUCE || coll == C_REDUCE || coll == C_REDUCESCATTER;
}

/* Ops as the tests see them; the two PreMulSum residences are separate ops. */
enum op_kind { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG, O_PMS_HOST, O_PMS_DEV, O_COUNT, O_NONE = -1 };
static const char* op_names[O_COUNT] = {
    "sum", "prod", "max", "min", "avg", "premulsum-host", "premulsum-device"};
#define PMS_SCALAR 2.0

struct coll_case {
  int coll, dt, op, in_place, root;
  size_t count;
  uint64_t seed;
};

static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Input element j of rank r: small integers chosen so that every result is exact. */
static inline double input_value(const struct coll_case* c, int nranks, int r, size_t j) {
  const struct dt_info* d = &dt_table[c->dt];
  uint64_t h = mix64(c->seed ^ mix64(((uint64_t)r << 40) ^ j));
  if (c->op == O_PROD) { /* ±1 everywhere, one rank per element contributes 2 */
    double mag = (int)(j % (size_t)nranks) == r ? 2 : 1;
    return d->is_signed && (h & 1) ? -mag : mag;
  }
  double range = c->op == O_NONE || c->op == O_MAX || c->op == O_MIN ? d->big_range : d->sum_range;
  if (c->op == O_PMS_HOST || c->op == O_PMS_DEV)
    range = range / PMS_SCALAR < 1 ? 1 : floor(range / PMS_SCALAR);
  uint64_t span = (uint64_t)range;
  if (!d->is_signed) return (double)(h % (span + 1));
  return (double)(int64_t)(h % (2 * span + 1)) - (double)span;
}

static inline double reduce_ref(const struct coll_case* c, int nranks, size_t j, double* maxabs) {
  double acc = input_value(c, nranks, 0, j);
  *maxabs = fabs(acc);
  for (int r = 1; r < nranks; r++) {
    double v = input_value(c, nranks, r, j);
    if (fabs(v) > *maxabs) *maxabs = fabs(v);
    switch (c->op) {
      case O_PROD:
        acc *= v;
        break;
      case O_MAX:
        acc = v > acc ? v : acc;
        break;
      case O_MIN:
        acc = v < acc ? v : acc;
        break;
      default:
        acc += v;
        break;
    }
  }
  if (c->op == O_PMS_HOST || c->op == O_PMS_DEV) acc *= PMS_SCALAR;
  if (c->op == O_AVG) acc = dt_table[c->dt].is_float ? acc / nranks : trunc(acc / nranks);
  return acc;
}

/* Elements per rank of the input and output buffers. */
static inline size_t in_elems(const struct coll_case* c, int n) {
  int wide = c->coll == C_REDUCESCATTER || c->coll == C_ALLTOALL || c->coll == C_SCATTER;
  return wide ? c->count * n : c->count;
}
static inline size_t out_elems(const struct coll_case* c, int n) {
  int wide = c->coll == C_ALLGATHER || c->coll == C_ALLTOALL || c->coll == C_GATHER;
  return wide ? c->count * n : c->coll == C_SENDRECV ? 2 * c->count : c->count;
}

/* Expected output element k of rank me; returns 0 where the output is undefined. */
static inline int expected(const struct coll_case* c, int me, int n, size_t k, double* want, double* tol) {
  size_t cnt = c->count;
  double maxabs = 0;
  *tol = 0;
  *want = 0;
  switch (c->coll) {
    case C_REDUCE:
      if (me != c->root) return 0;
      /* fall through */
    case C_ALLREDUCE:
      *want = reduce_ref(c, n, k, &maxabs);
      break;
    case C_REDUCESCATTER:
      *want = reduce_ref(c, n, (size_t)me * cnt + k, &maxabs);
      break;
    case C_BROADCAST:
      *want = input_value(c, n, c->root, k);
      break;
    case C_GATHER:
      if (me != c->root) return 0;
      /* fall through */
    case C_ALLGATHER:
      *want = input_value(c, n, (int)(k / cnt), k % cnt);
      break;
    case C_ALLTOALL:
      *want = input_value(c, n, (int)(k / cnt), (size_t)me * cnt + k % cnt);
      break;
    case C_SCATTER:
      *want = input_value(c, n, c->root, (size_t)me * cnt + k);
      break;
    case C_SENDRECV:
      *want = k < cnt ? input_value(c, n, (me + n - 1) % n, k) : input_value(c, n, me, k - cnt);
      break;
  }
  if (c->op == O_AVG && dt_table[c->dt].is_float) {
    /* Avg is PreMulSum(1/n) in the element type: each of n products and n-1 additions rounds
     * by at most half an ulp of values no larger than maxabs. */
    *tol = (n + 2) * ldexp(1, -dt_table[c->dt].mbits) * (maxabs > 1 ? maxabs : 1);
  }
  return 1;
}

/* ---- running a case on one rank ---- */

static volatile int coll_failures;
static uint64_t coll_base_seed;

#define CASE_FMT "%s %s %s count %zu root %d %s nranks %d rank %d (case seed 0x%llx, base seed 0x%llx)"
#define CASE_ARGS(c, n, me)                                                                             \
  coll_names[(c)->coll], dt_table[(c)->dt].name, (c)->op >= 0 ? op_names[(c)->op] : "-", (c)->count,    \
      (c)->root, (c)->in_place ? "in-place" : "out-of-place", (n), (me), (unsigned long long)(c)->seed, \
      (unsigned long long)coll_base_seed

static inline void case_fail(void) { __atomic_add_fetch(&coll_failures, 1, __ATOMIC_RELAXED); }

static inline ncclRedOp_t case_op(const struct coll_case* c, ncclComm_t comm, void* scalar,
                                  ncclResult_t* res) {
  static const ncclRedOp_t builtin[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  *res = ncclSuccess;
  if (c->op < O_PMS_HOST) return c->op >= 0 ? builtin[c->op] : ncclSum;
  ncclRedOp_t op = ncclSum;
  /* Host immediate reads the scalar now; device residence reads it when the op runs, so the
   * value at creation differs from the one at run time. */
  int dev = c->op == O_PMS_DEV;
  dt_set(scalar, 0, (ncclDataType_t)c->dt, dev ? 1 : PMS_SCALAR);
  *res = ncclRedOpCreatePreMulSum(&op, scalar, (ncclDataType_t)c->dt,
                                  dev ? ncclScalarDevice : ncclScalarHostImmediate, comm);
  dt_set(scalar, 0, (ncclDataType_t)c->dt, dev ? PMS_SCALAR : 1);
  return op;
}

/* One collective call of a case on stream st (the host backend ignores it). */
static inline ncclResult_t case_call_stream(const struct coll_case* c, ncclComm_t comm, int me, int n,
                                            const void* send, void* recv, ncclRedOp_t op, cudaStream_t st) {
  ncclDataType_t dt = (ncclDataType_t)c->dt;
  size_t cnt = c->count, bytes = cnt * dt_table[c->dt].size;
  switch (c->coll) {
    case C_ALLREDUCE:
      return ncclAllReduce(send, recv, cnt, dt, op, comm, st);
    case C_BROADCAST:
      if (c->in_place && (c->seed & 1)) return ncclBcast(recv, cnt, dt, c->root, comm, st);
      return ncclBroadcast(send, recv, cnt, dt, c->root, comm, st);
    case C_REDUCE:
      return ncclReduce(send, recv, cnt, dt, op, c->root, comm, st);
    case C_ALLGATHER:
      return ncclAllGather(send, recv, cnt, dt, comm, st);
    case C_REDUCESCATTER:
      return ncclReduceScatter(send, recv, cnt, dt, op, comm, st);
    case C_ALLTOALL:
      return ncclAlltoAll(send, recv, cnt, dt, comm, st);
    case C_GATHER:
      return ncclGather(send, recv, cnt, dt, c->root, comm, st);
    case C_SCATTER:
      return ncclScatter(send, recv, cnt, dt, c->root, comm, st);
    case C_SENDRECV: {
      ncclResult_t r[6];
      r[0] = ncclGroupStart();
      r[1] = ncclSend(send, cnt, dt, (me + 1) % n, comm, st);
      r[2] = ncclRecv(recv, cnt, dt, (me + n - 1) % n, comm, st);
      r[3] = ncclSend(send, cnt, dt, me, comm, st);
      r[4] = ncclRecv((char*)recv + bytes, cnt, dt, me, comm, st);
      r[5] = ncclGroupEnd();
      for (int i = 0; i < 6; i++)
        if (r[i] != ncclSuccess) return r[i];
      return ncclSuccess;
    }
  }
  return ncclInternalError;
}

static inline ncclResult_t case_call(const struct coll_case* c, ncclComm_t comm, int me, int n,
                                     const void* send, void* recv, ncclRedOp_t op) {
  return case_call_stream(c, comm, me, n, send, recv, op, NULL);
}

/* Buffers of one case: in place, the send range lies inside the receive buffer where NCCL's
 * in-place layout puts it. */
struct case_bufs {
  char* alloc_send; /* NULL when in place */
  char* alloc_recv;
  const void* send;
  void* recv;
  size_t recv_elems_checked; /* output elements at recv */
  int guard_ok;              /* bytes after the output are ours to check */
  size_t alloc_bytes;        /* of alloc_recv */
};

#define GUARD_BYTES 64
#define POISON 0xa5

static inline int case_in_place_ok(const struct coll_case* c, int me) {
  if (!c->in_place || c->coll == C_ALLTOALL || c->coll == C_SENDRECV) return 0;
  if ((c->coll == C_GATHER || c->coll == C_SCATTER) && me != c->root) return 0;
  return 1;
}

static inline int case_setup(const struct coll_case* c, int me, int n, struct case_bufs* b) {
  size_t sz = dt_table[c->dt].size, in = in_elems(c, n), out = out_elems(c, n);
  size_t cnt = c->count;
  memset(b, 0, sizeof(*b));
  size_t big = (in > out ? in : out) * sz;
  b->alloc_bytes = big + GUARD_BYTES;
  b->alloc_recv = malloc(b->alloc_bytes);
  if (!b->alloc_recv) return -1;
  memset(b->alloc_recv, POISON, big + GUARD_BYTES);
  b->recv = b->alloc_recv;
  b->recv_elems_checked = out;
  b->guard_ok = 1;
  if (!case_in_place_ok(c, me)) {
    b->alloc_send = malloc(in * sz + 1);
    if (!b->alloc_send) return -1;
    for (size_t j = 0; j < in; j++) dt_set(b->alloc_send, j, (ncclDataType_t)c->dt, input_value(c, n, me, j));
    b->send = b->alloc_send;
    return 0;
  }
  char* base = b->alloc_recv;
  switch (c->coll) {
    case C_ALLGATHER:
    case C_GATHER: { /* send is my (or the root's own) slice of recv */
      char* slice = base + (size_t)me * cnt * sz;
      for (size_t j = 0; j < cnt; j++) dt_set(slice, j, (ncclDataType_t)c->dt, input_value(c, n, me, j));
      b->send = slice;
      break;
    }
    case C_REDUCESCATTER:
    case C_SCATTER: /* recv is my slice of send */
      for (size_t j = 0; j < in; j++) dt_set(base, j, (ncclDataType_t)c->dt, input_value(c, n, me, j));
      b->send = base;
      b->recv = base + (size_t)me * cnt * sz;
      b->guard_ok = 0;
      break;
    default: /* same buffer */
      for (size_t j = 0; j < in; j++) dt_set(base, j, (ncclDataType_t)c->dt, input_value(c, n, me, j));
      b->send = base;
      break;
  }
  return 0;
}

static inline int case_check(const struct coll_case* c, int me, int n, const struct case_bufs* b) {
  int bad = 0;
  size_t sz = dt_table[c->dt].size;
  for (size_t k = 0; k < b->recv_elems_checked; k++) {
    double want, tol;
    if (!expected(c, me, n, k, &want, &tol)) continue;
    double got = dt_get(b->recv, k, (ncclDataType_t)c->dt);
    if (!(fabs(got - want) <= tol)) {
      if (bad < 3)
        fprintf(stderr, "FAILED " CASE_FMT ": element %zu got %.17g want %.17g (bound %g)\n",
                CASE_ARGS(c, n, me), k, got, want, tol);
      bad++;
    }
  }
  if (b->guard_ok) { /* everything after the output, up to the end of the allocation */
    const unsigned char* g = (const unsigned char*)b->recv;
    for (size_t k = b->recv_elems_checked * sz; k < b->alloc_bytes; k++) {
      if (g[k] != POISON) {
        fprintf(stderr, "FAILED " CASE_FMT ": byte %zu after the output was written\n", CASE_ARGS(c, n, me),
                k - b->recv_elems_checked * sz);
        bad++;
        break;
      }
    }
  }
  return bad;
}

/* Runs one case on this rank; returns the number of problems (also counted globally). */
static inline int run_case(const struct coll_case* c, ncclComm_t comm, int me, int n) {
  struct case_bufs b;
  if (case_setup(c, me, n, &b) != 0) {
    fprintf(stderr, "FAILED " CASE_FMT ": out of memory\n", CASE_ARGS(c, n, me));
    case_fail();
    return 1;
  }
  uint64_t scalar[1] = {0};
  ncclResult_t res;
  ncclRedOp_t op = case_op(c, comm, scalar, &res);
  int bad = 0;
  if (res == ncclSuccess) res = case_call(c, comm, me, n, b.send, b.recv, op);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED " CASE_FMT ": returned %s: %s\n", CASE_ARGS(c, n, me), ncclGetErrorString(res),
            ncclGetLastError(comm));
    bad = 1;
  } else {
    bad = case_check(c, me, n, &b);
  }
  if (c->op == O_PMS_HOST || c->op == O_PMS_DEV) {
    if (ncclRedOpDestroy(op, comm) != ncclSuccess && res == ncclSuccess) {
      fprintf(stderr, "FAILED " CASE_FMT ": ncclRedOpDestroy failed\n", CASE_ARGS(c, n, me));
      bad++;
    }
  }
  free(b.alloc_send);
  free(b.alloc_recv);
  if (bad) case_fail();
  return bad;
}

/* ---- case lists ---- */

struct case_list {
  struct coll_case* v;
  int n, cap;
};

static inline void case_add(struct case_list* l, struct coll_case c) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->v = realloc(l->v, l->cap * sizeof(*l->v));
    if (!l->v) abort();
  }
  l->v[l->n++] = c;
}

/* Every collective x datatype x op. In-place and the count alternate between neighbouring
 * cases, so each collective sees both layouts and both counts over the datatypes. */
static inline void cases_matrix(struct case_list* l, int nranks, uint64_t seed, size_t max_count) {
  int k = 0;
  for (int coll = 0; coll < C_COUNT; coll++) {
    for (int dt = 0; dt < ncclNumTypes; dt++) {
      for (int op = coll_has_op(coll) ? 0 : O_NONE; op < (coll_has_op(coll) ? O_COUNT : O_NONE + 1);
           op++, k++) {
        uint64_t s = mix64(seed + (uint64_t)k);
        struct coll_case c = {coll, dt, op, k & 1, (int)(s % (uint64_t)nranks), 7, s};
        if ((k >> 1) & 1) c.count = 8 + (size_t)(mix64(s) % (max_count - 7));
        case_add(l, c);
      }
    }
  }
}

/* Counts 0 and 1 for every collective, both layouts. */
static inline void cases_edges(struct case_list* l, int nranks, uint64_t seed) {
  int k = 0;
  for (int coll = 0; coll < C_COUNT; coll++) {
    for (int in_place = 0; in_place < 2; in_place++) {
      for (size_t count = 0; count < 2; count++, k++) {
        uint64_t s = mix64(seed ^ 0xed9e5ull ^ (uint64_t)k);
        int dt = k & 2 ? ncclFloat32 : ncclInt32;
        struct coll_case c = {
            coll, dt, coll_has_op(coll) ? O_SUM : O_NONE, in_place, (int)(s % (uint64_t)nranks), count, s};
        case_add(l, c);
      }
    }
  }
}

static inline uint64_t pick_seed(void) {
  const char* s = getenv("COLL_SEED");
  if (s) return strtoull(s, NULL, 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
}

/* ---- launchers ---- */

typedef int (*rank_body)(ncclComm_t comm, int rank, int nranks, void* arg);

/* Seconds on the monotonic clock, for tests that time how soon an operation ends. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* In a rank body with an int `rank` and an int `bad`: a failed check counts in `bad` and names
 * the rank and the line. */
#define WANT(cond, ...)                                            \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "FAILED rank %d line %d: ", rank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, "\n");                                       \
      bad++;                                                       \
    }                                                              \
  } while (0)
#define WANT_RES(call, want)                                                                                \
  do {                                                                                                      \
    ncclResult_t r_ = (call);                                                                               \
    WANT(r_ == (want), "%s returned %s, want %s", #call, ncclGetErrorString(r_), ncclGetErrorString(want)); \
  } while (0)
/* When set, run_procs calls it in each rank's process before that rank joins the communicator
 * (per-rank environments). */
static void (*coll_rank_setup)(int rank, int nranks);
/* When set, run_threads calls it in each rank's thread before that rank joins (per-thread state
 * such as the current CUDA device; not the environment, which threads share). */
static void (*coll_thread_setup)(int rank, int nranks);

struct thread_rank {
  pthread_t th;
  ncclUniqueId id;
  int rank, nranks, problems;
  rank_body body;
  void* arg;
};

static inline void* thread_rank_main(void* p) {
  struct thread_rank* t = p;
  ncclComm_t comm = NULL;
  if (coll_thread_setup) coll_thread_setup(t->rank, t->nranks);
  ncclResult_t res = ncclCommInitRank(&comm, t->nranks, t->id, t->rank);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d/%d: ncclCommInitRank: %s: %s\n", t->rank, t->nranks,
            ncclGetErrorString(res), ncclGetLastError(NULL));
    t->problems = 1;
    return NULL;
  }
  t->problems = t->body(comm, t->rank, t->nranks, t->arg);
  res = ncclCommDestroy(comm);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: ncclCommDestroy: %s\n", t->rank, ncclGetErrorString(res));
    t->problems++;
  }
  return NULL;
}

/* Ranks as threads of this process, each calling ncclCommInitRank with one unique id. */
static inline int run_threads(int nranks, rank_body body, void* arg) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "FAILED ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  struct thread_rank* t = calloc(nranks, sizeof(*t));
  for (int r = 0; r < nranks; r++) {
    t[r] = (struct thread_rank){.id = id, .rank = r, .nranks = nranks, .body = body, .arg = arg};
    if (pthread_create(&t[r].th, NULL, thread_rank_main, &t[r]) != 0) abort();
  }
  int problems = 0;
  for (int r = 0; r < nranks; r++) {
    pthread_join(t[r].th, NULL);
    problems += t[r].problems;
  }
  free(t);
  return problems;
}

/* Ranks as processes, forked from this (single-threaded) process with an id whose root a helper
 * process runs (uid.h); each exits 0 when its body found nothing wrong. child_limit_s bounds a
 * hung child. Returns the number of failed children. */
static inline int run_procs(int nranks, rank_body body, void* arg, int child_limit_s) {
  ncclUniqueId id;
  struct test_uid_holder holder;
  fflush(stdout); /* before the uid helper forks too: it would print what is buffered again */
  if (test_uid_from_child(&id, &holder) != ncclSuccess) {
    fprintf(stderr, "FAILED ncclGetUniqueId (in a helper process)\n");
    test_uid_release(&holder);
    return 1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t* pids = calloc(nranks, sizeof(*pids));
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(child_limit_s);
      if (coll_rank_setup) coll_rank_setup(r, nranks);
      ncclComm_t comm = NULL;
      ncclResult_t res = ncclCommInitRank(&comm, nranks, id, r);
      if (res != ncclSuccess) {
        fprintf(stderr, "FAILED rank %d/%d: ncclCommInitRank: %s: %s\n", r, nranks, ncclGetErrorString(res),
                ncclGetLastError(NULL));
        _exit(2);
      }
      int problems = body(comm, r, nranks, arg);
      if (ncclCommDestroy(comm) != ncclSuccess) problems++;
      fflush(stderr);
      _exit(problems ? 1 : 0);
    }
  }
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    int status = 0;
    if (pids[r] < 0 || waitpid(pids[r], &status, 0) < 0) {
      failed++;
      continue;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "FAILED rank %d (pid %d) of %d: %s %d (base seed 0x%llx)\n", r, (int)pids[r], nranks,
              WIFSIGNALED(status) ? "killed by signal" : "exit status",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
              (unsigned long long)coll_base_seed);
      failed++;
    }
  }
  free(pids);
  test_uid_release(&holder);
  return failed;
}

/* Runs a case list as the body of a rank. */
static inline int run_case_list(ncclComm_t comm, int rank, int nranks, void* arg) {
  const struct case_list* l = arg;
  int problems = 0;
  for (int i = 0; i < l->n; i++) problems += run_case(&l->v[i], comm, rank, nranks) != 0;
  return problems;
}

/* Names of /dev/shm entries that belong to process pid (segments are named weft-<tag>-<pid>-...). */
static inline int shm_leftovers(pid_t pid, int print) {
  char cmd[160];
  snprintf(cmd, sizeof(cmd), "ls /dev/shm 2>/dev/null | grep -E '^weft-.*-%d-[0-9]+$'", (int)pid);
  FILE* f = popen(cmd, "r");
  if (!f) return 0;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof(line), f)) {
    if (print) fprintf(stderr, "leftover in /dev/shm: %s", line);
    n++;
  }
  pclose(f);
  return n;
}

/* main() of the matrix tests: every collective x datatype x op for the rank counts given as
 * arguments (default 1, 2, 3, 4, 5, 8), ranks as threads or as forked processes. */
static inline int run_matrix_main(int argc, char** argv, int as_procs, const char* name) {
  static const int all[] = {1, 2, 3, 4, 5, 8};
  int counts[16], ncounts = 0;
  for (int i = 1; i < argc && ncounts < 16; i++) counts[ncounts++] = atoi(argv[i]);
  if (ncounts == 0)
    for (int i = 0; i < 6; i++) counts[ncounts++] = all[i];
  coll_base_seed = pick_seed();
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  if (!as_procs) alarm(500);
  const char* kind = as_procs ? "processes" : "threads";
  for (int i = 0; i < ncounts; i++) {
    int n = counts[i];
    struct case_list l = {0};
    cases_matrix(&l, n, coll_base_seed + (uint64_t)n, 30000);
    cases_edges(&l, n, coll_base_seed + (uint64_t)n);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failed = as_procs ? run_procs(n, run_case_list, &l, 300) : run_threads(n, run_case_list, &l);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d ranks (%s): %d cases, %d failed, %.1f s\n", n, kind, l.n, failed,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    fflush(stdout);
    EXPECT_MSG(failed == 0, "%d ranks as %s: %d failed (base seed 0x%llx)", n, kind, failed,
               (unsigned long long)coll_base_seed);
    free(l.v);
  }
  return test_finish(name);
}

#endif
