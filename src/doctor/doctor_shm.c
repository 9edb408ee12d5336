/* /dev/shm (WEFT_SHM_DIR) against what the job's ranks on this host map: containers get 64 MiB by
 * default, less than eight ranks' ring connectors at the default NCCL_BUFFSIZE. */
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "collectives/plan.h"
#include "doctor/doctor.h"
#include "transport/connector.h"
#include "util/param.h"

#define DEFAULT_LL_BYTES (256 * 1024) /* the host engine's LL FIFO when NCCL_LL_BUFFSIZE is unset */
#define MIB (1024.0 * 1024.0)

static size_t round_page(size_t n) { return (n + 4095) / 4096 * 4096; }

/* Each rank receives through one connector per ring channel from its ring predecessor at init;
 * trees (up to three neighbours per channel) and point-to-point peers add more later, so the
 * upper figure counts four connectors per channel and one send/recv FIFO for each of 7 peers. */
void weft_doctor_shm_need(size_t* at_init, size_t* at_most) {
  int64_t buff = weft_param_int("NCCL_BUFFSIZE");
  int64_t ll = weft_param_is_set("NCCL_LL_BUFFSIZE") ? weft_param_int("NCCL_LL_BUFFSIZE") : DEFAULT_LL_BYTES;
  if (buff < 64 * 1024) buff = 64 * 1024;
  if (ll < 32 * 1024) ll = 32 * 1024;
  size_t conn = WEFT_CTRL_BYTES + round_page((size_t)buff) + round_page((size_t)ll);
  size_t nch = (size_t)weft_plan_channels_to_connect();
  size_t p2p = WEFT_CTRL_BYTES + round_page((size_t)buff / 4) + round_page((size_t)ll);
  *at_init = nch * conn;
  *at_most = 4 * nch * conn + 7 * p2p;
}

void weft_doctor_check_shm(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  const char* dir = weft_param_str("WEFT_SHM_DIR");
  if (dir == NULL || dir[0] == 0) dir = "/dev/shm";
  if (weft_param_int("NCCL_SHM_DISABLE")) {
    weft_doctor_add(r, "shm.size", WEFT_DOCTOR_OK, NULL,
                    "NCCL_SHM_DISABLE=1: ranks of one host connect through the network, not %s", dir);
    return;
  }
  struct statvfs st;
  if (statvfs(dir, &st) != 0) {
    weft_doctor_add(
        r, "shm.size", WEFT_DOCTOR_BLOCK,
        "Mount a tmpfs there (docker run --shm-size=1g; mount -t tmpfs -o size=1g tmpfs /dev/shm) or "
        "point WEFT_SHM_DIR at a tmpfs directory",
        "%s cannot be read (%m): ranks of one host cannot share memory", dir);
    return;
  }
  const char* ranks_from = NULL;
  int ranks = weft_doctor_local_ranks(o, &ranks_from);
  size_t init_one, most_one;
  weft_doctor_shm_need(&init_one, &most_one);
  double free_b = (double)st.f_bavail * (double)st.f_frsize;
  double total_b = (double)st.f_blocks * (double)st.f_frsize;
  double init_b = (double)ranks * (double)init_one, most_b = (double)ranks * (double)most_one;
  char fix[640];
  snprintf(
      fix, sizeof(fix),
      "Give %s at least %.0f MiB: docker run --shm-size=%.0fm (Kubernetes: an emptyDir with medium: Memory "
      "on /dev/shm), or mount -o remount,size=%.0fm %s; or lower NCCL_BUFFSIZE / NCCL_MAX_NCHANNELS; or "
      "set NCCL_SHM_DISABLE=1 (slower: the ranks of a host then talk through the network)",
      dir, most_b / MIB + 1, most_b / MIB + 64, most_b / MIB + 64, dir);
  if (free_b < init_b) {
    weft_doctor_add(
        r, "shm.size", WEFT_DOCTOR_BLOCK, fix,
        "%s has %.1f MiB free (of %.1f MiB) but %d local rank(s) (%s) map %.1f MiB of connectors at "
        "init: init fails with 'A shared memory segment needs ...'",
        dir, free_b / MIB, total_b / MIB, ranks, ranks_from, init_b / MIB);
  } else if (free_b < most_b) {
    weft_doctor_add(
        r, "shm.size", WEFT_DOCTOR_WARN, fix,
        "%s has %.1f MiB free (of %.1f MiB): enough for %d local rank(s)' rings at init (%.1f MiB) "
        "but not for trees and send/recv peers as well (up to %.1f MiB)",
        dir, free_b / MIB, total_b / MIB, ranks, init_b / MIB, most_b / MIB);
  } else {
    weft_doctor_add(r, "shm.size", WEFT_DOCTOR_OK, NULL,
                    "%s has %.1f MiB free; %d local rank(s) (%s) need %.1f MiB at init, up to %.1f MiB", dir,
                    free_b / MIB, ranks, ranks_from, init_b / MIB, most_b / MIB);
  }
}
