/* Weft: the basic types of NCCL's device API (2.32.3 names, values and layouts), our own text.
 * C and C++; nccl_device/comm.h and the device-side headers build on these.
 * Not named core.h: NVIDIA's headers include "nccl_device/core.h" from a subdirectory, which
 * would find this file when both include directories are searched (see nccl_device.h). */
#ifndef WEFT_NCCL_DEVICE_TYPES_H
#define WEFT_NCCL_DEVICE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;
/* A multicast (NVLS) object's base address; passed by value. */
struct ncclMultimemHandle {
  void* mcBasePtr;
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;
/* A resource buffer of a device communicator: its offset in the communicator's resource
 * window, in units of 128 bytes (ncclGetResourceBufferOffset). */
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;
typedef uint32_t ncclCftLeId;
typedef ncclCftLeId ncclCftLeId_t;

/* nBarriers barriers whose flags live in the resource buffer bufHandle. */
struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
};
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
/* Barriers over the network: their first GIN signal. */
struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t reserved;
};
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclCftBarrierHandle ncclCftBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

/* A team: nRanks ranks of the communicator, this one at index rank, world ranks stride apart. */
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

#ifdef __cplusplus
/* Tags naming the communicator's built-in teams in constructors (barrier sessions). */
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};
#endif

typedef enum {
  NCCL_GIN_CONNECTION_NONE,
  NCCL_GIN_CONNECTION_FULL,
  NCCL_GIN_CONNECTION_RAIL,
  NCCL_GIN_CONNECTION_CUSTOM_STRIDE
} ncclGinConnectionType_t;

/* Values match the network plugin's device-offload kinds, hence the gap at 1. */
typedef enum {
  NCCL_GIN_TYPE_NONE = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4,
  NCCL_GIN_TYPE_EFA_GDA = 5,
  NCCL_GIN_MAX_TYPES = 6
} ncclGinType_t;

typedef enum { NCCL_CFT_TEAM_FLAT, NCCL_CFT_TEAM_HIER_MULTIMEM, NCCL_CFT_TEAM_HIER_LSA } ncclCftTeamMode_t;

typedef enum { NCCL_CFT_NONE = 0x0, NCCL_CFT = 0x1, NCCL_CFT_MULTIMEM = 0x2 } ncclCftCap_t;

/* Device code: compiled by nvcc, or as host C++ for Weft's emulated GPU (tests/gpuemu, which
 * defines WEFT_GPU_EMU and supplies what nvcc would). */
#if defined(__CUDACC__)
#define WEFT_NCCL_DEVICE_CODE 1
#define weft_dev_spin_pause() ((void)0)
#elif defined(__cplusplus) && defined(WEFT_GPU_EMU)
#define WEFT_NCCL_DEVICE_CODE 1
#define weft_dev_spin_pause() weft_emu_spin_pause() /* lets the emulator's other blocks run */
#endif

#ifdef WEFT_NCCL_DEVICE_CODE
#include <stdio.h>
/* Device functions that need what Weft lacks (network offload, multicast) stop the kernel with
 * this message. No such kernel can run today: ncclDevCommCreate refuses, so no kernel ever gets a
 * device communicator, and one made up by hand would not have these resources either. */
__device__ __forceinline__ void weft_dev_unsupported(const char* what) {
  printf("Weft: %s is not supported by Weft's device API (no network offload or multicast)\n", what);
  __trap();
}
#endif

#endif
