/* reduce.h: conversions of fp16/bf16/fp8 against a brute-force reference (every bit pattern,
 * every rounding midpoint, random floats) and every type x op loop against wide arithmetic. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "collectives/reduce.h"

/* A small float format described independently of reduce.h. */
struct fmt {
  const char* name;
  int ebits, mbits, bias, ieee; /* ieee: top exponent is Inf/NaN; else only all-ones is NaN */
  uint32_t maxcode;             /* largest finite positive encoding */
  uint32_t overflow;            /* encoding of overflow: Inf for ieee halves, max for fp8 (saturate) */
  int nbits;
  float (*dec)(uint32_t);
  uint32_t (*enc)(float);
};

static double ref_decode(const struct fmt* f, uint32_t v, int* is_nan) {
  int sign = (v >> (f->ebits + f->mbits)) & 1;
  int e = (v >> f->mbits) & ((1 << f->ebits) - 1);
  int m = v & ((1 << f->mbits) - 1);
  *is_nan = 0;
  if (f->ieee && e == (1 << f->ebits) - 1) {
    if (m) *is_nan = 1;
    return sign ? -INFINITY : INFINITY;
  }
  if (!f->ieee && e == (1 << f->ebits) - 1 && m == (1 << f->mbits) - 1) {
    *is_nan = 1;
    return NAN;
  }
  double val = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                      : ldexp(1.0 + (double)m / (1 << f->mbits), e - f->bias);
  return sign ? -val : val;
}

/* Nearest finite positive code to x >= 0 by search, ties to the even code; the value one step
 * above the largest finite (2^(emax+1)) counts as the overflow code, which is even. */
