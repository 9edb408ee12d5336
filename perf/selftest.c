/* Hidden --self-test: checks the harness's own arithmetic without a communicator (size parser and
 * sweep, fp16/bf16/fp8 encodings, exactness of the check inputs in any reduction order, detection of
 * a flipped element, and this binary's counts and bus-bandwidth factor). Prints FAIL lines; exit 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int failures;

#define ST_EXPECT(cond, ...)                      \
  do {                                            \
    if (!(cond)) {                                \
      failures++;                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                        \
      printf("\n");                               \
    }                                             \
  } while (0)

static void test_sizes(void) {
  ST_EXPECT(perf_parse_size("8") == 8, "8");
  ST_EXPECT(perf_parse_size("1K") == 1024 && perf_parse_size("1k") == 1024, "1K");
  ST_EXPECT(perf_parse_size("1.5M") == 1572864, "1.5M");
  ST_EXPECT(perf_parse_size("2G") == 2147483648ll, "2G");
  ST_EXPECT(perf_parse_size("abc") == -1 && perf_parse_size("1X") == -1 && perf_parse_size("-4") == -1,
            "bad");
  struct perf_args a;
  char* argv[] = {"x", "-b", "8", "-e", "1M", "-f", "4", NULL};
  ST_EXPECT(perf_args_parse(&a, 7, argv, "x") == 0, "parse");
  size_t s = a.min_bytes, n = 1, last = s;
  while (perf_next_size(&a, &s, 0)) n++, last = s;
  ST_EXPECT(n == 9 && last == 524288, "factor sweep: %zu sizes, last %zu", n, last);
  char* argv2[] = {"x", "-b", "100", "-e", "350", "-i", "100", NULL};
  ST_EXPECT(perf_args_parse(&a, 7, argv2, "x") == 0, "parse");
  s = a.min_bytes, n = 1;
  while (perf_next_size(&a, &s, 0)) n++, last = s;
  ST_EXPECT(n == 3 && last == 300, "step sweep: %zu sizes, last %zu", n, last);
  s = 0, n = 1;
  while (perf_next_size(&a, &s, 1)) n++;
  ST_EXPECT(n == 10, "warm-up from 0 doubles to 256: %zu", n); /* 0 1 2 4 ... 256 */
  char* argv3[] = {"x", "-b", "2M", "-e", "1M", NULL};
  ST_EXPECT(perf_args_parse(&a, 5, argv3, "x") == -1, "min > max must fail");
}

/* Every bit pattern decodes and re-encodes to itself (NaNs aside), and a few known values. */
static void test_minifloat(void) {
  static const int fmt[4][3] = {{5, 10, 1}, {8, 7, 1}, {4, 3, 0}, {5, 2, 1}};
  for (int f = 0; f < 4; f++) {
    int bits = 1 + fmt[f][0] + fmt[f][1];
    for (uint32_t b = 0; b < (1u << bits); b++) {
      double v = perf_minifloat_decode(b, fmt[f][0], fmt[f][1], fmt[f][2]);
      if (isnan(v)) continue;
      uint32_t e = perf_minifloat_encode(v, fmt[f][0], fmt[f][1], fmt[f][2]);
      ST_EXPECT(e == b, "format %d: 0x%x -> %g -> 0x%x", f, b, v, e);
    }
  }
  ST_EXPECT(perf_minifloat_encode(1.0, 5, 10, 1) == 0x3c00, "half 1.0");
  ST_EXPECT(perf_minifloat_encode(1.0 + 0x1p-11, 5, 10, 1) == 0x3c00, "half tie to even");
  ST_EXPECT(perf_minifloat_encode(1.0 + 3 * 0x1p-11, 5, 10, 1) == 0x3c02, "half tie up to even");
  ST_EXPECT(perf_minifloat_encode(-2.0, 8, 7, 1) == 0xc000, "bf16 -2");
  ST_EXPECT(perf_minifloat_encode(448.0, 4, 3, 0) == 0x7e, "e4m3 max");
  ST_EXPECT(perf_minifloat_encode(57344.0, 5, 2, 1) == 0x7b, "e5m2 max");
  ST_EXPECT(perf_minifloat_encode(0x1p-24, 5, 10, 1) == 0x0001, "half smallest subnormal");
#ifdef __FLT16_MANT_DIG__
  for (int i = -5000; i <= 5000; i++) {
    double v = i * 0.37;
    _Float16 h = (_Float16)v;
    uint16_t hb;
    memcpy(&hb, &h, 2);
    ST_EXPECT(perf_minifloat_encode(v, 5, 10, 1) == hb, "half(%g) vs _Float16", v);
  }
#endif
}

static double rt(const struct perf_type* t, double v) { /* round through the type */
  uint64_t b = 0;
  perf_type_store(t, &b, 0, v);
  return perf_type_load(t, &b, 0);
}

static double apply(int op, double a, double b) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return a > b ? a : b;
    case ncclMin:
      return a < b ? a : b;
    default:
      return a + b;
  }
}

/* Reduces x[0..n) in the type's precision, in order 0 (forward), 1 (backward) or 2 (pairwise tree). */
static double reduce_in_type(const struct perf_type* t, int op, double* x, int n, int order) {
  if (order == 2) {
    for (int w = 1; w < n; w *= 2)
      for (int i = 0; i + w < n; i += 2 * w) x[i] = rt(t, apply(op, x[i], x[i + w]));
    return x[0];
  }
  double acc = x[order ? n - 1 : 0];
  for (int k = 1; k < n; k++) acc = rt(t, apply(op, acc, x[order ? n - 1 - k : k]));
  return acc;
}

