/* Weft: NCCL's device API header (2.32.3 names), our own text. In C and C++ it declares the host
 * side (nccl_device/host.h: requirements, properties, struct ncclDevComm, host functions); under
 * nvcc (and on Weft's emulated GPU) also the device side that kernels call: coops, teams, window
 * pointers, LSA and hybrid barriers, and GIN. Weft creates no device communicators yet
 * (ncclDevCommCreate returns ncclInvalidUsage), so kernels written against it build but never
 * run; device functions that need a network offload or multicast stop the kernel with a message.
 *
 * Our nccl_device/ files are found relative to this one. None of them sits at a path that
 * NVIDIA's own device headers include as "nccl_device/..." from one of their subdirectories
 * (2.32.3: nccl_device/core.h, nccl_device/gin/...): with Weft's include directory searched before
 * NVIDIA's, such an include would find ours and mix the two sets. So the sets never meet, and
 * NVIDIA's nccl_device.h compiles on top of Weft's nccl.h (tests/api/test_nccl_device_headers.sh). */
#ifndef WEFT_NCCL_DEVICE_H
#define WEFT_NCCL_DEVICE_H

#include "nccl_device/host.h"

#ifdef WEFT_NCCL_DEVICE_CODE
#include "nccl_device/barrier.h"
#include "nccl_device/coop.h"
#include "nccl_device/gin.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/ptr.h"
#endif

#endif
