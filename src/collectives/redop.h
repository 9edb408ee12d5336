/* Reduction operators: built-in ops and user PreMulSum ops resolved into what the engine runs. */
#ifndef WEFT_COLLECTIVES_REDOP_H
#define WEFT_COLLECTIVES_REDOP_H

#include <stdint.h>

#include "collectives/task.h"
#include "nccl.h"

struct weft_comm_ctx;

/* Resolve op for datatype on comm (Avg uses comm->nranks); WARNs naming the call on an
 * unknown, destroyed or mismatched op. */
ncclResult_t weft_redop_resolve(struct weft_comm_ctx* comm, const char* name, ncclRedOp_t op,
                                ncclDataType_t dtype, struct weft_redop* out);
/* Encode value in the element type (round to nearest even for the small float types); the
 * bytes are returned in the low end of the result. */
/* ncclRedOpCreatePreMulSum / ncclRedOpDestroy (entry points in core/api_mem.c), on a comm core/
 * checked. */
ncclResult_t weft_redop_create(struct weft_comm_ctx* comm, ncclRedOp_t* op, void* scalar,
                               ncclDataType_t datatype, ncclScalarResidence_t residence);
ncclResult_t weft_redop_destroy(struct weft_comm_ctx* comm, ncclRedOp_t op);
uint64_t weft_redop_encode(double value, ncclDataType_t dtype);

#endif
