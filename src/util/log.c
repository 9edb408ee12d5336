/* NCCL-shaped logging: "host:pid:tid [dev] NCCL INFO msg", WARN lines with a timestamp and
 * file:line, and the last WARN kept for ncclGetLastError. */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "util/param.h"

int weft_log_level_now = -1;
uint32_t weft_log_mask_now = 0;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE* log_file;
static char host_name[64];
static char last_error[1024];
static int timestamp_levels; /* bit per level */
static struct timespec start_time;
static __thread int thread_device = -1;

static const struct {
  const char* name;
  uint32_t bit;
} subsys_names[] = {
    {"INIT", WEFT_INIT},
    {"COLL", WEFT_COLL},
    {"P2P", WEFT_P2P},
    {"SHM", WEFT_SHM},
    {"NET", WEFT_NET},
    {"GRAPH", WEFT_GRAPH},
    {"TUNING", WEFT_TUNING},
    {"ENV", WEFT_ENV},
    {"ALLOC", WEFT_ALLOC},
    {"CALL", WEFT_CALL},
    {"PROXY", WEFT_PROXY},
    {"NVLS", WEFT_NVLS},
    {"BOOTSTRAP", WEFT_BOOTSTRAP},
    {"REG", WEFT_REG},
    {"PROFILE", WEFT_PROFILE},
    {"RAS", WEFT_RAS},
    {"ALL", WEFT_ALL},
};

static const char* level_names[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};

int weft_log_parse_level(const char* text) {
  if (text == NULL) return WEFT_LOG_NONE;
  for (int l = WEFT_LOG_VERSION; l <= WEFT_LOG_TRACE; l++)
    if (strcasecmp(text, level_names[l]) == 0) return l;
  return WEFT_LOG_NONE;
}

uint32_t weft_log_parse_subsys(const char* text) {
  if (text == NULL) return WEFT_INIT | WEFT_BOOTSTRAP | WEFT_ENV;
  int invert = text[0] == '^';
  if (invert) text++;
  uint32_t mask = 0;
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", text);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
      if (strcasecmp(tok, subsys_names[i].name) == 0) mask |= subsys_names[i].bit;
  }
  return invert ? ~mask : mask;
}

/* Expand %h (host name) and %p (pid) in NCCL_DEBUG_FILE. */
static void expand_path(const char* pattern, char* out, size_t size) {
  size_t o = 0;
  for (const char* p = pattern; *p && o + 1 < size; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      int n = p[1] == 'h' ? snprintf(out + o, size - o, "%s", host_name)
                          : snprintf(out + o, size - o, "%d", (int)getpid());
      o += n > 0 ? (size_t)n : 0;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o < size ? o : size - 1] = 0;
}

static void parse_timestamp_levels(const char* text) {
  timestamp_levels = 0;
  if (text == NULL) return;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", text);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strcasecmp(tok, "ALL") == 0) timestamp_levels = ~0;
    int l = weft_log_parse_level(tok);
    if (l != WEFT_LOG_NONE) timestamp_levels |= 1 << l;
  }
}

static void init_locked(void) {
  if (weft_log_level_now >= 0) return;
  gethostname(host_name, sizeof(host_name) - 1);
  char* dot = strchr(host_name, '.');
  if (dot) *dot = 0;
  clock_gettime(CLOCK_MONOTONIC, &start_time);
  weft_log_mask_now = weft_log_parse_subsys(weft_param_str("NCCL_DEBUG_SUBSYS"));
  parse_timestamp_levels(weft_param_str("NCCL_DEBUG_TIMESTAMP_LEVELS"));
  const char* file = weft_param_str("NCCL_DEBUG_FILE");
  log_file = stdout;
  if (file != NULL) {
    char path[4096];
    expand_path(file, path, sizeof(path));
    FILE* f = fopen(path, "w");
    if (f != NULL) {
      setvbuf(f, NULL, _IOLBF, 0);
      log_file = f;
    }
  }
  int level = weft_log_parse_level(weft_param_str("NCCL_DEBUG"));
  __atomic_store_n(&weft_log_level_now, level, __ATOMIC_RELEASE);
}

