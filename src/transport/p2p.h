/* GPU connector memory for the CUDA backend: the control page and the Simple and LL FIFOs of
 * one connector (the layout of transport/connector.h) in device memory of the receiving rank,
 * shared with the sender as a plain pointer inside one process or through CUDA IPC between
 * processes. Several ranks may share one GPU. */
#ifndef WEFT_TRANSPORT_P2P_H
#define WEFT_TRANSPORT_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct weft_p2p_mem {
  char* base; /* device address of the control page; FIFOs follow */
  size_t size, simple_bytes, ll_bytes;
  int owner;  /* allocated it (the receiving side) */
  int ipc;    /* opened from another process's handle */
  int shared; /* inside one process: freed by the last of its two users */
};

/* What the owner sends its peer (fixed size, no pointers across processes). */
struct weft_p2p_handle {
  uint64_t size, simple_bytes, ll_bytes;
  uint64_t ptr;   /* same process: the device address */
  int64_t bus_id; /* owner's device, for messages */
  int32_t dev;    /* owner's device as the owner numbers it */
  int32_t use_ipc;
  char ipc[64]; /* cudaIpcMemHandle_t */
};

/* Allocate zeroed connector memory on the current device (zeroing on stream, waited for);
 * for_other_process exports it through CUDA IPC. */
ncclResult_t weft_p2p_mem_create(size_t simple_bytes, size_t ll_bytes, int for_other_process, int dev,
                                 void* stream, struct weft_p2p_mem** out, struct weft_p2p_handle* handle);
/* Map a peer's connector memory for use from device my_dev; owner_dev is the owner's device as
 * this process numbers it (-1: not visible here, fine through IPC). */
ncclResult_t weft_p2p_mem_attach(const struct weft_p2p_handle* handle, int my_dev, int owner_dev,
                                 struct weft_p2p_mem** out);
/* Drop this side's use; NULL-safe. No kernel may still use the memory. */
void weft_p2p_mem_release(struct weft_p2p_mem* mem);

#endif
