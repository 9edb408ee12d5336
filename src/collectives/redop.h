/* Reduction operators: built-in ops and user PreMulSum ops resolved into what the engine runs. */
#ifndef WEFT_COLLECTIVES_REDOP_H
#define WEFT_COLLECTIVES_REDOP_H

#include <stdint.h>

#include "collectives/task.h"
#include "nccl.h"

struct ncclComm;

/* Resolve op for datatype on comm (Avg uses comm->nranks); WARNs naming the call on an
 * unknown, destroyed or mismatched op. */
ncclResult_t weft_redop_resolve(struct ncclComm* comm, const char* name, ncclRedOp_t op, ncclDataType_t dtype,
                                struct weft_redop* out);
/* Encode value in the element type (round to nearest even for the small float types); the
 * bytes are returned in the low end of the result. */
uint64_t weft_redop_encode(double value, ncclDataType_t dtype);

#endif
