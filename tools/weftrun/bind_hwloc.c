/* weftrun: --bind through hwloc. NUMA nodes and cores come from hwloc's objects, so cgroup and
 * taskset restrictions, odd NUMA layouts and SMT siblings are seen as hwloc sees them; a rank with
 * a GPU (CUDA_VISIBLE_DEVICES as weftrun set it, GPUs counted in PCI bus order) is pinned to the
 * CPUs of the NUMA node its GPU hangs from, which is also where the GPU's NICs usually are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind_hwloc.h"
#include "util/hwloc.h"
#include "util/log.h"
#include "util/param.h"

#if WEFT_HWLOC_HEADERS

#define MAX_PICK 4096

struct pick {
  const struct weft_hwloc_topo* t;
  int type;
  const cpu_set_t* allowed; /* NULL: keep every object of the type */
  hwloc_obj_t objs[MAX_PICK];
  int n;
};

static int pick_one(hwloc_obj_t o, void* p) {
  struct pick* k = p;
  if ((int)o->type != k->type || k->n >= MAX_PICK) return 0;
  if (k->allowed) {
    cpu_set_t set;
    weft_hwloc_to_cpuset(k->t, o->cpuset, &set);
    CPU_AND(&set, &set, k->allowed);
    if (CPU_COUNT(&set) == 0) return 0;
  }
  k->objs[k->n++] = o;
  return 0;
}

static int cmp_os_index(const void* a, const void* b) {
  unsigned x = (*(const hwloc_obj_t*)a)->os_index, y = (*(const hwloc_obj_t*)b)->os_index;
  return x < y ? -1 : x > y;
}

static unsigned long long bus_key(hwloc_obj_t o) {
  const struct hwloc_pcidev_attr_s* p = &o->attr->pcidev;
  return (unsigned long long)p->domain << 24 | (unsigned)p->bus << 16 | (unsigned)p->dev << 8 | p->func;
}

static int cmp_bus(const void* a, const void* b) {
  unsigned long long x = bus_key(*(const hwloc_obj_t*)a), y = bus_key(*(const hwloc_obj_t*)b);
  return x < y ? -1 : x > y;
}

/* The GPU this rank was given: the first entry of CUDA_VISIBLE_DEVICES when it is an index. */
static hwloc_obj_t rank_gpu(struct pick* k) {
  const char* v = getenv("CUDA_VISIBLE_DEVICES");
  char* end;
  if (v == NULL || v[0] < '0' || v[0] > '9') return NULL; /* unset, empty or GPU UUIDs */
  long idx = strtol(v, &end, 10);
  k->type = HWLOC_OBJ_PCI_DEVICE;
  k->allowed = NULL;
  k->n = 0;
  weft_hwloc_walk(k->t->root, pick_one, k);
  int n = 0;
  for (int i = 0; i < k->n; i++) {
    const struct hwloc_pcidev_attr_s* p = &k->objs[i]->attr->pcidev;
    if (p->vendor_id == 0x10de && (p->class_id >> 8) == 0x03) k->objs[n++] = k->objs[i];
  }
  qsort(k->objs, (size_t)n, sizeof(k->objs[0]), cmp_bus);
  return idx < n ? k->objs[idx] : NULL;
}

/* CPUs near the rank's GPU: inside allowed, or (NCCL_IGNORE_CPU_AFFINITY=1) whatever the job was
 * given, inside what the machine lets this process use. 1 when there is no such GPU or CPU. */
static int near_gpu(struct pick* k, const cpu_set_t* allowed, cpu_set_t* out, char* how, size_t len) {
  hwloc_obj_t gpu = rank_gpu(k), at = gpu ? weft_hwloc_cpu_parent(gpu) : NULL;
  if (at == NULL) return 1;
  int ignore = weft_param_int("NCCL_IGNORE_CPU_AFFINITY") == 1;
  cpu_set_t machine;
  weft_hwloc_to_cpuset(k->t, at->cpuset, out);
  weft_hwloc_to_cpuset(k->t, k->t->root->cpuset, &machine);
  CPU_AND(out, out, ignore ? &machine : allowed);
  if (CPU_COUNT(out) == 0) return 1;
  const struct hwloc_pcidev_attr_s* p = &gpu->attr->pcidev;
  snprintf(how, len, "hwloc (%s), near GPU %04x:%02x:%02x.%x%s", k->t->what, (unsigned)p->domain, p->bus,
           p->dev, p->func, ignore ? ", NCCL_IGNORE_CPU_AFFINITY=1" : "");
  return 0;
}

static int pick_cpus(struct pick* k, int core, int local, const cpu_set_t* allowed, cpu_set_t* out, char* how,
                     size_t len) {
  if (!core && near_gpu(k, allowed, out, how, len) == 0) return 0;
  k->type = core ? HWLOC_OBJ_CORE : HWLOC_OBJ_NUMANODE;
  k->allowed = allowed;
  k->n = 0;
  weft_hwloc_walk(k->t->root, pick_one, k);
  if (k->n == 0) return 1;
  if (!core) qsort(k->objs, (size_t)k->n, sizeof(k->objs[0]), cmp_os_index);
  hwloc_obj_t o = k->objs[local % k->n];
  weft_hwloc_to_cpuset(k->t, o->cpuset, out);
  CPU_AND(out, out, allowed);
  snprintf(how, len, "hwloc (%s), %s %u of %d usable", k->t->what, core ? "core" : "NUMA node", o->os_index,
           k->n);
  return 0;
}

int weftrun_bind_hwloc(int core, int local, const cpu_set_t* allowed, cpu_set_t* out, char* how, size_t len) {
  struct weft_hwloc_topo* t;
  const char* mode = weft_param_str("WEFT_TOPO_DETECT"); /* as topology detection: sysfs skips hwloc */
  if (mode && strcmp(mode, "sysfs") == 0) return -1;
  if (weft_hwloc_open(WEFT_HWLOC_THIS_MACHINE, NULL, &t) != ncclSuccess) return -1;
  struct pick* k = calloc(1, sizeof(*k));
  int rc = 1;
  if (k) {
    k->t = t;
    rc = pick_cpus(k, core, local, allowed, out, how, len);
  }
  free(k);
  weft_hwloc_close(t);
  return rc;
}

#else

int weftrun_bind_hwloc(int core, int local, const cpu_set_t* allowed, cpu_set_t* out, char* how, size_t len) {
  (void)core, (void)local, (void)allowed, (void)out, (void)how, (void)len;
  return -1;
}

#endif

int weftrun_bind_verbose(void) { return WEFT_LOG_ON(WEFT_LOG_INFO, WEFT_INIT); }

void weftrun_cpulist_text(const cpu_set_t* set, char* buf, size_t len) {
  size_t n = 0;
  buf[0] = 0;
  for (int c = 0; c < CPU_SETSIZE && n + 24 < len; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int hi = c;
    while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set)) hi++;
    n += (size_t)(hi > c ? snprintf(buf + n, len - n, "%s%d-%d", n ? "," : "", c, hi)
                         : snprintf(buf + n, len - n, "%s%d", n ? "," : "", c));
    c = hi;
  }
}
