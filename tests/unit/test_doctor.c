/* weft-doctor's checks against planted misconfigurations: a fake /proc and /sys tree under
 * WEFT_DOCTOR_ROOT (ptrace scope, memlock limit with an RDMA device, two GPUs behind a bridge
 * with ACS redirect, an IOMMU without passthrough, NUMA nodes), a job environment given as a list
 * (misspelt and unknown names, a GPU listed twice) and another rank's environment file; whether
 * the NICs can reach the GPUs' memory (GPUDirect RDMA). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "doctor/doctor.h"
#include "util/log.h"

static char root[256];

static void mkdirs(const char* path) {
  char tmp[512];
  snprintf(tmp, sizeof(tmp), "%s", path);
  for (char* p = tmp + 1; *p; p++)
    if (*p == '/') *p = 0, mkdir(tmp, 0755), *p = '/';
  mkdir(tmp, 0755);
}

/* Writes len bytes (len < 0: a string) to root + rel, making the folders on the way. */
static void plant(const char* rel, const void* data, long len) {
  char path[512];
  snprintf(path, sizeof(path), "%s%s", root, rel);
  char* slash = strrchr(path, '/');
  *slash = 0;
  mkdirs(path);
  *slash = '/';
  FILE* f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
  fwrite(data, 1, len < 0 ? strlen(data) : (size_t)len, f);
  fclose(f);
}

static void plant_pci(const char* bdf, const char* vendor, const char* cls, const char* node) {
  char rel[256];
  snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/vendor", bdf);
  plant(rel, vendor, -1);
  snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/class", bdf);
  plant(rel, cls, -1);
  snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/numa_node", bdf);
  plant(rel, node, -1);
}

/* A bridge's config space whose only extended capability is ACS with redirect bits set. */
static void plant_acs_bridge(const char* bdf, unsigned ctrl) {
  static unsigned char cfg[4096];
  memset(cfg, 0, sizeof(cfg));
  cfg[0x100] = 0x0d, cfg[0x102] = 0x01; /* ACS, version 1, no next capability */
  cfg[0x106] = ctrl & 0xff, cfg[0x107] = ctrl >> 8;
  plant_pci(bdf, "0x8086", "0x060400", "0");
  char rel[256];
  snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/config", bdf);
  plant(rel, cfg, sizeof(cfg));
}

static const struct weft_doctor_finding* find(const struct weft_doctor_report* r, const char* id, int nth) {
  for (int i = 0; i < r->count; i++)
    if (strcmp(r->items[i].id, id) == 0 && nth-- == 0) return &r->items[i];
  return NULL;
}

#define EXPECT_FINDING(r, id, sev, text)                                                       \
  do {                                                                                         \
    const struct weft_doctor_finding* f_ = find(r, id, 0);                                     \
    EXPECT_MSG(f_ && f_->severity == (sev) && strstr(f_->seen, text), "%s: %s (%s)", id,       \
               f_ ? f_->seen : "missing", f_ ? weft_doctor_severity_name(f_->severity) : "-"); \
    if (f_ && (sev) > WEFT_DOCTOR_OK) EXPECT_MSG(f_->fix[0] != 0, "%s has no fix", id);        \
  } while (0)

