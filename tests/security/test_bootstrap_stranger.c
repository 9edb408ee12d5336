/* A stranger on loopback attacks the bootstrap of a real 3-rank job (threads): it checks in as
 * rank 1 before the real one, checks in first with nranks 2^24, replays a captured check-in,
 * injects a forged split message into a rank's bootstrap port, and (NCCL_COMM_ID mode) a rank
 * with the wrong secret checks in. Each time the stranger gets nothing, nobody connects to its
 * listener, and the real job finishes with the right all-reduce result. Both modes: an id from
 * ncclGetUniqueId, and NCCL_COMM_ID + WEFT_JOB_SECRET. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "check.h"
#include "core/comm.h"
#include "nccl.h"
#include "stranger.h"
#include "util/param.h"
#include "util/sha256.h"

#define NRANKS 3
#define COUNT 4096

enum mode { MODE_UNIQUE_ID, MODE_COMM_ID };
static enum mode mode;

struct rank_arg {
  ncclUniqueId id;
  int rank, nranks, split;
  pthread_barrier_t* ready; /* all comms built: the stranger may look at them */
  ncclComm_t comm;
  ncclResult_t init_res;
  int ok;
};

/* All-reduce of rank+1 (and i) over comm; 1 when every element is the right sum. */
static int allreduce_ok(ncclComm_t comm, int nranks, int rank) {
  float* send = malloc(COUNT * sizeof(float));
  float* recv = malloc(COUNT * sizeof(float));
  for (int i = 0; i < COUNT; i++) send[i] = (float)(rank + 1) + (float)(i % 7);
  int ok = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL) == ncclSuccess;
  float base = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; i < COUNT && ok; i++) ok = recv[i] == base + (float)(nranks * (i % 7));
  free(send);
  free(recv);
  return ok;
}

/* Set when the stranger is done: until then the ranks sit in their bootstrap's progress engine,
 * where they accept (and, with the checks broken, would park) whatever the stranger sends. */
static volatile int stranger_done;
static int until_stranger_done(struct weft_bootstrap* bs, void* arg) {
  (void)bs;
  (void)arg;
  return __atomic_load_n(&stranger_done, __ATOMIC_ACQUIRE);
}

static void* rank_main(void* p) {
  struct rank_arg* a = p;
  a->init_res = ncclCommInitRank(&a->comm, a->nranks, a->id, a->rank);
  if (a->ready) pthread_barrier_wait(a->ready);
  if (a->init_res != ncclSuccess) return NULL;
  a->ok = allreduce_ok(a->comm, a->nranks, a->rank);
  if (a->split) {
    a->ok = a->ok && weft_bs_progress(a->comm->ctx.bootstrap, NULL, 0, until_stranger_done, NULL, NULL,
                                      weft_socket_deadline(30), "waiting for the stranger") == ncclSuccess;
    ncclComm_t sub = NULL;
    /* Reverse order: the split's ring differs from the parent's. */
    a->ok = a->ok && ncclCommSplit(a->comm, 0, a->nranks - 1 - a->rank, &sub, NULL) == ncclSuccess &&
            allreduce_ok(sub, a->nranks, a->nranks - 1 - a->rank);
    if (sub) ncclCommDestroy(sub);
  }
  ncclCommDestroy(a->comm);
  return NULL;
}

static ncclUniqueId job_id(void) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId failed\n");
    exit(1);
  }
  return id;
}

static struct weft_bootstrap_handle handle_of(const ncclUniqueId* id) {
  struct weft_bootstrap_handle h;
  memcpy(&h, id->internal, sizeof(h));
  return h;
}

struct job {
  pthread_t threads[NRANKS];
  struct rank_arg args[NRANKS];
  int started;
};

static void job_start(struct job* j, const ncclUniqueId* id, int from, int to, int split,
                      pthread_barrier_t* ready) {
  for (int r = from; r < to; r++) {
    j->args[r] = (struct rank_arg){.id = *id, .rank = r, .nranks = NRANKS, .split = split, .ready = ready};
    pthread_create(&j->threads[r], NULL, rank_main, &j->args[r]);
  }
  j->started = to;
}

static int job_finish(struct job* j) {
  int ok = 1;
  for (int r = 0; r < j->started; r++) {
    pthread_join(j->threads[r], NULL);
    if (j->args[r].init_res != ncclSuccess || !j->args[r].ok) {
      fprintf(stderr, "rank %d: init %d, result %s\n", r, (int)j->args[r].init_res,
              j->args[r].ok ? "right" : "wrong");
      ok = 0;
    }
  }
  return ok;
}

