/* Device element math for the CUDA kernel: the ops of every datatype on its storage bits, with
 * fp16/bf16 in native half2/bfloat162 arithmetic and fp8 computed in half2, and the loops that
 * move and reduce a step's bytes with all threads of the block. Results match the host's
 * reduce.h bit for bit: every op rounds once to the element type (products are never fused
 * into an FMA, so PreMulSum rounds the product then the sum, as the host does). */
#ifndef WEFT_COLLECTIVES_CUDA_REDUCE_DEV_CUH
#define WEFT_COLLECTIVES_CUDA_REDUCE_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <string.h>

#include "collectives/dev_types.h"
#include "collectives/reduce.h"

/* Ops as the loops see them: SumPostDiv is SUM plus a post-division of final results. */
enum { DOP_SUM, DOP_PROD, DOP_MAX, DOP_MIN, DOP_PMS };

template <int DT>
struct dev_store;
#define WEFT_DEV_STORE(DT, T) \
  template <>                 \
  struct dev_store<DT> {      \
    typedef T t;              \
  };
WEFT_DEV_STORE(WEFT_DT_I8, int8_t)
WEFT_DEV_STORE(WEFT_DT_U8, uint8_t)
WEFT_DEV_STORE(WEFT_DT_I32, int32_t)
WEFT_DEV_STORE(WEFT_DT_U32, uint32_t)
WEFT_DEV_STORE(WEFT_DT_I64, int64_t)
WEFT_DEV_STORE(WEFT_DT_U64, uint64_t)
WEFT_DEV_STORE(WEFT_DT_F16, uint16_t)
WEFT_DEV_STORE(WEFT_DT_F32, float)
WEFT_DEV_STORE(WEFT_DT_F64, double)
WEFT_DEV_STORE(WEFT_DT_BF16, uint16_t)
WEFT_DEV_STORE(WEFT_DT_E4M3, uint8_t)
WEFT_DEV_STORE(WEFT_DT_E5M2, uint8_t)
#undef WEFT_DEV_STORE

__device__ __forceinline__ __half u16_half(uint16_t v) { return __ushort_as_half(v); }
__device__ __forceinline__ uint16_t half_u16(__half h) { return __half_as_ushort(h); }
__device__ __forceinline__ __nv_bfloat16 u16_bf16(uint16_t v) { return __ushort_as_bfloat16(v); }
__device__ __forceinline__ uint16_t bf16_u16(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }

template <int DT>
__device__ __forceinline__ __nv_fp8_interpretation_t fp8_kind() {
  return DT == WEFT_DT_E4M3 ? __NV_E4M3 : __NV_E5M2;
}

/* Binary op of kind OP (never DOP_PMS) on half values. */
template <int OP>
__device__ __forceinline__ __half half_op(__half a, __half b) {
  if constexpr (OP == DOP_SUM) return __hadd(a, b);
  if constexpr (OP == DOP_PROD) return __hmul_rn(a, b);
  if constexpr (OP == DOP_MAX) return __hmax(a, b);
  return __hmin(a, b);
}
template <int OP>
__device__ __forceinline__ __half2 half2_op(__half2 a, __half2 b) {
  if constexpr (OP == DOP_SUM) return __hadd2(a, b);
  if constexpr (OP == DOP_PROD) return __hmul2_rn(a, b);
  if constexpr (OP == DOP_MAX) return __hmax2(a, b);
  return __hmin2(a, b);
}
template <int OP>
__device__ __forceinline__ __nv_bfloat16 bf16_op(__nv_bfloat16 a, __nv_bfloat16 b) {
  if constexpr (OP == DOP_SUM) return __hadd(a, b);
  if constexpr (OP == DOP_PROD) return __hmul_rn(a, b);
  if constexpr (OP == DOP_MAX) return __hmax(a, b);
  return __hmin(a, b);
}
template <int OP>
__device__ __forceinline__ __nv_bfloat162 bf162_op(__nv_bfloat162 a, __nv_bfloat162 b) {
  if constexpr (OP == DOP_SUM) return __hadd2(a, b);
  if constexpr (OP == DOP_PROD) return __hmul2_rn(a, b);
  if constexpr (OP == DOP_MAX) return __hmax2(a, b);
  return __hmin2(a, b);
}

