/* PCIe settings that break GPU peer-to-peer: an IOMMU translating DMA (without iommu=pt), and ACS
 * on PCI bridges redirecting peer requests up to the root complex, where they are slow or dropped
 * (NVIDIA NCCL's P2P transport hangs or fails). Both are read from sysfs under WEFT_DOCTOR_ROOT. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"
#include "util/param.h"

#define PCI_EXT_CAP_START 0x100
#define PCI_EXT_CAP_ACS 0x000d
#define ACS_CTRL_OFFSET 6
#define ACS_P2P_REQ_REDIRECT (1u << 2)
#define ACS_P2P_CPL_REDIRECT (1u << 3)

static int iommu_groups(void) {
  char path[512];
  DIR* d = opendir(weft_doctor_path(path, sizeof(path), "/sys/kernel/iommu_groups"));
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static void check_iommu(int gpus, struct weft_doctor_report* r) {
  int groups = iommu_groups();
  char cmdline[2048] = "";
  weft_doctor_read_line("/proc/cmdline", cmdline, sizeof(cmdline));
  int passthrough = strstr(cmdline, "iommu=pt") != NULL || strstr(cmdline, "iommu.passthrough=1") != NULL;
  if (groups == 0 || passthrough) {
    weft_doctor_add(r, "pcie.iommu", WEFT_DOCTOR_OK, NULL, "%s",
                    groups == 0 ? "no IOMMU translates DMA" : "the IOMMU is in passthrough mode (iommu=pt)");
    return;
  }
  weft_doctor_add(
      r, "pcie.iommu", gpus >= 2 ? WEFT_DOCTOR_WARN : WEFT_DOCTOR_INFO,
      "Boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt), or disable the IOMMU in "
      "the BIOS where nothing needs it (VFIO does)",
      "the IOMMU translates DMA (%d IOMMU groups, no iommu=pt on the kernel command line) and %d GPU(s) "
      "are present: PCIe peer-to-peer between GPUs is slow or fails",
      groups, gpus);
}

static uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* The ACS control word of a bridge's config space, -1 without an ACS capability, -2 when only the
 * first 256 bytes are readable (sysfs shows extended config space to root only). */
static int acs_ctrl(const char* dev) {
  char rel[512], path[1024];
  snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/config", dev);
  FILE* f = fopen(weft_doctor_path(path, sizeof(path), rel), "rb");
  if (f == NULL) return -2;
  uint8_t cfg[4096];
  size_t n = fread(cfg, 1, sizeof(cfg), f);
  fclose(f);
  if (n <= PCI_EXT_CAP_START) return -2;
  for (unsigned off = PCI_EXT_CAP_START, hops = 0; off && off + 8 <= n && hops < 64; hops++) {
    uint32_t hdr = le32(cfg + off);
    if (hdr == 0 || hdr == 0xffffffffu) break;
    if ((hdr & 0xffff) == PCI_EXT_CAP_ACS)
      return cfg[off + ACS_CTRL_OFFSET] | cfg[off + ACS_CTRL_OFFSET + 1] << 8;
    off = (hdr >> 20) & 0xffc;
  }
  return -1;
}

static int is_bridge(const char* dev) {
  char rel[512], cls[32];
  snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/class", dev);
  return weft_doctor_read_line(rel, cls, sizeof(cls)) == 0 && strncmp(cls, "0x0604", 6) == 0;
}

static void check_acs(int gpus, struct weft_doctor_report* r) {
  char dir[512];
  DIR* d = opendir(weft_doctor_path(dir, sizeof(dir), "/sys/bus/pci/devices"));
  if (d == NULL) return;
  int bridges = 0, unreadable = 0, redirecting = 0;
  char names[400] = "";
  size_t used = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' || !is_bridge(e->d_name)) continue;
    bridges++;
    int ctrl = acs_ctrl(e->d_name);
    if (ctrl == -2) unreadable++;
    if (ctrl < 0 || !(ctrl & (ACS_P2P_REQ_REDIRECT | ACS_P2P_CPL_REDIRECT))) continue;
    if (redirecting++ < 8 && used + 1 < sizeof(names))
      used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "", e->d_name);
  }
  closedir(d);
  int p2p_off = weft_param_int("NCCL_P2P_DISABLE") != 0;
  if (redirecting > 0) {
    weft_doctor_add(
        r, "pcie.acs", gpus >= 2 && !p2p_off ? WEFT_DOCTOR_BLOCK : WEFT_DOCTOR_INFO,
        "Disable ACS P2P redirect on those bridges (BIOS option, or per boot: setpci -s BDF "
        "ECAP_ACS+0x6.w=0000), unless VMs rely on it; or set NCCL_P2P_DISABLE=1 (slower)",
        "%d PCI bridge(s) redirect peer-to-peer requests (ACS control RR/CR set: %s) with %d GPU(s) "
        "present%s: GPU P2P through them fails or hangs",
        redirecting, names, gpus, p2p_off ? " but NCCL_P2P_DISABLE=1" : "");
  } else if (unreadable > 0 && gpus >= 2) {
    weft_doctor_add(r, "pcie.acs", WEFT_DOCTOR_INFO, "Run weft-doctor as root to read bridges' ACS settings",
                    "%d of %d PCI bridge(s) show no extended config space to this user", unreadable, bridges);
  } else {
    weft_doctor_add(r, "pcie.acs", WEFT_DOCTOR_OK, NULL,
                    "no PCI bridge redirects peer-to-peer (%d bridge(s))", bridges);
  }
}

void weft_doctor_check_pcie(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  (void)o;
  int gpus = weft_doctor_count_gpus();
  check_iommu(gpus, r);
  check_acs(gpus, r);
}
