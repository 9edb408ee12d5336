/* dlopen of plugin libraries by NCCL's naming rules (see plugin_lib.h). */
#include "util/plugin_lib.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

/* A value that already names a file (a path, or lib*.so) is not expanded to lib<prefix>-<value>.so. */
static int is_file_name(const char* v) {
  size_t n = strlen(v);
  if (strchr(v, '/') != NULL) return 1;
  return strncmp(v, "lib", 3) == 0 && n >= 3 && strcmp(v + n - 3, ".so") == 0;
}

static int try_open(const char* name, struct weft_plugin_lib* lib) {
  /* RTLD_LOCAL: a plugin's symbols must not resolve another plugin's (every one exports the same names). */
  lib->handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib->handle == NULL) {
    const char* e = dlerror();
    snprintf(lib->error, sizeof(lib->error), "%s", e ? e : "dlopen failed");
    return 0;
  }
  struct link_map* lm = NULL;
  if (dlinfo(lib->handle, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name && lm->l_name[0])
    snprintf(lib->path, sizeof(lib->path), "%s", lm->l_name);
  else
    snprintf(lib->path, sizeof(lib->path), "%s", name);
  lib->error[0] = 0;
  return 1;
}

void weft_plugin_lib_open(const char* prefix, const char* value, struct weft_plugin_lib* lib) {
  char name[512];
  memset(lib, 0, sizeof(*lib));
  if (value == NULL || value[0] == 0) {
    snprintf(name, sizeof(name), "%s.so", prefix);
    snprintf(lib->path, sizeof(lib->path), "%s", name);
    try_open(name, lib);
    return;
  }
  snprintf(lib->path, sizeof(lib->path), "%s", value);
  if (try_open(value, lib) || is_file_name(value)) return;
  char first[sizeof(lib->error)];
  snprintf(first, sizeof(first), "%s", lib->error);
  snprintf(name, sizeof(name), "%s-%s.so", prefix, value);
  snprintf(lib->path, sizeof(lib->path), "%s", name);
  if (try_open(name, lib)) return;
  char second[sizeof(lib->error)];
  snprintf(second, sizeof(second), "%s", lib->error);
  snprintf(lib->error, sizeof(lib->error), "%.250s; %.250s", first, second);
}

void* weft_plugin_lib_sym(const struct weft_plugin_lib* lib, const char* symbol) {
  return lib->handle ? dlsym(lib->handle, symbol) : NULL;
}

void weft_plugin_lib_close(struct weft_plugin_lib* lib) {
  if (lib == NULL || lib->handle == NULL) return;
  dlclose(lib->handle);
  lib->handle = NULL;
}
