/* Host reduction dispatch: one switch over datatype x op onto reduce.h's array loops. */
#include "collectives/host/reduce.h"

#include <string.h>

#include "collectives/reduce.h"

void weft_host_reduce(int dt, const struct weft_dev_redop* op, void* dst, const void* a, const void* b,
                      size_t n) {
#define CASE(E, NAME, T)                                 \
  case E:                                                \
    switch (op->kind) {                                  \
      case WEFT_RED_PROD:                                \
        weft_red_prod_##NAME(dst, a, b, n);              \
        break;                                           \
      case WEFT_RED_MAX:                                 \
        weft_red_max_##NAME(dst, a, b, n);               \
        break;                                           \
      case WEFT_RED_MIN:                                 \
        weft_red_min_##NAME(dst, a, b, n);               \
        break;                                           \
      case WEFT_RED_PREMULSUM:                           \
        weft_premulsum_##NAME(dst, a, b, op->scalar, n); \
        break;                                           \
      default:                                           \
        weft_red_sum_##NAME(dst, a, b, n);               \
        break;                                           \
    }                                                    \
    break;
  switch (dt) { WEFT_FOR_EACH_DT(CASE) }
#undef CASE
}

void weft_host_preop(int dt, const struct weft_dev_redop* op, void* dst, const void* src, size_t n) {
  if (op->kind != WEFT_RED_PREMULSUM) {
    if (dst != src) memcpy(dst, src, n * weft_dt_size(dt));
    return;
  }
#define CASE(E, NAME, T)                         \
  case E:                                        \
    weft_premul_##NAME(dst, src, op->scalar, n); \
    break;
  switch (dt) { WEFT_FOR_EACH_DT(CASE) }
#undef CASE
}

void weft_host_postop(int dt, const struct weft_dev_redop* op, void* dst, size_t n) {
  if (op->kind != WEFT_RED_SUMPOSTDIV || op->divisor <= 1) return;
#define CASE(E, NAME, T)                      \
  case E:                                     \
    weft_postdiv_##NAME(dst, op->divisor, n); \
    break;
  switch (dt) { WEFT_FOR_EACH_DT(CASE) }
#undef CASE
}
