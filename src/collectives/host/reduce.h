/* Host dispatch of reduce.h's loops by datatype and op (compiled with vectorization on). */
#ifndef WEFT_COLLECTIVES_HOST_REDUCE_H
#define WEFT_COLLECTIVES_HOST_REDUCE_H

#include "collectives/dev_types.h"

/* dst = recvd op pre(own): pre multiplies this rank's own input for PreMulSum. */
void weft_host_reduce(int dt, const struct weft_dev_redop* op, void* dst, const void* recvd, const void* own,
                      size_t n);
/* dst = pre(src) (a copy unless PreMulSum). */
void weft_host_preop(int dt, const struct weft_dev_redop* op, void* dst, const void* src, size_t n);
/* dst = post(dst) (a division for SumPostDiv, else nothing). */
void weft_host_postop(int dt, const struct weft_dev_redop* op, void* dst, size_t n);

#endif