/* Connect to the root, take its challenge and send a check-in with a made-up answer. */
static int forged_checkin(const ncclUniqueId* id, int rank, int nranks, const union weft_socket_addr* lure) {
  struct weft_bootstrap_handle h = handle_of(id);
  int fd = stranger_connect(&h.addr);
  if (fd < 0) return -1;
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES];
  EXPECT(stranger_read(fd, challenge, sizeof(challenge), 5000) == sizeof(challenge));
  struct weft_bs_signed_checkin m;
  memset(&m, 0, sizeof(m));
  m.body = (struct weft_bs_checkin){.magic = h.magic,
                                    .type = WEFT_SOCKET_BOOTSTRAP,
                                    .kind = WEFT_BS_CHECKIN,
                                    .rank = rank,
                                    .nranks = nranks,
                                    .nroots = 1,
                                    .iroot = 0,
                                    .listen = *lure};
  weft_auth_random(m.mac, sizeof(m.mac));
  EXPECT(send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m));
  return fd;
}

/* The root answers a stranger at most with the 8-byte refusal, never with a reply. */
static void expect_refused(int fd, const char* what) {
  uint64_t code = 0;
  EXPECT_MSG(stranger_dropped(fd, 10000, sizeof(code), &code), "%s: the root kept the connection or replied",
             what);
  EXPECT_MSG(code == 0 || code == WEFT_BS_AUTH_REFUSED, "%s: unexpected bytes %llx", what,
             (unsigned long long)code);
  close(fd);
}

/* Checks in as `rank` with `nranks` before the real ranks (in NCCL_COMM_ID mode after rank 0,
 * which starts the root). */
static void scenario_forged_checkin(const char* name, int rank, int nranks) {
  ncclUniqueId id = job_id();
  union weft_socket_addr lure;
  int lfd = stranger_listen(&lure);
  struct job j = {0};
  if (mode == MODE_COMM_ID) job_start(&j, &id, 0, 1, 0, NULL);
  int fd = forged_checkin(&id, rank, nranks, &lure);
  EXPECT_MSG(fd >= 0, "%s: cannot reach the root", name);
  if (fd >= 0) expect_refused(fd, name);
  int from = j.started;
  job_start(&j, &id, from, NRANKS, 0, NULL);
  EXPECT_MSG(job_finish(&j), "%s: the real job failed", name);
  EXPECT_MSG(!stranger_was_contacted(lfd), "%s: a rank connected to the stranger", name);
  close(lfd);
}

/* A fake root captures a real rank's check-in; the stranger replays it to the real root. */
struct capture_arg {
  ncclUniqueId id;
  ncclResult_t res;
};
static void* capture_rank(void* p) {
  struct capture_arg* a = p;
  struct weft_bootstrap* bs = NULL;
  a->res = weft_bootstrap_init(&a->id, 1, NRANKS, NULL, &bs);
  weft_bootstrap_destroy(bs);
  return NULL;
}

static void scenario_replay(void) {
  ncclUniqueId id = job_id();
  struct weft_bootstrap_handle h = handle_of(&id);
  union weft_socket_addr fake;
  int ffd = stranger_listen(&fake);
  struct capture_arg cap = {.id = id};
  struct weft_bootstrap_handle fh = h;
  fh.addr = fake;
  memcpy(cap.id.internal, &fh, sizeof(fh));
  pthread_t t;
  pthread_create(&t, NULL, capture_rank, &cap);
  struct pollfd p = {.fd = ffd, .events = POLLIN};
  EXPECT(poll(&p, 1, 10000) == 1);
  int cfd = accept(ffd, NULL, NULL);
  uint8_t c1[WEFT_AUTH_NONCE_BYTES];
  weft_auth_random(c1, sizeof(c1));
  struct weft_bs_signed_checkin captured;
  EXPECT(send(cfd, c1, sizeof(c1), MSG_NOSIGNAL) == (ssize_t)sizeof(c1));
  EXPECT(stranger_read(cfd, &captured, sizeof(captured), 10000) == sizeof(captured));
  close(cfd);
  pthread_join(t, NULL);
  close(ffd);
  /* The capture is genuine: it answers the challenge it was made for. */
  EXPECT(weft_auth_check(&h.key, WEFT_AUTH_LABEL_CHECKIN, c1, &captured.body, sizeof(captured.body),
                         captured.mac));
  struct job j = {0};
  if (mode == MODE_COMM_ID) job_start(&j, &id, 0, 1, 0, NULL);
  int fd = stranger_connect(&h.addr);
  uint8_t c2[WEFT_AUTH_NONCE_BYTES];
  EXPECT(stranger_read(fd, c2, sizeof(c2), 5000) == sizeof(c2));
  EXPECT(send(fd, &captured, sizeof(captured), MSG_NOSIGNAL) == (ssize_t)sizeof(captured));
  expect_refused(fd, "replayed check-in");
  job_start(&j, &id, j.started, NRANKS, 0, NULL);
  EXPECT_MSG(job_finish(&j), "replay: the real job failed");
}

