/* The alias table behind util/tsan.h, built only under ThreadSanitizer. Lookups take no lock
 * and use relaxed atomics, which TSan sees as neither synchronisation nor races: a lock here
 * would order every post before every later wait of any thread and hide real races. A thread
 * only ever needs the aliases it registered itself (it maps its peers' segments and then waits
 * on them), so it always sees those; entries of other threads are at worst missed. */
#include "util/tsan.h"

#ifdef WEFT_TSAN
#include <stdint.h>

#include "util/log.h"

void __tsan_acquire(void* addr);
void __tsan_release(void* addr);

#define MAX_ALIASES 4096

struct alias {
  uintptr_t base; /* 0: free */
  uintptr_t len, canonical;
};

static struct alias aliases[MAX_ALIASES];

void weft_tsan_alias_add(void* mapped, const void* canonical, size_t len) {
  for (int i = 0; i < MAX_ALIASES; i++) {
    uintptr_t expected = 0;
    /* Claim with a placeholder so no reader matches a half-written entry. */
    if (!__atomic_compare_exchange_n(&aliases[i].base, &expected, 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      continue;
    __atomic_store_n(&aliases[i].len, (uintptr_t)len, __ATOMIC_RELAXED);
    __atomic_store_n(&aliases[i].canonical, (uintptr_t)canonical, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&aliases[i].base, (uintptr_t)mapped, __ATOMIC_RELAXED);
    return;
  }
  WEFT_WARN("ThreadSanitizer alias table full (%d mappings): synchronisation through %p is not seen",
            MAX_ALIASES, mapped);
}

void weft_tsan_alias_remove(void* mapped) {
  for (int i = 0; i < MAX_ALIASES; i++)
    if (__atomic_load_n(&aliases[i].base, __ATOMIC_RELAXED) == (uintptr_t)mapped) {
      __atomic_store_n(&aliases[i].base, 0, __ATOMIC_RELAXED);
      return;
    }
}

static void* canonical_of(const void* addr) {
  uintptr_t a = (uintptr_t)addr;
  for (int i = 0; i < MAX_ALIASES; i++) {
    uintptr_t base = __atomic_load_n(&aliases[i].base, __ATOMIC_RELAXED);
    if (base <= 1 || a < base) continue;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uintptr_t len = __atomic_load_n(&aliases[i].len, __ATOMIC_RELAXED);
    if (a - base < len) return (void*)(__atomic_load_n(&aliases[i].canonical, __ATOMIC_RELAXED) + (a - base));
  }
  return (void*)addr;
}

void weft_tsan_release(const void* addr) { __tsan_release(canonical_of(addr)); }
void weft_tsan_acquire(const void* addr) { __tsan_acquire(canonical_of(addr)); }
#endif
