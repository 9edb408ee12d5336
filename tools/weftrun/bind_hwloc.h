/* weftrun: --bind through hwloc (bind_hwloc.c). */
#ifndef WEFTRUN_BIND_HWLOC_H
#define WEFTRUN_BIND_HWLOC_H

#include <sched.h>
#include <stddef.h>

/* The CPUs for local rank `local` (a core when core, else a NUMA node or the CPUs near the rank's
 * GPU), inside `allowed` unless NCCL_IGNORE_CPU_AFFINITY=1 sends a GPU rank to its GPU's CPUs
 * anyway. how receives a description. Returns 0, 1 when nothing can be chosen (leave the rank
 * unbound), -1 when hwloc is not usable (use sysfs). */
int weftrun_bind_hwloc(int core, int local, const cpu_set_t* allowed, cpu_set_t* out, char* how, size_t len);
/* 1 when NCCL_DEBUG asks for INFO: each rank says where it was bound. */
int weftrun_bind_verbose(void);
void weftrun_cpulist_text(const cpu_set_t* set, char* buf, size_t len);

#endif