/* One element: a OP b on storage values (OP is SUM, PROD, MAX or MIN). */
template <int DT, int OP>
__device__ __forceinline__ typename dev_store<DT>::t elem_op(typename dev_store<DT>::t a,
                                                             typename dev_store<DT>::t b) {
  typedef typename dev_store<DT>::t T;
  if constexpr (DT == WEFT_DT_F32) {
    if constexpr (OP == DOP_SUM) return __fadd_rn(a, b);
    if constexpr (OP == DOP_PROD) return __fmul_rn(a, b);
    if constexpr (OP == DOP_MAX) return weft_fmaxf(a, b);
    return weft_fminf(a, b);
  } else if constexpr (DT == WEFT_DT_F64) {
    if constexpr (OP == DOP_SUM) return __dadd_rn(a, b);
    if constexpr (OP == DOP_PROD) return __dmul_rn(a, b);
    if constexpr (OP == DOP_MAX) return weft_fmax(a, b);
    return weft_fmin(a, b);
  } else if constexpr (DT == WEFT_DT_F16) {
    return half_u16(half_op<OP>(u16_half(a), u16_half(b)));
  } else if constexpr (DT == WEFT_DT_BF16) {
    return bf16_u16(bf16_op<OP>(u16_bf16(a), u16_bf16(b)));
  } else if constexpr (DT == WEFT_DT_E4M3 || DT == WEFT_DT_E5M2) {
    __half ha = __nv_cvt_fp8_to_halfraw(a, fp8_kind<DT>());
    __half hb = __nv_cvt_fp8_to_halfraw(b, fp8_kind<DT>());
    return __nv_cvt_halfraw_to_fp8(half_op<OP>(ha, hb), __NV_SATFINITE, fp8_kind<DT>());
  } else {
    /* Integers wrap: compute in 64-bit unsigned and keep the low bits, as the host does. */
    if constexpr (OP == DOP_SUM) return (T)((unsigned long long)a + (unsigned long long)b);
    if constexpr (OP == DOP_PROD) return (T)((unsigned long long)a * (unsigned long long)b);
    if constexpr (OP == DOP_MAX) return a > b ? a : b;
    return a < b ? a : b;
  }
}

/* Division of a final result by d (SumPostDiv, the integer Avg). */
template <int DT>
__device__ __forceinline__ typename dev_store<DT>::t elem_div(typename dev_store<DT>::t a, uint64_t d) {
  if constexpr (DT == WEFT_DT_I8) return weft_div_i8(a, d);
  if constexpr (DT == WEFT_DT_U8) return weft_div_u8(a, d);
  if constexpr (DT == WEFT_DT_I32) return weft_div_i32(a, d);
  if constexpr (DT == WEFT_DT_U32) return weft_div_u32(a, d);
  if constexpr (DT == WEFT_DT_I64) return weft_div_i64(a, d);
  return weft_div_u64(a, d);
}

/* What a pack computes: v = a OP pre(b) (or a alone, or pre(b) alone), then post(v). */
struct dev_calc {
  int has_a, has_b;
  int pre;  /* multiply b by the PreMulSum scalar */
  int post; /* divide by divisor */
  uint64_t scalar, divisor;
};

template <int DT, int OP>
__device__ __forceinline__ typename dev_store<DT>::t elem_calc(const struct dev_calc& c,
                                                               typename dev_store<DT>::t a,
                                                               typename dev_store<DT>::t b) {
  typedef typename dev_store<DT>::t T;
  constexpr int BASE = OP == DOP_PMS ? DOP_SUM : OP;
  T v;
  if (c.has_b) {
    if (OP == DOP_PMS && c.pre) {
      T s;
      memcpy(&s, &c.scalar, sizeof(T));
      b = elem_op<DT, DOP_PROD>(b, s);
    }
    v = c.has_a ? elem_op<DT, BASE>(a, b) : b;
  } else {
    v = a;
  }
  return v;
}

/* Two lanes of fp16, bf16 or fp8 (computed in half): the same steps as elem_calc. fp8 rounds
 * the PreMulSum product to fp8 before the sum, as the host does. */
