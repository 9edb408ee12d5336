/* What the emulated cuMemGetHandleForAddressRange (rt_driver.c) hands out for a DMA-BUF request:
 * not a real dma-buf (device memory is host memory here, no kernel driver exports it) but a memfd
 * holding one record that names the range. Only the test verbs provider (tests/ibemu/) reads it,
 * with pread at offset 0, and registers the range at dptr of process pid as ordinary memory. */
#ifndef WEFT_TESTS_GPUEMU_EMU_DMABUF_H
#define WEFT_TESTS_GPUEMU_EMU_DMABUF_H

#include <stdint.h>

#define WEFT_EMU_DMABUF_MAGIC "WEFTDMAB" /* the first 8 bytes, without a NUL */
#define WEFT_EMU_DMABUF_NAME \
  "weft-emu-dmabuf" /* the memfd's name: /proc/<pid>/fd/<fd> -> "/memfd:weft-emu-dmabuf" */

/* Native (little-endian) layout, 32 bytes, no padding between fields. */
struct weft_emu_dmabuf {
  char magic[8];
  uint64_t dptr; /* start of the range, page aligned, inside one cudaMalloc allocation */
  uint64_t size; /* bytes, a multiple of the page size */
  int32_t pid;   /* the process whose address dptr is */
  int32_t pad;   /* 0 */
};

#ifdef __cplusplus
static_assert(sizeof(struct weft_emu_dmabuf) == 32, "weft_emu_dmabuf is 32 bytes");
#else
_Static_assert(sizeof(struct weft_emu_dmabuf) == 32, "weft_emu_dmabuf is 32 bytes");
#endif

#endif
