/* Communicator suspend state, as other calls see it (core/suspend.c). */
#ifndef WEFT_CORE_SUSPEND_H
#define WEFT_CORE_SUSPEND_H

#include "nccl.h"

struct ncclComm;

/* weft_comm_check, and the comm is not suspended (nor about to be, by a suspend queued in the
 * caller's group): what every call that moves data through the comm's buffers requires. A
 * suspended comm gives ncclInvalidUsage and a WARN naming caller. */
ncclResult_t weft_comm_check_active(const struct ncclComm* comm, const char* caller);

#endif
