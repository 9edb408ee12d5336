/* hwloc (libhwloc.so.15, the 2.x ABI) loaded with dlopen: the library works unchanged where it is
 * absent. Only hwloc's types come from its header at build time; objects are walked through their
 * struct fields, so the table of functions stays small. */
#ifndef WEFT_UTIL_HWLOC_H
#define WEFT_UTIL_HWLOC_H

#include <sched.h>

#include "nccl.h"

#if defined(__has_include)
#if __has_include(<hwloc.h>)
#include <hwloc.h>
#define WEFT_HWLOC_HEADERS 1
#endif
#endif

#ifndef WEFT_HWLOC_HEADERS
#define WEFT_HWLOC_HEADERS 0
typedef struct hwloc_obj* hwloc_obj_t;
typedef struct hwloc_bitmap_s* hwloc_bitmap_t;
typedef const struct hwloc_bitmap_s* hwloc_const_bitmap_t;
#endif

/* Where a topology comes from: this machine, an hwloc XML file, or a synthetic description. */
enum weft_hwloc_source { WEFT_HWLOC_THIS_MACHINE, WEFT_HWLOC_XML, WEFT_HWLOC_SYNTHETIC };

struct weft_hwloc_fns;

struct weft_hwloc_topo {
  const struct weft_hwloc_fns* fn;
  void* topology; /* hwloc_topology_t */
  hwloc_obj_t root;
  int source;       /* enum weft_hwloc_source */
  char what[256];   /* file name or synthetic text, for messages */
  int this_machine; /* 1: sysfs of this machine matches the objects (link rates, net speeds) */
};

/* 1 when libhwloc.so.15 loaded and has every function needed; *why says why not otherwise. */
int weft_hwloc_available(const char** why);

/* Opens a topology. source THIS_MACHINE honours WEFT_HWLOC_XML, then hwloc's own HWLOC_XMLFILE,
 * then reads the machine; XML and SYNTHETIC take arg. I/O objects (PCI devices, bridges, OS devices) are
 * kept. ncclSystemError when hwloc is missing (INFO only: callers fall back), ncclInvalidArgument with a WARN
 * for a file or description hwloc rejects. */
ncclResult_t weft_hwloc_open(int source, const char* arg, struct weft_hwloc_topo** out);
void weft_hwloc_close(struct weft_hwloc_topo* t);

/* The value of info `name` on obj (hwloc's name/value pairs), NULL if absent. */
const char* weft_hwloc_info(hwloc_obj_t obj, const char* name);
/* Index of the next set bit after prev (-1 to start), -1 at the end. */
int weft_hwloc_bitmap_next(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, int prev);
/* Copies set into a cpu_set_t (bits past CPU_SETSIZE dropped); returns the number of CPUs. */
int weft_hwloc_to_cpuset(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, cpu_set_t* out);
/* The set as NCCL's affinity text: 32-bit hex words, most significant first, comma-separated. */
void weft_hwloc_mask_text(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, char* buf, size_t len);
/* The set as a CPU list ("0-3,8"). */
void weft_hwloc_list_text(const struct weft_hwloc_topo* t, hwloc_const_bitmap_t set, char* buf, size_t len);

/* Objects walked through their fields: calls fn on every object below obj (normal, memory and
 * I/O children; obj included), depth first; stops early when fn returns nonzero. */
int weft_hwloc_walk(hwloc_obj_t obj, int (*fn)(hwloc_obj_t, void*), void* arg);
/* First ancestor (or obj itself) that has a cpuset: the place an I/O object is attached. */
hwloc_obj_t weft_hwloc_cpu_parent(hwloc_obj_t obj);

#endif
