/* Detection helpers shared inside graph/: NVML through dlopen, the parts of the detected XML that
 * the sysfs path (detect.c) and the hwloc path (detect_hwloc.c) build alike. */
#ifndef WEFT_GRAPH_DETECT_H
#define WEFT_GRAPH_DETECT_H

#include "graph/graph.h"
#include "graph/xml.h"

#define WEFT_NVML_MAX_LINKS 18

struct weft_nvml_gpu {
  char busid[16]; /* "0000:18:00.0" */
  int sm;         /* compute capability x 10, 0 unknown */
  int p2p;        /* 1: PCIe P2P reads with every other GPU; 0: not with some; -1 unknown */
  int ntargets;
  struct {
    char busid[16];
    int count;
  } targets[WEFT_NVML_MAX_LINKS]; /* active NVLinks aggregated per remote bus id */
};

/* Fills out[] with the GPUs NVML reports; 0 when NVML is absent or reports none. */
int weft_topo_nvml_gpus(struct weft_nvml_gpu* out, int max);

/* detect.c */
const char* weft_detect_arch(void);
ncclResult_t weft_detect_cpu_attrs(const char* root, struct weft_xml_node* cpu);
/* Mb/s of this machine's interface (InfiniBand device when ib, else netdev); <= 0 unknown. */
long weft_detect_net_speed(const char* name, int ib);
ncclResult_t weft_detect_net_elem(struct weft_xml_node* nic, const char* name, int dev, long speed, int gdr);
/* <gpu dev rank gdr [sm]> under pci, with NVML's NVLinks; class_of gives a target's PCI class. */
ncclResult_t weft_detect_gpu_elem(struct weft_xml_node* pci, int dev, const struct weft_nvml_gpu* nv,
                                  long (*class_of)(const char* busid, void* arg), void* arg);
ncclResult_t weft_detect_host_hash(struct weft_xml_node* sys);
/* Fills the <system> tree from this machine (hwloc or sysfs, WEFT_TOPO_DETECT) and notes which
 * was used for weft_topo_detect_method (set by hand for a tree detected earlier). */
ncclResult_t weft_detect_machine_xml(struct weft_xml_node* xml);
void weft_detect_set_method(const char* method);
/* A new system from the <system> tree fill() builds: host hash, then the model. */
ncclResult_t weft_detect_finish(ncclResult_t (*fill)(struct weft_xml_node*, void*), void* arg,
                                struct weft_topo_system** out);

/* detect_hwloc.c: fills the <system> tree from an hwloc topology (source: enum weft_hwloc_source;
 * arg: the XML file or synthetic text). what receives a description of the source. ncclSystemError
 * means "hwloc not usable" (callers may fall back); other errors are the input's. */
ncclResult_t weft_detect_hwloc_xml(int source, const char* arg, struct weft_xml_node* sys, char* what,
                                   size_t what_len);

#endif
