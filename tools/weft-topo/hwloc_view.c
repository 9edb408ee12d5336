/* weft-topo: what hwloc saw (--hwloc FILE, --detect with hwloc): packages, NUMA nodes with their
 * allowed CPUs and memory, and the PCI branches that lead to GPUs and NICs, each device with its
 * link rate and OS devices, so it can be read beside the model Weft made of it. */
#include <stdio.h>
#include <string.h>

#include "report.h"
#include "util/hwloc.h"

#if WEFT_HWLOC_HEADERS

struct count_arg {
  int type, n;
};

static int count_one(hwloc_obj_t o, void* p) {
  struct count_arg* a = p;
  a->n += (int)o->type == a->type;
  return 0;
}

static int count(const struct weft_hwloc_topo* t, int type) {
  struct count_arg a = {type, 0};
  weft_hwloc_walk(t->root, count_one, &a);
  return a.n;
}

static int is_gpu(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_PCI_DEVICE && o->attr->pcidev.vendor_id == 0x10de &&
         (o->attr->pcidev.class_id >> 8) == 0x03;
}

static int is_net(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_OS_DEVICE && (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
                                            o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS);
}

/* 1 when obj or an I/O object below it becomes a node of the model (GPU or NIC). */
static int leads_somewhere(hwloc_obj_t o) {
  if (is_gpu(o) || is_net(o)) return 1;
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
    if (leads_somewhere(c)) return 1;
  return 0;
}

static void print_io(const struct weft_hwloc_topo* t, hwloc_obj_t o, int depth, FILE* f) {
  if (!leads_somewhere(o)) return;
  const struct hwloc_pcidev_attr_s* p = NULL;
  if (o->type == HWLOC_OBJ_PCI_DEVICE) p = &o->attr->pcidev;
  if (o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
    p = &o->attr->bridge.upstream.pci;
  if (p) {
    fprintf(f, "%*s%04x:%02x:%02x.%x %s %04x:%04x class %04x, %.1f GB/s%s", 4 + 2 * depth, "",
            (unsigned)p->domain, p->bus, p->dev, p->func, o->type == HWLOC_OBJ_BRIDGE ? "bridge" : "device",
            p->vendor_id, p->device_id, p->class_id, p->linkspeed, is_gpu(o) ? " (GPU)" : "");
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
      if (is_net(c))
        fprintf(f, " %s (%s)", c->name ? c->name : "?",
                c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ? "RDMA" : "netdev");
    fprintf(f, "\n");
    depth++;
  }
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) print_io(t, c, depth, f);
}

/* I/O hangs from objects with cpusets; say which NUMA nodes each branch is near. */
static int print_io_roots(hwloc_obj_t o, void* p) {
  const struct weft_hwloc_topo* t = ((void**)p)[0];
  FILE* f = ((void**)p)[1];
  if (o->cpuset == NULL || o->io_first_child == NULL) return 0;
  int any = 0;
  for (hwloc_obj_t c = o->io_first_child; c && !any; c = c->next_sibling) any = leads_somewhere(c);
  if (!any) return 0;
  char nodes[256] = "";
  weft_hwloc_list_text(t, o->nodeset, nodes, sizeof(nodes));
  fprintf(f, "  PCI near NUMA node(s) %s:\n", nodes);
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) print_io(t, c, 0, f);
  return 0;
}

static int print_numa(hwloc_obj_t o, void* p) {
  const struct weft_hwloc_topo* t = ((void**)p)[0];
  FILE* f = ((void**)p)[1];
  char cpus[512];
  if (o->type == HWLOC_OBJ_PACKAGE) {
    const char *v = weft_hwloc_info(o, "CPUVendor"), *fam = weft_hwloc_info(o, "CPUFamilyNumber"),
               *mod = weft_hwloc_info(o, "CPUModelNumber");
    fprintf(f, "  Package %u: %s family %s model %s\n", o->os_index, v ? v : "?", fam ? fam : "?",
            mod ? mod : "?");
  }
  if (o->type != HWLOC_OBJ_NUMANODE) return 0;
  weft_hwloc_list_text(t, o->cpuset, cpus, sizeof(cpus));
  fprintf(f, "  NUMA node %u: CPUs %s, %.1f GiB\n", o->os_index, cpus[0] ? cpus : "none allowed",
          (double)o->attr->numanode.local_memory / (1u << 30));
  return 0;
}

int hwloc_view_print(int source, const char* arg, FILE* f) {
  struct weft_hwloc_topo* t;
  if (weft_hwloc_open(source, arg, &t) != ncclSuccess) return -1;
  char allowed[512], all[512];
  weft_hwloc_list_text(t, t->root->cpuset, allowed, sizeof(allowed));
  weft_hwloc_list_text(t, t->root->complete_cpuset, all, sizeof(all));
  fprintf(f, "hwloc: %s: %d packages, %d NUMA nodes, %d cores, %d PUs; CPUs allowed %s of %s\n", t->what,
          count(t, HWLOC_OBJ_PACKAGE), count(t, HWLOC_OBJ_NUMANODE), count(t, HWLOC_OBJ_CORE),
          count(t, HWLOC_OBJ_PU), allowed, all);
  void* args[2] = {t, f};
  weft_hwloc_walk(t->root, print_numa, args);
  weft_hwloc_walk(t->root, print_io_roots, args);
  weft_hwloc_close(t);
  return 0;
}

#else

int hwloc_view_print(int source, const char* arg, FILE* f) {
  (void)source, (void)arg, (void)f;
  return -1;
}

#endif
