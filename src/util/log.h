/* Logging with NCCL's variables (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE) and line shape. */
#ifndef WEFT_UTIL_LOG_H
#define WEFT_UTIL_LOG_H

#include <stdint.h>

enum weft_log_level {
  WEFT_LOG_NONE = 0,
  WEFT_LOG_VERSION = 1,
  WEFT_LOG_WARN = 2,
  WEFT_LOG_INFO = 3,
  WEFT_LOG_ABORT = 4,
  WEFT_LOG_TRACE = 5
};

/* Subsystem bits, same names as NCCL_DEBUG_SUBSYS accepts. */
enum weft_log_subsys {
  WEFT_INIT = 1u << 0,
  WEFT_COLL = 1u << 1,
  WEFT_P2P = 1u << 2,
  WEFT_SHM = 1u << 3,
  WEFT_NET = 1u << 4,
  WEFT_GRAPH = 1u << 5,
  WEFT_TUNING = 1u << 6,
  WEFT_ENV = 1u << 7,
  WEFT_ALLOC = 1u << 8,
  WEFT_CALL = 1u << 9,
  WEFT_PROXY = 1u << 10,
  WEFT_NVLS = 1u << 11,
  WEFT_BOOTSTRAP = 1u << 12,
  WEFT_REG = 1u << 13,
  WEFT_PROFILE = 1u << 14,
  WEFT_RAS = 1u << 15,
  WEFT_ALL = ~0u
};

/* Current level and mask; read without locking on hot paths (set once at first use). */
extern int weft_log_level_now;
extern uint32_t weft_log_mask_now;

void weft_log_init(void);
void weft_log(int level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Device (or host-backend rank) shown in brackets on this thread's lines. */
void weft_log_set_device(int dev);
/* Text of the last WARN of the process, for ncclGetLastError: a copy for the calling thread,
 * valid until its next call. */
const char* weft_log_last_error(void);
/* While set on this thread, WARNs are written as INFO lines and leave ncclGetLastError alone: for
 * the aftermath of a communicator's failure (a peer that gave up on the same error and left, seen
 * as a broken connection), whose first WARN said why and must stay the last error. Returns the
 * previous setting. */
int weft_log_set_aftermath(int on);
/* Forget the parsed settings so the next line reads the environment again (ncclResetDebugInit). */
void weft_log_reset(void);
/* Parse a NCCL_DEBUG_SUBSYS value into a mask ("INIT,NET", "^COLL", "ALL"). */
uint32_t weft_log_parse_subsys(const char* text);
/* Parse a NCCL_DEBUG value into a level (unknown text gives WEFT_LOG_NONE). */
int weft_log_parse_level(const char* text);
/* Format one line as it would be written (no trailing newline); used by the logger and tests. */
int weft_log_format(char* out, int outsize, int level, const char* file, int line, const char* msg);

#define WEFT_LOG_ON(level, subsys)                    \
  (weft_log_level_now < 0 ? (weft_log_init(), 0) : 0, \
   weft_log_level_now >= (level) && (weft_log_mask_now & (subsys)))

#define WEFT_WARN(...) weft_log(WEFT_LOG_WARN, WEFT_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define WEFT_INFO(subsys, ...)                                            \
  do {                                                                    \
    if (WEFT_LOG_ON(WEFT_LOG_INFO, (subsys)))                             \
      weft_log(WEFT_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define WEFT_TRACE(subsys, ...)                                            \
  do {                                                                     \
    if (WEFT_LOG_ON(WEFT_LOG_TRACE, (subsys)))                             \
      weft_log(WEFT_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
