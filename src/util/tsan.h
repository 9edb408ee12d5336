/* ThreadSanitizer annotations for synchronisation through shared memory that one process maps
 * more than once (thread ranks map each other's ncclMemAlloc segments at their own addresses):
 * TSan keys happens-before by address, so a release at the owner's address and an acquire at a
 * peer's mapping of it would not pair up. Mappings register as aliases of the owner's address,
 * and the counters' post and wait release and acquire at that one address. Everything here
 * compiles to nothing unless the build is under -fsanitize=thread. */
#ifndef WEFT_UTIL_TSAN_H
#define WEFT_UTIL_TSAN_H

#include <stddef.h>

#if defined(__SANITIZE_THREAD__)
#define WEFT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TSAN 1
#endif
#endif

#ifdef WEFT_TSAN
/* mapped[0, len) is another mapping of the memory at canonical, made by this thread. */
void weft_tsan_alias_add(void* mapped, const void* canonical, size_t len);
void weft_tsan_alias_remove(void* mapped);
/* Release / acquire at addr, or at the canonical address addr is an alias of. */
void weft_tsan_release(const void* addr);
void weft_tsan_acquire(const void* addr);
#else
static inline void weft_tsan_alias_add(void* mapped, const void* canonical, size_t len) {
  (void)mapped, (void)canonical, (void)len;
}
static inline void weft_tsan_alias_remove(void* mapped) { (void)mapped; }
static inline void weft_tsan_release(const void* addr) { (void)addr; }
static inline void weft_tsan_acquire(const void* addr) { (void)addr; }
#endif

#endif
