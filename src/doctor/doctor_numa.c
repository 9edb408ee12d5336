/* NUMA placement: ranks should run on the node of their GPU and NIC, or every copy crosses the
 * inter-socket link. The doctor runs where a rank would (same launcher, same binding), so its
 * own CPU affinity stands for a rank's. */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "util/socket.h"
#include "util/sysfs.h"

#define MAX_NODES 64

/* Which NUMA nodes hold a CPU of set; returns the number of nodes present. */
static int nodes_of(const cpu_set_t* set, int* covered) {
  char path[512];
  DIR* d = opendir(weft_doctor_path(path, sizeof(path), "/sys/devices/system/node"));
  if (d == NULL) return 0;
  int nodes = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    int node;
    if (sscanf(e->d_name, "node%d", &node) != 1 || node < 0 || node >= MAX_NODES) continue;
    nodes++;
    char rel[128], list[1024];
    snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%d/cpulist", node);
    cpu_set_t cpus, both;
    if (weft_doctor_read_line(rel, list, sizeof(list)) != 0 || weft_parse_cpulist(list, &cpus) != 0) continue;
    CPU_AND(&both, &cpus, set);
    if (CPU_COUNT(&both) > 0) covered[node] = 1;
  }
  closedir(d);
  return nodes;
}

static int read_node(const char* rel) {
  char line[32];
  return weft_doctor_read_line(rel, line, sizeof(line)) == 0 ? atoi(line) : -1;
}

/* Nodes of NVIDIA GPUs and of the selected socket interfaces; returns how many devices have one. */
static int device_nodes(int* has_dev, char* seen, size_t size) {
  size_t used = 0;
  int n = 0;
  char dir[512];
  DIR* d = opendir(weft_doctor_path(dir, sizeof(dir), "/sys/bus/pci/devices"));
  for (struct dirent* e; d && (e = readdir(d)) != NULL;) {
    char rel[512];
    if (e->d_name[0] == '.' || !weft_doctor_is_nvidia_gpu(e->d_name)) continue;
    snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/numa_node", e->d_name);
    int node = read_node(rel);
    if (node < 0 || node >= MAX_NODES) continue;
    has_dev[node] = 1, n++;
    if (used + 1 < size)
      used +=
          (size_t)snprintf(seen + used, size - used, "%sGPU %s node %d", used ? ", " : "", e->d_name, node);
  }
  if (d) closedir(d);
  struct weft_socket_if ifs[16];
  int nifs = weft_socket_find_ifs(NULL, ifs, 16);
  for (int i = 0; i < nifs; i++) {
    char rel[256];
    snprintf(rel, sizeof(rel), "/sys/class/net/%s/device/numa_node", ifs[i].name);
    int node = read_node(rel);
    if (node < 0 || node >= MAX_NODES) continue;
    has_dev[node] = 1, n++;
    if (used + 1 < size)
      used +=
          (size_t)snprintf(seen + used, size - used, "%sNIC %s node %d", used ? ", " : "", ifs[i].name, node);
  }
  return n;
}

void weft_doctor_check_numa(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  (void)o;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
  int covered[MAX_NODES] = {0}, has_dev[MAX_NODES] = {0};
  int nodes = nodes_of(&set, covered);
  char seen[512] = "";
  int ndev = device_nodes(has_dev, seen, sizeof(seen));
  if (nodes < 2 || ndev == 0) {
    weft_doctor_add(r, "numa.placement", WEFT_DOCTOR_OK, NULL,
                    "%d NUMA node(s), %d GPU/NIC with a node: nothing to place", nodes, ndev);
    return;
  }
  int ncovered = 0, near = 0;
  for (int n = 0; n < MAX_NODES; n++) ncovered += covered[n], near += covered[n] && has_dev[n];
  if (ncovered < nodes && near == 0) {
    weft_doctor_add(
        r, "numa.placement", WEFT_DOCTOR_WARN,
        "Bind each rank to the node of its GPU and NIC (weftrun --bind numa, numactl --cpunodebind=N, "
        "or your launcher's binding) instead of this one",
        "this process is bound to NUMA node(s) without any GPU or selected NIC (%s): every copy "
        "between a rank and its devices crosses the inter-socket link",
        seen);
  } else if (ncovered == nodes) {
    weft_doctor_add(r, "numa.placement", WEFT_DOCTOR_INFO,
                    "Bind each rank to its GPU's node: weftrun --bind numa, or numactl --cpunodebind=N",
                    "ranks are not bound (this process may run on all %d nodes); devices: %s", nodes, seen);
  } else {
    weft_doctor_add(r, "numa.placement", WEFT_DOCTOR_OK, NULL, "bound to a node with devices (%s)", seen);
  }
}
