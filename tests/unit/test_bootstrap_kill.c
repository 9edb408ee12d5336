/* A rank killed (SIGKILL) during bootstrap init: the other ranks of a 4-process NCCL_COMM_ID job
 * must fail within seconds, well under WEFT_BOOTSTRAP_TIMEOUT, with ncclRemoteError and a WARN
 * naming the dead rank. Moments: waiting at the root for a rank that comes later, after its reply
 * but before connecting the ring, and after opening the ring while the others all-gather (the
 * victim speaks the protocol by hand so it stops exactly there); then, once the bootstrap is up
 * (the root is gone), while the others wait for a message from it, and while they all-gather
 * (ranks waiting for a rank that failed because of the victim name that rank). Processes are
 * forked before any thread starts. */
#include <arpa/inet.h>

#include "bootstrap/internal.h"
#include "test_bootstrap_common.h"

#define NRANKS 4
#define VICTIM 2
#define QUICK_S 5.0 /* "at once": far below the 60 s bootstrap timeout */
/* A rank that waits for a rank that failed because of the victim hears of it a probe later. */
#define QUICK_HOPS_S 8.0

enum moment { AT_ROOT, AFTER_REPLY, RING_OPENED, AWAITED, IN_GATHER };
static const char* moment_name[] = {"waiting at the root", "after its reply", "ring opened",
                                    "awaited after init", "in a later all-gather"};

/* Check in with the root by hand; returns the successor's address (and the open link). */
static int victim_checkin(const struct weft_bootstrap_handle* h, const union weft_socket_addr* listen_addr,
                          union weft_socket_addr* next, int* link) {
  int64_t deadline = weft_socket_deadline(20);
  struct weft_bs_signed_checkin m;
  memset(&m, 0, sizeof(m));
  m.body = (struct weft_bs_checkin){.magic = h->magic,
                                    .type = WEFT_SOCKET_BOOTSTRAP,
                                    .kind = WEFT_BS_CHECKIN,
                                    .rank = VICTIM,
                                    .nranks = NRANKS,
                                    .nroots = 1,
                                    .iroot = 0,
                                    .listen = *listen_addr};
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES];
  struct weft_bs_signed_reply reply;
  if (weft_socket_connect(&h->addr, "the root", NULL, deadline, link) != ncclSuccess ||
      weft_socket_recv_all(*link, challenge, sizeof(challenge), "the root", NULL, deadline) != ncclSuccess)
    return 0;
  weft_auth_mac(&h->key, WEFT_AUTH_LABEL_CHECKIN, challenge, &m.body, sizeof(m.body), m.mac);
  if (weft_socket_send_all(*link, &m, sizeof(m), "the root", NULL, deadline) != ncclSuccess ||
      weft_socket_recv_all(*link, &reply, sizeof(reply), "the root", NULL, deadline) != ncclSuccess ||
      reply.body.kind != WEFT_BS_REPLY_NEXT)
    return 0;
  *next = reply.body.next;
  return 1;
}

/* Open the ring to the successor (a RING opening, then the answer to its challenge), then stop. */
static int victim_open_ring(const struct weft_bootstrap_handle* h, const union weft_socket_addr* next) {
  int64_t deadline = weft_socket_deadline(20);
  int fd;
  struct weft_bs_opening o;
  memset(&o, 0, sizeof(o));
  o.hdr = (struct weft_bs_header){.magic = h->magic,
                                  .type = WEFT_SOCKET_BOOTSTRAP,
                                  .kind = WEFT_BS_RING,
                                  .src = VICTIM,
                                  .dst = VICTIM + 1};
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES], answer[WEFT_AUTH_MAC_BYTES];
  if (weft_socket_connect(next, "rank 3", NULL, deadline, &fd) != ncclSuccess ||
      weft_socket_send_all(fd, &o, sizeof(o), "rank 3", NULL, deadline) != ncclSuccess ||
      weft_socket_recv_all(fd, challenge, sizeof(challenge), "rank 3", NULL, deadline) != ncclSuccess)
    return 0;
  weft_auth_mac(&h->key, WEFT_AUTH_LABEL_PEER, challenge, &o.hdr, sizeof(o.hdr), answer);
  return weft_socket_send_all(fd, answer, sizeof(answer), "rank 3", NULL, deadline) == ncclSuccess;
}

/* The victim of the later moments: reach the moment, tell the parent, wait for the kill. */
static void victim_main(enum moment when, int ready_fd) {
  ncclUniqueId id;
  if (weft_bootstrap_get_unique_id(&id) != ncclSuccess) _exit(2);
  if (when >= AWAITED) {
    struct weft_bootstrap* bs = NULL;
    if (weft_bootstrap_init(&id, VICTIM, NRANKS, NULL, &bs) != ncclSuccess) _exit(3);
    if (write(ready_fd, "r", 1) != 1) _exit(5);
    pause();
    _exit(6);
  }
  struct weft_bootstrap_handle h;
  memcpy(&h, id.internal, sizeof(h));
  union weft_socket_addr listen_addr = {.sin = {.sin_family = AF_INET}}, next;
  listen_addr.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int listen_fd, link;
  if (weft_socket_listen(&listen_addr, &listen_fd) != ncclSuccess) _exit(2);
  if (!victim_checkin(&h, &listen_addr, &next, &link)) _exit(3);
  if (when == RING_OPENED && !victim_open_ring(&h, &next)) _exit(4);
  if (write(ready_fd, "r", 1) != 1) _exit(5);
  pause();
  _exit(6);
}

