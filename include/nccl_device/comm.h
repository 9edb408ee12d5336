/* Weft: the device communicator (struct ncclDevComm) and the window descriptor device code
 * reads, our own layout. C and C++: host code allocates an ncclDevComm for ncclDevCommCreate and
 * passes it to kernels by value. Weft does not create device communicators yet
 * (ncclDevCommCreate returns ncclInvalidUsage), so nothing fills these today; the layout is what
 * Weft's CUDA backend will fill. */
#ifndef WEFT_NCCL_DEVICE_COMM_H
#define WEFT_NCCL_DEVICE_COMM_H

#include "nccl_device/types.h"

/* What an ncclWindow_t of the CUDA backend will point at, in memory the device reads: where each
 * LSA peer's buffer is mapped on this device. A peer table, not one flat range, because CUDA IPC
 * maps each peer at an address of its own. (Host-backend windows are host objects that no device
 * code reads.) */
struct ncclWindow_vidmem {
  char* const* lsaBase; /* [lsaSize] each LSA peer's buffer, as this device addresses it */
  char* multimemBase;   /* the window's multicast mapping; NULL (Weft has no multicast) */
  size_t size;          /* bytes of each rank's buffer */
  int lsaRank, lsaSize; /* this rank in the LSA team */
  int worldRank;
  int winFlags; /* ncclCommWindowRegister's flags */
};

/* NCCL documents rank, nRanks, lsaRank, lsaSize and ginContextCount as the fields users may
 * read; they sit at NCCL 2.32.3's offsets and the struct has its size (248 bytes), so one that a
 * program built against NVIDIA's headers allocates holds exactly what Weft fills. The other
 * fields are Weft's own; reserved bytes are zero. The LSA team is the world ranks
 * rank - lsaRank .. rank - lsaRank + lsaSize - 1. */
struct ncclDevComm {
  unsigned int magic;   /* NCCL_API_MAGIC */
  unsigned int version; /* NCCL_VERSION_CODE of the library that filled it */
  int rank, nRanks;
  uint32_t reserved0;
  int lsaRank, lsaSize;
  uint32_t reserved1;
  ncclWindow_t resourceWindow;       /* symmetric memory of barrier flags and resource buffers */
  volatile uint32_t* abortFlag;      /* nonzero once the communicator aborts; device waits poll it */
  ncclLsaBarrierHandle_t lsaBarrier; /* lsaBarrierCount barriers over the LSA team */
  ncclLsaBarrierHandle_t barrier;    /* barrierCount barriers (ncclBarrierSession), LSA part */
  ncclMultimemHandle_t lsaMultimem;  /* the LSA team's multicast object; none in Weft */
  uint8_t reserved2[80];
  uint32_t ginContextCount; /* GIN contexts (ncclGin); 0: Weft has no network offload */
  uint8_t reserved3[92];
};

#if defined(__cplusplus)
static_assert(sizeof(struct ncclDevComm) == 248 && offsetof(struct ncclDevComm, lsaRank) == 20 &&
                  offsetof(struct ncclDevComm, ginContextCount) == 152,
              "ncclDevComm: NCCL 2.32.3's size and public offsets");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(struct ncclDevComm) == 248 && offsetof(struct ncclDevComm, lsaRank) == 20 &&
                   offsetof(struct ncclDevComm, ginContextCount) == 152,
               "ncclDevComm: NCCL 2.32.3's size and public offsets");
#endif

#endif