template <int DT>
struct dev_x2 {
  typedef __half2 t;
};
template <>
struct dev_x2<WEFT_DT_BF16> {
  typedef __nv_bfloat162 t;
};

template <int DT, int OP>
__device__ __forceinline__ typename dev_x2<DT>::t x2_op(typename dev_x2<DT>::t a, typename dev_x2<DT>::t b) {
  if constexpr (DT == WEFT_DT_BF16)
    return bf162_op<OP>(a, b);
  else
    return half2_op<OP>(a, b);
}

template <int DT>
__device__ __forceinline__ __half2 fp8x2_round(__half2 h) {
  __half2_raw r = h;
  __half2 back = __nv_cvt_fp8x2_to_halfraw2(__nv_cvt_halfraw2_to_fp8x2(r, __NV_SATFINITE, fp8_kind<DT>()),
                                            fp8_kind<DT>());
  return back;
}

template <int DT, int OP>
__device__ __forceinline__ typename dev_x2<DT>::t calc_x2(const struct dev_calc& c, typename dev_x2<DT>::t a,
                                                          typename dev_x2<DT>::t b,
                                                          typename dev_x2<DT>::t s) {
  constexpr int BASE = OP == DOP_PMS ? DOP_SUM : OP;
  if (!c.has_b) return a;
  if (OP == DOP_PMS && c.pre) {
    b = x2_op<DT, DOP_PROD>(b, s);
    if constexpr (DT == WEFT_DT_E4M3 || DT == WEFT_DT_E5M2) b = fp8x2_round<DT>(b);
  }
  return c.has_a ? x2_op<DT, BASE>(a, b) : b;
}

/* Eight bytes of elements: fp16/bf16 two lanes at a time, fp8 as half2; others per element. */
template <int DT, int OP>
__device__ __forceinline__ uint64_t pack_calc(const struct dev_calc& c, uint64_t a, uint64_t b) {
  typedef typename dev_store<DT>::t T;
  if constexpr (DT == WEFT_DT_F16 || DT == WEFT_DT_BF16) {
    typedef typename dev_x2<DT>::t H2;
    H2 x[2], y[2], s;
    memcpy(x, &a, 8);
    memcpy(y, &b, 8);
    uint32_t sbits = (uint32_t)(c.scalar & 0xffff) * 0x10001u;
    memcpy(&s, &sbits, 4);
    x[0] = calc_x2<DT, OP>(c, x[0], y[0], s);
    x[1] = calc_x2<DT, OP>(c, x[1], y[1], s);
    uint64_t r;
    memcpy(&r, x, 8);
    return r;
  } else if constexpr (DT == WEFT_DT_E4M3 || DT == WEFT_DT_E5M2) {
    uint16_t sb = (uint16_t)((c.scalar & 0xff) * 0x101u);
    __half2 s = __nv_cvt_fp8x2_to_halfraw2(sb, fp8_kind<DT>());
    uint64_t r = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      __half2 x = __nv_cvt_fp8x2_to_halfraw2((uint16_t)(a >> (16 * i)), fp8_kind<DT>());
      __half2 y = __nv_cvt_fp8x2_to_halfraw2((uint16_t)(b >> (16 * i)), fp8_kind<DT>());
      __half2_raw v = calc_x2<DT, OP>(c, x, y, s);
      r |= (uint64_t)__nv_cvt_halfraw2_to_fp8x2(v, __NV_SATFINITE, fp8_kind<DT>()) << (16 * i);
    }
    return r;
  } else {
    constexpr int N = 8 / sizeof(T);
    T va[N], vb[N];
    memcpy(va, &a, 8);
    memcpy(vb, &b, 8);
#pragma unroll
    for (int i = 0; i < N; i++) va[i] = elem_calc<DT, OP>(c, va[i], vb[i]);
    uint64_t r;
    memcpy(&r, va, 8);
    return r;
  }
}

/* Post-division of 8 bytes of final results (SumPostDiv: integer Avg; only integers get it). */
template <int DT>
__device__ __forceinline__ uint64_t pack_div(uint64_t v, uint64_t d) {
  typedef typename dev_store<DT>::t T;
  constexpr int N = 8 / sizeof(T);
  T x[N];
  memcpy(x, &v, 8);
#pragma unroll
  for (int i = 0; i < N; i++) x[i] = elem_div<DT>(x[i], d);
  memcpy(&v, x, 8);
  return v;
}

