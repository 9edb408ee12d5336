/* IEEE special values through the CUDA backend's reductions: NaN (quiet and signalling, either
 * sign, any payload), +-Inf, +-0, subnormals, normals near overflow and small integers, in float32,
 * float64, float16, bfloat16 and both fp8 formats, through AllReduce, Reduce and ReduceScatter
 * with sum, prod, max and min, on NCCL_PROTO=Simple and on LL (a communicator each: the protocol
 * is read when a communicator is made). Every output element must be what some order of combining
 * the ranks' inputs gives with the element math the library promises (reduce.h: each op rounds
 * once to the type, to nearest even, subnormals kept; max/min return the non-NaN operand; fp8
 * saturates). The reference enumerates every order and grouping of the ranks (all binary trees),
 * so it holds for ring and tree alike without knowing which ran, and where all orders agree
 * (exact sums, NaN, Inf + -Inf, zero signs of sums) the check is exact. An all-reduce's output
 * must also be bit-identical on every rank (one result, copied: NaN payloads included); nothing
 * after an output may be written, and a non-root's Reduce buffer stays untouched. NaN payloads
 * and the sign of a NaN are not compared: a GPU makes canonical NaNs, the host keeps payloads.
 * On the emulated GPU this checks the data path; on a real GPU also the hardware's rules
 * (native half/bfloat16 add, mul, max and min, fp8 conversions, float subnormals not flushed).
 * Usage: test_gpu_special [threads|procs] [nranks...] (1 to 4 ranks; default threads 2 3 4).
 * SKIP without a GPU. */
#include <sys/mman.h>

#include "gpu_util.h"

#define MAX_RANKS 4
#define MAX_SET 128 /* distinct results of 4 ranks: at most 4! * 5 ordered binary trees = 120 */

static const int special_types[] = {ncclFloat32,  ncclFloat64,    ncclFloat16,
                                    ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
#define NTYPES ((int)(sizeof(special_types) / sizeof(special_types[0])))
static const int special_colls[] = {C_ALLREDUCE, C_REDUCE, C_REDUCESCATTER};
static const ncclRedOp_t nccl_ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};

/* ---- the formats, as fields ---- */

struct fmt {
  int size, ebits, mbits, ieee; /* ieee: the all-ones exponent is Inf/NaN (all but e4m3) */
};

static struct fmt fmt_of(int dt) {
  struct fmt f = {dt_table[dt].size, dt_table[dt].ebits, dt_table[dt].mbits, dt != ncclFloat8e4m3};
  return f;
}

static uint64_t fields(const struct fmt* f, int neg, uint64_t e, uint64_t m) {
  return (uint64_t)neg << (f->ebits + f->mbits) | e << f->mbits | m;
}

static void put_bits(void* buf, size_t i, int size, uint64_t bits) {
  char* p = (char*)buf + i * (size_t)size;
  uint8_t b8 = (uint8_t)bits;
  uint16_t b16 = (uint16_t)bits;
  uint32_t b32 = (uint32_t)bits;
  switch (size) {
    case 1:
      memcpy(p, &b8, 1);
      break;
    case 2:
      memcpy(p, &b16, 2);
      break;
    case 4:
      memcpy(p, &b32, 4);
      break;
    default:
      memcpy(p, &bits, 8);
      break;
  }
}

/* Largest finite value: e4m3 stops at S.1111.110 (448), the others one exponent below all ones. */
static double max_finite(int dt) {
  struct fmt f = fmt_of(dt);
  uint64_t bits = f.ieee ? fields(&f, 0, (1u << f.ebits) - 2, (1ull << f.mbits) - 1) : 0x7e;
  uint64_t buf = 0;
  put_bits(&buf, 0, f.size, bits);
  return dt_get(&buf, 0, (ncclDataType_t)dt);
}

/* ---- inputs ---- */

/* Input element j of rank r. The element's class (the same on every rank) picks which kinds of
 * value the ranks draw, so that zeros meet zeros, infinities of both signs meet, and subnormals
 * add up, often enough to matter; class 0 mixes everything. */