static void test_proc_files(void) {
  struct weft_doctor_opts o = {0};
  struct weft_doctor_report r = {0};
  plant("/proc/sys/kernel/yama/ptrace_scope", "2\n", -1);
  plant("/proc/self/limits", "Limit  Soft Limit  Hard Limit  Units\nMax locked memory  65536  65536  bytes\n",
        -1);
  plant("/sys/class/infiniband/mlx5_0/ports", "", -1);
  weft_doctor_check_ptrace(&o, &r);
  weft_doctor_check_memlock(&o, &r);
  EXPECT_FINDING(&r, "ptrace.scope", WEFT_DOCTOR_WARN, "ptrace_scope = 2");
  EXPECT_FINDING(&r, "memlock", WEFT_DOCTOR_WARN, "limited to 0.1 MiB");
  EXPECT_FINDING(&r, "memlock", WEFT_DOCTOR_WARN, "mlx5_0");
  /* The fake root has no /proc/self/fd: Weft's ranks could not map each other's segments. */
  EXPECT_FINDING(&r, "ptrace.procfd", WEFT_DOCTOR_BLOCK, "cannot be opened");
  weft_doctor_report_free(&r);
  plant("/proc/sys/kernel/yama/ptrace_scope", "0\n", -1);
  plant("/proc/self/limits", "Max locked memory  unlimited  unlimited  bytes\n", -1);
  weft_doctor_check_ptrace(&o, &r);
  weft_doctor_check_memlock(&o, &r);
  EXPECT_FINDING(&r, "ptrace.scope", WEFT_DOCTOR_OK, "= 0");
  EXPECT_FINDING(&r, "memlock", WEFT_DOCTOR_OK, "unlimited");
  weft_doctor_report_free(&r);
}

static void test_pcie_gpus_numa(void) {
  plant_pci("0000:01:00.0", "0x10de", "0x030200", "1");
  plant_pci("0000:02:00.0", "0x10de", "0x030200", "1");
  plant_acs_bridge("0000:00:01.0", 0x001d);
  plant("/sys/kernel/iommu_groups/0/type", "DMA\n", -1);
  plant("/proc/cmdline", "BOOT_IMAGE=/vmlinuz intel_iommu=on\n", -1);
  plant("/sys/devices/system/node/node0/cpulist", "0-1023\n", -1);
  plant("/sys/devices/system/node/node1/cpulist", "2048-2049\n", -1);
  EXPECT_EQ_INT(weft_doctor_count_gpus(), 2);
  const char* env[] = {"CUDA_VISIBLE_DEVICES=0,1,0", NULL};
  struct weft_doctor_opts o = {.env = env};
  struct weft_doctor_report r = {0};
  weft_doctor_check_pcie(&o, &r);
  weft_doctor_check_gpus(&o, &r);
  weft_doctor_check_numa(&o, &r);
  EXPECT_FINDING(&r, "pcie.acs", WEFT_DOCTOR_BLOCK, "0000:00:01.0");
  EXPECT_FINDING(&r, "pcie.iommu", WEFT_DOCTOR_WARN, "no iommu=pt");
  EXPECT_FINDING(&r, "gpus.duplicate", WEFT_DOCTOR_WARN, "names GPU 0 twice");
  /* This process runs on CPUs of node 0 only (the fake node 1 has CPUs no machine has). */
  EXPECT_FINDING(&r, "numa.placement", WEFT_DOCTOR_WARN, "GPU 0000:01:00.0 node 1");
  weft_doctor_report_free(&r);
  /* Cleared settings: ACS control 0, iommu=pt, each GPU once but 3 ranks on 2 GPUs. */
  plant_acs_bridge("0000:00:01.0", 0);
  plant("/proc/cmdline", "intel_iommu=on iommu=pt\n", -1);
  const char* env2[] = {"CUDA_VISIBLE_DEVICES=0,1", NULL};
  struct weft_doctor_opts o2 = {.env = env2, .ranks = 3};
  weft_doctor_check_pcie(&o2, &r);
  weft_doctor_check_gpus(&o2, &r);
  EXPECT_FINDING(&r, "pcie.acs", WEFT_DOCTOR_OK, "no PCI bridge");
  EXPECT_FINDING(&r, "pcie.iommu", WEFT_DOCTOR_OK, "passthrough");
  EXPECT_FINDING(&r, "gpus.duplicate", WEFT_DOCTOR_WARN, "3 local rank(s) (--ranks) but 2 visible");
  weft_doctor_report_free(&r);
  /* Without --ranks, a launcher's variable says how many ranks share the host. */
  const char* env3[] = {"CUDA_VISIBLE_DEVICES=0,1", "LOCAL_WORLD_SIZE=5", NULL};
  struct weft_doctor_opts o3 = {.env = env3};
  weft_doctor_check_gpus(&o3, &r);
  weft_doctor_check_shm(&o3, &r);
  EXPECT_FINDING(&r, "gpus.duplicate", WEFT_DOCTOR_WARN, "5 local rank(s) (LOCAL_WORLD_SIZE) but 2 visible");
  const struct weft_doctor_finding* shm = find(&r, "shm.size", 0);
  EXPECT_MSG(shm && strstr(shm->seen, "5 local rank(s) (LOCAL_WORLD_SIZE)"), "%s",
             shm ? shm->seen : "missing");
  weft_doctor_report_free(&r);
}

