/* Portability header of the emulated GPU (tests only): force-included (-include) when CUDA
 * device sources are compiled as host C++. It supplies what nvcc would: the execution-space
 * keywords, threadIdx/blockIdx/blockDim/gridDim, barriers, fences, and the registration that
 * lets the emulated runtime's cudaLaunchKernel call a __global__ function. CUDA's own headers
 * (cuda_runtime.h, cuda_fp16.h, ...) are used as they are: they compile for the host. */
#ifndef WEFT_TESTS_GPUEMU_DEVICE_H
#define WEFT_TESTS_GPUEMU_DEVICE_H

#ifndef __cplusplus
#error "device.h is for device sources compiled as C++"
#endif

/* Defined before CUDA's host_defines.h, which then keeps them. __shared__ variables are per
 * block: a block is one OS thread, its CUDA threads are fibers of it. */
#define __host__
#define __device__
#define __global__
#define __shared__ static thread_local
#define __constant__ static
#define __managed__
#define __launch_bounds__(...)
#define __grid_constant__

#include <cuda_runtime.h>

#include <cstdlib>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emu.h"

/* GCC spells its own attribute __noinline__ in system headers, so the hint is dropped here,
 * after those headers. */
#define __noinline__

/* A trap ends the whole grid with an error on a GPU; here it ends the process. */
#define __trap() abort()

#define threadIdx (weft_emu_self()->thread_idx)
#define blockIdx (weft_emu_self()->block_idx)
#define blockDim (weft_emu_self()->block_dim)
#define gridDim (weft_emu_self()->grid_dim)
#define warpSize 32

/* Round-to-nearest arithmetic that nvcc never fuses into an FMA; the emulated build compiles with
 * -ffp-contract=off so that the host compiler does not either. */
__device__ __forceinline__ float __fadd_rn(float a, float b) { return a + b; }
__device__ __forceinline__ float __fmul_rn(float a, float b) { return a * b; }
__device__ __forceinline__ double __dadd_rn(double a, double b) { return a + b; }
__device__ __forceinline__ double __dmul_rn(double a, double b) { return a * b; }

/* Cache-hinted loads and stores: the hint has no meaning here. */
template <typename T>
__device__ __forceinline__ T __ldcg(const T* p) {
  return *p;
}
template <typename T>
__device__ __forceinline__ T __ldg(const T* p) {
  return *p;
}
template <typename T>
__device__ __forceinline__ T __ldcs(const T* p) {
  return *p;
}
template <typename T>
__device__ __forceinline__ void __stcg(T* p, T v) {
  *p = v;
}
template <typename T>
__device__ __forceinline__ void __stcs(T* p, T v) {
  *p = v;
}

#define WEFT_EMU_STR2(x) #x
#define WEFT_EMU_STR(x) WEFT_EMU_STR2(x)
#define WEFT_EMU_SITE __FILE__ ":" WEFT_EMU_STR(__LINE__)
#define __syncthreads() weft_emu_syncthreads(WEFT_EMU_SITE)
#define __syncthreads_or(p) weft_emu_syncthreads_or((p), WEFT_EMU_SITE)
#define __syncthreads_and(p) weft_emu_syncthreads_and((p), WEFT_EMU_SITE)
#define __syncthreads_count(p) weft_emu_syncthreads_count((p), WEFT_EMU_SITE)
#define __threadfence_system() weft_emu_fence()
#define __threadfence() weft_emu_fence()
#define __threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)

/* Registration: pack copies the launch's arguments (as cudaLaunchKernel does), run calls the
 * kernel with them in the calling fiber. */
template <typename... A>
struct weft_emu_args {
  typedef void (*fn_t)(A...);
  typedef std::tuple<typename std::decay<A>::type...> tuple_t;
  template <size_t... I>
  static void pack_at(void* dst, void** params, std::index_sequence<I...>) {
    new (dst) tuple_t(*static_cast<typename std::decay<A>::type*>(params[I])...);
  }
  static void pack(void* dst, void** params) { pack_at(dst, params, std::index_sequence_for<A...>{}); }
  static void run(const void* fn, const void* packed) {
    std::apply((fn_t)fn, *static_cast<const tuple_t*>(packed));
  }
  static void destroy(void* packed) { static_cast<tuple_t*>(packed)->~tuple_t(); }
};

template <typename... A>
static int weft_emu_register(void (*fn)(A...), const char* name) {
  typedef weft_emu_args<A...> args;
  /* One record per kernel, alive as long as the program. */
  weft_emu_kernel* k = new weft_emu_kernel{(const void*)fn, name,      sizeof(typename args::tuple_t),
                                           args::pack,      args::run, args::destroy};
  weft_emu_register_kernel(k);
  return 0;
}

#define WEFT_EMU_KERNEL(fn) static int weft_emu_registered_##fn = weft_emu_register(fn, #fn)

#endif