__device__ __noinline__ uint64_t calc_div(int dt, uint64_t v, uint64_t d) {
  switch (dt) {
    case WEFT_DT_I8:
      return pack_div<WEFT_DT_I8>(v, d);
    case WEFT_DT_U8:
      return pack_div<WEFT_DT_U8>(v, d);
    case WEFT_DT_I32:
      return pack_div<WEFT_DT_I32>(v, d);
    case WEFT_DT_U32:
      return pack_div<WEFT_DT_U32>(v, d);
    case WEFT_DT_I64:
      return pack_div<WEFT_DT_I64>(v, d);
    case WEFT_DT_U64:
      return pack_div<WEFT_DT_U64>(v, d);
    default:
      return v; /* floating types never carry a post-division (their Avg is PreMulSum) */
  }
}

/* Up to 8 bytes at p (n bytes, a multiple of the element size, p aligned to it). */
__device__ __forceinline__ uint64_t load_part(const char* p, int n, int esize) {
  uint64_t v = 0;
  if (n == 8 && ((uintptr_t)p & 7) == 0) return *(const uint64_t*)p;
  for (int i = 0; i < n; i += esize) {
    uint64_t e;
    switch (esize) {
      case 1:
        e = *(const uint8_t*)(p + i);
        break;
      case 2:
        e = *(const uint16_t*)(p + i);
        break;
      case 4:
        e = *(const uint32_t*)(p + i);
        break;
      default:
        e = *(const uint64_t*)(p + i);
        break;
    }
    v |= e << (8 * i);
  }
  return v;
}
__device__ __forceinline__ void store_part(char* p, uint64_t v, int n, int esize) {
  if (n == 8 && ((uintptr_t)p & 7) == 0) {
    *(uint64_t*)p = v;
    return;
  }
  for (int i = 0; i < n; i += esize) {
    uint64_t e = v >> (8 * i);
    switch (esize) {
      case 1:
        *(uint8_t*)(p + i) = (uint8_t)e;
        break;
      case 2:
        *(uint16_t*)(p + i) = (uint16_t)e;
        break;
      case 4:
        *(uint32_t*)(p + i) = (uint32_t)e;
        break;
      default:
        *(uint64_t*)(p + i) = e;
        break;
    }
  }
}

/* A step's data movement: sources a (received; read around L1, another agent wrote it) and b
 * (own input), destinations d1 and optional d2, bytes a multiple of the element size. */
struct dev_move {
  const char* a;
  const char* b;
  char* d1;
  char* d2;
  size_t bytes;
  int esize;
};

#define WEFT_DEV_UNROLL 4

template <int DT, int OP>
__device__ __noinline__ void calc_loop(const struct dev_move& m, const struct dev_calc& c) {
  const int nt = blockDim.x;
  uintptr_t align = (uintptr_t)m.a | (uintptr_t)m.b | (uintptr_t)m.d1 | (uintptr_t)m.d2;
  size_t nvec = (align & 15) == 0 ? m.bytes / 16 : 0;
  const ulonglong2* a = (const ulonglong2*)m.a;
  const ulonglong2* b = (const ulonglong2*)m.b;
  ulonglong2* d1 = (ulonglong2*)m.d1;
  ulonglong2* d2 = (ulonglong2*)m.d2;
  size_t i = threadIdx.x;
  /* Loads of several vectors are issued before any store, so each thread keeps a few memory
   * requests in flight. */
  for (; i + (WEFT_DEV_UNROLL - 1) * nt < nvec; i += WEFT_DEV_UNROLL * nt) {
    ulonglong2 va[WEFT_DEV_UNROLL], vb[WEFT_DEV_UNROLL];
#pragma unroll
    for (int u = 0; u < WEFT_DEV_UNROLL; u++) {
      va[u] = c.has_a ? __ldcg(a + i + u * nt) : make_ulonglong2(0, 0);
      vb[u] = c.has_b ? b[i + u * nt] : make_ulonglong2(0, 0);
    }
#pragma unroll
    for (int u = 0; u < WEFT_DEV_UNROLL; u++) {
      ulonglong2 r;
      r.x = pack_calc<DT, OP>(c, va[u].x, vb[u].x);
      r.y = pack_calc<DT, OP>(c, va[u].y, vb[u].y);
      d1[i + u * nt] = r;
      if (d2) d2[i + u * nt] = r;
    }
  }
  for (; i < nvec; i += nt) {
    ulonglong2 va = c.has_a ? __ldcg(a + i) : make_ulonglong2(0, 0);
    ulonglong2 vb = c.has_b ? b[i] : make_ulonglong2(0, 0);
    ulonglong2 r;
    r.x = pack_calc<DT, OP>(c, va.x, vb.x);
    r.y = pack_calc<DT, OP>(c, va.y, vb.y);
    d1[i] = r;
    if (d2) d2[i] = r;
  }
  /* The rest (or everything, when unaligned) one element per thread. */
  const int es = m.esize;
  for (size_t off = nvec * 16 + (size_t)threadIdx.x * es; off < m.bytes; off += (size_t)nt * es) {
    uint64_t va = c.has_a ? load_part(m.a + off, es, es) : 0;
    uint64_t vb = c.has_b ? load_part(m.b + off, es, es) : 0;
    uint64_t r = pack_calc<DT, OP>(c, va, vb);
    store_part(m.d1 + off, r, es, es);
    if (m.d2) store_part(m.d2 + off, r, es, es);
  }
}