static void unplant(const char* rel) {
  char path[512];
  snprintf(path, sizeof(path), "%s%s", root, rel);
  unlink(path);
}

/* GPUDirect RDMA with an RDMA device (test_proc_files) and GPUs (test_pcie_gpus_numa) planted:
 * none (the proprietary driver, no nvidia-peermem), then nvidia-peermem, then DMA-BUF (the open
 * modules on a new kernel, not on an old one), then turned off by NCCL_NET_GDR_LEVEL. */
/* One run of the gdr check on what is planted now; its finding must have sev and contain text. */
static void expect_gdr(const struct weft_doctor_opts* o, enum weft_doctor_severity sev, const char* text) {
  struct weft_doctor_report r = {0};
  weft_doctor_check_gdr(o, &r);
  EXPECT_FINDING(&r, "gdr", sev, text);
  weft_doctor_report_free(&r);
}

static void test_gdr(void) {
  struct weft_doctor_opts o = {0};
  plant("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05\n", -1);
  plant("/proc/sys/kernel/osrelease", "6.8.0-45-generic\n", -1);
  expect_gdr(&o, WEFT_DOCTOR_WARN, "no way for the NICs to reach GPU memory");
  plant("/sys/module/nvidia_peermem/version", "1.1\n", -1);
  expect_gdr(&o, WEFT_DOCTOR_OK, "nvidia-peermem is loaded");
  unplant("/sys/module/nvidia_peermem/version");
  plant("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15\n",
        -1);
  expect_gdr(&o, WEFT_DOCTOR_OK, "DMA-BUF");
  plant("/proc/sys/kernel/osrelease", "5.4.0-150-generic\n", -1);
  expect_gdr(&o, WEFT_DOCTOR_WARN, "running 5.4.0-150-generic");
  const char* env[] = {"NCCL_NET_GDR_LEVEL=LOC", NULL};
  o.env = env;
  expect_gdr(&o, WEFT_DOCTOR_INFO, "turns GPUDirect RDMA off");
}

static void test_suggest(void) {
  int known = 0;
  const char* s = weft_doctor_env_suggest("NCCL_SOCKET_IFNAM", &known);
  EXPECT_MSG(!known && s && strcmp(s, "NCCL_SOCKET_IFNAME") == 0, "%s", s ? s : "NULL");
  s = weft_doctor_env_suggest("NCCL_SOCKTE_IFNAME", &known); /* swapped letters */
  EXPECT_MSG(s && strcmp(s, "NCCL_SOCKET_IFNAME") == 0, "%s", s ? s : "NULL");
  s = weft_doctor_env_suggest("WEFT_SOCKET_IFNAME", &known); /* wrong prefix */
  EXPECT_MSG(s && strcmp(s, "NCCL_SOCKET_IFNAME") == 0, "%s", s ? s : "NULL");
  s = weft_doctor_env_suggest("NCCL_IB_HCAS", &known); /* close to a name only NVIDIA NCCL reads */
  EXPECT_MSG(s && strcmp(s, "NCCL_IB_HCA") == 0, "%s", s ? s : "NULL");
  s = weft_doctor_env_suggest("WEFT_TIMEOUTT", &known);
  EXPECT_MSG(s && strcmp(s, "WEFT_TIMEOUT") == 0, "%s", s ? s : "NULL");
  EXPECT(weft_doctor_env_suggest("NCCL_IB_HCA", &known) == NULL && known);
  EXPECT(weft_doctor_env_suggest("NCCL_SOCKET_IFNAME", &known) == NULL && known);
  EXPECT(weft_doctor_env_suggest("NCCL_SOMETHING_NEW", &known) == NULL && !known);
  EXPECT(weft_doctor_env_suggest("NCCL_NIC", &known) == NULL); /* short: distance 2 from NCCL_NET is noise */
}

