/* The one monotonic clock of the library, in nanoseconds (waits, the proxy, the flight recorder,
 * the tuning log). */
#ifndef WEFT_UTIL_TIME_H
#define WEFT_UTIL_TIME_H

#include <stdint.h>
#include <time.h>

static inline uint64_t weft_time_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
