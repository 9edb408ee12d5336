/* hwloc through dlopen: a table of the dozen functions Weft calls, loaded once; a missing library
 * or a 1.x/3.x ABI reads as "no hwloc" and callers fall back to sysfs. */
#include "util/hwloc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/param.h"

#if WEFT_HWLOC_HEADERS

struct weft_hwloc_fns {
  unsigned (*api_version)(void);
  int (*init)(hwloc_topology_t*);
  int (*load)(hwloc_topology_t);
  void (*destroy)(hwloc_topology_t);
  int (*set_xml)(hwloc_topology_t, const char*);
  int (*set_synthetic)(hwloc_topology_t, const char*);
  int (*set_io_filter)(hwloc_topology_t, enum hwloc_type_filter_e);
  hwloc_obj_t (*obj_by_depth)(hwloc_topology_t, int, unsigned);
  int (*is_thissystem)(hwloc_topology_t);
  int (*bitmap_next)(hwloc_const_bitmap_t, int);
};

static struct weft_hwloc_fns fns;
static const char* load_error = "not loaded";
static char load_error_buf[200];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;

#define SYM(field, name)                                                                 \
  do {                                                                                   \
    *(void**)&fns.field = dlsym(lib, name);                                              \
    if (fns.field == NULL) {                                                             \
      snprintf(load_error_buf, sizeof(load_error_buf), "libhwloc.so.15 lacks %s", name); \
      load_error = load_error_buf;                                                       \
      return;                                                                            \
    }                                                                                    \
  } while (0)

static void load_lib(void) {
  const char* name = weft_param_str("WEFT_HWLOC_LIB");
  if (name == NULL || name[0] == 0) name = "libhwloc.so.15";
  /* RTLD_LOCAL keeps hwloc's symbols from an application's own copy; the price is that hwloc's
   * plugins (libxml2 XML parser) cannot load, and files go through hwloc's built-in parser. */
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(load_error_buf, sizeof(load_error_buf), "cannot load %s: %s", name, dlerror());
    load_error = load_error_buf;
    return;
  }
  SYM(api_version, "hwloc_get_api_version");
  SYM(init, "hwloc_topology_init");
  SYM(load, "hwloc_topology_load");
  SYM(destroy, "hwloc_topology_destroy");
  SYM(set_xml, "hwloc_topology_set_xml");
  SYM(set_synthetic, "hwloc_topology_set_synthetic");
  SYM(set_io_filter, "hwloc_topology_set_io_types_filter");
  SYM(obj_by_depth, "hwloc_get_obj_by_depth");
  SYM(is_thissystem, "hwloc_topology_is_thissystem");
  SYM(bitmap_next, "hwloc_bitmap_next");
  /* The object layout walked below is the 2.x one; the library's major must be 2. */
  unsigned v = fns.api_version();
  if ((v >> 16) != (HWLOC_API_VERSION >> 16)) {
    snprintf(load_error_buf, sizeof(load_error_buf), "libhwloc.so.15 has API 0x%x, built for 0x%x", v,
             (unsigned)HWLOC_API_VERSION);
    load_error = load_error_buf;
    return;
  }
  loaded = 1; /* the library stays loaded for the life of the process */
}

int weft_hwloc_available(const char** why) {
  pthread_once(&load_once, load_lib);
  if (why) *why = loaded ? "loaded" : load_error;
  return loaded;
}

/* WEFT_HWLOC_XML turns "this machine" into that file. HWLOC_XMLFILE is hwloc's own: hwloc reads it
 * while loading, and the topology then says it is not this system. */
static void resolve_source(int* source, const char** arg) {
  const char* file = weft_param_str("WEFT_HWLOC_XML");
  if (*source == WEFT_HWLOC_THIS_MACHINE && file && file[0]) {
    *source = WEFT_HWLOC_XML;
    *arg = file;
  }
}

static ncclResult_t configure(hwloc_topology_t topo, int source, const char* arg) {
  /* Bridges and PCI devices are what the PCI tree is made of: keep them all, not only the
   * "important" ones, so switches above NICs and GPUs stay visible. */
  if (fns.set_io_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) != 0) {
    WEFT_WARN("hwloc: cannot enable I/O objects");
    return ncclSystemError;
  }
  int rc = 0;
  if (source == WEFT_HWLOC_XML) rc = fns.set_xml(topo, arg);
  if (source == WEFT_HWLOC_SYNTHETIC) rc = fns.set_synthetic(topo, arg);
  if (rc != 0) {
    WEFT_WARN("hwloc: %s %s is not a usable topology (hwloc refused it)",
              source == WEFT_HWLOC_XML ? "XML file" : "synthetic description", arg);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t weft_hwloc_open(int source, const char* arg, struct weft_hwloc_topo** out) {
  const char* why;
  *out = NULL;
  if (source != WEFT_HWLOC_THIS_MACHINE && (arg == NULL || arg[0] == 0)) {
    WEFT_WARN("hwloc: empty %s given", source == WEFT_HWLOC_XML ? "XML file name" : "synthetic description");
    return ncclInvalidArgument;
  }
  resolve_source(&source, &arg);
  if (!weft_hwloc_available(&why)) {
    if (source != WEFT_HWLOC_THIS_MACHINE) {
      WEFT_WARN("hwloc: cannot read %s without hwloc (%s)", arg, why);
      return ncclInvalidUsage;
    }
    WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "hwloc: %s", why);
    return ncclSystemError;
  }
  struct weft_hwloc_topo* t = calloc(1, sizeof(*t));
  hwloc_topology_t topo = NULL;
  if (t == NULL || fns.init(&topo) != 0) {
    free(t);
    WEFT_WARN("hwloc: cannot create a topology (out of memory)");
    return ncclSystemError;
  }
  ncclResult_t res = configure(topo, source, arg);
  if (res == ncclSuccess && fns.load(topo) != 0) {
    WEFT_WARN("hwloc: loading the topology of %s failed", arg ? arg : "this machine");
    res = source == WEFT_HWLOC_THIS_MACHINE ? ncclSystemError : ncclInvalidArgument;
  }
  if (res != ncclSuccess) {
    fns.destroy(topo);
    free(t);
    return res;
  }
  t->fn = &fns;
  t->topology = topo;
  t->root = fns.obj_by_depth(topo, 0, 0);
  t->source = source;
  /* Only this machine's objects may be matched with its sysfs and NVML. */
  t->this_machine = source == WEFT_HWLOC_THIS_MACHINE && fns.is_thissystem(topo);
  if (source == WEFT_HWLOC_THIS_MACHINE && !t->this_machine) {
    t->source = WEFT_HWLOC_XML;
    arg = "the XML file named by HWLOC_XMLFILE";
  }
  snprintf(t->what, sizeof(t->what), "%s", arg ? arg : "this machine");
  *out = t;
  return ncclSuccess;
}

