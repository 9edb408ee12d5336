/* The locked-memory limit RDMA needs: verbs register (pin) every buffer a NIC reads or writes, and
 * a limit of a few MiB (the usual default, and containers') makes registration fail at init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"

#define MIB (1024.0 * 1024.0)

/* "Max locked memory  <soft> <hard> bytes" of the root-prefixed /proc/self/limits; -1: unlimited. */
static int read_limit(long long* soft, long long* hard) {
  char path[512], line[256];
  FILE* f = fopen(weft_doctor_path(path, sizeof(path), "/proc/self/limits"), "r");
  if (f == NULL) return -1;
  int found = -1;
  while (found != 0 && fgets(line, sizeof(line), f)) {
    char s[32], h[32];
    if (sscanf(line, "Max locked memory %31s %31s", s, h) != 2) continue;
    *soft = strcmp(s, "unlimited") == 0 ? -1 : atoll(s);
    *hard = strcmp(h, "unlimited") == 0 ? -1 : atoll(h);
    found = 0;
  }
  fclose(f);
  return found;
}

static void limit_text(long long v, char* buf, size_t size) {
  if (v < 0)
    snprintf(buf, size, "unlimited");
  else
    snprintf(buf, size, "%.1f MiB", (double)v / MIB);
}

void weft_doctor_check_memlock(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  (void)o;
  long long soft = 0, hard = 0;
  if (read_limit(&soft, &hard) != 0) {
    weft_doctor_add(r, "memlock", WEFT_DOCTOR_INFO, NULL, "the locked-memory limit could not be read");
    return;
  }
  char first[64] = "", s[32], h[32];
  int ndev = weft_doctor_rdma_devices(first, sizeof(first));
  limit_text(soft, s, sizeof(s));
  limit_text(hard, h, sizeof(h));
  const char* fix =
      "ulimit -l unlimited before starting the ranks; docker run --ulimit memlock=-1:-1; for logins "
      "'* - memlock unlimited' in /etc/security/limits.conf; for systemd services LimitMEMLOCK=infinity";
  if (soft < 0) {
    weft_doctor_add(r, "memlock", WEFT_DOCTOR_OK, NULL, "locked memory is unlimited (%d RDMA device(s))",
                    ndev);
  } else if (ndev > 0) {
    weft_doctor_add(
        r, "memlock", WEFT_DOCTOR_WARN, fix,
        "locked memory is limited to %s (hard %s) and %d RDMA device(s) exist (%s): an RDMA "
        "network (the IB transport, NCCL's or Weft's, or a net plugin) fails to register its buffers; "
        "the socket network does not pin memory",
        s, h, ndev, first);
  } else {
    weft_doctor_add(r, "memlock", WEFT_DOCTOR_INFO, fix,
                    "locked memory is limited to %s (hard %s); no RDMA device, so nothing needs it now", s,
                    h);
  }
}
