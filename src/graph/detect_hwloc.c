/* Detection through hwloc: the same NCCL topology XML the sysfs path builds, from hwloc's view of
 * this machine, of an hwloc XML file (lstopo --of xml) or of a synthetic description. NUMA nodes
 * become <cpu> with their (allowed) cpusets; PCI bridges and switch ports between a CPU and a
 * device become nested <pci>; NVIDIA display devices become <gpu> (matched to NVML by bus id on
 * this machine); PCI devices with OpenFabrics or network OS devices become <nic> with one <net>
 * per RDMA device and per netdev, RDMA devices first, each kind in name order, as the sysfs path
 * numbers them. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "graph/detect.h"
#include "graph/topo.h"
#include "util/check.h"
#include "util/hwloc.h"
#include "util/sysfs.h"

#if WEFT_HWLOC_HEADERS

#define MAX_OBJS 4096

struct hw {
  struct weft_hwloc_topo* t;
  struct weft_xml_node* sys;
  struct weft_nvml_gpu nv[WEFT_TOPO_CAP_GPU];
  int nnv, ngpu, nnet;
  hwloc_obj_t objs[MAX_OBJS]; /* scratch list filled by collect() */
  int nobjs;
};

struct collect_arg {
  struct hw* h;
  int type;
};

static int collect_one(hwloc_obj_t o, void* p) {
  struct collect_arg* a = p;
  if ((int)o->type == a->type && a->h->nobjs < MAX_OBJS) a->h->objs[a->h->nobjs++] = o;
  return 0;
}

/* Every object of one type, in hwloc's walk order, into h->objs. */
static void collect(struct hw* h, int type) {
  struct collect_arg a = {h, type};
  h->nobjs = 0;
  weft_hwloc_walk(h->t->root, collect_one, &a);
}

static void busid_text(const struct hwloc_pcidev_attr_s* p, char* buf, size_t len) {
  snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)p->domain, p->bus, p->dev, p->func);
}

