/* Element math of every datatype and reduction: conversions of fp16, bf16 and both fp8 formats
 * (round to nearest even, portable), scalar ops, and array loops the host executor vectorizes.
 * Compiles as C11 and as CUDA; small floats are computed in float, which for +, *, max and min
 * gives the correctly rounded result (float has more than 2p+2 bits for every format here). */
#ifndef WEFT_COLLECTIVES_REDUCE_H
#define WEFT_COLLECTIVES_REDUCE_H

#include "collectives/dev_types.h"

WEFT_DEVICE_INLINE uint32_t weft_f2u(float f) {
  union {
    float f;
    uint32_t u;
  } v;
  v.f = f;
  return v.u;
}
WEFT_DEVICE_INLINE float weft_u2f(uint32_t u) {
  union {
    float f;
    uint32_t u;
  } v;
  v.u = u;
  return v.f;
}

/* Small binary float with `mbits` mantissa bits and exponent bias `bias`, decoded exactly.
 * `ieee`: all-ones exponent means Inf/NaN (fp16, e5m2); otherwise only S.1111.111 is NaN (e4m3). */
WEFT_DEVICE_INLINE float weft_mini_to_f32(uint32_t v, int ebits, int mbits, int bias, int ieee) {
  uint32_t sign = (v >> (ebits + mbits)) & 1u;
  uint32_t e = (v >> mbits) & ((1u << ebits) - 1u);
  uint32_t m = v & ((1u << mbits) - 1u);
  uint32_t s32 = sign << 31;
  uint32_t emax = (1u << ebits) - 1u;
  if (ieee && e == emax) return weft_u2f(s32 | 0x7f800000u | (m << (23 - mbits)) | (m ? 0x400000u : 0u));
  if (!ieee && e == emax && m == (1u << mbits) - 1u) return weft_u2f(s32 | 0x7fc00000u);
  if (e == 0) {
    /* Subnormal: m * 2^(1 - bias - mbits), a product of exact values. */
    float scale = weft_u2f((uint32_t)(127 + 1 - bias - mbits) << 23);
    float r = (float)m * scale;
    return sign ? -r : r;
  }
  return weft_u2f(s32 | ((e - (uint32_t)bias + 127u) << 23) | (m << (23 - mbits)));
}

/* Round the magnitude bits `a` of a finite float (not NaN/Inf) to the small format, to nearest
 * even. Returns the unsigned encoding, which may exceed the largest finite one (caller handles). */
WEFT_DEVICE_INLINE uint32_t weft_f32_round_mini(uint32_t a, int mbits, int bias) {
  int e = (int)(a >> 23) - 127;
  int emin = 1 - bias;
  if (a < 0x00800000u) return 0; /* float subnormals are far below every small format */
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  int shift;
  uint32_t base;
  if (e >= emin) {
    /* Normal: rebias the exponent; a carry out of the mantissa bumps the exponent as it should. */
    if (e > 64) return 0xffffffffu;
    base = a - ((uint32_t)(127 - bias) << 23);
    shift = 23 - mbits;
  } else {
    shift = 23 + emin - mbits - e;
    if (shift > 25) return 0;
    base = m;
  }
  uint32_t r = base >> shift;
  uint32_t rem = base & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) r++;
  return r;
}

WEFT_DEVICE_INLINE float weft_f16_to_f32(uint16_t h) { return weft_mini_to_f32(h, 5, 10, 15, 1); }
WEFT_DEVICE_INLINE uint16_t weft_f32_to_f16(float f) {
  uint32_t u = weft_f2u(f), a = u & 0x7fffffffu, s = (u >> 16) & 0x8000u;
  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u | ((a >> 13) & 0x1ffu));
  if (a == 0x7f800000u) return (uint16_t)(s | 0x7c00u);
  uint32_t r = weft_f32_round_mini(a, 10, 15);
  if (r > 0x7c00u) r = 0x7c00u; /* overflow is Inf in IEEE binary16 */
  return (uint16_t)(s | r);
}

