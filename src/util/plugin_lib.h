/* Opening a plugin library by NCCL's naming rules (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN, ...). */
#ifndef WEFT_UTIL_PLUGIN_LIB_H
#define WEFT_UTIL_PLUGIN_LIB_H

#include <stddef.h>

/* Opens the library for `name` of a plugin kind whose files are called prefix.so / prefix-NAME.so
 * ("libnccl-tuner"): first name itself as dlopen takes it (prefix.so when name is NULL or empty;
 * "STATIC_PLUGIN" is the program itself), then prefix-name.so unless name is a path or already a
 * lib*.so file name. Returns the dlopen handle and the file that opened in opened (NULL when
 * nothing did; the tries that failed are logged at INFO under subsys, tagged by kind). */
void* weft_plugin_lib_open(const char* kind, unsigned subsys, const char* prefix, const char* name,
                           char* opened, size_t size);
void weft_plugin_lib_close(void* handle); /* NULL-safe */
/* Whether name, besides itself, stands for prefix-name.so (a bare name: not a path, not lib*.so). */
int weft_plugin_lib_expands(const char* name);
/* dlsym, returning NULL for a NULL handle. */
void* weft_plugin_lib_sym(void* handle, const char* symbol);

/* NCCL's logger (ncclDebugLogger_t) for plugins: their lines join ours, with NCCL's levels and
 * subsystem bits; a WARN always shows. */
void weft_plugin_log(int level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