/* Plain copy of src (a, else b) to d1 and d2: 16-byte vectors when aligned, else elements. */
__device__ __noinline__ void copy_loop(const struct dev_move& m) {
  const int nt = blockDim.x;
  const char* src = m.a ? m.a : m.b;
  int fifo_src = m.a != NULL;
  uintptr_t align = (uintptr_t)src | (uintptr_t)m.d1 | (uintptr_t)m.d2;
  size_t nvec = (align & 15) == 0 ? m.bytes / 16 : 0;
  const ulonglong2* s = (const ulonglong2*)src;
  ulonglong2* d1 = (ulonglong2*)m.d1;
  ulonglong2* d2 = (ulonglong2*)m.d2;
  size_t i = threadIdx.x;
  for (; i + (WEFT_DEV_UNROLL - 1) * nt < nvec; i += WEFT_DEV_UNROLL * nt) {
    ulonglong2 v[WEFT_DEV_UNROLL];
#pragma unroll
    for (int u = 0; u < WEFT_DEV_UNROLL; u++) v[u] = fifo_src ? __ldcg(s + i + u * nt) : s[i + u * nt];
#pragma unroll
    for (int u = 0; u < WEFT_DEV_UNROLL; u++) {
      d1[i + u * nt] = v[u];
      if (d2) d2[i + u * nt] = v[u];
    }
  }
  for (; i < nvec; i += nt) {
    ulonglong2 v = fifo_src ? __ldcg(s + i) : s[i];
    d1[i] = v;
    if (d2) d2[i] = v;
  }
  const int es = m.esize;
  for (size_t off = nvec * 16 + (size_t)threadIdx.x * es; off < m.bytes; off += (size_t)nt * es) {
    uint64_t v = load_part(src + off, es, es);
    store_part(m.d1 + off, v, es, es);
    if (m.d2) store_part(m.d2 + off, v, es, es);
  }
}

/* In-place post-division of bytes at d (8-byte packs, then elements). */
__device__ __noinline__ void div_loop(int dt, char* d, size_t bytes, int esize, uint64_t divisor) {
  const int nt = blockDim.x;
  size_t npack = ((uintptr_t)d & 7) == 0 ? bytes / 8 : 0;
  for (size_t i = threadIdx.x; i < npack; i += nt) {
    uint64_t* p = (uint64_t*)d + i;
    *p = calc_div(dt, *p, divisor);
  }
  for (size_t off = npack * 8 + (size_t)threadIdx.x * esize; off < bytes; off += (size_t)nt * esize)
    store_part(d + off, calc_div(dt, load_part(d + off, esize, esize), divisor), esize, esize);
}

