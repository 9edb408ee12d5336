/* GPUs and NVLinks through NVML, loaded with dlopen so that machines without the NVIDIA driver
 * (and builds without CUDA) work unchanged: absent NVML means "no NVML information". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/detect.h"
#include "util/log.h"

/* The few NVML types used, as the public NVML API defines them. */
typedef void* nvml_device;
struct nvml_pci_info {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
  char reserve[64]; /* slack in case a newer library writes more */
};

struct nvml_fns {
  int (*init)(void);
  int (*shutdown)(void);
  int (*count)(unsigned int*);
  int (*handle)(unsigned int, nvml_device*);
  int (*pci)(nvml_device, struct nvml_pci_info*);
  int (*cc)(nvml_device, int*, int*);
  int (*link_state)(nvml_device, unsigned int, int*);
  int (*link_remote)(nvml_device, unsigned int, struct nvml_pci_info*);
  int (*p2p_status)(nvml_device, nvml_device, int, int*);
};

#define NVML_P2P_CAPS_READ 0
#define NVML_P2P_STATUS_OK 0

static void* load(struct nvml_fns* f) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return NULL;
  *(void**)&f->init = dlsym(h, "nvmlInit_v2");
  *(void**)&f->shutdown = dlsym(h, "nvmlShutdown");
  *(void**)&f->count = dlsym(h, "nvmlDeviceGetCount_v2");
  *(void**)&f->handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  *(void**)&f->pci = dlsym(h, "nvmlDeviceGetPciInfo_v3");
  *(void**)&f->cc = dlsym(h, "nvmlDeviceGetCudaComputeCapability");
  *(void**)&f->link_state = dlsym(h, "nvmlDeviceGetNvLinkState");
  *(void**)&f->link_remote = dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  *(void**)&f->p2p_status = dlsym(h, "nvmlDeviceGetP2PStatus");
  if (!f->init || !f->shutdown || !f->count || !f->handle || !f->pci || !f->cc) {
    dlclose(h);
    return NULL;
  }
  return h;
}

/* NVML writes "00000000:18:00.0"; the XML uses "0000:18:00.0", lower case. */
static void short_busid(const char* in, char* out) {
  size_t n = strnlen(in, 31);
  const char* s = n > 12 ? in + n - 12 : in;
  size_t i = 0;
  for (; s[i] && i < 12; i++) out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] + 32 : s[i]);
  out[i] = 0;
}

static void add_link(struct weft_nvml_gpu* g, const char* target) {
  for (int i = 0; i < g->ntargets; i++)
    if (strcmp(g->targets[i].busid, target) == 0) {
      g->targets[i].count++;
      return;
    }
  if (g->ntargets >= WEFT_NVML_MAX_LINKS) return;
  snprintf(g->targets[g->ntargets].busid, sizeof(g->targets[0].busid), "%s", target);
  g->targets[g->ntargets++].count = 1;
}

static void links_of(struct nvml_fns* f, nvml_device d, struct weft_nvml_gpu* g) {
  if (!f->link_state || !f->link_remote) return;
  for (unsigned int l = 0; l < WEFT_NVML_MAX_LINKS; l++) {
    int active = 0;
    struct nvml_pci_info rp;
    memset(&rp, 0, sizeof(rp));
    if (f->link_state(d, l, &active) != 0 || !active) continue;
    if (f->link_remote(d, l, &rp) != 0) continue;
    char target[16];
    short_busid(rp.bus_id, target);
    add_link(g, target);
  }
}

/* What the driver says of PCIe P2P between each GPU and the others (GeForce boards: unsupported);
 * the model then stages their traffic in host memory, as NCCL's SHM transport does. */
static void p2p_of(struct nvml_fns* f, nvml_device* devs, struct weft_nvml_gpu* g, int n) {
  for (int i = 0; i < n; i++) {
    g[i].p2p = f->p2p_status ? 1 : -1;
    for (int j = 0; j < n && f->p2p_status; j++) {
      int st = NVML_P2P_STATUS_OK;
      if (i != j && f->p2p_status(devs[i], devs[j], NVML_P2P_CAPS_READ, &st) == 0 && st != NVML_P2P_STATUS_OK)
        g[i].p2p = 0;
    }
  }
}

int weft_topo_nvml_gpus(struct weft_nvml_gpu* out, int max) {
  struct nvml_fns f;
  memset(&f, 0, sizeof(f));
  void* h = load(&f);
  if (h == NULL) return 0;
  unsigned int n = 0;
  int got = 0;
  nvml_device* devs = calloc((size_t)max, sizeof(*devs));
  if (devs && f.init() == 0) {
    if (f.count(&n) != 0) n = 0;
    for (unsigned int i = 0; i < n && got < max; i++) {
      nvml_device d;
      struct nvml_pci_info pi;
      int major = 0, minor = 0;
      memset(&pi, 0, sizeof(pi));
      if (f.handle(i, &d) != 0 || f.pci(d, &pi) != 0) continue;
      devs[got] = d;
      struct weft_nvml_gpu* g = &out[got++];
      memset(g, 0, sizeof(*g));
      short_busid(pi.bus_id, g->busid);
      if (f.cc(d, &major, &minor) == 0) g->sm = major * 10 + minor;
      links_of(&f, d, g);
    }
    p2p_of(&f, devs, out, got);
    f.shutdown();
  }
  free(devs);
  dlclose(h);
  WEFT_INFO(WEFT_GRAPH, "NVML: %d GPU(s)", got);
  return got;
}
