/* Opening an NCCL plugin library by the rules NCCL applies to NCCL_<KIND>_PLUGIN: the value as
 * given (a file name or path) first, then, for a bare name, lib<prefix>-<name>.so; unset, the
 * default lib<prefix>.so. Shared by the plugin loaders (profiler, and any later net or tuner). */
#ifndef WEFT_UTIL_PLUGIN_LIB_H
#define WEFT_UTIL_PLUGIN_LIB_H

#include <stddef.h>

struct weft_plugin_lib {
  void* handle;    /* dlopen handle, NULL when nothing could be opened */
  char path[512];  /* the file dlopen resolved it to (or the name tried), for logs */
  char error[512]; /* why the last name tried failed: dlerror's text, or the names not found */
};

/* prefix: "libnccl-profiler"; value: the variable's text, NULL or "" for the default. Never
 * logs: the caller knows whether a failure deserves a WARN (a named plugin) or not (the default). */
void weft_plugin_lib_open(const char* prefix, const char* value, struct weft_plugin_lib* lib);
/* dlsym, NULL when absent. */
void* weft_plugin_lib_sym(const struct weft_plugin_lib* lib, const char* symbol);
void weft_plugin_lib_close(struct weft_plugin_lib* lib); /* NULL-safe, idempotent */

#endif
