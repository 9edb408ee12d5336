/* Small CUDA helpers for backend selection: whether a device is usable (false, never an error,
 * when the build has no CUDA or the machine no driver or GPU) and the current device. */
#ifndef WEFT_UTIL_CUDA_H
#define WEFT_UTIL_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* 1 when this build has the CUDA backend and at least one device answers; decided once. */
int weft_cuda_usable(void);
/* The calling thread's current device (cudaGetDevice); 0 when CUDA is not usable. */
int weft_cuda_current_device(void);
/* Why weft_cuda_usable() is 0, for messages ("not built", "no driver", ...). */
const char* weft_cuda_unusable_reason(void);

/* Device dev's name and PCI bus id for logs ("?" when unknown); buf holds at least 64 bytes. */
void weft_cuda_device_desc(int dev, char* buf, size_t len);

/* Device dev's PCI bus id as weft_topo_busid_parse gives it for "0000:18:00.0"; -1 unknown. */
int64_t weft_cuda_device_busid(int dev);

/* The device this process numbers for a bus id from weft_cuda_device_busid (in any process of the
 * host: CUDA_VISIBLE_DEVICES may number it differently, or hide it); -1 when not visible here. */
int weft_cuda_device_by_busid(int64_t busid);

/* GPUDirect RDMA (util/cuda_gdr.c). DMA-BUF of GPU memory: whether device dev can export it, and
 * a new descriptor for [ptr, ptr+size) (page aligned, inside one allocation); -1 when it cannot.
 * A NIC's writes to dev: whether its kernels see them in order (Hopper and later), else whether
 * the host can flush them, and the flush (0 when done; blocks; sets dev current). */
int weft_cuda_dmabuf_supported(int dev);
int weft_cuda_dmabuf_fd(void* ptr, size_t size);
int weft_cuda_gdr_ordered(int dev);
int weft_cuda_gdr_can_flush(int dev);
int weft_cuda_gdr_flush(int dev);

/* Whether WEFT_BACKEND selects the CUDA backend: "cuda", or "auto" with a usable device. */
int weft_cuda_selected(void);

#endif