/* A forged split message (our listener as the new ring neighbour) into every rank's port, as if
 * from its successor in the split's reversed ring (parent rank r - 1). */
static void scenario_split_injection(void) {
  ncclUniqueId id = job_id();
  union weft_socket_addr lure;
  int lfd = stranger_listen(&lure);
  pthread_barrier_t ready;
  pthread_barrier_init(&ready, NULL, NRANKS + 1);
  stranger_done = 0;
  struct job j = {0};
  job_start(&j, &id, 0, NRANKS, 1, &ready);
  pthread_barrier_wait(&ready);
  int fds[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    fds[r] = -1;
    if (j.args[r].init_res != ncclSuccess) continue;
    struct weft_bootstrap* bs = j.args[r].comm->ctx.bootstrap;
    fds[r] = stranger_connect(&bs->listen_addr);
  }
  for (int r = 0; r < NRANKS; r++) {
    if (fds[r] < 0) continue;
    struct weft_bootstrap* bs = j.args[r].comm->ctx.bootstrap;
    /* A message is signed over the receiver's session nonce: a stranger can only guess. */
    struct weft_bs_opening o;
    memset(&o, 0, sizeof(o));
    o.hdr = (struct weft_bs_header){.magic = bs->magic,
                                    .type = WEFT_SOCKET_BOOTSTRAP,
                                    .kind = WEFT_BS_SPLIT,
                                    .src = (r + NRANKS - 1) % NRANKS,
                                    .dst = r,
                                    /* The next in order, as a peer would send it. */
                                    .seq = bs->recv_seq[(r + NRANKS - 1) % NRANKS] + 1,
                                    .size = sizeof(lure)};
    weft_auth_random(o.mac, sizeof(o.mac));
    EXPECT(send(fds[r], &o, sizeof(o), MSG_NOSIGNAL) == (ssize_t)sizeof(o));
    (void)send(fds[r], &lure, sizeof(lure), MSG_NOSIGNAL);
    EXPECT_MSG(stranger_dropped(fds[r], 10000, 0, NULL), "rank %d kept the forged split connection", r);
    close(fds[r]);
  }
  __atomic_store_n(&stranger_done, 1, __ATOMIC_RELEASE);
  EXPECT_MSG(job_finish(&j), "split injection: the real job failed");
  EXPECT_MSG(!stranger_was_contacted(lfd), "split injection: a rank connected to the stranger");
  close(lfd);
  pthread_barrier_destroy(&ready);
}

/* NCCL_COMM_ID mode: a rank whose secret differs is refused and says why (ncclInvalidUsage). */
static void scenario_wrong_secret(void) {
  ncclUniqueId id = job_id(), wrong = id;
  struct weft_bootstrap_handle h = handle_of(&id);
  weft_sha256("another secret", 14, h.key.bytes);
  memcpy(wrong.internal, &h, sizeof(h));
  struct job j = {0};
  job_start(&j, &id, 0, 1, 0, NULL);
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRank(&comm, NRANKS, wrong, 1);
  EXPECT_EQ_INT(res, ncclInvalidUsage);
  if (res == ncclSuccess) ncclCommDestroy(comm);
  job_start(&j, &id, 1, NRANKS, 0, NULL);
  EXPECT_MSG(job_finish(&j), "wrong secret: the real job failed");
}

static void run_all(void) {
  scenario_forged_checkin("impersonating rank 1", 1, NRANKS);
  scenario_forged_checkin("first check-in with nranks 2^24", 0, WEFT_BOOTSTRAP_MAX_RANKS);
  scenario_replay();
  scenario_split_injection();
  if (mode == MODE_COMM_ID) scenario_wrong_secret();
}

int main(void) {
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "60", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  unsetenv("NCCL_COMM_ID");
  weft_param_reload();
  mode = MODE_UNIQUE_ID;
  run_all();
  char comm_id[64];
  snprintf(comm_id, sizeof(comm_id), "127.0.0.1:%d", test_free_port());
  setenv("NCCL_COMM_ID", comm_id, 1);
  setenv("WEFT_JOB_SECRET", "test secret of this job", 1);
  weft_param_reload();
  mode = MODE_COMM_ID;
  run_all();
  return test_finish("test_bootstrap_stranger");
}
