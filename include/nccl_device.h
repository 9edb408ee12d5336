/* Weft: NCCL's device API header (2.32.3 names), our own text. Today it carries the host side
 * (nccl_device/host.h): requirements, communicator properties and the host functions. Weft's
 * CUDA backend has no device API yet, so ncclDevCommCreate returns ncclInvalidUsage. */
#ifndef WEFT_NCCL_DEVICE_H
#define WEFT_NCCL_DEVICE_H

#include "nccl_device/host.h"

#endif
