/* Ranks in different processes keep a connection per pair of ranks for their bootstrap messages:
 * many messages between two process ranks open one connection each way, not one per message
 * (with WEFT_BOOTSTRAP_MAX_CONNS=0, the old way, they open one per message: the counters measure
 * what they claim). The cache is bounded on both sides: a sender beyond its limit closes the least
 * recently used connection, a receiver beyond it shuts one for writing and its sender reconnects,
 * and a receiver that closes a kept connection costs the sender a new connection, never a message.
 * Every message is checked byte for byte and in order. Ranks are forked processes (threads of one
 * process exchange messages through memory). */
#include <sys/socket.h>

#include "bootstrap/internal.h"
#include "test_bootstrap_common.h"
#include "uid.h"
#include "util/param.h"

#define NMSG 200
#define ROUNDS 20

/* What each rank reports to the parent. */
struct report {
  int bad;
  long long connects, accepts; /* see rank_proc */
  long long mid_connects;      /* phase_lru: rank 0's after the round robin over three */
  long long connects2;         /* phase_receiver_closes: the second close */
  int flag;                    /* phase_receiver_closes: rank 1 closed, outside any wait */
  int max_conns;               /* most connections kept for sending at once */
  int max_idle_in;             /* most idle kept incoming connections not shut, after a message */
};

static struct report* reports;

/* Message k from src to dst: sizes from 0 to beyond a socket buffer (the two ranks of a pair send
 * at once, so each must read while it writes). */
static size_t conn_msg_size(int src, int dst, int k) {
  if (k % 50 == 7) return 400000;
  return (size_t)(src * 13 + dst * 5 + k * 37) % 700;
}

static int send_msg(struct weft_bootstrap* bs, int dst, int k, char* buf) {
  int src = weft_bootstrap_rank(bs);
  size_t len = conn_msg_size(src, dst, k);
  for (size_t i = 0; i < len; i++) buf[i] = (char)msg_byte(src, dst, k, i);
  ncclResult_t res = weft_bootstrap_send(bs, dst, k % 3, buf, len);
  if (res != ncclSuccess)
    fprintf(stderr, "rank %d: message %d to rank %d: send failed %d\n", src, k, dst, res);
  return res != ncclSuccess;
}

static int recv_msg(struct weft_bootstrap* bs, int src, int k, char* buf) {
  int dst = weft_bootstrap_rank(bs);
  size_t len = conn_msg_size(src, dst, k);
  if (weft_bootstrap_recv(bs, src, k % 3, buf, len) != ncclSuccess) {
    fprintf(stderr, "rank %d: message %d from rank %d: receive failed\n", dst, k, src);
    return 1;
  }
  for (size_t i = 0; i < len; i++) {
    if ((unsigned char)buf[i] != msg_byte(src, dst, k, i)) {
      fprintf(stderr, "rank %d: message %d from rank %d wrong at byte %zu\n", dst, k, src, i);
      return 1;
    }
  }
  return 0;
}

static int idle_in(const struct weft_bootstrap* bs) {
  int n = 0;
  for (int i = 0; i < bs->ninc; i++) n += bs->inc[i].authed && !bs->inc[i].closing && bs->inc[i].hgot == 0;
  return n;
}

static void note(struct weft_bootstrap* bs, struct report* r) {
  if (bs->nconns > r->max_conns) r->max_conns = bs->nconns;
  if (idle_in(bs) > r->max_idle_in) r->max_idle_in = idle_in(bs);
}

/* Two ranks send NMSG messages to each other at once, then receive them. */
static void phase_pair(struct weft_bootstrap* bs, struct report* r, char* buf) {
  int peer = 1 - weft_bootstrap_rank(bs);
  for (int k = 0; k < NMSG && !r->bad; k++) r->bad += send_msg(bs, peer, k, buf);
  for (int k = 0; k < NMSG && !r->bad; k++) r->bad += recv_msg(bs, peer, k, buf);
  note(bs, r);
}

/* Rank 0 sends round robin to ranks 1..3 (more peers than kept connections: each send evicts),
 * then to ranks 1 and 2 only (both stay kept). */
static void phase_lru(struct weft_bootstrap* bs, struct report* r, char* buf) {
  int rank = weft_bootstrap_rank(bs);
  for (int k = 0; k < 2 * ROUNDS && !r->bad; k++) {
    int three = k < ROUNDS;
    for (int dst = 1; dst <= (three ? 3 : 2); dst++) {
      if (rank == 0) r->bad += send_msg(bs, dst, k, buf);
      if (rank == dst) r->bad += recv_msg(bs, 0, k, buf);
      note(bs, r);
    }
    if (rank == 0 && k == ROUNDS - 1) r->mid_connects = (long long)bs->nconnects;
  }
}

