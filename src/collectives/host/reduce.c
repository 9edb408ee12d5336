/* Host reduction dispatch: one switch over datatype x op onto reduce.h's array loops. */
#include "collectives/host/reduce.h"

#include <string.h>

#include "collectives/reduce.h"

void weft_host_reduce(int dt, const struct weft_dev_redop* op, void* dst, const void* a, const void* b,
                      size_t n) {
#define CASE(E, NAME, T)                                                         \
  case E:                                                                        \
    switch (op->kind) {                                                          \
      case WEFT_RED_PROD:                                                        \
        weft_red_prod_##NAME((T*)dst, (const T*)a, (const T*)b, n);              \
        break;                                                                   \
      case WEFT_RED_MAX:                                                         \
        weft_red_max_##NAME((T*)dst, (const T*)a, (const T*)b, n);               \
        break;                                                                   \
      case WEFT_RED_MIN:                                                         \
        weft_red_min_##NAME((T*)dst, (const T*)a, (const T*)b, n);               \
        break;                                                                   \
      case WEFT_RED_PREMULSUM:                                                   \
        weft_premulsum_##NAME((T*)dst, (const T*)a, (const T*)b, op->scalar, n); \
        break;                                                                   \
      default:                                                                   \
        weft_red_sum_##NAME((T*)dst, (const T*)a, (const T*)b, n);               \
        break;                                                                   \
    }                                                                            \
    break;
  switch (dt) { WEFT_FOR_EACH_DT(CASE) }
#undef CASE
}

void weft_host_preop(int dt, const struct weft_dev_redop* op, void* dst, const void* src, size_t n) {
  if (op->kind != WEFT_RED_PREMULSUM) {
    if (dst != src) memcpy(dst, src, n * weft_dt_size(dt));
    return;
  }
#define CASE(E, NAME, T)                                       \
  case E:                                                      \
    weft_premul_##NAME((T*)dst, (const T*)src, op->scalar, n); \
    break;
  switch (dt) { WEFT_FOR_EACH_DT(CASE) }
#undef CASE
}

void weft_host_postop(int dt, const struct weft_dev_redop* op, void* dst, size_t n) {
  if (op->kind != WEFT_RED_SUMPOSTDIV || op->divisor <= 1) return;
#define CASE(E, NAME, T)                          \
  case E:                                         \
    weft_postdiv_##NAME((T*)dst, op->divisor, n); \
    break;
  switch (dt) { WEFT_FOR_EACH_DT(CASE) }
#undef CASE
}