/* The PCI attributes of a bridge or PCI device object; NULL for host bridges and others. */
static const struct hwloc_pcidev_attr_s* pci_attr(hwloc_obj_t o) {
  if (o->type == HWLOC_OBJ_PCI_DEVICE) return &o->attr->pcidev;
  if (o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
    return &o->attr->bridge.upstream.pci;
  return NULL;
}

static const char* cpu_arch_text(const char* hw) {
  if (hw == NULL) return NULL;
  if (strcmp(hw, "aarch64") == 0 || strcmp(hw, "arm64") == 0) return "arm64";
  if (strncmp(hw, "ppc64", 5) == 0) return "ppc64";
  if (strcmp(hw, "x86_64") == 0) return "x86_64";
  return "other";
}

static hwloc_obj_t package_of(struct hw* h, hwloc_obj_t numa) {
  for (hwloc_obj_t o = numa->parent; o; o = o->parent)
    if (o->type == HWLOC_OBJ_PACKAGE) return o;
  collect(h, HWLOC_OBJ_PACKAGE); /* NUMA node above the package (e.g. one node, two sockets) */
  return h->nobjs > 0 ? h->objs[0] : NULL;
}

static ncclResult_t cpu_elem(struct hw* h, hwloc_obj_t numa) {
  struct weft_xml_node* c = weft_xml_add_child(h->sys, "cpu");
  char mask[CPU_SETSIZE / 4 + CPU_SETSIZE / 32 + 1];
  if (c == NULL) return ncclSystemError;
  WEFT_CHECK(weft_xml_set_int(c, "numaid", numa->os_index));
  weft_hwloc_mask_text(h->t, numa->cpuset, mask, sizeof(mask));
  WEFT_CHECK(weft_xml_set(c, "affinity", mask));
  const char* arch = cpu_arch_text(weft_hwloc_info(h->t->root, "Architecture"));
  if (arch == NULL && h->t->this_machine) arch = weft_detect_arch();
  if (arch) WEFT_CHECK(weft_xml_set(c, "arch", arch));
  hwloc_obj_t pkg = package_of(h, numa);
  static const char* const infos[][2] = {
      {"CPUVendor", "vendor"}, {"CPUFamilyNumber", "familyid"}, {"CPUModelNumber", "modelid"}};
  int got = 0;
  for (int i = 0; i < 3; i++) {
    const char* v = weft_hwloc_info(pkg, infos[i][0]);
    if (v == NULL) continue;
    WEFT_CHECK(weft_xml_set(c, infos[i][1], v));
    got++;
  }
  if (got == 0 && h->t->this_machine) WEFT_CHECK(weft_detect_cpu_attrs("", c));
  return ncclSuccess;
}

static int cmp_os_index(const void* a, const void* b) {
  unsigned x = (*(const hwloc_obj_t*)a)->os_index, y = (*(const hwloc_obj_t*)b)->os_index;
  return x < y ? -1 : x > y;
}

static ncclResult_t add_cpus(struct hw* h) {
  collect(h, HWLOC_OBJ_NUMANODE);
  int n = h->nobjs < WEFT_TOPO_CAP_CPU ? h->nobjs : WEFT_TOPO_CAP_CPU;
  hwloc_obj_t nodes[WEFT_TOPO_CAP_CPU];
  memcpy(nodes, h->objs, sizeof(hwloc_obj_t) * (size_t)n);
  qsort(nodes, (size_t)n, sizeof(nodes[0]), cmp_os_index);
  for (int i = 0; i < n; i++) WEFT_CHECK(cpu_elem(h, nodes[i]));
  return ncclSuccess;
}

/* NCCL's link_speed/link_width text. On this machine sysfs has both (as the sysfs path reads them);
 * hwloc itself keeps only GB/s, so for files the generation and width that give it are found. */
static void link_text(struct hw* h, const struct hwloc_pcidev_attr_s* p, const char* busid, char* speed,
                      char* width) {
  speed[0] = width[0] = 0;
  if (h->t->this_machine) {
    char path[128];
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/max_link_speed", busid);
    weft_read_line(path, speed, 64);
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/max_link_width", busid);
    weft_read_line(path, width, 16);
    if (speed[0] || width[0]) return;
  }
  /* The same GB/s comes from several pairs (Gen4 x8 = Gen3 x16); the model only needs the product,
   * so the widest link is named, as GPUs and NICs mostly are x16. */
  static const double gts[] = {2.5, 5, 8, 16, 32, 64};
  static const int widths[] = {16, 8, 4, 2, 1, 32};
  for (int k = 0; k < 6 && p->linkspeed > 0; k++)
    for (int g = 0; g < 6; g++) {
      int w = widths[k];
      double enc = gts[g] < 8 ? 0.8 : 128.0 / 130.0, gbs = gts[g] * w * enc / 8;
      if (gbs > p->linkspeed * 0.97 && gbs < p->linkspeed * 1.03) {
        snprintf(speed, 64, "%.1f GT/s PCIe", gts[g]);
        snprintf(width, 16, "%d", w);
        return;
      }
    }
}

static ncclResult_t pci_attrs(struct hw* h, struct weft_xml_node* x, hwloc_obj_t o, const char* busid) {
  const struct hwloc_pcidev_attr_s* p = pci_attr(o);
  char speed[64], width[16];
  const struct {
    const char* name;
    unsigned value, digits;
  } ids[] = {{"class", (unsigned)p->class_id << 8, 6}, /* hwloc drops the programming interface */
             {"vendor", p->vendor_id, 4},
             {"device", p->device_id, 4},
             {"subsystem_vendor", p->subvendor_id, 4},
             {"subsystem_device", p->subdevice_id, 4}};
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) { /* as sysfs writes them */
    char v[16];
    snprintf(v, sizeof(v), "0x%0*x", (int)ids[i].digits, ids[i].value);
    WEFT_CHECK(weft_xml_set(x, ids[i].name, v));
  }
  link_text(h, p, busid, speed, width);
  if (speed[0]) WEFT_CHECK(weft_xml_set(x, "link_speed", speed));
  if (width[0]) WEFT_CHECK(weft_xml_set(x, "link_width", width));
  return ncclSuccess;
}

static struct weft_xml_node* cpu_of(struct hw* h, hwloc_obj_t dev) {
  hwloc_obj_t at = weft_hwloc_cpu_parent(dev);
  int numa = at ? weft_hwloc_bitmap_next(h->t, at->nodeset, -1) : -1;
  struct weft_xml_node* first = NULL;
  for (int i = 0; i < h->sys->nchildren; i++) {
    struct weft_xml_node* c = h->sys->children[i];
    if (strcmp(c->name, "cpu") != 0) continue;
    if (first == NULL) first = c;
    if (weft_xml_get_int(c, "numaid", -1) == numa) return c;
  }
  return first;
}

