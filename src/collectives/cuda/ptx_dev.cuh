/* The memory accessors of the CUDA prims: PTX loads and stores with the ordering the connector
 * protocol needs. On the emulated GPU (tests/gpuemu, WEFT_GPU_EMU) they are C++ atomics with the
 * same ordering, so the rest of the device code compiles unchanged as host C++. */
#ifndef WEFT_COLLECTIVES_CUDA_PTX_DEV_CUH
#define WEFT_COLLECTIVES_CUDA_PTX_DEV_CUH

#include <stdint.h>

#include "transport/connector.h"

#ifndef WEFT_GPU_EMU

__device__ __forceinline__ uint64_t weft_ld_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void weft_st_relaxed(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void weft_st_release(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/* A note for the host (collectives/progress.h): relaxed, no ordering with anything else. */
__device__ __forceinline__ void weft_st_note(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned weft_atomic_inc(unsigned* p) { return atomicAdd(p, 1u); }
/* The host-mapped flags (abort, error): the host reads and writes them while kernels run. */
__device__ __forceinline__ uint32_t weft_flag_ld(const volatile uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void weft_flag_st_release(volatile uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/* 1 for the one caller that turns *p from 0 to 1. */
__device__ __forceinline__ int weft_flag_claim(volatile uint32_t* p) {
  return atomicCAS_system((unsigned*)p, 0u, 1u) == 0u;
}
__device__ __forceinline__ uint64_t weft_globaltimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void weft_ll_load(const struct weft_ll_line* l, uint32_t* d1, uint32_t* f1,
                                             uint32_t* d2, uint32_t* f2) {
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(*d1), "=r"(*f1), "=r"(*d2), "=r"(*f2)
               : "l"(l)
               : "memory");
}
__device__ __forceinline__ void weft_ll_store(struct weft_ll_line* l, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(l), "r"((uint32_t)v), "r"(flag),
               "r"((uint32_t)(v >> 32)), "r"(flag)
               : "memory");
}

#else /* emulated GPU */

__device__ __forceinline__ uint64_t weft_ld_acquire(const uint64_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
__device__ __forceinline__ void weft_st_relaxed(uint64_t* p, uint64_t v) { weft_emu_store_relaxed_u64(p, v); }
__device__ __forceinline__ void weft_st_release(uint64_t* p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
/* Not weft_st_relaxed: that one turns into a release after a fence, which is the tail's. */
__device__ __forceinline__ void weft_st_note(uint64_t* p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
__device__ __forceinline__ unsigned weft_atomic_inc(unsigned* p) {
  return __atomic_fetch_add(p, 1u, __ATOMIC_ACQ_REL);
}
__device__ __forceinline__ uint32_t weft_flag_ld(const volatile uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
__device__ __forceinline__ void weft_flag_st_release(volatile uint32_t* p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
__device__ __forceinline__ int weft_flag_claim(volatile uint32_t* p) {
  uint32_t zero = 0;
  return __atomic_compare_exchange_n(p, &zero, 1u, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}
/* Read every WEFT_SPINS_PER_CHECK spins of a wait: also the moment to let the writer run. */
__device__ __forceinline__ uint64_t weft_globaltimer(void) {
  weft_emu_spin_pause();
  return weft_emu_globaltimer();
}
/* An LL line is two 8-byte halves, each {data, flag} written and read as one access. */
__device__ __forceinline__ void weft_ll_load(const struct weft_ll_line* l, uint32_t* d1, uint32_t* f1,
                                             uint32_t* d2, uint32_t* f2) {
  const uint64_t* w = (const uint64_t*)l;
  uint64_t a = __atomic_load_n(&w[0], __ATOMIC_RELAXED), b = __atomic_load_n(&w[1], __ATOMIC_RELAXED);
  *d1 = (uint32_t)a;
  *f1 = (uint32_t)(a >> 32);
  *d2 = (uint32_t)b;
  *f2 = (uint32_t)(b >> 32);
}
__device__ __forceinline__ void weft_ll_store(struct weft_ll_line* l, uint64_t v, uint32_t flag) {
  uint64_t* w = (uint64_t*)l;
  __atomic_store_n(&w[0], (uint64_t)(uint32_t)v | ((uint64_t)flag << 32), __ATOMIC_RELAXED);
  __atomic_store_n(&w[1], (v >> 32) | ((uint64_t)flag << 32), __ATOMIC_RELAXED);
}

#endif

#endif