/* The library's view: per-rank inputs as stored, premultiplied for mulsum (and avg, NCCL-style). */
static size_t simulate(const struct perf_data* d, int order, int premul_avg, void* out, size_t count) {
  const struct perf_type* t = d->t;
  int n = d->nranks, op = d->op;
  double x[64];
  for (size_t i = 0; i < count; i++) {
    for (int r = 0; r < n; r++) {
      x[r] = rt(t, perf_gen(d, r, i));
      if (op == PERF_OP_PREMULSUM) x[r] = rt(t, x[r] * perf_premul_scalar(r));
      if (op == ncclAvg && premul_avg) x[r] = rt(t, x[r] * rt(t, 1.0 / n));
    }
    int rop = op == PERF_OP_PREMULSUM || op == ncclAvg ? ncclSum : op;
    double v = reduce_in_type(t, rop, x, n, order);
    if (op == ncclAvg && !premul_avg)
      v = t->kind == PERF_KIND_FLOAT ? v / n
          : t->kind == PERF_KIND_INT ? (double)((int64_t)v / n)
                                     : (double)((uint64_t)v / (uint64_t)n);
    perf_type_store(t, out, i, v);
  }
  (void)count;
  return 0;
}

static void test_exactness(void) {
  enum { COUNT = 300 };
  static unsigned char expected[COUNT * 8], got[COUNT * 8];
  for (int type = 0; type < ncclNumTypes; type++) {
    const struct perf_type* t = perf_type_get(type);
    for (int op = 0; op < PERF_NUM_OPS; op++) {
      for (int n = 1; n <= 9; n++) {
        struct perf_data d;
        perf_data_init(&d, t, op, n, 0, 7 + (uint64_t)n, COUNT);
        perf_fill_reduced(&d, expected, COUNT, 0);
        for (int order = 0; order < 3; order++) {
          for (int pre = 0; pre <= (op == ncclAvg && t->kind == PERF_KIND_FLOAT); pre++) {
            simulate(&d, order, pre, got, COUNT);
            size_t wrong = perf_compare(&d, got, expected, COUNT);
            ST_EXPECT(wrong == 0, "%s %s n=%d order %d premul %d: %zu wrong", t->name, perf_op_name(op), n,
                      order, pre, wrong);
          }
        }
        /* One flipped bit must count as exactly one wrong element (exact ops). */
        if (op != ncclAvg) {
          memcpy(got, expected, (size_t)COUNT * (size_t)t->size);
          got[(COUNT / 2) * (size_t)t->size] ^= 1;
          ST_EXPECT(perf_compare(&d, got, expected, COUNT) == 1, "%s %s: flip not detected", t->name,
                    perf_op_name(op));
        }
      }
    }
  }
}

static double factor_of(const char* name, int n) {
  if (!strcmp(name, "all_reduce")) return 2.0 * (n - 1) / n;
  if (!strcmp(name, "broadcast") || !strcmp(name, "reduce") || !strcmp(name, "sendrecv") ||
      !strcmp(name, "hypercube"))
    return 1;
  return (double)(n - 1) / n;
}

/* Counts and bandwidth of this binary's collective against nccl-tests' table (reference A.5). */
static void test_this_coll(void) {
  const struct perf_coll* c = &perf_this_coll;
  const char* name = c->name;
  int gathers = !strcmp(name, "all_gather") || !strcmp(name, "gather") || !strcmp(name, "hypercube");
  int scatters = !strcmp(name, "reduce_scatter") || !strcmp(name, "scatter");
  int full = !strcmp(name, "all_reduce") || !strcmp(name, "broadcast") || !strcmp(name, "reduce") ||
             !strcmp(name, "sendrecv");
  for (int n = 1; n <= 8; n++) {
    for (int type = 0; type < ncclNumTypes; type++) {
      size_t es = (size_t)perf_type_get(type)->size;
      size_t count = (1u << 20) / es + 3 * (size_t)n + 1;
      size_t base = (count / (size_t)n) & ~(16 / es - 1);
      struct perf_counts k;
      c->counts(count, es, n, &k);
      if (full)
        ST_EXPECT(k.param == count && k.send == count && k.recv == count, "%s counts", name);
      else
        ST_EXPECT(k.param == base && (base * es) % 16 == 0, "%s base count %zu vs %zu", name, k.param, base);
      if (gathers)
        ST_EXPECT(k.send == base && k.recv == base * n && k.send_inplace_off == base, "%s layout", name);
      if (scatters)
        ST_EXPECT(k.send == base * n && k.recv == base && k.recv_inplace_off == base, "%s layout", name);
      double algbw, busbw;
      c->bw(k.param, es, n, 2.0, &algbw, &busbw);
      double bytes = !strcmp(name, "hypercube") ? (double)(k.param * es) * (n - 1)
                     : full                     ? (double)(k.param * es)
                                                : (double)(k.param * es) * n;
      ST_EXPECT(fabs(algbw - bytes / 2.0 / 1e9) <= 1e-12 * algbw + 1e-15, "%s algbw n=%d", name, n);
      ST_EXPECT(fabs(busbw - algbw * factor_of(name, n)) <= 1e-12 * busbw + 1e-15, "%s busbw n=%d", name, n);
    }
  }
}

static void test_float_str(void) {
  char s[8];
  perf_float_str(123456.7, 7, s);
  ST_EXPECT(!strcmp(s, " 123457"), "'%s'", s);
  perf_float_str(1.2e7, 7, s);
  ST_EXPECT(!strcmp(s, "1.2e+07"), "'%s'", s);
  perf_float_str(25.468, 7, s);
  ST_EXPECT(!strcmp(s, "  25.47"), "'%s'", s);
}

int perf_self_test(void) {
  test_sizes();
  test_minifloat();
  test_exactness();
  test_this_coll();
  test_float_str();
  printf("%s self-test: %d failures\n", perf_this_coll.name, failures);
  return failures ? 1 : 0;
}
