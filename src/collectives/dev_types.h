/* The few types and macros shared by the portable algorithm bodies (algo/), reduce.h and
 * both executors. Compiles as C11 and as CUDA; includes nothing of the library. */
#ifndef WEFT_COLLECTIVES_DEV_TYPES_H
#define WEFT_COLLECTIVES_DEV_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define WEFT_DEVICE_INLINE __device__ __forceinline__
#define WEFT_RESTRICT __restrict__
#else
#define WEFT_DEVICE_INLINE static inline
#define WEFT_RESTRICT restrict
#endif

/* Same values as ncclDataType_t (checked in plan.c). */
enum weft_dt {
  WEFT_DT_I8,
  WEFT_DT_U8,
  WEFT_DT_I32,
  WEFT_DT_U32,
  WEFT_DT_I64,
  WEFT_DT_U64,
  WEFT_DT_F16,
  WEFT_DT_F32,
  WEFT_DT_F64,
  WEFT_DT_BF16,
  WEFT_DT_E4M3,
  WEFT_DT_E5M2,
  WEFT_DT_COUNT
};

/* Same values as enum weft_op_kind in task.h (checked in plan.c). */
enum weft_red {
  WEFT_RED_SUM,
  WEFT_RED_PROD,
  WEFT_RED_MAX,
  WEFT_RED_MIN,
  WEFT_RED_PREMULSUM,
  WEFT_RED_SUMPOSTDIV
};

/* Protocols of a connector: Simple (bulk slots, head/tail) and LL (flagged 8-byte words). */
enum weft_proto { WEFT_PROTO_LL = 0, WEFT_PROTO_SIMPLE = 1, WEFT_PROTO_COUNT = 2 };

/* The reduction as executed: kind, the PreMulSum scalar's bits in the element type, the
 * SumPostDiv divisor. */
struct weft_dev_redop {
  int kind;
  uint64_t scalar;
  uint64_t divisor;
};

/* One channel's share of one collective, as produced by plan.c and run by an algorithm body.
 * Offsets and counts are in elements. For AllGather/ReduceScatter, [ch_offset, +ch_count)
 * selects the same range inside every rank's block of `count` elements. */
struct weft_dev_work {
  int coll; /* enum weft_coll */
  int dtype;
  int proto;
  int rank, nranks, root;
  struct weft_dev_redop op;
  size_t count;     /* NCCL's count (per-rank block for AllGather/ReduceScatter) */
  size_t ch_offset; /* this channel's first element */
  size_t ch_count;  /* this channel's elements */
  size_t chunk;     /* elements per step (at most one FIFO slot) */
};

WEFT_DEVICE_INLINE size_t weft_dt_size(int dt) {
  switch (dt) {
    case WEFT_DT_I8:
    case WEFT_DT_U8:
    case WEFT_DT_E4M3:
    case WEFT_DT_E5M2:
      return 1;
    case WEFT_DT_F16:
    case WEFT_DT_BF16:
      return 2;
    case WEFT_DT_I32:
    case WEFT_DT_U32:
    case WEFT_DT_F32:
      return 4;
    default:
      return 8;
  }
}

WEFT_DEVICE_INLINE size_t weft_min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* Channel ch's share of count elements split over nch channels, the same on every rank and in
 * both executors: contiguous ranges, each a multiple of 64 elements but the last (which may be
 * short or empty). Returns its element count, with its first element in *offset. */
WEFT_DEVICE_INLINE size_t weft_channel_range(size_t count, int nch, int ch, size_t* offset) {
  size_t per = (count + (size_t)nch - 1) / (size_t)nch;
  per = (per + 63) / 64 * 64;
  size_t off = weft_min_sz(count, (size_t)ch * per);
  *offset = off;
  return weft_min_sz(per, count - off);
}

#endif
