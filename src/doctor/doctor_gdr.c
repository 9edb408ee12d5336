/* GPUDirect RDMA: whether a NIC here can reach the GPUs' memory. Without it a GPU job's network
 * steps are staged through host memory, and NCCL and Weft both fall back to that without an
 * error: the job only runs slower. A NIC reaches GPU memory through the nvidia-peermem module, or
 * through a DMA-BUF of it, which NVIDIA's open GPU kernel modules export on Linux 5.12 and later. */
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"
#include "transport/net_ib.h"
#include "util/param.h"

/* The running kernel is at least major.minor (/proc/sys/kernel/osrelease). */
static int kernel_at_least(int major, int minor, char* release, size_t size) {
  int ma = 0, mi = 0;
  if (weft_doctor_read_line("/proc/sys/kernel/osrelease", release, size) != 0) {
    snprintf(release, size, "unknown");
    return 0;
  }
  if (sscanf(release, "%d.%d", &ma, &mi) != 2) return 0;
  return ma > major || (ma == major && mi >= minor);
}

/* NVIDIA's driver says which kernel module it is in /proc/driver/nvidia/version. */
static int open_gpu_modules(void) {
  char line[256];
  return weft_doctor_read_line("/proc/driver/nvidia/version", line, sizeof(line)) == 0 &&
         strstr(line, "Open Kernel Module") != NULL;
}

void weft_doctor_check_gdr(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  char first[64] = "", release[128];
  int nics = weft_doctor_rdma_devices(first, sizeof(first)), gpus = weft_doctor_count_gpus();
  if (nics == 0 || gpus == 0) {
    weft_doctor_add(r, "gdr", WEFT_DOCTOR_OK, NULL,
                    "%d RDMA device(s) and %d GPU(s): GPUDirect RDMA does not apply", nics, gpus);
    return;
  }
  const char* level = weft_doctor_env_get(o, "NCCL_NET_GDR_LEVEL");
  if (level != NULL && (strcmp(level, "LOC") == 0 || strcmp(level, "0") == 0)) {
    weft_doctor_add(r, "gdr", WEFT_DOCTOR_INFO, "unset NCCL_NET_GDR_LEVEL (default PXB)",
                    "NCCL_NET_GDR_LEVEL=%s turns GPUDirect RDMA off: %d GPU(s) send and receive through host "
                    "memory",
                    level, gpus);
    return;
  }
  const char* root = weft_param_str("WEFT_DOCTOR_ROOT");
  int peermem = weft_ib_peermem_loaded(root ? root : "");
  int open_modules = open_gpu_modules(), new_kernel = kernel_at_least(5, 12, release, sizeof(release));
  if (peermem || (open_modules && new_kernel)) {
    weft_doctor_add(
        r, "gdr", WEFT_DOCTOR_OK, NULL, "%d RDMA device(s) (%s) can reach GPU memory:%s%s", nics, first,
        peermem ? " nvidia-peermem is loaded" : "",
        open_modules && new_kernel ? " DMA-BUF (open GPU kernel modules, Linux 5.12 or later)" : "");
    return;
  }
  weft_doctor_add(r, "gdr", WEFT_DOCTOR_WARN,
                  "modprobe nvidia-peermem (shipped with the NVIDIA driver), or use NVIDIA's open GPU kernel "
                  "modules on Linux 5.12 or later (DMA-BUF); then NCCL_DEBUG=INFO shows \"GPUDirect RDMA\" "
                  "per NIC",
                  "%d RDMA device(s) (%s) and %d GPU(s), but no way for the NICs to reach GPU memory: "
                  "nvidia-peermem is not loaded and DMA-BUF needs the open GPU kernel modules (%s) on Linux "
                  "5.12 or later (running %s): every network step is staged through host memory",
                  nics, first, gpus, open_modules ? "loaded" : "not loaded", release);
}
