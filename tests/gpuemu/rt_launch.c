/* Emulated CUDA runtime: kernel launches (looked up among the kernels the emulated translation
 * units registered, arguments copied at launch), host functions, function attributes, occupancy. */
#include <stdlib.h>

#include "rt.h"

#define KERNEL_MAX_THREADS 512 /* the launch bound the library's kernels are built with */
#define KERNEL_REGS 128        /* what ptxas reports for the collective kernel (emu.h) */

static cudaError_t launch(const void* func, dim3 grid, dim3 block, void** args, size_t smem, cudaStream_t h) {
  const struct weft_emu_kernel* k = weft_emu_find_kernel(func);
  if (!k) return rt_error(cudaErrorInvalidDeviceFunction);
  struct weft_emu_dim g = {grid.x, grid.y, grid.z}, b = {block.x, block.y, block.z};
  int err = weft_emu_grid_check(g, b);
  if (err) return rt_error((cudaError_t)err);
  if (smem > 227 * 1024) return rt_error(cudaErrorInvalidValue);
  struct rt_op* op = rt_op_new(RT_OP_KERNEL);
  void* packed = op ? malloc(k->args_bytes ? k->args_bytes : 1) : NULL;
  if (!packed) {
    free(op);
    return rt_error(cudaErrorMemoryAllocation);
  }
  k->pack(packed, args); /* CUDA copies the arguments at launch: later changes do not matter */
  op->u.kernel.k = k, op->u.kernel.packed = packed, op->u.kernel.grid = g, op->u.kernel.block = b;
  return rt_stream_submit(h, op);
}

RT_API cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t smem,
                                    cudaStream_t h) {
  return launch(func, grid, block, args, smem, h);
}

RT_API cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void** args,
                                               size_t smem, cudaStream_t h) {
  return launch(func, grid, block, args, smem, h);
}

/* Launch attributes (cooperative, cluster shape, priority...) change nothing in the emulator. */
RT_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  if (!config) return rt_error(cudaErrorInvalidValue);
  return launch(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream);
}

RT_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void* arg) {
  if (!fn) return rt_error(cudaErrorInvalidValue);
  struct rt_op* op = rt_op_new(RT_OP_HOST);
  if (op) op->u.host.fn = fn, op->u.host.arg = arg;
  return rt_stream_submit(h, op);
}

RT_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, const void* func) {
  if (!attr) return rt_error(cudaErrorInvalidValue);
  if (!weft_emu_find_kernel(func)) return rt_error(cudaErrorInvalidDeviceFunction);
  *attr = (struct cudaFuncAttributes){0};
  attr->maxThreadsPerBlock = KERNEL_MAX_THREADS;
  attr->numRegs = KERNEL_REGS;
  attr->ptxVersion = 90;
  attr->binaryVersion = 90;
  attr->maxDynamicSharedSizeBytes = 48 * 1024;
  attr->preferredShmemCarveout = -1;
  return cudaSuccess;
}

RT_API cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  (void)attr, (void)value;
  return weft_emu_find_kernel(func) ? cudaSuccess : rt_error(cudaErrorInvalidDeviceFunction);
}

RT_API cudaError_t cudaFuncSetCacheConfig(const void* func, enum cudaFuncCache config) {
  (void)config;
  return weft_emu_find_kernel(func) ? cudaSuccess : rt_error(cudaErrorInvalidDeviceFunction);
}

RT_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void* func,
                                                                          int block_size, size_t smem,
                                                                          unsigned int flags) {
  (void)smem;
  if (!n || block_size <= 0 || (flags & ~(unsigned)cudaOccupancyDisableCachingOverride))
    return rt_error(cudaErrorInvalidValue);
  if (!weft_emu_find_kernel(func)) return rt_error(cudaErrorInvalidDeviceFunction);
  *n = block_size > KERNEL_MAX_THREADS ? 0 : weft_emu_blocks_per_sm(block_size);
  return cudaSuccess;
}

RT_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void* func, int block_size,
                                                                 size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, block_size, smem, 0);
}
