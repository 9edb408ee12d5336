/* Emulated CUDA runtime: copies and memsets. All memory is in this process's address space, so a
 * copy is a memmove, but it runs in stream order; the pointer checks are the real point: a host
 * pointer passed where the device's memory is expected fails as cudaErrorInvalidValue. */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static int device_addressable(int kind) { return kind > 0; }

/* dst/src must be device-addressable where kind says the device reads or writes them; dn / sn
 * bytes are touched on each side. */
static cudaError_t check_spans(void* dst, size_t dn, const void* src, size_t sn, enum cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (dn == 0 || sn == 0) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  int dk = rt_mem_range_kind(dst, dn, NULL), sk = rt_mem_range_kind(src, sn, NULL);
  if (dk < 0 || sk < 0) return cudaErrorInvalidValue; /* runs past the end of an allocation */
  int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_dev && !device_addressable(dk)) || (src_dev && !device_addressable(sk)))
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

static cudaError_t check_copy(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind) {
  return check_spans(dst, n, src, n, kind);
}

static struct rt_op* copy_op(void* dst, const void* src, size_t n) {
  struct rt_op* op = rt_op_new(RT_OP_COPY);
  if (op) op->u.copy.dst = dst, op->u.copy.src = src, op->u.copy.n = n;
  return op;
}

/* What CUDA documents for pageable host memory (outside capture): a copy from it returns once the
 * source has been staged (so the caller may reuse it at once), a copy into it returns once the
 * copy is done. Pinned memory and device memory are fully asynchronous. */
RT_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind,
                                   cudaStream_t h) {
  cudaError_t err = check_copy(dst, src, n, kind);
  if (err != cudaSuccess) return rt_error(err);
  int dk = rt_mem_range_kind(dst, n, NULL), sk = rt_mem_range_kind(src, n, NULL);
  int from_pageable = n && sk == 0 && dk != 0, to_pageable = n && dk == 0 && sk != 0;
  if ((from_pageable || to_pageable) && rt_stream_capturing(h)) from_pageable = to_pageable = 0;
  struct rt_op* op = copy_op(dst, src, n);
  if (op && from_pageable) {
    op->u.copy.staged = malloc(n);
    if (!op->u.copy.staged) {
      free(op);
      return rt_error(cudaErrorMemoryAllocation);
    }
    memcpy(op->u.copy.staged, src, n);
    op->u.copy.src = op->u.copy.staged;
  }
  return to_pageable ? rt_stream_submit_wait(h, op) : rt_stream_submit(h, op);
}

/* Synchronous copies run on the legacy default stream (ordered after the blocking streams' work)
 * and return when done; they are "potentially unsafe" for stream capture. */
RT_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind) {
  cudaError_t err = check_copy(dst, src, n, kind);
  if (err == cudaSuccess) err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  return rt_stream_submit_wait(cudaStreamLegacy, copy_op(dst, src, n));
}

static cudaError_t check_set(void* p, size_t n) {
  if (n == 0) return cudaSuccess;
  return device_addressable(rt_mem_range_kind(p, n, NULL)) ? cudaSuccess : cudaErrorInvalidValue;
}

static struct rt_op* set_op(void* p, int value, size_t n) {
  struct rt_op* op = rt_op_new(RT_OP_SET);
  if (op) op->u.set.dst = p, op->u.set.value = value, op->u.set.n = n;
  return op;
}

RT_API cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t h) {
  cudaError_t err = check_set(p, n);
  if (err != cudaSuccess) return rt_error(err);
  return rt_stream_submit(h, set_op(p, value, n));
}

RT_API cudaError_t cudaMemset(void* p, int value, size_t n) {
  cudaError_t err = check_set(p, n);
  if (err == cudaSuccess) err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  return rt_stream_submit_wait(cudaStreamLegacy, set_op(p, value, n));
}

static cudaError_t check_peer(void* dst, int ddev, const void* src, int sdev, size_t n) {
  if (!rt_device_valid(ddev) || !rt_device_valid(sdev)) return cudaErrorInvalidDevice;
  return check_copy(dst, src, n, cudaMemcpyDeviceToDevice);
}

RT_API cudaError_t cudaMemcpyPeerAsync(void* dst, int ddev, const void* src, int sdev, size_t n,
                                       cudaStream_t h) {
  cudaError_t err = check_peer(dst, ddev, src, sdev, n);
  if (err != cudaSuccess) return rt_error(err);
  return rt_stream_submit(h, copy_op(dst, src, n));
}

RT_API cudaError_t cudaMemcpyPeer(void* dst, int ddev, const void* src, int sdev, size_t n) {
  cudaError_t err = check_peer(dst, ddev, src, sdev, n);
  if (err == cudaSuccess) err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  return rt_stream_submit_wait(cudaStreamLegacy, copy_op(dst, src, n));
}

/* One copy op per row (one op in all when the rows are contiguous on both sides). */
static cudaError_t copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind, cudaStream_t h, int wait) {
  if (width > dpitch || width > spitch) return rt_error(cudaErrorInvalidPitchValue);
  if (height == 0 || width == 0) return cudaSuccess;
  size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
  cudaError_t err = check_spans(dst, dspan, src, sspan, kind);
  if (err == cudaSuccess && wait) err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  if (dpitch == width && spitch == width) width *= height, height = 1;
  for (size_t r = 0; r < height && err == cudaSuccess; r++) {
    struct rt_op* op = copy_op((char*)dst + r * dpitch, (const char*)src + r * spitch, width);
    err = wait && r == height - 1 ? rt_stream_submit_wait(h, op) : rt_stream_submit(h, op);
  }
  return err;
}

RT_API cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                size_t height, enum cudaMemcpyKind kind) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, cudaStreamLegacy, 1);
}

RT_API cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                     size_t height, enum cudaMemcpyKind kind, cudaStream_t h) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, h, 0);
}
