/* Communicator configuration parsing (ncclConfig_t with NCCL's versioned-struct rules). */
#ifndef WEFT_CORE_CONFIG_H
#define WEFT_CORE_CONFIG_H

#include "nccl.h"

/* user may be NULL (defaults). On success out holds every field defined. */
ncclResult_t weft_config_parse(const ncclConfig_t* user, ncclConfig_t* out);

#endif
