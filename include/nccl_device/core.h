/* Weft: the basic types of NCCL's device API (2.32.3 names, values and layouts), our own text.
 * Included by nccl_device/host.h; the device-side templates build on these. */
#ifndef WEFT_NCCL_DEVICE_CORE_H
#define WEFT_NCCL_DEVICE_CORE_H

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
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;
typedef uint32_t ncclCftLeId;
typedef ncclCftLeId ncclCftLeId_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclCftBarrierHandle ncclCftBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

/* A team: nRanks ranks of the communicator, this one at index rank, world ranks stride apart. */
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

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

#endif