static uint64_t special_bits(const struct coll_case* c, int nranks, int r, size_t j) {
  struct fmt f = fmt_of(c->dt);
  uint64_t h = mix64(c->seed ^ mix64(((uint64_t)r << 40) ^ j ^ 0x5bd1e995ull));
  uint64_t h2 = mix64(h);
  int neg = (int)(h2 >> 63);
  uint64_t eall = (1u << f.ebits) - 1, mall = (1ull << f.mbits) - 1;
  uint64_t emax = f.ieee ? eall - 1 : eall; /* largest exponent field of a finite value */
  int bias = (1 << (f.ebits - 1)) - 1;
  enum { K_NAN, K_PINF, K_NINF, K_ZERO, K_SUB, K_NORMAL, K_MODERATE, K_LARGE, K_INT } kind;
  switch (mix64(c->seed ^ j ^ 0xc1a55ull) % 8) {
    case 0: { /* everything */
      static const int mixed[16] = {K_NAN, K_PINF, K_NINF,   K_ZERO,   K_ZERO,     K_ZERO,  K_SUB, K_SUB,
                                    K_SUB, K_SUB,  K_NORMAL, K_NORMAL, K_MODERATE, K_LARGE, K_INT, K_INT};
      kind = mixed[h % 16];
      break;
    }
    case 1: /* zeros of both signs */
      kind = K_ZERO;
      break;
    case 2:
      kind = h % 3 ? K_SUB : K_ZERO;
      break;
    case 3: /* infinities of both signs among finite values */
      kind = h % 3 == 0 ? K_PINF : h % 3 == 1 ? K_NINF : K_MODERATE;
      break;
    case 4:
      kind = h % 2 ? K_SUB : K_MODERATE;
      break;
    case 5: /* exactly one rank's NaN */
      kind = (int)(j % (size_t)nranks) == r ? K_NAN : h % 3 == 0 ? K_PINF : h % 3 == 1 ? K_SUB : K_MODERATE;
      break;
    case 6: /* overflow of sums and products */
      kind = K_LARGE;
      break;
    default:
      kind = h % 4 ? K_INT : K_ZERO;
      break;
  }
  uint64_t m = h2 & mall;
  switch (kind) {
    case K_NAN: /* any payload: quiet, signalling (top mantissa bit clear), all ones */
      if (!f.ieee) return fields(&f, neg, eall, mall);
      return fields(&f, neg, eall, h2 % 4 == 0 ? 1 : h2 % 4 == 1 ? mall : 1 + m % mall);
    case K_PINF:
    case K_NINF: /* e4m3 has none: its largest finite value instead */
      return f.ieee ? fields(&f, kind == K_NINF, eall, 0) : fields(&f, kind == K_NINF, eall, mall - 1);
    case K_ZERO:
      return fields(&f, neg, 0, 0);
    case K_SUB: /* the smallest, the largest and others */
      return fields(&f, neg, 0, h2 % 4 == 0 ? 1 : h2 % 4 == 1 ? mall : 1 + m % mall);
    case K_NORMAL: {
      uint64_t e = 1 + (h2 >> 32) % emax;
      if (!f.ieee && e == eall && m == mall) m--; /* that one is e4m3's NaN */
      return fields(&f, neg, e, m);
    }
    case K_MODERATE: /* 2^-4 .. 2^5: sums and products of these mostly stay normal */
      return fields(&f, neg, (uint64_t)(bias - 4 + (int)((h2 >> 32) % 9)), m);
    case K_LARGE: {
      uint64_t e = emax - (h2 >> 32) % 2;
      if (!f.ieee && e == eall && m == mall) m--;
      return fields(&f, neg, e, m);
    }
    default: { /* small integers, exact in every format here */
      double v = (double)((int)(h2 % 13) - 6);
      uint64_t bits = 0;
      if (c->dt == ncclFloat32) {
        float x = (float)v;
        uint32_t u;
        memcpy(&u, &x, 4);
        bits = u;
      } else if (c->dt == ncclFloat64) {
        memcpy(&bits, &v, 8);
      } else {
        bits = small_encode(v, f.ebits, f.mbits);
      }
      return bits;
    }
  }
}

static double input_at(const struct coll_case* c, int nranks, int r, size_t j) {
  uint64_t buf = 0;
  put_bits(&buf, 0, dt_table[c->dt].size, special_bits(c, nranks, r, j));
  return dt_get(&buf, 0, (ncclDataType_t)c->dt);
}

