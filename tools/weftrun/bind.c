/* weftrun: --bind. Pins a local rank, before exec, to the CPUs of one NUMA node or of one core,
 * chosen by local rank among those holding CPUs the launcher itself may use (cgroups, taskset).
 * hwloc gives the NUMA nodes, cores and the GPU's place; with a GPU, --bind numa pins the rank to
 * the CPUs near its GPU. Without hwloc, NUMA nodes come from sysfs and a core is one CPU. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* for the Linux extras: CPU affinity, parent-death signal */
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind_hwloc.h"
#include "util/sysfs.h"
#include "weftrun.h"

#define NODE_DIR "/sys/devices/system/node"
#define MAX_NODES 1024

static int cmp_int(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }

/* NUMA node ids in increasing order; the ids may have gaps (node0, node2). */
static int list_nodes(int* ids) {
  DIR* d = opendir(NODE_DIR);
  int n = 0;
  if (!d) return 0;
  for (struct dirent* e; (e = readdir(d)) && n < MAX_NODES;)
    if (!strncmp(e->d_name, "node", 4) && isdigit((unsigned char)e->d_name[4]))
      ids[n++] = atoi(e->d_name + 4);
  closedir(d);
  qsort(ids, n, sizeof(*ids), cmp_int);
  return n;
}

static int numa_cpus(int local_rank, cpu_set_t* set) {
  static int ids[MAX_NODES];
  int n = list_nodes(ids);
  if (n == 0) return -1; /* no NUMA information: the caller leaves the rank unbound */
  char path[128], line[8192];
  snprintf(path, sizeof(path), NODE_DIR "/node%d/cpulist", ids[local_rank % n]);
  return weft_read_line(path, line, sizeof(line)) == 0 ? weft_parse_cpulist(line, set) : -1;
}

static int core_cpu(int local_rank, const cpu_set_t* allowed, cpu_set_t* set) {
  int n = CPU_COUNT(allowed), want = local_rank % (n ? n : 1);
  CPU_ZERO(set);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, allowed) && want-- == 0) {
      CPU_SET(c, set);
      return 0;
    }
  return -1;
}

static const char* bind_name(int bind) { return bind == WEFTRUN_BIND_CORE ? "core" : "numa"; }

/* Runs in the forked child. Failing to bind is reported but never fatal: an unbound rank
 * still computes the right answer. */
void weftrun_bind_self(struct weftrun_job* job, struct weftrun_rank* rank) {
  cpu_set_t allowed, set;
  char how[160];
  if (job->opts.bind == WEFTRUN_BIND_NONE) return;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int rc = weftrun_bind_hwloc(job->opts.bind == WEFTRUN_BIND_CORE, rank->local_rank, &allowed, &set, how,
                              sizeof(how));
  if (rc < 0) { /* no hwloc: sysfs */
    snprintf(how, sizeof(how), "sysfs");
    rc = job->opts.bind == WEFTRUN_BIND_CORE ? core_cpu(rank->local_rank, &allowed, &set)
                                             : numa_cpus(rank->local_rank, &set);
    if (rc == 0) CPU_AND(&set, &set, &allowed);
  }
  if (rc != 0) return;
  if (CPU_COUNT(&set) == 0) {
    fprintf(stderr, "weftrun: rank %d: its %s has no CPU this job may use; not bound\n", rank->rank,
            job->opts.bind == WEFTRUN_BIND_CORE ? "core" : "NUMA node");
    return;
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    fprintf(stderr, "weftrun: rank %d: sched_setaffinity: %s\n", rank->rank, strerror(errno));
    return;
  }
  if (weftrun_bind_verbose()) {
    char list[1024];
    weftrun_cpulist_text(&set, list, sizeof(list));
    fprintf(stderr, "weftrun: rank %d bound (--bind %s) to CPUs %s: %s\n", rank->rank,
            bind_name(job->opts.bind), list, how);
  }
}