static struct weft_xml_node* pci_child(struct weft_xml_node* parent, const char* busid) {
  for (int c = 0; c < parent->nchildren; c++) {
    const char* b = weft_xml_get(parent->children[c], "busid");
    if (strcmp(parent->children[c]->name, "pci") == 0 && b && strcmp(b, busid) == 0)
      return parent->children[c];
  }
  return NULL;
}

/* The <pci> of dev under its NUMA node's <cpu>, with one <pci> per PCI bridge above it (root
 * ports, switch ports); host bridges have no bus id of their own and are left out, as in sysfs. */
static ncclResult_t pci_chain(struct hw* h, hwloc_obj_t dev, struct weft_xml_node** out) {
  hwloc_obj_t chain[64];
  int n = 0;
  *out = NULL;
  for (hwloc_obj_t o = dev; o && o->cpuset == NULL && n < 64; o = o->parent)
    if (pci_attr(o)) chain[n++] = o;
  struct weft_xml_node* parent = cpu_of(h, dev);
  for (int i = n - 1; i >= 0 && parent; i--) {
    char busid[16];
    busid_text(pci_attr(chain[i]), busid, sizeof(busid));
    struct weft_xml_node* x = pci_child(parent, busid);
    if (x == NULL) {
      if ((x = weft_xml_add_child(parent, "pci")) == NULL) return ncclSystemError;
      WEFT_CHECK(weft_xml_set(x, "busid", busid));
      WEFT_CHECK(pci_attrs(h, x, chain[i], busid));
    }
    parent = x;
  }
  *out = parent;
  return ncclSuccess;
}

static hwloc_obj_t pci_by_busid(struct hw* h, const char* busid) {
  collect(h, HWLOC_OBJ_PCI_DEVICE);
  for (int i = 0; i < h->nobjs; i++) {
    char b[16];
    busid_text(&h->objs[i]->attr->pcidev, b, sizeof(b));
    if (strcmp(b, busid) == 0) return h->objs[i];
  }
  return NULL;
}

static long class_of(const char* busid, void* arg) {
  hwloc_obj_t o = pci_by_busid(arg, busid);
  return o ? (long)o->attr->pcidev.class_id << 8 : 0x068000;
}

static ncclResult_t add_gpu(struct hw* h, hwloc_obj_t dev, const struct weft_nvml_gpu* nv) {
  struct weft_xml_node* pci;
  WEFT_CHECK(pci_chain(h, dev, &pci));
  return pci ? weft_detect_gpu_elem(pci, h->ngpu++, nv, class_of, h) : ncclSuccess;
}

static int cmp_busid(const void* a, const void* b) {
  char x[16], y[16];
  busid_text(&(*(const hwloc_obj_t*)a)->attr->pcidev, x, sizeof(x));
  busid_text(&(*(const hwloc_obj_t*)b)->attr->pcidev, y, sizeof(y));
  return strcmp(x, y);
}

static int cmp_name(const void* a, const void* b) {
  return strverscmp((*(const hwloc_obj_t*)a)->name, (*(const hwloc_obj_t*)b)->name);
}

/* NVML's GPUs when it reports any (this machine only), else every NVIDIA display device. */
static ncclResult_t add_gpus(struct hw* h) {
  h->nnv = h->t->this_machine ? weft_topo_nvml_gpus(h->nv, WEFT_TOPO_CAP_GPU) : 0;
  for (int i = 0; i < h->nnv; i++) {
    hwloc_obj_t dev = pci_by_busid(h, h->nv[i].busid);
    if (dev == NULL)
      WEFT_INFO(WEFT_GRAPH, "hwloc: NVML's GPU %s is not on hwloc's PCI bus; left out", h->nv[i].busid);
    else
      WEFT_CHECK(add_gpu(h, dev, &h->nv[i]));
  }
  if (h->nnv > 0) return ncclSuccess;
  collect(h, HWLOC_OBJ_PCI_DEVICE);
  hwloc_obj_t gpus[WEFT_TOPO_CAP_GPU];
  int n = 0;
  for (int i = 0; i < h->nobjs && n < WEFT_TOPO_CAP_GPU; i++) {
    const struct hwloc_pcidev_attr_s* p = &h->objs[i]->attr->pcidev;
    if (p->vendor_id == 0x10de && (p->class_id >> 8) == 0x03) gpus[n++] = h->objs[i];
  }
  qsort(gpus, (size_t)n, sizeof(gpus[0]), cmp_busid); /* bus id order, as the sysfs path */
  for (int i = 0; i < n; i++) WEFT_CHECK(add_gpu(h, gpus[i], NULL));
  return ncclSuccess;
}