/* When each rank's init returned (monotonic clock, shared by the processes). */
static int64_t* failed_at;

/* After init, the step that must fail: a receive from the victim, or an all-gather. */
static ncclResult_t after_init(struct weft_bootstrap* bs, enum moment when) {
  if (when == AWAITED) {
    int value;
    return weft_bootstrap_recv(bs, VICTIM, 7, &value, sizeof(value));
  }
  int all[NRANKS] = {0};
  return weft_bootstrap_allgather(bs, all, sizeof(all[0]));
}

/* A normal rank: init (or the step after it) must fail with ncclRemoteError and a WARN naming
 * the victim, or in an all-gather after init a rank that is gone. It stays a moment, as a real
 * process would while reporting, so the root it may host outlives the kill. */
static void rank_proc(int rank, int delay_ms, enum moment when) {
  if (delay_ms) usleep(delay_ms * 1000);
  ncclUniqueId id;
  struct weft_bootstrap* bs = NULL;
  ncclResult_t res = weft_bootstrap_get_unique_id(&id);
  if (res == ncclSuccess) res = weft_bootstrap_init(&id, rank, NRANKS, NULL, &bs);
  if (res == ncclSuccess && when >= AWAITED) res = after_init(bs, when);
  failed_at[rank] = weft_socket_now_ns();
  const char* err = weft_log_last_error();
  int names_lost_rank = strstr(err, "is gone") != NULL || strstr(err, "closed the connection") != NULL;
  int ok =
      res == ncclRemoteError && (strstr(err, "rank 2") != NULL || (when == IN_GATHER && names_lost_rank));
  if (!ok) fprintf(stderr, "rank %d: result %d, last error \"%s\"\n", rank, res, err);
  weft_bootstrap_destroy(bs);
  usleep(2000000);
  _exit(ok ? 0 : 1);
}

static void kill_during(enum moment when) {
  int ready[2];
  EXPECT(pipe(ready) == 0);
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) failed_at[r] = INT64_MAX;
  fflush(NULL);
  for (int r = 0; r < NRANKS; r++) {
    pids[r] = fork();
    if (pids[r] != 0) continue;
    alarm(30); /* a hung rank must not hang the test */
    close(ready[0]);
    if (r == VICTIM && when != AT_ROOT) victim_main(when, ready[1]);
    /* AT_ROOT: the last rank comes only after the kill, and must be turned away at once too. */
    rank_proc(r, when == AT_ROOT && r == NRANKS - 1 ? 1500 : 0, when);
  }
  close(ready[1]);
  if (when == AT_ROOT) {
    usleep(700000); /* ranks 0-2 checked in and wait for rank 3 */
  } else {
    char c;
    EXPECT_MSG(read(ready[0], &c, 1) == 1, "victim did not reach the moment \"%s\"", moment_name[when]);
    usleep(100000);
  }
  close(ready[0]);
  kill(pids[VICTIM], SIGKILL);
  int64_t killed = weft_socket_now_ns();
  for (int r = 0; r < NRANKS; r++) {
    int status;
    waitpid(pids[r], &status, 0);
    if (r == VICTIM) continue;
    double secs = (failed_at[r] - killed) / 1e9;
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    EXPECT_MSG(ok, "%s: rank %d status 0x%x", moment_name[when], r, status);
    EXPECT_MSG(secs < (when == IN_GATHER ? QUICK_HOPS_S : QUICK_S), "%s: rank %d ended %.2f s after the kill",
               moment_name[when], r, secs);
  }
  double worst = 0;
  for (int r = 0; r < NRANKS; r++)
    if (r != VICTIM && (failed_at[r] - killed) / 1e9 > worst) worst = (failed_at[r] - killed) / 1e9;
  printf("killed rank %d %-22s others failed within %.2f s\n", VICTIM, moment_name[when], worst);
  fflush(stdout);
}

int main(int argc, char** argv) {
  char value[64];
  snprintf(value, sizeof(value), "127.0.0.1:%d", test_free_port());
  setenv("NCCL_COMM_ID", value, 1);
  setenv("WEFT_JOB_SECRET", "test-bootstrap-kill", 1);
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "60", 1);
  failed_at =
      mmap(NULL, NRANKS * sizeof(*failed_at), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  /* The address all-gather over the ring (as for small jobs), then in log rounds (as above
   * WEFT_BOOTSTRAP_LOG_GATHER_MIN ranks): both must hear of the loss from the root. */
  static const char* gathers[] = {"0", "2"};
  for (int g = 0; g < 2; g++) {
    setenv("WEFT_BOOTSTRAP_LOG_GATHER_MIN", gathers[g], 1);
    printf("WEFT_BOOTSTRAP_LOG_GATHER_MIN=%s\n", gathers[g]);
    for (enum moment m = AT_ROOT; m <= IN_GATHER; m++) {
      if (argc > 1 && atoi(argv[1]) != (int)m) continue; /* one moment, for debugging */
      kill_during(m);
      /* A fresh root address per job: the last one may linger in TIME_WAIT. */
      snprintf(value, sizeof(value), "127.0.0.1:%d", test_free_port());
      setenv("NCCL_COMM_ID", value, 1);
    }
  }
  return test_finish("test_bootstrap_kill");
}