/* ---- the reference: the element math, written from IEEE 754, not from reduce.h ---- */

/* v rounded to the format of dt, to nearest even, with gradual underflow; overflow is Inf, or
 * the largest finite value for fp8 (saturating, as CUDA's __NV_SATFINITE). Values are carried
 * in doubles: every input and result here is exact in one. */
static double round_to(int dt, double v) {
  if (dt == ncclFloat64 || dt == ncclFloat32 || isnan(v)) return v; /* float: already computed in float */
  int fp8 = dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
  double maxf = max_finite(dt);
  if (isinf(v)) return fp8 ? copysign(maxf, v) : v;
  if (v == 0) return v;
  int bias = (1 << (dt_table[dt].ebits - 1)) - 1, e;
  frexp(v, &e);
  e -= 1; /* |v| = 1.f * 2^e */
  if (e < 1 - bias) e = 1 - bias;
  double q = ldexp(1, e - dt_table[dt].mbits); /* the spacing of the format at v */
  double r = nearbyint(v / q) * q;             /* the default rounding mode: to nearest even */
  if (fabs(r) > maxf) r = fp8 ? copysign(maxf, v) : copysign(INFINITY, v);
  return r == 0 ? copysign(0, v) : r;
}

/* a op b, a being what arrived and b this rank's own (max/min return the non-NaN operand, and b
 * when they compare equal: +0 and -0, which either order covers). Sums and products of two
 * values of the small formats are exact in double (or within 53 bits, enough that rounding twice
 * gives the correctly rounded result), so one rounding to the format follows. */
static double ref_op(int op, int dt, double a, double b) {
  double v;
  if (dt == ncclFloat32) {
    float x = (float)a, y = (float)b;
    switch (op) {
      case O_SUM:
        return x + y;
      case O_PROD:
        return x * y;
      default:
        break;
    }
  }
  switch (op) {
    case O_SUM:
      v = a + b;
      break;
    case O_PROD:
      v = a * b;
      break;
    case O_MAX:
      v = (a > b || isnan(b)) ? a : b;
      break;
    default:
      v = (a < b || isnan(b)) ? a : b;
      break;
  }
  return round_to(dt, v);
}

/* Set of results: NaN is one value whatever its payload; +0 and -0 are two. */
struct vset {
  int n;
  double v[MAX_SET];
};