/* Ranks 1..3 send to rank 0, which keeps fewer incoming connections than it has senders; each
 * round waits for rank 0's answer, so senders meet the connections it shut. */
static void phase_fan_in(struct weft_bootstrap* bs, struct report* r, char* buf) {
  int rank = weft_bootstrap_rank(bs);
  for (int k = 0; k < ROUNDS && !r->bad; k++) {
    if (rank != 0) r->bad += send_msg(bs, 0, k, buf);
    for (int src = 1; src <= 3 && rank == 0 && !r->bad; src++) {
      r->bad += recv_msg(bs, src, k, buf);
      note(bs, r);
    }
    for (int dst = 1; dst <= 3 && rank == 0 && !r->bad; dst++) r->bad += send_msg(bs, dst, k, buf);
    if (rank != 0 && !r->bad) r->bad += recv_msg(bs, 0, k, buf);
  }
}

/* Rank 1 closes everything it accepted, then tells rank 0, whose next message to it must still
 * arrive (on a new connection): first through the bootstrap (rank 0's wait for that word sees
 * the closed connection), then through shared memory (rank 0's send finds it closed). */
static void phase_receiver_closes(struct weft_bootstrap* bs, struct report* r, char* buf) {
  int rank = weft_bootstrap_rank(bs);
  if (rank == 0) r->bad += send_msg(bs, 1, 0, buf);
  if (rank == 1) {
    r->bad += recv_msg(bs, 0, 0, buf);
    weft_bs_incoming_drop_all(bs);
    r->bad += send_msg(bs, 0, 1, buf);
  }
  if (rank == 0) {
    r->bad += recv_msg(bs, 1, 1, buf);
    long long before = (long long)bs->nconnects;
    r->bad += send_msg(bs, 1, 2, buf);
    r->connects = (long long)bs->nconnects - before;
  }
  if (rank == 1) {
    r->bad += recv_msg(bs, 0, 2, buf);
    weft_bs_incoming_drop_all(bs);
    __atomic_store_n(&reports[1].flag, 1, __ATOMIC_SEQ_CST);
    r->bad += weft_bootstrap_recv(bs, 0, 9, NULL, 0) != ncclSuccess;
  }
  if (rank == 0) {
    while (!__atomic_load_n(&reports[1].flag, __ATOMIC_SEQ_CST)) usleep(1000);
    usleep(50000); /* the close reaches our socket */
    long long before = (long long)bs->nconnects;
    /* Empty: one write, which a closed peer would take and lose were it not seen before. */
    r->bad += weft_bootstrap_send(bs, 1, 9, NULL, 0) != ncclSuccess;
    r->connects2 = (long long)bs->nconnects - before;
  }
}

typedef void (*phase_fn)(struct weft_bootstrap*, struct report*, char*);

static void rank_proc(const ncclUniqueId* id, int rank, int nranks, phase_fn phase) {
  alarm(60);
  struct report* r = &reports[rank];
  struct weft_bootstrap* bs = NULL;
  if (weft_bootstrap_init(id, rank, nranks, NULL, &bs) != ncclSuccess) _exit(1);
  char* buf = malloc(400000);
  uint64_t connects = bs->nconnects;
  phase(bs, r, buf);
  /* A barrier before leaving: no rank closes its side while a peer still waits on it. */
  if (!r->bad && weft_bootstrap_barrier(bs) != ncclSuccess) r->bad++;
  /* Counted since the bootstrap began (a peer's first message may be accepted while we still
   * finish init): in a job of 2 (ring all-gather), the ring is one accepted connection and no
   * message; the barrier is one message each way. */
  if (phase == phase_pair) {
    r->connects = (long long)bs->nconnects;
    r->accepts = (long long)bs->naccepts;
  }
  if (phase == phase_fan_in) r->accepts = (long long)bs->naccepts;
  if (phase == phase_lru && rank == 0) {
    r->connects = (long long)(bs->nconnects - connects);
    r->mid_connects -= (long long)connects;
  }
  free(buf);
  weft_bootstrap_destroy(bs);
  _exit(r->bad ? 1 : 0);
}

/* Run phase on nranks forked ranks with WEFT_BOOTSTRAP_MAX_CONNS=max_conns; 0 when all passed. */
static int run(int nranks, const char* max_conns, phase_fn phase) {
  setenv("WEFT_BOOTSTRAP_MAX_CONNS", max_conns, 1);
  weft_param_reload();
  memset(reports, 0, 8 * sizeof(*reports));
  ncclUniqueId id;
  struct test_uid_holder root;
  if (test_uid_from_child(&id, &root) != ncclSuccess) return 1;
  pid_t pids[8];
  fflush(NULL);
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) rank_proc(&id, r, nranks, phase);
  }
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    int status;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d of %d (WEFT_BOOTSTRAP_MAX_CONNS=%s) failed (status 0x%x)\n", r, nranks,
              max_conns, status);
      failed++;
    }
  }
  test_uid_release(&root);
  return failed;
}

