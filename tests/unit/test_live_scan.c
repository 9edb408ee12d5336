/* The long-stall liveness scan (weft_host_check_peers with all): a rank that waits long looks
 * for any dead process among its host's ranks. Every rank of a stalled job does it twice a
 * second, so each check must cost a bounded number of process lookups, not one per rank on the
 * host (1,024 ranks: a million lookups a second), and must still find a dead rank anywhere in
 * the list within nranks / 32 checks. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collectives/context.h"
#include "collectives/host/wait.h"
#include "util/log.h"

#define NRANKS 1024
/* The bound asked of a check, set here and not read from wait.h (WEFT_LIVE_SCAN_PER_CHECK), so
 * a larger scan fails this test. */
#define PER_CHECK 32

static volatile uint32_t abort_flag;

/* A pid that no process has any more: a child that exited and was reaped. */
static int dead_pid(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  waitpid(pid, &status, 0);
  return (int)pid;
}

static void scan_finds(int dead_rank) {
  static struct weft_peer_info peers[NRANKS];
  static uint8_t watch[NRANKS];
  for (int p = 0; p < NRANKS; p++) {
    memset(&peers[p], 0, sizeof(peers[p]));
    peers[p].rank = p;
    peers[p].pid = p == dead_rank ? dead_pid() : (int)getpid();
    strcpy(peers[p].host_name, "host");
    watch[p] = p != 0;
  }
  struct weft_waiter w;
  weft_waiter_init(&w, &abort_flag, 0, NRANKS);
  w.peers = peers;
  w.watch = watch;
  int checks = 0;
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && checks < NRANKS) {
    uint64_t before = w.live_probes;
    res = weft_host_check_peers(&w, 1, 1); /* waiting for rank 1, which lives */
    checks++;
    EXPECT_MSG(w.live_probes - before <= PER_CHECK + 1, "check %d looked up %llu processes", checks,
               (unsigned long long)(w.live_probes - before));
  }
  EXPECT_EQ_INT(res, ncclRemoteError);
  EXPECT_MSG(checks <= (NRANKS + PER_CHECK - 1) / PER_CHECK + 1, "rank %d found dead after %d checks",
             dead_rank, checks);
  EXPECT_MSG(strstr(weft_log_last_error(), "has exited") != NULL, "last error \"%s\"", weft_log_last_error());
}

int main(void) {
  static const int dead[] = {2, 500, NRANKS - 1};
  for (size_t i = 0; i < sizeof(dead) / sizeof(dead[0]); i++) scan_finds(dead[i]);
  return test_finish("test_live_scan");
}