static int same_value(double a, double b) {
  return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static void vset_add(struct vset* s, double x) {
  for (int i = 0; i < s->n; i++)
    if (same_value(s->v[i], x)) return;
  if (s->n == MAX_SET) {
    fprintf(stderr, "test bug: more than %d results\n", MAX_SET);
    abort();
  }
  s->v[s->n++] = x;
}

/* Every result of reducing x[0..n-1] in any order and grouping: R[S] for a set S of ranks holds
 * a op b for every split of S into A and B (both orders) and every a in R[A], b in R[B]. */
static const struct vset* all_results(const double* x, int n, int op, int dt, struct vset* R) {
  for (int s = 1; s < (1 << n); s++) {
    R[s].n = 0;
    if ((s & (s - 1)) == 0) {
      vset_add(&R[s], x[__builtin_ctz((unsigned)s)]);
      continue;
    }
    for (int a = (s - 1) & s; a > 0; a = (a - 1) & s)
      for (int i = 0; i < R[a].n; i++)
        for (int k = 0; k < R[s ^ a].n; k++) vset_add(&R[s], ref_op(op, dt, R[a].v[i], R[s ^ a].v[k]));
  }
  return &R[(1 << n) - 1];
}

/* ---- running ---- */

/* What the ranks leave for the checker (shared memory: ranks may be processes): per case and
 * rank, the call's result and the output followed by GUARD_BYTES. */
struct special_run {
  struct case_list cases;
  int nranks;
  size_t send_pool, recv_pool; /* bytes per rank */
  size_t* slot_off;            /* per case: offset of rank 0's slot in out */
  int* res;                    /* [case * MAX_RANKS + rank] */
  unsigned char* out;
  size_t shared_bytes;
};

static size_t slot_bytes(const struct coll_case* c, int n) {
  return out_elems(c, n) * (size_t)dt_table[c->dt].size + GUARD_BYTES;
}

static int special_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  struct special_run* run = arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  /* One pool per rank for the whole list: cudaFree between cases would wait for the other
   * ranks' kernels, which may wait for this rank's next launch. */
  char *d_send, *d_recv;
  GPU_CHECK(cudaMalloc((void**)&d_send, run->send_pool));
  GPU_CHECK(cudaMalloc((void**)&d_recv, run->recv_pool));
  char* h_in = malloc(run->send_pool);
  if (!h_in) abort();
  int problems = 0;
  for (int i = 0; i < run->cases.n; i++) {
    const struct coll_case* c = &run->cases.v[i];
    int sz = dt_table[c->dt].size;
    size_t in = in_elems(c, nranks), out_bytes = out_elems(c, nranks) * (size_t)sz;
    for (size_t j = 0; j < in; j++) put_bits(h_in, j, sz, special_bits(c, nranks, rank, j));
    GPU_CHECK(cudaMemsetAsync(d_recv, POISON, run->recv_pool, st));
    const char* send = d_send;
    char* recv = d_recv;
    if (c->in_place) { /* NCCL's in-place layouts: the same buffer; ReduceScatter: my slice of it */
      GPU_CHECK(cudaMemcpyAsync(d_recv, h_in, in * (size_t)sz, cudaMemcpyHostToDevice, st));
      send = d_recv;
      if (c->coll == C_REDUCESCATTER) recv = d_recv + (size_t)rank * out_bytes;
    } else {
      GPU_CHECK(cudaMemcpyAsync(d_send, h_in, in * (size_t)sz, cudaMemcpyHostToDevice, st));
    }
    ncclResult_t res = case_call_stream(c, comm, rank, nranks, send, recv, nccl_ops[c->op], st);
    run->res[i * MAX_RANKS + rank] = res;
    if (res != ncclSuccess) {
      fprintf(stderr, "FAILED " CASE_FMT ": returned %s: %s\n", CASE_ARGS(c, nranks, rank),
              ncclGetErrorString(res), ncclGetLastError(comm));
      problems++;
      continue;
    }
    unsigned char* slot = run->out + run->slot_off[i] + (size_t)rank * slot_bytes(c, nranks);
    GPU_CHECK(cudaMemcpyAsync(slot, recv, out_bytes + GUARD_BYTES, cudaMemcpyDeviceToHost, st));
    GPU_CHECK(cudaStreamSynchronize(st));
  }
  GPU_CHECK(cudaStreamSynchronize(st));
  free(h_in);
  cudaFree(d_send);
  cudaFree(d_recv);
  cudaStreamDestroy(st);
  return problems;
}

/* What the outputs covered, so that a change of inputs that stops producing a kind of result
 * fails instead of passing quietly. */
struct coverage {
  long elements, nan, inf, neg_zero, subnormal, order_dependent;
};

static void cover(struct coverage* cv, int dt, double got, const struct vset* want) {
  cv->elements++;
  if (isnan(got)) cv->nan++;
  if (isinf(got)) cv->inf++;
  if (got == 0 && signbit(got)) cv->neg_zero++;
  if (got != 0 && fabs(got) < ldexp(1, 2 - (1 << (dt_table[dt].ebits - 1)))) cv->subnormal++;
  if (want->n > 1) cv->order_dependent++;
}

static void print_value(FILE* f, const void* buf, size_t k, int dt) {
  uint64_t bits = 0;
  memcpy(&bits, (const char*)buf + k * (size_t)dt_table[dt].size, (size_t)dt_table[dt].size);
  fprintf(f, "%a (0x%llx)", dt_get(buf, k, (ncclDataType_t)dt), (unsigned long long)bits);
}