WEFT_DEVICE_INLINE float weft_bf16_to_f32(uint16_t b) { return weft_u2f((uint32_t)b << 16); }
WEFT_DEVICE_INLINE uint16_t weft_f32_to_bf16(float f) {
  uint32_t u = weft_f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* keep NaN, quiet */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* fp8 follows the OCP 8-bit formats with the saturating conversion CUDA's __NV_SATFINITE uses,
 * so host and GPU agree: finite overflow and Inf become the largest finite value, NaN stays NaN.
 * e4m3: bias 7, no Inf, S.1111.111 is NaN, max 448. e5m2: bias 15, IEEE-like, max 57344. */
WEFT_DEVICE_INLINE float weft_e4m3_to_f32(uint8_t v) { return weft_mini_to_f32(v, 4, 3, 7, 0); }
WEFT_DEVICE_INLINE uint8_t weft_f32_to_e4m3(float f) {
  uint32_t u = weft_f2u(f), a = u & 0x7fffffffu, s = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) return (uint8_t)(s | 0x7fu);
  if (a == 0x7f800000u) return (uint8_t)(s | 0x7eu);
  uint32_t r = weft_f32_round_mini(a, 3, 7);
  if (r > 0x7eu) r = 0x7eu;
  return (uint8_t)(s | r);
}
WEFT_DEVICE_INLINE float weft_e5m2_to_f32(uint8_t v) { return weft_mini_to_f32(v, 5, 2, 15, 1); }
WEFT_DEVICE_INLINE uint8_t weft_f32_to_e5m2(float f) {
  uint32_t u = weft_f2u(f), a = u & 0x7fffffffu, s = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) return (uint8_t)(s | 0x7eu | ((a >> 21) & 1u));
  if (a == 0x7f800000u) return (uint8_t)(s | 0x7bu);
  uint32_t r = weft_f32_round_mini(a, 2, 15);
  if (r > 0x7bu) r = 0x7bu;
  return (uint8_t)(s | r);
}

/* ---- Scalar ops. Integers wrap (computed unsigned); floats: max/min return the non-NaN
 * operand as fmax/fmin do. ---- */
WEFT_DEVICE_INLINE float weft_fmaxf(float a, float b) { return (a > b || b != b) ? a : b; }
WEFT_DEVICE_INLINE float weft_fminf(float a, float b) { return (a < b || b != b) ? a : b; }
WEFT_DEVICE_INLINE double weft_fmax(double a, double b) { return (a > b || b != b) ? a : b; }
WEFT_DEVICE_INLINE double weft_fmin(double a, double b) { return (a < b || b != b) ? a : b; }

/* X(name, storage type, compute type, unsigned type or compute, load, store) for each datatype. */
#define WEFT_LD_ID(x) (x)
#define WEFT_LD_F16(x) weft_f16_to_f32(x)
#define WEFT_ST_F16(x) weft_f32_to_f16(x)
#define WEFT_LD_BF16(x) weft_bf16_to_f32(x)
#define WEFT_ST_BF16(x) weft_f32_to_bf16(x)
#define WEFT_LD_E4M3(x) weft_e4m3_to_f32(x)
#define WEFT_ST_E4M3(x) weft_f32_to_e4m3(x)
#define WEFT_LD_E5M2(x) weft_e5m2_to_f32(x)
#define WEFT_ST_E5M2(x) weft_f32_to_e5m2(x)

/* Integer types: ops in the unsigned type so overflow wraps instead of being undefined. */
#define WEFT_DEF_INT_OPS(NAME, T, U, W)                                              \
  WEFT_DEVICE_INLINE T weft_sum_##NAME(T a, T b) { return (T)((U)a + (U)b); }        \
  WEFT_DEVICE_INLINE T weft_prod_##NAME(T a, T b) { return (T)((U)a * (U)b); }       \
  WEFT_DEVICE_INLINE T weft_max_##NAME(T a, T b) { return a > b ? a : b; }           \
  WEFT_DEVICE_INLINE T weft_min_##NAME(T a, T b) { return a < b ? a : b; }           \
  WEFT_DEVICE_INLINE T weft_div_##NAME(T a, uint64_t d) { return (T)((W)a / (W)d); } \
  WEFT_DEVICE_INLINE T weft_scalar_##NAME(uint64_t bits) { return (T)bits; }

