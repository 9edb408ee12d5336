/* CUDA availability for backend selection. The runtime is linked statically and loads the
 * driver itself at first use, so a machine without driver or GPU only sees an error code. */
#include "util/cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "util/param.h"
#if WEFT_CUDA
#include "util/cuda_check.h"
#endif

#if WEFT_CUDA
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int usable;
static const char* reason = "not probed";
static char reason_buf[160];

static void probe(void) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    snprintf(reason_buf, sizeof(reason_buf), "cudaGetDeviceCount: %s", cudaGetErrorString(err));
    reason = reason_buf;
    cudaGetLastError(); /* not sticky: clear it so later calls do not see it */
    return;
  }
  if (n <= 0) {
    reason = "no CUDA device";
    return;
  }
  usable = 1;
  reason = "usable";
}

int weft_cuda_usable(void) {
  pthread_once(&probe_once, probe);
  return usable;
}

const char* weft_cuda_unusable_reason(void) {
  pthread_once(&probe_once, probe);
  return reason;
}

void weft_cuda_device_desc(int dev, char* buf, size_t len) {
  struct cudaDeviceProp p;
  if (!weft_cuda_usable() || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    cudaGetLastError();
    snprintf(buf, len, "?");
    return;
  }
  snprintf(buf, len, "%s, busId %04x:%02x:%02x.0", p.name, p.pciDomainID, p.pciBusID, p.pciDeviceID);
}

int64_t weft_cuda_device_busid(int dev) {
  struct cudaDeviceProp p;
  if (!weft_cuda_usable() || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  /* domain:bus:device.0 as one number, the way weft_topo_busid_parse reads "0000:18:00.0" */
  return ((int64_t)p.pciDomainID << 20) | ((int64_t)p.pciBusID << 12) | ((int64_t)p.pciDeviceID << 4);
}

int weft_cuda_device_by_busid(int64_t busid) {
  if (busid < 0 || !weft_cuda_usable()) return -1;
  char id[32];
  snprintf(id, sizeof(id), "%04x:%02x:%02x.0", (unsigned)(busid >> 20), (unsigned)((busid >> 12) & 0xff),
           (unsigned)((busid >> 4) & 0xff));
  int dev = -1;
  if (cudaDeviceGetByPCIBusId(&dev, id) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

int weft_cuda_current_device(void) {
  int dev = 0;
  if (!weft_cuda_usable() || cudaGetDevice(&dev) != cudaSuccess) return 0;
  return dev;
}
#else
int weft_cuda_usable(void) { return 0; }
const char* weft_cuda_unusable_reason(void) { return "this build has no CUDA backend (built with CUDA=0)"; }
int weft_cuda_current_device(void) { return 0; }
void weft_cuda_device_desc(int dev, char* buf, size_t len) {
  (void)dev;
  snprintf(buf, len, "?");
}
int64_t weft_cuda_device_busid(int dev) {
  (void)dev;
  return -1;
}
int weft_cuda_device_by_busid(int64_t busid) {
  (void)busid;
  return -1;
}
#endif

int weft_cuda_selected(void) {
  const char* want = weft_param_str("WEFT_BACKEND");
  if (want != NULL && strcmp(want, "cuda") == 0) return 1;
  return (want == NULL || strcmp(want, "auto") == 0) && weft_cuda_usable();
}
