/* The emulated GPU's internal seams (tests only): kernels registered by the translation units
 * compiled for the emulator, the grid executor that runs them (grid.c: blocks as threads, CUDA
 * threads as fibers) and the emulated runtime (rt_*.c) that queues launches on streams. C11. */
#ifndef WEFT_TESTS_GPUEMU_EMU_H
#define WEFT_TESTS_GPUEMU_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_EMU_EXPORT __attribute__((visibility("default")))

/* A __global__ function as the emulator knows it. `fn` is the address cudaLaunchKernel gets. */
struct weft_emu_kernel {
  const void* fn;
  const char* name;
  size_t args_bytes;                               /* bytes pack() writes */
  void (*pack)(void* dst, void** params);          /* copy the launch's arguments (params[i] -> dst) */
  void (*run)(const void* fn, const void* packed); /* call fn(args...) with copies of packed */
  void (*destroy)(void* packed);                   /* destroy what pack() constructed */
};

/* Called from static initializers of emulated translation units (device.h's WEFT_EMU_KERNEL). */
WEFT_EMU_EXPORT void weft_emu_register_kernel(const struct weft_emu_kernel* k);
/* NULL when fn was never registered (cudaErrorInvalidDeviceFunction). */
WEFT_EMU_EXPORT const struct weft_emu_kernel* weft_emu_find_kernel(const void* fn);

/* Launch geometry, as dim3 (kept separate so that C files need no CUDA header here). */
struct weft_emu_dim {
  unsigned x, y, z;
};

/* Runs a whole grid of kernel k on emulated device dev and returns when every block has ended.
 * Blocks beyond what the device holds at once (SMs x blocks per SM) wait for a resident block to
 * end, as on hardware. Returns 0 or a cudaError_t value (bad geometry). */
WEFT_EMU_EXPORT int weft_emu_grid_run(const struct weft_emu_kernel* k, const void* packed,
                                      struct weft_emu_dim grid, struct weft_emu_dim block, int dev);
/* Geometry check done at launch time: 0 or a cudaError_t value (cudaErrorInvalidConfiguration). */
WEFT_EMU_EXPORT int weft_emu_grid_check(struct weft_emu_dim grid, struct weft_emu_dim block);

/* The emulated device's shape: WEFT_EMU_SMS (default 132, an H200's), WEFT_EMU_DEVICES (default 2),
 * and blocks per SM as the register file allows: 65536 / (WEFT_EMU_REGS_PER_THREAD x threads),
 * where the default 128 is what ptxas -v reports for the collective kernel (so 1 block of 512
 * threads per SM), at most 2048 threads and 32 blocks; WEFT_EMU_BLOCKS_PER_SM overrides. */
WEFT_EMU_EXPORT int weft_emu_sm_count(void);
WEFT_EMU_EXPORT int weft_emu_blocks_per_sm(int threads_per_block);
WEFT_EMU_EXPORT int weft_emu_device_count(void);

/* Device-side services for device.h (exported: the emulated code lives in other libraries). */
struct weft_emu_thread {
  struct weft_emu_dim thread_idx, block_idx, block_dim, grid_dim;
};
WEFT_EMU_EXPORT const struct weft_emu_thread* weft_emu_self(void);
WEFT_EMU_EXPORT void weft_emu_syncthreads(const char* site);
WEFT_EMU_EXPORT int weft_emu_syncthreads_or(int pred, const char* site);
WEFT_EMU_EXPORT int weft_emu_syncthreads_and(int pred, const char* site);
WEFT_EMU_EXPORT int weft_emu_syncthreads_count(int pred, const char* site);
/* A device thread's polling loop is about to spin again: lets other host threads run. */
WEFT_EMU_EXPORT void weft_emu_spin_pause(void);
/* globaltimer: nanoseconds (CLOCK_MONOTONIC). */
WEFT_EMU_EXPORT uint64_t weft_emu_globaltimer(void);
/* __threadfence_system and the relaxed store that follows it. C++ (and ThreadSanitizer) order a
 * fence then a relaxed store as a release store, so the store after a fence is made one: a
 * missing fence is then a data race the race detector reports. */
WEFT_EMU_EXPORT void weft_emu_fence(void);
WEFT_EMU_EXPORT void weft_emu_store_relaxed_u64(uint64_t* p, uint64_t v);

/* Memory the runtime handed out, for pointer checks: 1 device memory (dev set), 2 host memory
 * the device can address (registered / cudaHostAlloc), 0 unknown. */
WEFT_EMU_EXPORT int weft_emu_pointer_kind(const void* p, int* dev);

/* Report an emulator-detected misuse on stderr ("weft-emu: ...") and, with WEFT_EMU_STRICT=1
 * (the default in tests), abort the process so the test fails where the bug is. */
void weft_emu_fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void weft_emu_report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif
