/* Detection: builds NCCL topology XML for this machine, then the system from it. hwloc
 * (detect_hwloc.c) is used when it loads; this file is the sysfs path used otherwise (NUMA nodes and
 * their CPUs, NICs from /sys/class/infiniband and /sys/class/net with speeds and PCI parents,
 * NVIDIA GPUs on the PCI bus) and what both share (NVLinks from NVML, net speeds, host hash).
 * WEFT_TOPO_SYSFS prefixes every sysfs path (tests) and selects the sysfs path. */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/detect.h"
#include "graph/topo.h"
#include "util/check.h"
#include "util/hwloc.h"
#include "util/param.h"
#include "util/sysfs.h"

struct det {
  char root[PATH_MAX / 2];
  struct weft_xml_node* sys;
  int ngpu, nnet;
};

/* First line of root + path into buf (trailing newline removed); -1 when unreadable. */
static int read_line(const struct det* d, const char* path, char* buf, size_t size) {
  char full[PATH_MAX];
  int n = snprintf(full, sizeof(full), "%s%s", d->root, path);
  if (n < 0 || (size_t)n >= sizeof(full)) return -1; /* a path that long is not a kernel file */
  return weft_read_line(full, buf, size);
}

static long read_long(const struct det* d, const char* path, long def) {
  char buf[64];
  if (read_line(d, path, buf, sizeof(buf)) != 0) return def;
  char* end;
  long v = strtol(buf, &end, 0);
  return end == buf ? def : v;
}

const char* weft_detect_arch(void) {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "arm64";
#elif defined(__powerpc64__)
  return "ppc64";
#else
  return "other";
#endif
}

/* x86 vendor, family and model from /proc/cpuinfo (under root). */
ncclResult_t weft_detect_cpu_attrs(const char* root, struct weft_xml_node* cpu) {
  char path[PATH_MAX], line[256];
  snprintf(path, sizeof(path), "%s/proc/cpuinfo", root);
  FILE* f = fopen(path, "r");
  if (f == NULL) return ncclSuccess;
  int got = 0;
  while (got != 7 && fgets(line, sizeof(line), f)) {
    char* v = strchr(line, ':');
    if (v == NULL) continue;
    v++;
    v += strspn(v, " \t");
    v[strcspn(v, "\n")] = 0;
    ncclResult_t res = ncclSuccess;
    if (!(got & 1) && strncmp(line, "vendor_id", 9) == 0)
      res = weft_xml_set(cpu, "vendor", v), got |= 1;
    else if (!(got & 2) && strncmp(line, "cpu family", 10) == 0)
      res = weft_xml_set(cpu, "familyid", v), got |= 2;
    else if (!(got & 4) && strncmp(line, "model", 5) == 0 && (line[5] == ' ' || line[5] == '\t'))
      res = weft_xml_set(cpu, "modelid", v), got |= 4;
    if (res != ncclSuccess) {
      fclose(f);
      return res;
    }
  }
  fclose(f);
  return ncclSuccess;
}

static ncclResult_t add_cpu(struct det* d, int numa) {
  struct weft_xml_node* c = weft_xml_add_child(d->sys, "cpu");
  if (c == NULL) return ncclSystemError;
  char path[128], map[1024];
  WEFT_CHECK(weft_xml_set_int(c, "numaid", numa));
  snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpumap", numa);
  if (read_line(d, path, map, sizeof(map)) == 0) WEFT_CHECK(weft_xml_set(c, "affinity", map));
  WEFT_CHECK(weft_xml_set(c, "arch", weft_detect_arch()));
  return weft_detect_cpu_attrs(d->root, c);
}

static ncclResult_t add_cpus(struct det* d) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/sys/devices/system/node", d->root);
  DIR* dir = opendir(path);
  int ids[WEFT_TOPO_CAP_CPU], n = 0;
  struct dirent* e;
  while (dir && (e = readdir(dir)) != NULL && n < WEFT_TOPO_CAP_CPU) {
    char* end;
    if (strncmp(e->d_name, "node", 4) != 0) continue;
    long id = strtol(e->d_name + 4, &end, 10);
    if (*end == 0 && end != e->d_name + 4 && id >= 0) ids[n++] = (int)id;
  }
  if (dir) closedir(dir);
  if (n == 0) ids[n++] = 0;   /* no NUMA information: one node */
  for (int i = 0; i < n; i++) /* numeric order, as the kernel numbers them */
    for (int j = i + 1; j < n; j++)
      if (ids[j] < ids[i]) {
        int t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
      }
  for (int i = 0; i < n; i++) WEFT_CHECK(add_cpu(d, ids[i]));
  return ncclSuccess;
}

static int is_bdf(const char* s, size_t n) {
  /* dddd:bb:dd.f */
  if (n != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return 0;
  for (size_t i = 0; i < n; i++)
    if (i != 4 && i != 7 && i != 10 && !strchr("0123456789abcdefABCDEF", s[i])) return 0;
  return 1;
}

static struct weft_xml_node* cpu_elem(struct det* d, long numa) {
  struct weft_xml_node* first = NULL;
  for (int i = 0; i < d->sys->nchildren; i++) {
    struct weft_xml_node* c = d->sys->children[i];
    if (strcmp(c->name, "cpu") != 0) continue;
    if (first == NULL) first = c;
    if (weft_xml_get_int(c, "numaid", -1) == numa) return c;
  }
  return first;
}

static ncclResult_t pci_attrs(struct weft_xml_node* p, const char* dir) {
  static const char* const files[][2] = {{"class", "class"},
                                         {"vendor", "vendor"},
                                         {"device", "device"},
                                         {"subsystem_vendor", "subsystem_vendor"},
                                         {"subsystem_device", "subsystem_device"},
                                         {"max_link_speed", "link_speed"},
                                         {"max_link_width", "link_width"}};
  struct det none = {.root = ""};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char path[PATH_MAX + 32], v[128];
    snprintf(path, sizeof(path), "%s/%s", dir, files[i][0]);
    if (read_line(&none, path, v, sizeof(v)) == 0) WEFT_CHECK(weft_xml_set(p, files[i][1], v));
  }
  return ncclSuccess;
}

/* The <pci> element of the device at sysfs path `real` (a resolved path), creating its bridges
 * under the CPU of its NUMA node; NULL when the path has no PCI component. */
static ncclResult_t pci_chain(struct det* d, const char* real, struct weft_xml_node** out) {
  const char* comps[32];
  size_t ncomp = 0;
  *out = NULL;
  for (const char* p = real; *p && ncomp < 32;) {
    const char* s = strchr(p, '/');
    size_t n = s ? (size_t)(s - p) : strlen(p);
    if (is_bdf(p, n)) comps[ncomp++] = p;
    p += n + (s ? 1 : 0);
  }
  if (ncomp == 0) return ncclSuccess;
  char dir[PATH_MAX];
  size_t dl = (size_t)(comps[ncomp - 1] + 12 - real);
  snprintf(dir, sizeof(dir), "%.*s", (int)dl, real);
  struct det none = {.root = ""};
  char numa_path[PATH_MAX + 16];
  snprintf(numa_path, sizeof(numa_path), "%s/numa_node", dir);
  struct weft_xml_node* parent = cpu_elem(d, read_long(&none, numa_path, 0));
  for (size_t i = 0; i < ncomp && parent; i++) {
    char busid[16];
    snprintf(busid, sizeof(busid), "%.12s", comps[i]);
    for (size_t k = 0; busid[k]; k++)
      busid[k] = (char)(busid[k] >= 'A' && busid[k] <= 'F' ? busid[k] + 32 : busid[k]);
    struct weft_xml_node* found = NULL;
    for (int c = 0; c < parent->nchildren && !found; c++) {
      const char* b = weft_xml_get(parent->children[c], "busid");
      if (strcmp(parent->children[c]->name, "pci") == 0 && b && strcmp(b, busid) == 0)
        found = parent->children[c];
    }
    if (found == NULL) {
      if ((found = weft_xml_add_child(parent, "pci")) == NULL) return ncclSystemError;
      WEFT_CHECK(weft_xml_set(found, "busid", busid));
      snprintf(dir, sizeof(dir), "%.*s", (int)(comps[i] + 12 - real), real);
      WEFT_CHECK(pci_attrs(found, dir));
    }
    parent = found;
  }
  *out = parent;
  return ncclSuccess;
}

/* Mb/s of an InfiniBand port from its "rate" text ("100 Gb/sec (4X EDR)"). */
static long ib_speed(struct det* d, const char* dev) {
  char path[PATH_MAX], v[128];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/rate", dev);
  if (read_line(d, path, v, sizeof(v)) != 0) return 0;
  return (long)(strtod(v, NULL) * 1000);
}

static long net_speed(struct det* d, const char* name, int ib) {
  char path[PATH_MAX];
  if (ib) return ib_speed(d, name);
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", name);
  return read_long(d, path, -1);
}

long weft_detect_net_speed(const char* name, int ib) {
  struct det none = {.root = ""};
  return net_speed(&none, name, ib);
}

ncclResult_t weft_detect_net_elem(struct weft_xml_node* nic, const char* name, int dev, long speed, int gdr) {
  struct weft_xml_node* net = weft_xml_add_child(nic, "net");
  if (net == NULL) return ncclSystemError;
  WEFT_CHECK(weft_xml_set(net, "name", name));
  WEFT_CHECK(weft_xml_set_int(net, "dev", dev));
  WEFT_CHECK(weft_xml_set_int(net, "speed", speed > 0 ? speed : 10000));
  WEFT_CHECK(weft_xml_set_int(net, "port", 1));
  WEFT_CHECK(weft_xml_set(net, "latency", "0"));
  return weft_xml_set_int(net, "gdr", gdr);
}

static ncclResult_t add_net(struct det* d, const char* cls, const char* name, long speed, int gdr) {
  char path[PATH_MAX], real[PATH_MAX];
  snprintf(path, sizeof(path), "%s/sys/class/%s/%s", d->root, cls, name);
  if (realpath(path, real) == NULL || strstr(real, "/virtual/")) return ncclSuccess;
  struct weft_xml_node* pci;
  WEFT_CHECK(pci_chain(d, real, &pci));
  if (pci == NULL) return ncclSuccess; /* not a PCI device */
  struct weft_xml_node* nic = NULL;
  for (int i = 0; i < pci->nchildren && !nic; i++)
    if (strcmp(pci->children[i]->name, "nic") == 0) nic = pci->children[i];
  if (nic == NULL && (nic = weft_xml_add_child(pci, "nic")) == NULL) return ncclSystemError;
  return weft_detect_net_elem(nic, name, d->nnet++, speed, gdr);
}

static int visible_entry(const struct dirent* e) {
  return e->d_name[0] != '.' && strcmp(e->d_name, "lo") != 0;
}

/* The entries of a sysfs directory in natural order (mlx5_2 before mlx5_10), so that devices are
 * numbered alike whatever order the kernel lists them in, and as the hwloc path numbers them.
 * Returns the count (0 when unreadable); free with free_entries. */
static int sorted_entries(const char* dir, struct dirent*** out) {
  int n = scandir(dir, out, visible_entry, versionsort);
  if (n < 0) *out = NULL;
  return n < 0 ? 0 : n;
}

static void free_entries(struct dirent** e, int n) {
  for (int i = 0; i < n; i++) free(e[i]);
  free(e);
}

static ncclResult_t add_nets(struct det* d) {
  static const char* const classes[] = {"infiniband", "net"};
  ncclResult_t res = ncclSuccess;
  for (int k = 0; k < 2 && res == ncclSuccess; k++) {
    char path[PATH_MAX];
    struct dirent** e;
    snprintf(path, sizeof(path), "%s/sys/class/%s", d->root, classes[k]);
    int n = sorted_entries(path, &e);
    for (int i = 0; i < n && res == ncclSuccess; i++)
      res = add_net(d, classes[k], e[i]->d_name, net_speed(d, e[i]->d_name, k == 0), k == 0);
    free_entries(e, n);
  }
  return res;
}

ncclResult_t weft_detect_gpu_elem(struct weft_xml_node* pci, int dev, const struct weft_nvml_gpu* nv,
                                  long (*class_of)(const char* busid, void* arg), void* arg) {
  struct weft_xml_node* g = weft_xml_add_child(pci, "gpu");
  if (g == NULL) return ncclSystemError;
  WEFT_CHECK(weft_xml_set_int(g, "dev", dev));
  if (nv && nv->sm > 0) WEFT_CHECK(weft_xml_set_int(g, "sm", nv->sm));
  WEFT_CHECK(weft_xml_set_int(g, "rank", dev));
  WEFT_CHECK(weft_xml_set_int(g, "gdr", 1));
  if (nv && nv->p2p == 0) WEFT_CHECK(weft_xml_set_int(g, "p2p", 0)); /* Weft's attribute */
  for (int i = 0; nv && i < nv->ntargets; i++) {
    struct weft_xml_node* l = weft_xml_add_child(g, "nvlink");
    if (l == NULL) return ncclSystemError;
    WEFT_CHECK(weft_xml_set(l, "target", nv->targets[i].busid));
    WEFT_CHECK(weft_xml_set_int(l, "count", nv->targets[i].count));
    WEFT_CHECK(weft_xml_set_hex(l, "tclass", (unsigned long long)class_of(nv->targets[i].busid, arg)));
  }
  return ncclSuccess;
}

/* PCI class of an NVLink target; targets not on the PCI bus are NVSwitches. */
static long sysfs_class(const char* busid, void* arg) {
  char f[PATH_MAX];
  snprintf(f, sizeof(f), "/sys/bus/pci/devices/%s/class", busid);
  return read_long(arg, f, 0x068000);
}

/* <gpu> under the PCI chain of the device at sysfs path rel (under root), with NVML's data when
 * known: compute capability and NVLinks. */
static ncclResult_t add_gpu(struct det* d, const char* busid, const struct weft_nvml_gpu* nv) {
  char f[PATH_MAX], real[PATH_MAX];
  snprintf(f, sizeof(f), "%s/sys/bus/pci/devices/%s", d->root, busid);
  struct weft_xml_node* pci = NULL;
  if (realpath(f, real) == NULL) return ncclSuccess;
  WEFT_CHECK(pci_chain(d, real, &pci));
  if (pci == NULL) return ncclSuccess;
  return weft_detect_gpu_elem(pci, d->ngpu++, nv, sysfs_class, d);
}

static ncclResult_t add_gpus(struct det* d) {
  static struct weft_nvml_gpu nv[WEFT_TOPO_CAP_GPU];
  int n = d->root[0] ? 0 : weft_topo_nvml_gpus(nv, WEFT_TOPO_CAP_GPU); /* a fake tree has no NVML */
  for (int i = 0; i < n; i++) WEFT_CHECK(add_gpu(d, nv[i].busid, &nv[i]));
  if (n > 0) return ncclSuccess;
  char path[PATH_MAX];
  struct dirent** e;
  snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", d->root);
  int ne = sorted_entries(path, &e); /* bus id order */
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < ne && res == ncclSuccess; i++) {
    char f[PATH_MAX];
    snprintf(f, sizeof(f), "/sys/bus/pci/devices/%s/class", e[i]->d_name);
    long cls = read_long(d, f, 0);
    snprintf(f, sizeof(f), "/sys/bus/pci/devices/%s/vendor", e[i]->d_name);
    if ((cls >> 16) == 0x03 && read_long(d, f, 0) == 0x10de) res = add_gpu(d, e[i]->d_name, NULL);
  }
  free_entries(e, ne);
  return res;
}

/* Hosts are told apart by a hash of the host name (WEFT_HOSTID / NCCL_HOSTID when set). */
ncclResult_t weft_detect_host_hash(struct weft_xml_node* sys) {
  char name[256] = "";
  const char* id = weft_param_str("WEFT_HOSTID");
  if (id == NULL || id[0] == 0) id = weft_param_str("NCCL_HOSTID");
  if (id == NULL || id[0] == 0) {
    gethostname(name, sizeof(name) - 1);
    id = name;
  }
  uint64_t h = 1469598103934665603ull;
  for (const char* p = id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (int i = 0; i < sys->nchildren; i++) WEFT_CHECK(weft_xml_set_hex(sys->children[i], "host_hash", h));
  return ncclSuccess;
}

static ncclResult_t detect_sysfs(struct weft_xml_node* xml, const char* root) {
  struct det* d = calloc(1, sizeof(*d));
  if (d == NULL) return ncclSystemError;
  snprintf(d->root, sizeof(d->root), "%s", root);
  d->sys = xml;
  ncclResult_t res = add_cpus(d);
  if (res == ncclSuccess) res = add_nets(d);
  if (res == ncclSuccess) res = add_gpus(d);
  free(d);
  return res;
}

/* hwloc unless WEFT_TOPO_DETECT=sysfs or a fake sysfs tree is given; sysfs when hwloc is missing
 * and detection was not pinned to it. The log says which was used. */
static _Thread_local const char* last_method = "none";

const char* weft_topo_detect_method(void) { return last_method; }
void weft_detect_set_method(const char* method) { last_method = method; }

ncclResult_t weft_detect_machine_xml(struct weft_xml_node* xml) {
  const char* mode = weft_param_str("WEFT_TOPO_DETECT");
  const char* root = weft_param_str("WEFT_TOPO_SYSFS");
  root = root ? root : "";
  if (mode == NULL || mode[0] == 0) mode = "auto";
  if (strcmp(mode, "auto") != 0 && strcmp(mode, "hwloc") != 0 && strcmp(mode, "sysfs") != 0) {
    WEFT_WARN("WEFT_TOPO_DETECT=%s: expected auto, hwloc or sysfs", mode);
    return ncclInvalidArgument;
  }
  if (strcmp(mode, "sysfs") != 0 && !(root[0] && strcmp(mode, "auto") == 0)) {
    char what[300];
    ncclResult_t res = weft_detect_hwloc_xml(WEFT_HWLOC_THIS_MACHINE, NULL, xml, what, sizeof(what));
    if (res == ncclSuccess) {
      WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "Topology detection: hwloc (%s)", what);
      last_method = "hwloc";
      return ncclSuccess;
    }
    if (res != ncclSystemError || strcmp(mode, "hwloc") == 0) {
      if (res == ncclSystemError) WEFT_WARN("WEFT_TOPO_DETECT=hwloc but hwloc is not usable here");
      return res;
    }
  }
  WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "Topology detection: sysfs%s%s", root[0] ? " under " : "", root);
  last_method = "sysfs";
  ncclResult_t res = detect_sysfs(xml, root);
  if (res == ncclSystemError) WEFT_WARN("topology detection: out of memory building the XML tree");
  return res;
}

/* The system made from a detected <system> tree (fill builds it), with the host hash set. */
ncclResult_t weft_detect_finish(ncclResult_t (*fill)(struct weft_xml_node*, void*), void* arg,
                                struct weft_topo_system** out) {
  struct weft_topo_system* sys;
  *out = NULL;
  WEFT_CHECK(weft_topo_system_alloc(&sys));
  ncclResult_t res = ncclSuccess;
  sys->xml = weft_xml_new("system");
  res = sys->xml ? weft_xml_set(sys->xml, "version", "1") : ncclSystemError;
  if (res == ncclSuccess) res = fill(sys->xml, arg);
  if (res == ncclSuccess) res = weft_detect_host_hash(sys->xml);
  if (res == ncclSuccess) res = weft_topo_from_xml(sys);
  if (res != ncclSuccess) {
    weft_topo_system_destroy(sys);
    return res;
  }
  WEFT_INFO(WEFT_GRAPH,
            "Detected topology: %d NUMA nodes, %d PCI switches/bridges, %d NICs, %d NETs, %d GPUs",
            sys->count[WEFT_NODE_CPU], sys->count[WEFT_NODE_PCI], sys->count[WEFT_NODE_NIC],
            sys->count[WEFT_NODE_NET], sys->count[WEFT_NODE_GPU]);
  *out = sys;
  return ncclSuccess;
}

static ncclResult_t fill_detected(struct weft_xml_node* xml, void* arg) {
  (void)arg;
  return weft_detect_machine_xml(xml);
}

ncclResult_t weft_topo_detect(struct weft_topo_system** out) {
  return weft_detect_finish(fill_detected, NULL, out);
}