void weft_log_init(void) {
  if (__atomic_load_n(&weft_log_level_now, __ATOMIC_ACQUIRE) >= 0) return;
  pthread_mutex_lock(&log_lock);
  init_locked();
  pthread_mutex_unlock(&log_lock);
}

void weft_log_reset(void) {
  pthread_mutex_lock(&log_lock);
  if (log_file && log_file != stdout) fclose(log_file);
  log_file = NULL;
  __atomic_store_n(&weft_log_level_now, -1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&log_lock);
  weft_param_reload();
}

void weft_log_set_device(int dev) { thread_device = dev; }

/* A copy per thread: another thread's WARN may rewrite last_error while the caller reads the
 * text (ncclGetLastError's pointer carries no lock). It stays valid until this thread asks again. */
const char* weft_log_last_error(void) {
  static __thread char copy[sizeof(last_error)];
  pthread_mutex_lock(&log_lock);
  memcpy(copy, last_error, sizeof(copy));
  pthread_mutex_unlock(&log_lock);
  return copy;
}

static int format_timestamp(char* out, int size) {
  const char* fmt = weft_param_str("NCCL_DEBUG_TIMESTAMP_FORMAT");
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  size_t n = strftime(out, (size_t)size, fmt ? fmt : "[%F %T] ", &tm);
  return (int)n;
}

int weft_log_format(char* out, int size, int level, const char* file, int line, const char* msg) {
  if (weft_log_level_now < 0) weft_log_init();
  if (level == WEFT_LOG_VERSION) return snprintf(out, size, "%s", msg) < size ? (int)strlen(out) : size - 1;
  int n = 0;
  int pid = (int)getpid();
  int tid = (int)syscall(SYS_gettid);
  if (level == WEFT_LOG_WARN) n += snprintf(out + n, size - n, "\n");
  if (timestamp_levels & (1 << level)) n += format_timestamp(out + n, size - n);
  n += snprintf(out + n, size - n, "%s:%d:%d [%d] ", host_name, pid, tid,
                thread_device < 0 ? 0 : thread_device);
  if (n >= size) return size - 1;
  if (level == WEFT_LOG_WARN) {
    const char* base = strrchr(file, '/');
    n += snprintf(out + n, size - n, "%s:%d NCCL WARN %s", base ? base + 1 : file, line, msg);
  } else if (level == WEFT_LOG_TRACE) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (now.tv_sec - start_time.tv_sec) * 1e3 + (now.tv_nsec - start_time.tv_nsec) / 1e6;
    const char* base = strrchr(file, '/');
    n += snprintf(out + n, size - n, "%f %s:%d NCCL TRACE %s", ms, base ? base + 1 : file, line, msg);
  } else {
    n += snprintf(out + n, size - n, "NCCL %s %s", level_names[level], msg);
  }
  return n < size ? n : size - 1;
}

static __thread int aftermath;

int weft_log_set_aftermath(int on) {
  int was = aftermath;
  aftermath = on;
  return was;
}

void weft_log(int level, uint32_t subsys, const char* file, int line, const char* fmt, ...) {
  if (__atomic_load_n(&weft_log_level_now, __ATOMIC_ACQUIRE) < 0) weft_log_init();
  if (level == WEFT_LOG_WARN && aftermath) level = WEFT_LOG_INFO;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&log_lock);
  if (level == WEFT_LOG_WARN) snprintf(last_error, sizeof(last_error), "%s", msg);
  if (weft_log_level_now >= level && (weft_log_mask_now & subsys) && log_file) {
    char out[1400];
    weft_log_format(out, sizeof(out), level, file, line, msg);
    fprintf(log_file, "%s\n", out);
    fflush(log_file);
  }
  pthread_mutex_unlock(&log_lock);
}