/* Checks output element k of rank me (global element g of the reduction); returns 1 if wrong. */
static int check_element(const struct coll_case* c, int n, int me, const void* got_buf, size_t k, size_t g,
                         struct coverage* cv, int* reported) {
  double x[MAX_RANKS];
  struct vset R[1 << MAX_RANKS];
  for (int r = 0; r < n; r++) x[r] = input_at(c, n, r, g);
  const struct vset* want = all_results(x, n, c->op, c->dt, R);
  double got = dt_get(got_buf, k, (ncclDataType_t)c->dt);
  cover(cv, c->dt, got, want);
  for (int i = 0; i < want->n; i++)
    if (same_value(got, want->v[i])) return 0;
  if ((*reported)++ < 4) {
    fprintf(stderr, "FAILED " CASE_FMT ": element %zu got ", CASE_ARGS(c, n, me), k);
    print_value(stderr, got_buf, k, c->dt);
    fprintf(stderr, "; inputs");
    for (int r = 0; r < n; r++) fprintf(stderr, " %a", x[r]);
    fprintf(stderr, "; any order gives one of");
    for (int i = 0; i < want->n && i < 8; i++) fprintf(stderr, " %a", want->v[i]);
    fprintf(stderr, "%s\n", want->n > 8 ? " ..." : "");
  }
  return 1;
}

static int guard_intact(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    if (p[i] != POISON) return 0;
  return 1;
}

/* Checks case i on every rank; returns the number of wrong outputs. */
static int check_case(const struct special_run* run, int i, struct coverage* cv) {
  const struct coll_case* c = &run->cases.v[i];
  int n = run->nranks, bad = 0;
  size_t sz = (size_t)dt_table[c->dt].size, out_bytes = c->count * sz;
  for (int me = 0; me < n; me++) {
    if (run->res[i * MAX_RANKS + me] != ncclSuccess) {
      bad++;
      continue;
    }
    const unsigned char* got = run->out + run->slot_off[i] + (size_t)me * slot_bytes(c, n);
    int reported = 0, wrong = 0;
    if (c->coll == C_REDUCE && me != c->root) {
      /* Not the root: its receive buffer is not the collective's to write (in place, it holds
       * this rank's input). */
      if (!c->in_place && !guard_intact(got, out_bytes + GUARD_BYTES)) {
        fprintf(stderr, "FAILED " CASE_FMT ": a non-root's receive buffer was written\n",
                CASE_ARGS(c, n, me));
        wrong++;
      }
      bad += wrong;
      continue;
    }
    if (c->coll == C_ALLREDUCE && me > 0) {
      /* One result, copied to every rank: the same bits as rank 0's, NaN payloads included. */
      const unsigned char* first = run->out + run->slot_off[i];
      for (size_t k = 0; k < c->count && wrong < 1; k++) {
        if (memcmp(got + k * sz, first + k * sz, sz) != 0) {
          fprintf(stderr, "FAILED " CASE_FMT ": element %zu differs from rank 0's: ", CASE_ARGS(c, n, me), k);
          print_value(stderr, got, k, c->dt);
          fprintf(stderr, " vs ");
          print_value(stderr, first, k, c->dt);
          fprintf(stderr, "\n");
          wrong++;
        }
      }
    } else {
      size_t base = c->coll == C_REDUCESCATTER ? (size_t)me * c->count : 0;
      for (size_t k = 0; k < c->count; k++) wrong += check_element(c, n, me, got, k, base + k, cv, &reported);
    }
    /* In place, a ReduceScatter's output is followed by the next rank's input. */
    if (!(c->in_place && c->coll == C_REDUCESCATTER) && !guard_intact(got + out_bytes, GUARD_BYTES)) {
      fprintf(stderr, "FAILED " CASE_FMT ": bytes after the output were written\n", CASE_ARGS(c, n, me));
      wrong++;
    }
    if (wrong > reported && wrong > 4)
      fprintf(stderr, "FAILED " CASE_FMT ": %d wrong in all\n", CASE_ARGS(c, n, me), wrong);
    bad += wrong;
  }
  return bad;
}

/* Every collective x type x op, counts alternating between a few elements (one thread each),
 * an odd count that is not a whole number of 16-byte vectors, and a few thousand. */
