/* Whether ranks of one host can reach each other's memory: Weft maps a peer's segments through
 * /proc/<pid>/fd, MPI and UCX copy through CMA (process_vm_readv), which Yama's ptrace scope and
 * containers' seccomp profiles restrict. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "doctor/doctor.h"

static void check_scope(struct weft_doctor_report* r) {
  char line[64];
  if (weft_doctor_read_line("/proc/sys/kernel/yama/ptrace_scope", line, sizeof(line)) != 0) {
    weft_doctor_add(r, "ptrace.scope", WEFT_DOCTOR_OK, NULL,
                    "no Yama ptrace restriction (kernel.yama absent)");
    return;
  }
  int scope = atoi(line);
  if (scope == 0) {
    weft_doctor_add(r, "ptrace.scope", WEFT_DOCTOR_OK, NULL, "kernel.yama.ptrace_scope = 0");
  } else if (scope == 1) {
    weft_doctor_add(
        r, "ptrace.scope", WEFT_DOCTOR_INFO,
        "Nothing for Weft; for MPI/UCX single-copy between ranks: sysctl -w kernel.yama.ptrace_scope=0",
        "kernel.yama.ptrace_scope = 1: a rank may read only its descendants' memory with CMA "
        "(process_vm_readv); Weft does not use CMA");
  } else {
    weft_doctor_add(
        r, "ptrace.scope", WEFT_DOCTOR_WARN,
        "sysctl -w kernel.yama.ptrace_scope=0 (or 1); scope 3 needs a reboot to lower",
        "kernel.yama.ptrace_scope = %d: CMA (process_vm_readv) between ranks fails for "
        "unprivileged users, so MPI/UCX single-copy transports and CMA-based plugins fall back or fail",
        scope);
  }
}

/* Reading one's own memory is always allowed by ptrace rules, so a failure here is seccomp. */
static void check_cma(struct weft_doctor_report* r) {
  char src[16] = "weft-doctor", dst[16] = {0};
  struct iovec local = {dst, sizeof(dst)}, remote = {src, sizeof(src)};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == (ssize_t)sizeof(src) && memcmp(src, dst, sizeof(src)) == 0) {
    weft_doctor_add(r, "ptrace.cma", WEFT_DOCTOR_OK, NULL, "process_vm_readv works");
    return;
  }
  weft_doctor_add(
      r, "ptrace.cma", WEFT_DOCTOR_WARN,
      "Allow process_vm_readv/process_vm_writev: docker run --cap-add SYS_PTRACE, or a seccomp profile "
      "that permits them",
      "process_vm_readv on this process failed (%s): a seccomp profile blocks CMA, which MPI/UCX "
      "single-copy paths use",
      strerror(errno));
}

/* Weft's ranks open each other's shared-memory segments as /proc/<pid>/fd/<n>. */
static void check_proc_fd(struct weft_doctor_report* r) {
  char path[512];
  DIR* d = opendir(weft_doctor_path(path, sizeof(path), "/proc/self/fd"));
  if (d != NULL) {
    closedir(d);
    weft_doctor_add(r, "ptrace.procfd", WEFT_DOCTOR_OK, NULL, "%s is readable", path);
    return;
  }
  weft_doctor_add(
      r, "ptrace.procfd", WEFT_DOCTOR_BLOCK,
      "Mount /proc in the container (and run the ranks of one host in one PID namespace: docker run "
      "--pid=host or one container for all of them)",
      "%s cannot be opened (%s): ranks of one host cannot map each other's shared memory", path,
      strerror(errno));
}

void weft_doctor_check_ptrace(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  (void)o;
  check_scope(r);
  check_cma(r);
  check_proc_fd(r);
}
