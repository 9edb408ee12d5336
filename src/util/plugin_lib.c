/* Plugin libraries: the two names NCCL tries for a plugin, each with dlopen, and why they failed. */
#include "util/plugin_lib.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

static int ends_with(const char* s, const char* tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* A bare name ("force") also stands for prefix-force.so; a path or a library file name does not. */
int weft_plugin_lib_expands(const char* name) {
  return strchr(name, '/') == NULL && !(strncmp(name, "lib", 3) == 0 && ends_with(name, ".so"));
}

/* A missing file is the usual case (nothing installed) and joins one list; any other failure (a
 * missing dependency, a wrong architecture) is worth its own line. */
static void* try_open(const char* kind, unsigned subsys, const char* file, char* missing, size_t msize) {
  int self = strcasecmp(file, "STATIC_PLUGIN") == 0;
  void* h = dlopen(self ? NULL : file, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) return h;
  const char* err = dlerror();
  if (err != NULL && !(strstr(err, file) != NULL && strstr(err, "No such file") != NULL)) {
    WEFT_INFO(subsys, "%s/Plugin: %s: %s", kind, file, err);
  } else {
    size_t used = strlen(missing);
    snprintf(missing + used, msize - used, " %s", file);
  }
  return NULL;
}

void* weft_plugin_lib_open(const char* kind, unsigned subsys, const char* prefix, const char* name,
                           char* opened, size_t size) {
  char file[512], missing[1100] = "";
  int named = name != NULL && name[0] != 0;
  if (named)
    snprintf(file, sizeof(file), "%s", name);
  else
    snprintf(file, sizeof(file), "%s.so", prefix);
  void* h = try_open(kind, subsys, file, missing, sizeof(missing));
  if (h == NULL && named && weft_plugin_lib_expands(name)) {
    snprintf(file, sizeof(file), "%s-%s.so", prefix, name);
    h = try_open(kind, subsys, file, missing, sizeof(missing));
  }
  if (h != NULL) {
    snprintf(opened, size, "%s", file);
    return h;
  }
  if (missing[0]) WEFT_INFO(subsys, "%s/Plugin: could not find:%s", kind, missing);
  if (size) opened[0] = 0;
  return NULL;
}

void weft_plugin_lib_close(void* handle) {
  if (handle != NULL) dlclose(handle);
}

void* weft_plugin_lib_sym(void* handle, const char* symbol) { return handle ? dlsym(handle, symbol) : NULL; }

void weft_plugin_log(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  if (level == WEFT_LOG_ABORT) level = WEFT_LOG_WARN; /* a plugin's ABORT must not end the program */
  if (level != WEFT_LOG_WARN && !WEFT_LOG_ON(level, (uint32_t)flags)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  weft_log(level, (uint32_t)flags, file ? file : "plugin", line, "%s", msg);
}