#define WEFT_DEF_FLOAT_OPS(NAME, T, C, LD, ST, MAXF, MINF)                            \
  WEFT_DEVICE_INLINE T weft_sum_##NAME(T a, T b) { return ST((C)LD(a) + (C)LD(b)); }  \
  WEFT_DEVICE_INLINE T weft_prod_##NAME(T a, T b) { return ST((C)LD(a) * (C)LD(b)); } \
  WEFT_DEVICE_INLINE T weft_max_##NAME(T a, T b) { return ST(MAXF(LD(a), LD(b))); }   \
  WEFT_DEVICE_INLINE T weft_min_##NAME(T a, T b) { return ST(MINF(LD(a), LD(b))); }   \
  WEFT_DEVICE_INLINE T weft_div_##NAME(T a, uint64_t d) { return ST((C)LD(a) / (C)d); }

WEFT_DEF_INT_OPS(i8, int8_t, uint8_t, int64_t)
WEFT_DEF_INT_OPS(u8, uint8_t, uint32_t, uint64_t)
WEFT_DEF_INT_OPS(i32, int32_t, uint32_t, int64_t)
WEFT_DEF_INT_OPS(u32, uint32_t, uint32_t, uint64_t)
WEFT_DEF_INT_OPS(i64, int64_t, uint64_t, int64_t)
WEFT_DEF_INT_OPS(u64, uint64_t, uint64_t, uint64_t)
WEFT_DEF_FLOAT_OPS(f16, uint16_t, float, WEFT_LD_F16, WEFT_ST_F16, weft_fmaxf, weft_fminf)
WEFT_DEF_FLOAT_OPS(f32, float, float, WEFT_LD_ID, WEFT_LD_ID, weft_fmaxf, weft_fminf)
WEFT_DEF_FLOAT_OPS(f64, double, double, WEFT_LD_ID, WEFT_LD_ID, weft_fmax, weft_fmin)
WEFT_DEF_FLOAT_OPS(bf16, uint16_t, float, WEFT_LD_BF16, WEFT_ST_BF16, weft_fmaxf, weft_fminf)
WEFT_DEF_FLOAT_OPS(e4m3, uint8_t, float, WEFT_LD_E4M3, WEFT_ST_E4M3, weft_fmaxf, weft_fminf)
WEFT_DEF_FLOAT_OPS(e5m2, uint8_t, float, WEFT_LD_E5M2, WEFT_ST_E5M2, weft_fmaxf, weft_fminf)

/* PreMulSum scalars arrive as the element's bytes in the low end of a uint64_t. */
WEFT_DEVICE_INLINE float weft_scalar_f32(uint64_t bits) { return weft_u2f((uint32_t)bits); }
WEFT_DEVICE_INLINE double weft_scalar_f64(uint64_t bits) {
  union {
    double d;
    uint64_t u;
  } v;
  v.u = bits;
  return v.d;
}
WEFT_DEVICE_INLINE uint16_t weft_scalar_f16(uint64_t bits) { return (uint16_t)bits; }
WEFT_DEVICE_INLINE uint16_t weft_scalar_bf16(uint64_t bits) { return (uint16_t)bits; }
WEFT_DEVICE_INLINE uint8_t weft_scalar_e4m3(uint64_t bits) { return (uint8_t)bits; }
WEFT_DEVICE_INLINE uint8_t weft_scalar_e5m2(uint64_t bits) { return (uint8_t)bits; }

/* ---- Array loops, one per type x op: dst may equal either source exactly (in place), never
 * overlap partially. Buffers may sit at any byte offset (users pass pointers 1 or 2 bytes into
 * an allocation), so elements are read and written through memcpy-sized accessors, which the
 * compiler turns into the same (unaligned) vector loads and stores as plain element loops. ----
 * weft_red_<op>_<t>(dst, a, b, n):       dst = a op b
 * weft_premulsum_<t>(dst, a, b, s, n):   dst = a + b*s  (b is this rank's own input)
 * weft_premul_<t>(dst, b, s, n):         dst = b*s
 * weft_postdiv_<t>(dst, d, n):           dst = dst / d */