static void test_pair(void) {
  EXPECT(run(2, "64", phase_pair) == 0);
  for (int r = 0; r < 2; r++) {
    EXPECT_MSG(reports[r].connects == 1, "rank %d opened %lld connections for %d messages to its peer", r,
               reports[r].connects, NMSG + 1);
    EXPECT_MSG(reports[r].accepts == 1 + 1,
               "rank %d accepted %lld connections (ring included) for %d messages", r, reports[r].accepts,
               NMSG + 1);
    EXPECT(reports[r].max_conns == 1);
  }
  /* Without the cache: one connection a message, as before it. */
  EXPECT(run(2, "0", phase_pair) == 0);
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ_INT(reports[r].connects, NMSG + 1);
    EXPECT_EQ_INT(reports[r].accepts, 1 + NMSG + 1);
    EXPECT_EQ_INT(reports[r].max_conns, 0);
  }
}

static void test_lru(void) {
  EXPECT(run(4, "2", phase_lru) == 0);
  EXPECT_MSG(reports[0].max_conns <= 2, "rank 0 kept %d connections, limit 2", reports[0].max_conns);
  EXPECT_MSG(reports[0].mid_connects == 3 * ROUNDS,
             "rank 0 opened %lld connections for %d messages to three peers", reports[0].mid_connects,
             3 * ROUNDS);
  EXPECT_MSG(reports[0].connects - reports[0].mid_connects <= 2,
             "rank 0 opened %lld connections for %d messages to two peers it keeps",
             reports[0].connects - reports[0].mid_connects, 2 * ROUNDS);
}

static void test_fan_in(void) {
  EXPECT(run(4, "1", phase_fan_in) == 0);
  EXPECT_MSG(reports[0].max_idle_in <= 1, "rank 0 kept %d idle incoming connections, limit 1",
             reports[0].max_idle_in);
  /* The ring, and more than one connection per sender. */
  EXPECT_MSG(reports[0].accepts > 1 + 3,
             "rank 0 accepted only %lld connections from 3 senders over its limit", reports[0].accepts);
}

static void test_receiver_closes(void) {
  EXPECT(run(2, "64", phase_receiver_closes) == 0);
  EXPECT_EQ_INT(reports[0].connects, 1);
  EXPECT_EQ_INT(reports[0].connects2, 1);
}

/* The root (epoll) drops connections that never check in, each at its own deadline: one opened
 * now and one 3 s later close about WEFT_AUTH_TIMEOUT_S after they opened. Last: it starts the
 * root's thread in this process, and the tests above fork. */
static void test_root_drops_silent(void) {
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  struct weft_bootstrap_handle h;
  memcpy(&h, id.internal, sizeof(h));
  int fd[2];
  int64_t opened[2], closed[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    if (k == 1) sleep(3);
    EXPECT(weft_socket_connect(&h.addr, "the root", NULL, weft_socket_deadline(5), &fd[k]) == ncclSuccess);
    opened[k] = weft_socket_now_ns();
  }
  int64_t until = weft_socket_now_ns() + (WEFT_AUTH_TIMEOUT_S + 5) * 1000000000LL;
  while ((closed[0] == 0 || closed[1] == 0) && weft_socket_now_ns() < until) {
    for (int k = 0; k < 2; k++) {
      char b[64];
      if (closed[k] == 0 && weft_socket_try_recv(fd[k], b, sizeof(b)) < 0) closed[k] = weft_socket_now_ns();
    }
    usleep(20000);
  }
  for (int k = 0; k < 2; k++) {
    double after = closed[k] ? (closed[k] - opened[k]) / 1e9 : -1;
    EXPECT_MSG(after >= WEFT_AUTH_TIMEOUT_S - 0.5 && after <= WEFT_AUTH_TIMEOUT_S + 2.5,
               "silent connection %d dropped after %.2f s (-1: never), expected about %d s", k, after,
               WEFT_AUTH_TIMEOUT_S);
    weft_socket_close(fd[k]);
  }
}

int main(void) {
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "30", 1);
  /* The counts below are of message connections: no liveness probe of a slow sender joins them. */
  setenv("WEFT_BOOTSTRAP_PROBE_MS", "0", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  reports = mmap(NULL, 8 * sizeof(*reports), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  test_pair();
  test_lru();
  test_fan_in();
  test_receiver_closes();
  test_root_drops_silent();
  return test_finish("test_bootstrap_conns");
}