static void test_env_and_ranks(void) {
  char peer[512];
  snprintf(peer, sizeof(peer), "%s/rank1.env", root);
  static const char theirs[] =
      "NCCL_BUFFSIZE=1048576\0WEFT_BACKEND=cuda\0NCCL_SOCKET_IFNAME=eth1\0WEFT_TIMEOUT=60";
  plant("/rank1.env", theirs, sizeof(theirs)); /* as /proc/PID/environ: NUL-separated */
  const char* env[] = {"NCCL_SOCKET_IFNAM=lo",
                       "NCCL_MADE_UP_THING=1",
                       "NCCL_SOCKET_IFNAME=eth0",
                       "WEFT_BACKEND=host",
                       "PATH=/bin",
                       NULL};
  const char* peers[] = {peer};
  struct weft_doctor_opts o = {.env = env, .peers = peers, .npeers = 1};
  struct weft_doctor_report r = {0};
  weft_doctor_check_env(&o, &r);
  weft_doctor_check_ranks(&o, &r);
  EXPECT_FINDING(&r, "env.spelling", WEFT_DOCTOR_WARN, "did you mean NCCL_SOCKET_IFNAME?");
  EXPECT_FINDING(&r, "env.unknown", WEFT_DOCTOR_INFO, "NCCL_MADE_UP_THING");
  int backend = 0, buff = 0, timeout = 0, ifname = 0;
  for (int i = 0; i < r.count; i++) {
    const struct weft_doctor_finding* f = &r.items[i];
    if (strcmp(f->id, "ranks.settings") != 0) continue;
    backend += strstr(f->seen, "WEFT_BACKEND differs: host here, cuda") && f->severity == WEFT_DOCTOR_BLOCK;
    buff +=
        strstr(f->seen, "NCCL_BUFFSIZE differs: (unset) here, 1048576") && f->severity == WEFT_DOCTOR_INFO;
    timeout += strstr(f->seen, "WEFT_TIMEOUT differs") && f->severity == WEFT_DOCTOR_WARN;
    ifname += strstr(f->seen, "NCCL_SOCKET_IFNAME") != NULL;
  }
  EXPECT_EQ_INT(backend, 1);
  EXPECT_EQ_INT(buff, 1);
  EXPECT_EQ_INT(timeout, 1);
  EXPECT_EQ_INT(ifname, 0); /* per host by nature */
  EXPECT(weft_doctor_worst(&r) == WEFT_DOCTOR_BLOCK);
  weft_doctor_report_free(&r);
}

/* The library's WARN at init: once, naming the known name; WEFT_ENV_CHECK=0 keeps it silent. */
static int child_warns(int check) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_SOCKET_IFNAM", "lo", 1);
    if (!check) setenv("WEFT_ENV_CHECK", "0", 1);
    weft_doctor_warn_env_once();
    _exit(strstr(weft_log_last_error(),
                 "NCCL_SOCKET_IFNAM is set but nothing reads it; did you mean "
                 "NCCL_SOCKET_IFNAME?") != NULL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void) {
  snprintf(root, sizeof(root), "%s/weft-doctor-root.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(root) == NULL) test_skip("cannot make a temporary folder");
  setenv("WEFT_DOCTOR_ROOT", root, 1);
  test_proc_files();
  test_pcie_gpus_numa();
  test_gdr();
  test_suggest();
  test_env_and_ranks();
  EXPECT_EQ_INT(child_warns(1), 1);
  EXPECT_EQ_INT(child_warns(0), 0);
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", root);
  return test_finish("test_doctor");
}