#define WEFT_DEF_LOOPS(NAME, T)                                                                          \
  WEFT_DEVICE_INLINE T weft_ld_##NAME(const void* p, size_t i) {                                         \
    T v;                                                                                                 \
    __builtin_memcpy(&v, (const char*)p + i * sizeof(T), sizeof(T));                                     \
    return v;                                                                                            \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_st_##NAME(void* p, size_t i, T v) {                                       \
    __builtin_memcpy((char*)p + i * sizeof(T), &v, sizeof(T));                                           \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_red_sum_##NAME(void* dst, const void* a, const void* b, size_t n) {       \
    for (size_t i = 0; i < n; i++)                                                                       \
      weft_st_##NAME(dst, i, weft_sum_##NAME(weft_ld_##NAME(a, i), weft_ld_##NAME(b, i)));               \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_red_prod_##NAME(void* dst, const void* a, const void* b, size_t n) {      \
    for (size_t i = 0; i < n; i++)                                                                       \
      weft_st_##NAME(dst, i, weft_prod_##NAME(weft_ld_##NAME(a, i), weft_ld_##NAME(b, i)));              \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_red_max_##NAME(void* dst, const void* a, const void* b, size_t n) {       \
    for (size_t i = 0; i < n; i++)                                                                       \
      weft_st_##NAME(dst, i, weft_max_##NAME(weft_ld_##NAME(a, i), weft_ld_##NAME(b, i)));               \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_red_min_##NAME(void* dst, const void* a, const void* b, size_t n) {       \
    for (size_t i = 0; i < n; i++)                                                                       \
      weft_st_##NAME(dst, i, weft_min_##NAME(weft_ld_##NAME(a, i), weft_ld_##NAME(b, i)));               \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_premulsum_##NAME(void* dst, const void* a, const void* b, uint64_t s,     \
                                                size_t n) {                                              \
    T sc = weft_scalar_##NAME(s);                                                                        \
    for (size_t i = 0; i < n; i++)                                                                       \
      weft_st_##NAME(dst, i,                                                                             \
                     weft_sum_##NAME(weft_ld_##NAME(a, i), weft_prod_##NAME(weft_ld_##NAME(b, i), sc))); \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_premul_##NAME(void* dst, const void* b, uint64_t s, size_t n) {           \
    T sc = weft_scalar_##NAME(s);                                                                        \
    for (size_t i = 0; i < n; i++) weft_st_##NAME(dst, i, weft_prod_##NAME(weft_ld_##NAME(b, i), sc));   \
  }                                                                                                      \
  WEFT_DEVICE_INLINE void weft_postdiv_##NAME(void* dst, uint64_t d, size_t n) {                         \
    for (size_t i = 0; i < n; i++) weft_st_##NAME(dst, i, weft_div_##NAME(weft_ld_##NAME(dst, i), d));   \
  }

WEFT_DEF_LOOPS(i8, int8_t)
WEFT_DEF_LOOPS(u8, uint8_t)
WEFT_DEF_LOOPS(i32, int32_t)
WEFT_DEF_LOOPS(u32, uint32_t)
WEFT_DEF_LOOPS(i64, int64_t)
WEFT_DEF_LOOPS(u64, uint64_t)
WEFT_DEF_LOOPS(f16, uint16_t)
WEFT_DEF_LOOPS(f32, float)
WEFT_DEF_LOOPS(f64, double)
WEFT_DEF_LOOPS(bf16, uint16_t)
WEFT_DEF_LOOPS(e4m3, uint8_t)
WEFT_DEF_LOOPS(e5m2, uint8_t)

/* X-macro over datatypes, for dispatch tables: X(enum value, name, storage type). */
#define WEFT_FOR_EACH_DT(X)       \
  X(WEFT_DT_I8, i8, int8_t)       \
  X(WEFT_DT_U8, u8, uint8_t)      \
  X(WEFT_DT_I32, i32, int32_t)    \
  X(WEFT_DT_U32, u32, uint32_t)   \
  X(WEFT_DT_I64, i64, int64_t)    \
  X(WEFT_DT_U64, u64, uint64_t)   \
  X(WEFT_DT_F16, f16, uint16_t)   \
  X(WEFT_DT_F32, f32, float)      \
  X(WEFT_DT_F64, f64, double)     \
  X(WEFT_DT_BF16, bf16, uint16_t) \
  X(WEFT_DT_E4M3, e4m3, uint8_t)  \
  X(WEFT_DT_E5M2, e5m2, uint8_t)

#endif