static uint32_t ref_round(const struct fmt* f, double x) {
  int nan;
  double top = ref_decode(f, f->maxcode, &nan);
  double above = ldexp(1.0, (int)floor(log2(top)) + 1);
  if (x >= above) return f->overflow;
  uint32_t lo = 0, hi = f->maxcode;
  while (lo < hi) { /* largest code with value <= x */
    uint32_t mid = (lo + hi + 1) / 2;
    if (ref_decode(f, mid, &nan) <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  double vlo = ref_decode(f, lo, &nan);
  if (vlo == x) return lo;
  double vhi = lo == f->maxcode ? above : ref_decode(f, lo + 1, &nan);
  uint32_t chi = lo == f->maxcode ? f->overflow : lo + 1;
  uint32_t r;
  if (x - vlo < vhi - x)
    r = lo;
  else if (x - vlo > vhi - x)
    r = chi;
  else
    r = (lo & 1) ? chi : lo; /* tie: the even code (for overflow, maxcode is odd in all formats) */
  return r;
}

static float dec_f16(uint32_t v) { return weft_f16_to_f32((uint16_t)v); }
static uint32_t enc_f16(float x) { return weft_f32_to_f16(x); }
static float dec_bf16(uint32_t v) { return weft_bf16_to_f32((uint16_t)v); }
static uint32_t enc_bf16(float x) { return weft_f32_to_bf16(x); }
static float dec_e4m3(uint32_t v) { return weft_e4m3_to_f32((uint8_t)v); }
static uint32_t enc_e4m3(float x) { return weft_f32_to_e4m3(x); }
static float dec_e5m2(uint32_t v) { return weft_e5m2_to_f32((uint8_t)v); }
static uint32_t enc_e5m2(float x) { return weft_f32_to_e5m2(x); }

static const struct fmt fmts[] = {
    {"fp16", 5, 10, 15, 1, 0x7bff, 0x7c00, 16, dec_f16, enc_f16},
    {"bf16", 8, 7, 127, 1, 0x7f7f, 0x7f80, 16, dec_bf16, enc_bf16},
    {"e4m3", 4, 3, 7, 0, 0x7e, 0x7e, 8, dec_e4m3, enc_e4m3},
    {"e5m2", 5, 2, 15, 1, 0x7b, 0x7b, 8, dec_e5m2, enc_e5m2},
};

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Encode x with the library and compare with the reference (sign handled symmetrically). */
static int check_encode(const struct fmt* f, float x) {
  uint32_t got = f->enc(x);
  uint32_t sign = signbit(x) ? 1u << (f->nbits - 1) : 0;
  uint32_t want;
  if (isnan(x)) {
    int nan;
    ref_decode(f, got, &nan);
    if (!nan) fprintf(stderr, "%s: NaN encoded as 0x%x\n", f->name, got);
    return nan;
  }
  if (isinf(x))
    want = f->overflow;
  else
    want = ref_round(f, fabs((double)x));
  want |= sign;
  if (got != want) {
    fprintf(stderr, "%s: encode(%a) = 0x%x, want 0x%x\n", f->name, (double)x, got, want);
    return 0;
  }
  return 1;
}

static void test_format(const struct fmt* f) {
  uint32_t n = 1u << f->nbits;
  int bad = 0;
  for (uint32_t v = 0; v < n && bad < 5; v++) {
    int nan;
    double want = ref_decode(f, v, &nan);
    float got = f->dec(v);
    if (nan) {
      if (!isnan(got))
        bad++, fprintf(stderr, "%s: 0x%x should decode to NaN\n", f->name, v);
      else if (!isnan(f->dec(f->enc(got))))
        bad++, fprintf(stderr, "%s: NaN 0x%x lost\n", f->name, v);
      continue;
    }
    if ((double)got != want || !signbit(got) != !signbit(want))
      bad++, fprintf(stderr, "%s: decode(0x%x) = %a, want %a\n", f->name, v, (double)got, want);
    else if (f->enc(got) != v && !isinf(got)) /* fp8 saturates Inf */
      bad++, fprintf(stderr, "%s: round trip of 0x%x gives 0x%x\n", f->name, v, f->enc(got));
  }
  EXPECT_MSG(bad == 0, "%s bit patterns", f->name);
  /* Midpoints between neighbours and one float ulp either side: the rounding decisions. */
  bad = 0;
  for (uint32_t v = 0; v < f->maxcode + 1 && bad < 5; v++) {
    int nan;
    double lo = ref_decode(f, v, &nan);
    double hi = v == f->maxcode ? 2 * ldexp(1.0, (int)floor(log2(lo))) : ref_decode(f, v + 1, &nan);
    float mid = (float)((lo + hi) / 2);
    float xs[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
    for (int i = 0; i < 3; i++) {
      if (!check_encode(f, xs[i])) bad++;
      if (!check_encode(f, -xs[i])) bad++;
    }
  }
  EXPECT_MSG(bad == 0, "%s midpoints", f->name);
  bad = 0;
  for (int i = 0; i < 200000 && bad < 5; i++) {
    uint32_t u = (uint32_t)rnd();
    float x;
    memcpy(&x, &u, 4);
    if (!check_encode(f, x)) bad++;
    /* Also values near the format's range, where random bits rarely land. */
    float y = ldexpf((float)(rnd() % 1000000) / 1e6f + 0.5f, (int)(rnd() % 70) - 40);
    if (!check_encode(f, (rnd() & 1) ? y : -y)) bad++;
  }
  EXPECT_MSG(bad == 0, "%s random floats", f->name);
  EXPECT(check_encode(f, INFINITY) && check_encode(f, -INFINITY) && check_encode(f, NAN));
}

/* Independent element reference in wide arithmetic. */
static double ref_op(int op, double a, double b) {
  switch (op) {
    case WEFT_RED_SUM:
      return a + b;
    case WEFT_RED_PROD:
      return a * b;
    case WEFT_RED_MAX:
      return a > b ? a : b;
    default:
      return a < b ? a : b;
  }
}

#define NELEM 1003
static void test_int_ops(void) {
  int8_t a8[NELEM], b8[NELEM], d8[NELEM];
  int64_t a64[NELEM], b64[NELEM], d64[NELEM];
  uint32_t a32[NELEM], b32[NELEM], d32[NELEM];
  for (int i = 0; i < NELEM; i++) {
    a8[i] = (int8_t)rnd(), b8[i] = (int8_t)rnd();
    a64[i] = (int64_t)rnd() >> (rnd() % 40), b64[i] = (int64_t)rnd() >> (rnd() % 40);
    a32[i] = (uint32_t)rnd(), b32[i] = (uint32_t)rnd();
  }
  int bad = 0;
  weft_red_sum_i8(d8, a8, b8, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d8[i] != (int8_t)(uint8_t)((int)a8[i] + (int)b8[i]);
  weft_red_max_i8(d8, a8, b8, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d8[i] != (a8[i] > b8[i] ? a8[i] : b8[i]);
  weft_red_min_i64(d64, a64, b64, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d64[i] != (a64[i] < b64[i] ? a64[i] : b64[i]);
  weft_red_prod_i64(d64, a64, b64, NELEM);
  for (int i = 0; i < NELEM; i++) bad += (uint64_t)d64[i] != (uint64_t)a64[i] * (uint64_t)b64[i];
  weft_red_max_u32(d32, a32, b32, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d32[i] != (a32[i] > b32[i] ? a32[i] : b32[i]);
  weft_red_sum_u32(d32, a32, b32, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d32[i] != a32[i] + b32[i];
  /* SumPostDiv divides signed values truncating toward zero, as C does. */
  memcpy(d64, a64, sizeof(d64));
  weft_postdiv_i64(d64, 3, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d64[i] != a64[i] / 3;
  memcpy(d8, a8, sizeof(d8));
  weft_postdiv_i8(d8, 200, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d8[i] != 0;
  weft_premulsum_u32(d32, a32, b32, 7, NELEM);
  for (int i = 0; i < NELEM; i++) bad += d32[i] != a32[i] + b32[i] * 7u;
  weft_red_sum_u32(a32, a32, b32, NELEM); /* exactly in place */
  for (int i = 0; i < NELEM; i++) bad += a32[i] != d32[i] - b32[i] * 7u + b32[i];
  EXPECT_EQ_INT(bad, 0);
}

static void test_small_float_ops(const struct fmt* f, int dt) {
  uint8_t a[NELEM * 2], b[NELEM * 2], d[NELEM * 2];
  size_t es = f->nbits / 8;
  for (int i = 0; i < NELEM; i++) {
    uint32_t x, y;
    int nan;
    do x = (uint32_t)rnd() & ((1u << f->nbits) - 1), ref_decode(f, x, &nan);
    while (nan || isinf(f->dec(x)));
    do y = (uint32_t)rnd() & ((1u << f->nbits) - 1), ref_decode(f, y, &nan);
    while (nan || isinf(f->dec(y)));
    memcpy(a + i * es, &x, es);
    memcpy(b + i * es, &y, es);
  }
  int bad = 0;
  for (int op = WEFT_RED_SUM; op <= WEFT_RED_MIN; op++) {
#define RUN(NAME, T)                                                         \
  if (op == WEFT_RED_SUM) weft_red_sum_##NAME((T*)d, (T*)a, (T*)b, NELEM);   \
  if (op == WEFT_RED_PROD) weft_red_prod_##NAME((T*)d, (T*)a, (T*)b, NELEM); \
  if (op == WEFT_RED_MAX) weft_red_max_##NAME((T*)d, (T*)a, (T*)b, NELEM);   \
  if (op == WEFT_RED_MIN) weft_red_min_##NAME((T*)d, (T*)a, (T*)b, NELEM);
    if (dt == WEFT_DT_F16) {
      RUN(f16, uint16_t)
    }
    if (dt == WEFT_DT_BF16) {
      RUN(bf16, uint16_t)
    }
    if (dt == WEFT_DT_E4M3) {
      RUN(e4m3, uint8_t)
    }
    if (dt == WEFT_DT_E5M2) {
      RUN(e5m2, uint8_t)
    }
    for (int i = 0; i < NELEM && bad < 5; i++) {
      uint32_t x = 0, y = 0, got = 0;
      int nan;
      memcpy(&x, a + i * es, es);
      memcpy(&y, b + i * es, es);
      memcpy(&got, d + i * es, es);
      double r = ref_op(op, ref_decode(f, x, &nan), ref_decode(f, y, &nan));
      uint32_t want = isinf(r) ? f->overflow : ref_round(f, fabs(r));
      if (r < 0 || (r == 0 && op >= WEFT_RED_MAX && signbit(r))) want |= 1u << (f->nbits - 1);
      /* +0 and -0 compare equal: either is a right sum of opposite zeros or max/min of zeros. */
      if (r == 0 && (got & ~(1u << (f->nbits - 1))) == 0) continue;
      if (got != want)
        bad++, fprintf(stderr, "%s op %d: 0x%x,0x%x -> 0x%x want 0x%x\n", f->name, op, x, y, got, want);
    }
  }
  EXPECT_MSG(bad == 0, "%s ops", f->name);
}

static void test_float_ops(void) {
  float a[NELEM], b[NELEM], d[NELEM];
  double da[NELEM], db[NELEM], dd[NELEM];
  for (int i = 0; i < NELEM; i++) {
    a[i] = (float)((int64_t)(rnd() % 2001) - 1000) / 8, b[i] = (float)((int64_t)(rnd() % 2001) - 1000) / 4;
    da[i] = a[i], db[i] = b[i];
  }
  a[5] = NAN;
  int bad = 0;
  weft_red_max_f32(d, a, b, NELEM);
  for (int i = 0; i < NELEM; i++)
    bad += i == 5 ? d[i] != b[i] : d[i] != (float)ref_op(WEFT_RED_MAX, a[i], b[i]);
  weft_red_prod_f64(dd, da, db, NELEM);
  for (int i = 0; i < NELEM; i++) bad += i != 5 && dd[i] != da[i] * db[i];
  float s = 0.25f;
  uint32_t sbits;
  memcpy(&sbits, &s, 4);
  weft_premulsum_f32(d, a, b, sbits, NELEM);
  for (int i = 0; i < NELEM; i++) bad += i != 5 && d[i] != a[i] + b[i] * 0.25f;
  EXPECT_EQ_INT(bad, 0);
  /* fp16 PreMulSum multiplies in the element type: 1/3 rounded to half, then rounded product. */
  uint16_t h[3] = {weft_f32_to_f16(3.0f), weft_f32_to_f16(6.0f), 0};
  uint16_t third = weft_f32_to_f16(1.0f / 3);
  weft_premul_f16(&h[2], &h[0], third, 1);
  EXPECT(h[2] == weft_f32_to_f16(3.0f * weft_f16_to_f32(third)));
}

/* Buffers 1 and 2 bytes into an allocation, as users may pass them: the loops must read and
 * write them correctly (and, in a UBSan build, without a misaligned access report). */
static void test_unaligned(void) {
  enum { N = 1000 };
  static unsigned char mem[3][N * 8 + 16];
  for (int off = 1; off <= 2; off++) {
    void *d = mem[0] + off, *a = mem[1] + off, *b = mem[2] + off;
    for (int i = 0; i < N; i++) {
      double x = i, y = 2 * i;
      memcpy((char*)a + 8 * i, &x, 8);
      memcpy((char*)b + 8 * i, &y, 8);
    }
    weft_red_sum_f64(d, a, b, N);
    weft_postdiv_f64(d, 3, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
      double v;
      memcpy(&v, (char*)d + 8 * i, 8);
      bad += v != (double)i;
    }
    EXPECT_MSG(bad == 0, "f64 sum at offset %d: %d wrong", off, bad);
    for (int i = 0; i < N; i++) {
      float x = (float)i, y = 1.0f;
      memcpy((char*)a + 4 * i, &x, 4);
      memcpy((char*)b + 4 * i, &y, 4);
    }
    weft_red_max_f32(d, a, b, N);
    bad = 0;
    for (int i = 0; i < N; i++) {
      float v;
      memcpy(&v, (char*)d + 4 * i, 4);
      bad += v != (i < 1 ? 1.0f : (float)i);
    }
    EXPECT_MSG(bad == 0, "f32 max at offset %d: %d wrong", off, bad);
  }
}

int main(void) {
  test_unaligned();
  rng_state = (uint64_t)time(NULL) * 2654435761u | 1;
  fprintf(stderr, "seed %llu\n", (unsigned long long)rng_state);
  for (int i = 0; i < 4; i++) test_format(&fmts[i]);
  test_int_ops();
  test_small_float_ops(&fmts[0], WEFT_DT_F16);
  test_small_float_ops(&fmts[1], WEFT_DT_BF16);
  test_small_float_ops(&fmts[2], WEFT_DT_E4M3);
  test_small_float_ops(&fmts[3], WEFT_DT_E5M2);
  test_float_ops();
  /* Spot values fixed by the formats' definitions. */
  EXPECT(weft_f32_to_e4m3(448.0f) == 0x7e && weft_f32_to_e4m3(1e9f) == 0x7e &&
         weft_f32_to_e4m3(-INFINITY) == 0xfe);
  EXPECT(weft_f32_to_e5m2(57344.0f) == 0x7b && weft_f32_to_e5m2(1e9f) == 0x7b);
  EXPECT(weft_f32_to_f16(65520.0f) == 0x7c00 && weft_f32_to_f16(65519.0f) == 0x7bff);
  EXPECT(weft_f32_to_f16(5.9604645e-8f) == 0x0001 && weft_f32_to_f16(2.9802322e-8f) == 0);
  EXPECT(weft_f32_to_bf16(1.00390625f) == 0x3f80 && weft_f32_to_bf16(1.01171875f) == 0x3f82);
  return test_finish("reduce");
}