void weft_hwloc_close(struct weft_hwloc_topo* t) {
  if (t == NULL) return;
  if (t->topology) t->fn->destroy(t->topology);
  free(t);
}

int weft_hwloc_bitmap_next(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, int prev) {
  return set ? t->fn->bitmap_next(set, prev) : -1;
}

const char* weft_hwloc_info(hwloc_obj_t obj, const char* name) {
  for (unsigned i = 0; obj && i < obj->infos_count; i++)
    if (obj->infos[i].name && strcmp(obj->infos[i].name, name) == 0) return obj->infos[i].value;
  return NULL;
}

static int walk_list(hwloc_obj_t first, int (*fn)(hwloc_obj_t, void*), void* arg) {
  for (hwloc_obj_t c = first; c; c = c->next_sibling)
    if (weft_hwloc_walk(c, fn, arg)) return 1;
  return 0;
}

int weft_hwloc_walk(hwloc_obj_t obj, int (*fn)(hwloc_obj_t, void*), void* arg) {
  if (obj == NULL) return 0;
  if (fn(obj, arg)) return 1;
  return walk_list(obj->memory_first_child, fn, arg) || walk_list(obj->first_child, fn, arg) ||
         walk_list(obj->io_first_child, fn, arg);
}

hwloc_obj_t weft_hwloc_cpu_parent(hwloc_obj_t obj) {
  while (obj && obj->cpuset == NULL) obj = obj->parent;
  return obj;
}

#else /* built without hwloc's header: never available */

int weft_hwloc_available(const char** why) {
  if (why) *why = "built without hwloc headers (libhwloc-dev)";
  return 0;
}

ncclResult_t weft_hwloc_open(int source, const char* arg, struct weft_hwloc_topo** out) {
  *out = NULL;
  if (source != WEFT_HWLOC_THIS_MACHINE) {
    WEFT_WARN("hwloc: cannot read %s: built without hwloc headers (libhwloc-dev)", arg ? arg : "");
    return ncclInvalidUsage;
  }
  WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "hwloc: built without hwloc headers");
  return ncclSystemError;
}

void weft_hwloc_close(struct weft_hwloc_topo* t) { (void)t; }
int weft_hwloc_bitmap_next(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, int prev) {
  (void)t, (void)set, (void)prev;
  return -1;
}
const char* weft_hwloc_info(hwloc_obj_t obj, const char* name) {
  (void)obj, (void)name;
  return NULL;
}
int weft_hwloc_walk(hwloc_obj_t obj, int (*fn)(hwloc_obj_t, void*), void* arg) {
  (void)obj, (void)fn, (void)arg;
  return 0;
}
hwloc_obj_t weft_hwloc_cpu_parent(hwloc_obj_t obj) { return obj; }

#endif

int weft_hwloc_to_cpuset(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, cpu_set_t* out) {
  CPU_ZERO(out);
  for (int c = weft_hwloc_bitmap_next(t, set, -1); c >= 0 && c < CPU_SETSIZE;
       c = weft_hwloc_bitmap_next(t, set, c))
    CPU_SET(c, out);
  return CPU_COUNT(out);
}

void weft_hwloc_mask_text(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, char* buf, size_t len) {
  unsigned words[CPU_SETSIZE / 32] = {0};
  int last = -1;
  for (int c = weft_hwloc_bitmap_next(t, set, -1); c >= 0 && c < CPU_SETSIZE;
       c = weft_hwloc_bitmap_next(t, set, c)) {
    words[c / 32] |= 1u << (c % 32);
    last = c / 32;
  }
  size_t n = 0;
  buf[0] = 0;
  if (last < 0) last = 0;
  for (int w = last; w >= 0 && n + 10 < len; w--)
    n += (size_t)snprintf(buf + n, len - n, "%s%08x", w == last ? "" : ",", words[w]);
}

void weft_hwloc_list_text(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, char* buf, size_t len) {
  size_t n = 0;
  buf[0] = 0;
  int c = weft_hwloc_bitmap_next(t, set, -1);
  while (c >= 0 && n + 24 < len) {
    int hi = c, next;
    while ((next = weft_hwloc_bitmap_next(t, set, hi)) == hi + 1) hi = next;
    n += (size_t)snprintf(buf + n, len - n, hi > c ? "%s%d-%d" : "%s%d", n ? "," : "", c, hi);
    c = next;
  }
}
