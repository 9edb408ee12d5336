/* Data types and reduction ops of the perf binaries: names, sizes, exact ranges and the host-side
 * encodings of half, bfloat16 and fp8 (values are converted through double). */
#include <math.h>
#include <string.h>

#include "common.h"

/* Indexed by ncclDataType_t; names and order as nccl-tests prints them. */
static const struct perf_type types[ncclNumTypes] = {
    {ncclInt8, "int8", 1, PERF_KIND_INT, 127, 8, 0, 0, 0},
    {ncclUint8, "uint8", 1, PERF_KIND_UINT, 255, 8, 0, 0, 0},
    {ncclInt32, "int32", 4, PERF_KIND_INT, 2147483647.0, 0, 0, 0, 0},
    {ncclUint32, "uint32", 4, PERF_KIND_UINT, 4294967295.0, 0, 0, 0, 0},
    {ncclInt64, "int64", 8, PERF_KIND_INT, 4503599627370496.0, 0, 0, 0, 0},
    {ncclUint64, "uint64", 8, PERF_KIND_UINT, 4503599627370496.0, 0, 0, 0, 0},
    {ncclFloat16, "half", 2, PERF_KIND_FLOAT, 2048, 64, 5, 10, 0x1p-10},
    {ncclFloat32, "float", 4, PERF_KIND_FLOAT, 16777216.0, 0, 0, 0, 0x1p-23},
    {ncclFloat64, "double", 8, PERF_KIND_FLOAT, 9007199254740992.0, 0, 0, 0, 0x1p-52},
    {ncclBfloat16, "bfloat16", 2, PERF_KIND_FLOAT, 256, 16, 8, 7, 0x1p-7},
    {ncclFloat8e4m3, "f8e4m3", 1, PERF_KIND_FLOAT, 16, 4, 4, 3, 0x1p-3},
    {ncclFloat8e5m2, "f8e5m2", 1, PERF_KIND_FLOAT, 8, 4, 5, 2, 0x1p-2},
};

static const char* const op_names[PERF_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "mulsum"};

const struct perf_type* perf_type_get(int type) {
  if (type < 0 || type >= ncclNumTypes) return NULL;
  return &types[type];
}

int perf_type_from_name(const char* name) {
  for (int t = 0; t < ncclNumTypes; t++)
    if (strcmp(name, types[t].name) == 0) return t;
  if (strcmp(name, "all") == 0) return PERF_ALL;
  return -2;
}

const char* perf_op_name(int op) { return op >= 0 && op < PERF_NUM_OPS ? op_names[op] : "?"; }

int perf_op_from_name(const char* name) {
  for (int o = 0; o < PERF_NUM_OPS; o++)
    if (strcmp(name, op_names[o]) == 0) return o;
  if (strcmp(name, "all") == 0) return PERF_ALL;
  return -2;
}

/* IEEE-style binary format with ebits/mbits, rounding to nearest even. ieee=0 is the "fn" flavour
 * of e4m3: no infinities, all-ones is NaN, overflow saturates. */
uint32_t perf_minifloat_encode(double v, int ebits, int mbits, int ieee) {
  uint32_t sign = signbit(v) ? 1u << (ebits + mbits) : 0;
  uint32_t emax_field = (1u << ebits) - 1;
  int bias = (1 << (ebits - 1)) - 1;
  if (isnan(v)) return sign | (emax_field << mbits) | (ieee ? 1u << (mbits - 1) : (1u << mbits) - 1);
  double a = fabs(v);
  if (a == 0) return sign;
  if (isinf(a)) a = 0x1p1000; /* rounds to infinity, or saturates without one */
  int e;
  frexp(a, &e);
  int E = e - 1; /* a = 1.m x 2^E */
  if (E < 1 - bias) E = 1 - bias;
  double m = nearbyint(ldexp(a, mbits - E)); /* in [0, 2^(mbits+1)] */
  /* Subnormals (field 0) and normals share this form; a carry into the exponent is automatic. */
  uint64_t bits = ((uint64_t)(E + bias - 1) << mbits) + (uint64_t)m;
  uint64_t max_finite = ieee ? ((uint64_t)(emax_field - 1) << mbits) | ((1u << mbits) - 1)
                             : ((uint64_t)emax_field << mbits) | ((1u << mbits) - 2);
  if (bits > max_finite) bits = ieee ? (uint64_t)emax_field << mbits : max_finite;
  return sign | (uint32_t)bits;
}

double perf_minifloat_decode(uint32_t bits, int ebits, int mbits, int ieee) {
  uint32_t emax_field = (1u << ebits) - 1;
  uint32_t ef = (bits >> mbits) & emax_field;
  uint32_t mf = bits & ((1u << mbits) - 1);
  int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (ieee && ef == emax_field)
    v = mf ? NAN : INFINITY;
  else if (!ieee && ef == emax_field && mf == (1u << mbits) - 1)
    v = NAN;
  else if (ef == 0)
    v = ldexp((double)mf, 1 - bias - mbits);
  else
    v = ldexp((double)(mf + (1u << mbits)), (int)ef - bias - mbits);
  return (bits >> (ebits + mbits)) & 1 ? -v : v;
}

void perf_type_store(const struct perf_type* t, void* buf, size_t i, double v) {
  unsigned char* p = (unsigned char*)buf + i * (size_t)t->size;
  if (t->kind != PERF_KIND_FLOAT) {
    /* Integers are stored two's complement, little-endian, truncated to the width. */
    uint64_t x = t->kind == PERF_KIND_INT ? (uint64_t)(int64_t)v : (uint64_t)v;
    memcpy(p, &x, (size_t)t->size);
  } else if (t->type == ncclFloat32) {
    float f = (float)v;
    memcpy(p, &f, 4);
  } else if (t->type == ncclFloat64) {
    memcpy(p, &v, 8);
  } else {
    uint32_t b = perf_minifloat_encode(v, t->ebits, t->mbits, t->type != ncclFloat8e4m3);
    if (t->size == 2) {
      uint16_t h = (uint16_t)b;
      memcpy(p, &h, 2);
    } else {
      *p = (unsigned char)b;
    }
  }
}

double perf_type_load(const struct perf_type* t, const void* buf, size_t i) {
  const unsigned char* p = (const unsigned char*)buf + i * (size_t)t->size;
  if (t->kind != PERF_KIND_FLOAT) {
    uint64_t x = 0;
    memcpy(&x, p, (size_t)t->size);
    if (t->kind == PERF_KIND_INT && t->size < 8) {
      int shift = 64 - 8 * t->size;
      return (double)((int64_t)(x << shift) >> shift);
    }
    return t->kind == PERF_KIND_INT ? (double)(int64_t)x : (double)x;
  }
  if (t->type == ncclFloat32) {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  if (t->type == ncclFloat64) {
    double d;
    memcpy(&d, p, 8);
    return d;
  }
  uint32_t b = t->size == 2 ? (uint32_t)(p[0] | (p[1] << 8)) : p[0];
  return perf_minifloat_decode(b, t->ebits, t->mbits, t->type != ncclFloat8e4m3);
}