/* Dispatch of the typed loop on datatype and op, decided once per step. */
template <int DT>
__device__ __forceinline__ void calc_loop_dt(int op, const struct dev_move& m, const struct dev_calc& c) {
  switch (op) {
    case DOP_PROD:
      calc_loop<DT, DOP_PROD>(m, c);
      break;
    case DOP_MAX:
      calc_loop<DT, DOP_MAX>(m, c);
      break;
    case DOP_MIN:
      calc_loop<DT, DOP_MIN>(m, c);
      break;
    case DOP_PMS:
      calc_loop<DT, DOP_PMS>(m, c);
      break;
    default:
      calc_loop<DT, DOP_SUM>(m, c);
      break;
  }
}

__device__ __noinline__ void calc_move(int dt, int op, const struct dev_move& m, const struct dev_calc& c) {
  switch (dt) {
    case WEFT_DT_I8:
      calc_loop_dt<WEFT_DT_I8>(op, m, c);
      break;
    case WEFT_DT_U8:
      calc_loop_dt<WEFT_DT_U8>(op, m, c);
      break;
    case WEFT_DT_I32:
      calc_loop_dt<WEFT_DT_I32>(op, m, c);
      break;
    case WEFT_DT_U32:
      calc_loop_dt<WEFT_DT_U32>(op, m, c);
      break;
    case WEFT_DT_I64:
      calc_loop_dt<WEFT_DT_I64>(op, m, c);
      break;
    case WEFT_DT_U64:
      calc_loop_dt<WEFT_DT_U64>(op, m, c);
      break;
    case WEFT_DT_F16:
      calc_loop_dt<WEFT_DT_F16>(op, m, c);
      break;
    case WEFT_DT_F32:
      calc_loop_dt<WEFT_DT_F32>(op, m, c);
      break;
    case WEFT_DT_F64:
      calc_loop_dt<WEFT_DT_F64>(op, m, c);
      break;
    case WEFT_DT_BF16:
      calc_loop_dt<WEFT_DT_BF16>(op, m, c);
      break;
    case WEFT_DT_E4M3:
      calc_loop_dt<WEFT_DT_E4M3>(op, m, c);
      break;
    default:
      calc_loop_dt<WEFT_DT_E5M2>(op, m, c);
      break;
  }
}

/* One 8-byte pack for LL lines, dispatched per pack (LL moves little data per step). */
template <int DT>
__device__ __forceinline__ uint64_t pack_dt(int op, const struct dev_calc& c, uint64_t a, uint64_t b) {
  switch (op) {
    case DOP_PROD:
      return pack_calc<DT, DOP_PROD>(c, a, b);
    case DOP_MAX:
      return pack_calc<DT, DOP_MAX>(c, a, b);
    case DOP_MIN:
      return pack_calc<DT, DOP_MIN>(c, a, b);
    case DOP_PMS:
      return pack_calc<DT, DOP_PMS>(c, a, b);
    default:
      return pack_calc<DT, DOP_SUM>(c, a, b);
  }
}

__device__ __noinline__ uint64_t calc_pack(int dt, int op, const struct dev_calc& c, uint64_t a, uint64_t b) {
  switch (dt) {
    case WEFT_DT_I8:
      return pack_dt<WEFT_DT_I8>(op, c, a, b);
    case WEFT_DT_U8:
      return pack_dt<WEFT_DT_U8>(op, c, a, b);
    case WEFT_DT_I32:
      return pack_dt<WEFT_DT_I32>(op, c, a, b);
    case WEFT_DT_U32:
      return pack_dt<WEFT_DT_U32>(op, c, a, b);
    case WEFT_DT_I64:
      return pack_dt<WEFT_DT_I64>(op, c, a, b);
    case WEFT_DT_U64:
      return pack_dt<WEFT_DT_U64>(op, c, a, b);
    case WEFT_DT_F16:
      return pack_dt<WEFT_DT_F16>(op, c, a, b);
    case WEFT_DT_F32:
      return pack_dt<WEFT_DT_F32>(op, c, a, b);
    case WEFT_DT_F64:
      return pack_dt<WEFT_DT_F64>(op, c, a, b);
    case WEFT_DT_BF16:
      return pack_dt<WEFT_DT_BF16>(op, c, a, b);
    case WEFT_DT_E4M3:
      return pack_dt<WEFT_DT_E4M3>(op, c, a, b);
    default:
      return pack_dt<WEFT_DT_E5M2>(op, c, a, b);
  }
}

#endif
