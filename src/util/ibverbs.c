/* libibverbs through dlopen: the control-path functions the IB transport calls, loaded once. A
 * missing library or symbol reads as "no InfiniBand" and the transport reports no devices. */
#include "util/ibverbs.h"

#if WEFT_IBVERBS_HEADERS
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "util/param.h"

static struct weft_ibv_fns fns;
static const struct weft_ibv_fns* loaded;
static char load_error[256] = "not loaded";
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* 0 with load_error set when name is missing (and required). */
static int sym(void* lib, const char* lib_name, const char* name, void** field, int required) {
  *field = dlsym(lib, name);
  if (*field != NULL || !required) return 1;
  snprintf(load_error, sizeof(load_error), "%s lacks %s", lib_name, name);
  return 0;
}

static int load_symbols(void* lib, const char* n) {
  return sym(lib, n, "ibv_get_device_list", (void**)&fns.get_device_list, 1) &&
         sym(lib, n, "ibv_free_device_list", (void**)&fns.free_device_list, 1) &&
         sym(lib, n, "ibv_get_device_name", (void**)&fns.get_device_name, 1) &&
         sym(lib, n, "ibv_open_device", (void**)&fns.open_device, 1) &&
         sym(lib, n, "ibv_close_device", (void**)&fns.close_device, 1) &&
         sym(lib, n, "ibv_query_device", (void**)&fns.query_device, 1) &&
         sym(lib, n, "ibv_query_port", (void**)&fns.query_port, 1) &&
         sym(lib, n, "ibv_query_gid", (void**)&fns.query_gid, 1) &&
         sym(lib, n, "ibv_alloc_pd", (void**)&fns.alloc_pd, 1) &&
         sym(lib, n, "ibv_dealloc_pd", (void**)&fns.dealloc_pd, 1) &&
         sym(lib, n, "ibv_reg_mr", (void**)&fns.reg_mr, 1) &&
         sym(lib, n, "ibv_reg_mr_iova2", (void**)&fns.reg_mr_iova2, 0) &&
         sym(lib, n, "ibv_reg_dmabuf_mr", (void**)&fns.reg_dmabuf_mr, 0) &&
         sym(lib, n, "ibv_dereg_mr", (void**)&fns.dereg_mr, 1) &&
         sym(lib, n, "ibv_create_cq", (void**)&fns.create_cq, 1) &&
         sym(lib, n, "ibv_destroy_cq", (void**)&fns.destroy_cq, 1) &&
         sym(lib, n, "ibv_create_qp", (void**)&fns.create_qp, 1) &&
         sym(lib, n, "ibv_modify_qp", (void**)&fns.modify_qp, 1) &&
         sym(lib, n, "ibv_destroy_qp", (void**)&fns.destroy_qp, 1) &&
         sym(lib, n, "ibv_wc_status_str", (void**)&fns.wc_status_str, 1) &&
         sym(lib, n, "_ibv_query_gid_ex", (void**)&fns.query_gid_ex, 0);
}

static void load_lib(void) {
  const char* name = weft_param_str("WEFT_IBVERBS_LIB");
  if (name == NULL || name[0] == 0) name = "libibverbs.so.1";
  /* RTLD_LOCAL: an application's own libibverbs (or ours) keeps its symbols to itself. */
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(load_error, sizeof(load_error), "cannot load %s: %s", name, dlerror());
    return;
  }
  if (!load_symbols(lib, name)) {
    dlclose(lib);
    return;
  }
  loaded = &fns; /* stays loaded for the life of the process: contexts outlive any one comm */
}

const struct weft_ibv_fns* weft_ibv_load(const char** why) {
  pthread_once(&load_once, load_lib);
  if (why) *why = loaded ? "loaded" : load_error;
  return loaded;
}
#endif