/* One <net> for the OS device osdev (RDMA when ib) under the <nic> of its PCI device. */
static ncclResult_t add_net(struct hw* h, hwloc_obj_t osdev, int ib) {
  hwloc_obj_t dev = osdev->parent;
  if (dev == NULL || dev->type != HWLOC_OBJ_PCI_DEVICE || osdev->name == NULL) return ncclSuccess;
  struct weft_xml_node *pci, *nic = NULL;
  WEFT_CHECK(pci_chain(h, dev, &pci));
  if (pci == NULL) return ncclSuccess;
  for (int i = 0; i < pci->nchildren && !nic; i++)
    if (strcmp(pci->children[i]->name, "nic") == 0) nic = pci->children[i];
  if (nic == NULL && (nic = weft_xml_add_child(pci, "nic")) == NULL) return ncclSystemError;
  long speed = h->t->this_machine ? weft_detect_net_speed(osdev->name, ib) : 0;
  return weft_detect_net_elem(nic, osdev->name, h->nnet++, speed, ib);
}

static ncclResult_t add_nets(struct hw* h) {
  static const int kinds[2] = {HWLOC_OBJ_OSDEV_OPENFABRICS, HWLOC_OBJ_OSDEV_NETWORK};
  hwloc_obj_t* devs = malloc(sizeof(hwloc_obj_t) * MAX_OBJS);
  if (devs == NULL) return ncclSystemError;
  collect(h, HWLOC_OBJ_OS_DEVICE);
  int n = 0;
  for (int i = 0; i < h->nobjs; i++)
    if (h->objs[i]->name) devs[n++] = h->objs[i];
  qsort(devs, (size_t)n, sizeof(devs[0]), cmp_name); /* natural name order, as the sysfs path */
  ncclResult_t res = ncclSuccess;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < n && res == ncclSuccess; i++)
      if ((int)devs[i]->attr->osdev.type == kinds[k]) res = add_net(h, devs[i], k == 0);
  free(devs);
  return res;
}

ncclResult_t weft_detect_hwloc_xml(int source, const char* arg, struct weft_xml_node* sys, char* what,
                                   size_t what_len) {
  struct hw* h = calloc(1, sizeof(*h));
  if (h == NULL) return ncclSystemError;
  ncclResult_t res = weft_hwloc_open(source, arg, &h->t);
  if (res == ncclSuccess) {
    h->sys = sys;
    snprintf(what, what_len, "%s", h->t->what);
    res = add_cpus(h);
    if (res == ncclSuccess) res = add_nets(h);
    if (res == ncclSuccess) res = add_gpus(h);
    if (res == ncclSystemError) WEFT_WARN("hwloc detection: out of memory building the XML tree");
    if (res == ncclSystemError) res = ncclInternalError; /* not "hwloc missing": do not fall back */
  }
  weft_hwloc_close(h->t);
  free(h);
  return res;
}

#else

ncclResult_t weft_detect_hwloc_xml(int source, const char* arg, struct weft_xml_node* sys, char* what,
                                   size_t what_len) {
  struct weft_hwloc_topo* t;
  (void)sys;
  snprintf(what, what_len, "none");
  return weft_hwloc_open(source, arg, &t); /* says why, returns the error */
}

#endif

struct hwloc_fill {
  int source;
  const char* arg;
};

static ncclResult_t fill(struct weft_xml_node* sys, void* p) {
  struct hwloc_fill* f = p;
  char what[300];
  ncclResult_t res = weft_detect_hwloc_xml(f->source, f->arg, sys, what, sizeof(what));
  if (res == ncclSuccess) WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "Topology detection: hwloc (%s)", what);
  return res;
}

ncclResult_t weft_topo_detect_hwloc(int source, const char* arg, struct weft_topo_system** out) {
  if (source != WEFT_HWLOC_XML && source != WEFT_HWLOC_SYNTHETIC) {
    WEFT_WARN("hwloc detection: source %d is neither an XML file (1) nor a synthetic description (2)",
              source);
    *out = NULL;
    return ncclInvalidArgument;
  }
  struct hwloc_fill f = {source, arg};
  return weft_detect_finish(fill, &f, out);
}