static void make_cases(struct special_run* run, uint64_t seed) {
  int k = 0, n = run->nranks;
  static const size_t counts[] = {37, 1021, 4099};
  for (int ci = 0; ci < 3; ci++)
    for (int t = 0; t < NTYPES; t++)
      for (int op = O_SUM; op <= O_MIN; op++, k++) {
        uint64_t s = mix64(seed + (uint64_t)k);
        struct coll_case c = {special_colls[ci],      special_types[t], op, (int)(s >> 7) & 1,
                              (int)(s % (uint64_t)n), counts[k % 3],    s};
        case_add(&run->cases, c);
      }
  size_t off = 0;
  run->slot_off = calloc((size_t)run->cases.n, sizeof(size_t));
  for (int i = 0; i < run->cases.n; i++) {
    const struct coll_case* c = &run->cases.v[i];
    size_t sz = (size_t)dt_table[c->dt].size;
    size_t in = in_elems(c, n) * sz, out = out_elems(c, n) * sz;
    if (in > run->send_pool) run->send_pool = in;
    if ((in > out ? in : out) + GUARD_BYTES > run->recv_pool)
      run->recv_pool = (in > out ? in : out) + GUARD_BYTES;
    run->slot_off[i] = off;
    off += (size_t)n * slot_bytes(c, n);
  }
  run->shared_bytes = off + (size_t)run->cases.n * MAX_RANKS * sizeof(int);
  void* p = mmap(NULL, run->shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) abort();
  run->out = p;
  run->res = (int*)(run->out + off);
  for (int i = 0; i < run->cases.n * MAX_RANKS; i++) run->res[i] = ncclInternalError; /* until a rank says */
}

int main(int argc, char** argv) {
  gpu_require();
  const char* mode = argc > 1 ? argv[1] : "threads";
  int as_procs = strcmp(mode, "procs") == 0;
  if (!as_procs && strcmp(mode, "threads") != 0) {
    fprintf(stderr, "usage: %s [threads|procs] [nranks...] (1 to %d)\n", argv[0], MAX_RANKS);
    return 2;
  }
  int counts[8], ncounts = 0;
  for (int i = 2; i < argc && ncounts < 8; i++) counts[ncounts++] = atoi(argv[i]);
  if (ncounts == 0) counts[ncounts++] = 2, counts[ncounts++] = 3, counts[ncounts++] = 4;
  for (int i = 0; i < ncounts; i++)
    if (counts[i] < 1 || counts[i] > MAX_RANKS) {
      fprintf(stderr, "nranks %d: 1 to %d\n", counts[i], MAX_RANKS);
      return 2;
    }
  coll_base_seed = pick_seed();
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  static const char* protos[] = {"Simple", "LL"};
  struct coverage total = {0};
  int failed = 0;
  for (int p = 0; p < 2; p++) {
    /* Read when each communicator is made; no rank runs while it changes. */
    setenv("NCCL_PROTO", protos[p], 1);
    for (int i = 0; i < ncounts; i++) {
      struct special_run run = {.nranks = counts[i]};
      make_cases(&run, coll_base_seed + (uint64_t)(16 * p + counts[i]));
      fflush(stdout);
      int rank_failures = as_procs ? run_procs(run.nranks, special_body, &run, 300)
                                   : run_threads(run.nranks, special_body, &run);
      struct coverage cv = {0};
      int bad_cases = 0;
      for (int k = 0; k < run.cases.n; k++) bad_cases += check_case(&run, k, &cv) != 0;
      printf(
          "NCCL_PROTO=%s, %d ranks (%s): %d cases, %d wrong; %ld elements checked: %ld NaN, %ld Inf, %ld -0, "
          "%ld subnormal, %ld where orders differ\n",
          protos[p], run.nranks, mode, run.cases.n, bad_cases, cv.elements, cv.nan, cv.inf, cv.neg_zero,
          cv.subnormal, cv.order_dependent);
      fflush(stdout);
      failed += bad_cases + rank_failures;
      total.elements += cv.elements, total.nan += cv.nan, total.inf += cv.inf;
      total.neg_zero += cv.neg_zero, total.subnormal += cv.subnormal;
      munmap(run.out, run.shared_bytes);
      free(run.slot_off);
      free(run.cases.v);
    }
  }
  /* The inputs must have produced every kind of special result, or the test checked less than
   * it says. */
  if (!(total.nan > 0 && total.inf > 0 && total.neg_zero > 0 && total.subnormal > 0 && total.elements > 0)) {
    fprintf(stderr,
            "FAILED: the outputs lack a kind of special value (NaN %ld, Inf %ld, -0 %ld, subnormal %ld)\n",
            total.nan, total.inf, total.neg_zero, total.subnormal);
    failed++;
  }
  printf("%s\n", failed ? "FAILED" : "every output is a result of some order of the inputs");
  return failed ? 1 : 0;
}
