/* The transport conformance suite (nng's style): the same cases over every transport of the table
 * (transport/transport.h) that runs on a host without a GPU, each between two ranks joined by a
 * real bootstrap and connected through the one setup path (weft_transport_offer / take /
 * finish_offer): the table's choice for the peer; Simple and LL steps with their bytes and the
 * head/tail protocol, the FIFO wrapping several times; teardown leaving no segment, mapping,
 * descriptor or proxy connection behind; and, between processes, a peer killed mid-transfer
 * failing the survivor's wait (not hanging it). GPU P2P, and SHM and NET as CUDA maps them, run in
 * the emulated-GPU collective tests (tests/gpuemu), not here. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "check.h"
#include "collectives/tuned.h"
#include "conn_steps.h"
#include "core/comm.h"
#include "proxy/proxy.h"
#include "transport/transport.h"

#define TAG 0x7e570100
#define TAG_ACK 0x7e570200
#define NSTEPS_RUN (3 * WEFT_NSTEPS + 5) /* per protocol: the FIFO wraps three times */
#define KILL_AFTER 3                     /* steps moved before a victim dies */
#define LOST_WITHIN_S 8                  /* WEFT_TIMEOUT is longer: the loss itself must be seen */

struct tcase {
  const char* name;
  const struct weft_transport_ops* tr;
  int procs;  /* ranks are processes (else threads of this one) */
  int remote; /* as on different hosts */
};

/* Same-process memory is SHM's mode for ranks that are threads of one process. */
static const struct tcase cases[] = {
    {"SHM, processes", &weft_transport_shm, 1, 0},
    {"SHM, threads of one process", &weft_transport_shm, 0, 0},
    {"NET, processes", &weft_transport_net, 1, 1},
    {"NET, threads of one process", &weft_transport_net, 0, 1},
};

enum { NOBODY_DIES = -1 };

struct rank_job {
  const struct tcase* tc;
  const ncclUniqueId* id;
  int rank;
  int victim; /* the rank that dies mid-transfer, or NOBODY_DIES */
};

static char shm_dir[256];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Entries of dir whose name contains part (all when part is NULL). */
static int count_entries(const char* dir, const char* part) {
  DIR* d = opendir(dir);
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && (part == NULL || strstr(e->d_name, part) != NULL)) n++;
  closedir(d);
  return n;
}

/* Descriptors of this process whose target contains part. */
static int count_fds(const char* part) {
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  int n = 0;
  char path[300], target[512];
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(path, target, sizeof(target) - 1);
    if (len <= 0) continue;
    target[len] = 0;
    n += strstr(target, part) != NULL;
  }
  closedir(d);
  return n;
}

/* Mappings of this process whose path contains part. */
static int count_maps(const char* part) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), f)) n += strstr(line, part) != NULL;
  fclose(f);
  return n;
}

/* Everything a rank needs to wait as the host executor does. */
struct rank_env {
  volatile uint32_t abort_flag;
  volatile ncclResult_t async;
  struct weft_cause cause;
  struct weft_peer_info peers[2];
  uint8_t watch[2];
  struct weft_waiter w;
};

/* Peer processes are watched on one host only, as the engine does (init_watch): across hosts the
 * network connector itself must notice the loss. */
static ncclResult_t env_init(struct rank_env* e, struct weft_bootstrap* bs, int rank,
                             const struct tcase* tc) {
  memset(e, 0, sizeof(*e));
  e->peers[rank].pid = getpid();
  snprintf(e->peers[rank].host_name, sizeof(e->peers[rank].host_name), "h%d", rank);
  ncclResult_t res = weft_bootstrap_allgather(bs, e->peers, sizeof(e->peers[0]));
  e->watch[1 - rank] = tc->procs && !tc->remote;
  weft_waiter_init(&e->w, &e->abort_flag, rank, 2);
  e->w.async_result = &e->async;
  e->w.peers = e->peers;
  e->w.watch = e->watch;
  e->w.cause = &e->cause;
  e->w.opname = "test steps";
  return res;
}

static void link_peer(const struct tcase* tc, struct weft_bootstrap* bs, struct rank_env* e, int rank,
                      struct weft_link_peer* lp) {
  memset(lp, 0, sizeof(*lp));
  int peer = 1 - rank;
  lp->net = (struct weft_net_peer){bs,        rank, peer, e->peers[peer].host_name, &e->abort_flag, &e->async,
                                   &e->cause, NULL, 0};
  lp->remote = tc->remote;
  lp->same_process = !tc->procs;
  lp->peer_pid = e->peers[peer].pid;
}

/* Rank 1 sends, rank 0 receives. The victim dies after KILL_AFTER steps (a sender with them
 * published, a receiver with them consumed); the survivor's wait must then fail, soon. */
static void move_steps(const struct tcase* tc, struct weft_conn* c, struct rank_env* e, int rank, int ll,
                       int victim) {
  const char* proto = ll ? "LL" : "Simple";
  uint64_t first = c->step, upto = first + NSTEPS_RUN;
  int bad = 0, credit_bad = 0;
  ncclResult_t res = ncclSuccess;
  double t0 = now_s();
  /* A survivor goes on until its wait fails: a network sender's steps fill socket buffers first. */
  if (victim != NOBODY_DIES) upto = UINT64_MAX;
  while (c->step < upto && res == ncclSuccess && now_s() - t0 < 2 * LOST_WITHIN_S) {
    if (victim == rank && c->step == first + KILL_AFTER) raise(SIGKILL);
    if (rank == 1) {
      res = weft_host_wait(&e->w, head_ready, c, &c->ctrl->head, &c->ctrl->head_waiting, 0, 0, "send");
      if (res == ncclSuccess) try_send(c, ll);
      if (ld(&c->ctrl->head) > ld(&c->ctrl->tail)) credit_bad++; /* a credit for a step never sent */
    } else {
      res = weft_host_wait(&e->w, tail_ready, c, &c->ctrl->tail, &c->ctrl->tail_waiting, 1, 0, "receive");
      if (res == ncclSuccess) try_recv(c, ll, &bad);
    }
  }
  double took = now_s() - t0;
  if (victim != NOBODY_DIES) {
    EXPECT_MSG(res != ncclSuccess && took < LOST_WITHIN_S,
               "%s %s: rank %d's wait for its killed peer gave %d after %.1f s", tc->name, proto, rank, res,
               took);
    return;
  }
  EXPECT_MSG(res == ncclSuccess && c->step == upto, "%s %s: rank %d moved %llu of %d steps (%d)", tc->name,
             proto, rank, (unsigned long long)(c->step - first), NSTEPS_RUN, res);
  EXPECT_MSG(bad == 0, "%s %s: %d wrong words or FIFO overruns", tc->name, proto, bad);
  EXPECT_MSG(credit_bad == 0, "%s %s: head passed tail %d time(s)", tc->name, proto, credit_bad);
  while (rank == 1 && ld(&c->ctrl->head) < upto && now_s() - t0 < 20) sched_yield();
}

/* Once both ranks are done with a protocol: every step sent came back as exactly one credit, and
 * every step received was published exactly once. */
static void check_counters(const struct tcase* tc, struct weft_bootstrap* bs, struct weft_conn* c, int rank) {
  EXPECT(weft_bootstrap_barrier(bs) == ncclSuccess);
  uint64_t* counter = rank == 1 ? &c->ctrl->head : &c->ctrl->tail;
  EXPECT_MSG(ld(counter) == c->step, "%s: rank %d's %s is %llu after %llu steps", tc->name, rank,
             rank == 1 ? "head" : "tail", (unsigned long long)ld(counter), (unsigned long long)c->step);
  EXPECT(weft_bootstrap_barrier(bs) == ncclSuccess); /* before the sender moves on */
}

/* The connector's segment (its file, mapping and descriptor) and proxy connections are gone once
 * both sides have released it. */
static void check_teardown(const struct tcase* tc) {
  EXPECT_MSG(count_fds(shm_dir) == 0 && count_fds("weft-conn") == 0, "%s: a segment's descriptor is open",
             tc->name);
  EXPECT_MSG(count_entries(shm_dir, NULL) == 0, "%s: files left in %s", tc->name, shm_dir);
  EXPECT_MSG(count_maps(shm_dir) == 0 && count_maps("weft-conn") == 0, "%s: segments still mapped", tc->name);
  EXPECT_MSG(weft_proxy_nconns() == 0, "%s: %d proxy connections left", tc->name, weft_proxy_nconns());
}

/* Connect (rank 0 offers, rank 1 takes), move Simple then LL steps, release. */
static void run_rank(const struct rank_job* j) {
  const struct tcase* tc = j->tc;
  struct weft_bootstrap* bs = NULL;
  volatile uint32_t bs_abort = 0;
  struct rank_env e;
  if (weft_bootstrap_init_scalable(j->id, 1, j->rank, 2, &bs_abort, &bs) != ncclSuccess ||
      env_init(&e, bs, j->rank, tc) != ncclSuccess) {
    EXPECT_MSG(0, "%s: rank %d: bootstrap", tc->name, j->rank);
    weft_bootstrap_destroy(bs);
    return;
  }
  struct weft_link_peer lp;
  link_peer(tc, bs, &e, j->rank, &lp);
  EXPECT_MSG(weft_transport_choose(&lp) == tc->tr, "%s: the table chose %s", tc->name,
             weft_transport_choose(&lp)->name);
  struct weft_link_mem* m = NULL;
  ncclResult_t res = j->rank == 0 ? weft_transport_offer(&lp, TAG, 64 * 1024, 32 * 1024, &m)
                                  : weft_transport_take(&lp, TAG, TAG_ACK, &m);
  if (res == ncclSuccess && j->rank == 0) res = weft_transport_finish_offer(&lp, TAG_ACK, m);
  EXPECT_MSG(res == ncclSuccess && m != NULL && m->tr == tc->tr && m->host != NULL, "%s: rank %d connect: %d",
             tc->name, j->rank, res);
  if (res == ncclSuccess) {
    struct weft_conn c;
    weft_conn_bind(&c, m->host, 1 - j->rank);
    move_steps(tc, &c, &e, j->rank, 0, j->victim);
    for (int ll = 0; ll < 2 && j->victim == NOBODY_DIES; ll++) {
      if (ll) move_steps(tc, &c, &e, j->rank, 1, NOBODY_DIES);
      check_counters(tc, bs, &c, j->rank);
    }
  }
  weft_transport_release(m);
  if (j->victim == NOBODY_DIES) {
    EXPECT(weft_bootstrap_barrier(bs) == ncclSuccess);
    /* Thread ranks share one /proc/self/fd, where the other thread's check (its opendir of
     * shm_dir) would count as a descriptor left open: run_case checks once after both. */
    if (tc->procs) check_teardown(tc);
  }
  weft_bootstrap_destroy(bs);
}

static void* rank_thread(void* arg) {
  run_rank(arg);
  return NULL;
}

/* Both ranks, as threads or as forked processes (forked before any thread of theirs starts). */
static void run_case(const struct tcase* tc, int victim) {
  ncclUniqueId id;
  if (weft_bootstrap_get_unique_id(&id) != ncclSuccess) {
    EXPECT_MSG(0, "%s: unique id", tc->name);
    return;
  }
  struct rank_job jobs[2] = {{tc, &id, 0, victim}, {tc, &id, 1, victim}};
  if (!tc->procs) {
    pthread_t t[2];
    for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, rank_thread, &jobs[r]);
    for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
    check_teardown(tc);
    printf("%s: done\n", tc->name);
    return;
  }
  pid_t pids[2];
  fflush(NULL);
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(60); /* a hang is a failure, not a stuck test run */
      test_failures = 0;
      run_rank(&jobs[r]);
      _exit(test_failures == 0 ? 0 : 1);
    }
  }
  for (int r = 0; r < 2; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    int ok = r == victim ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL : WIFEXITED(st) && WEXITSTATUS(st) == 0;
    EXPECT_MSG(ok, "%s%s: rank %d ended with status 0x%x", tc->name, victim >= 0 ? " (a rank killed)" : "", r,
               st);
  }
  printf("%s%s: done\n", tc->name, victim == 0 ? ", receiver killed" : victim == 1 ? ", sender killed" : "");
}

/* The walk over the table for peers of both executors, under NCCL's knobs: P2P for a GPU's own
 * device (CUDA builds; equal devices stand for one bus id here), and not once NCCL_P2P_DISABLE or
 * NCCL_P2P_LEVEL=LOC rules it out (the verdict the CUDA executor asks of a communicator without a
 * topology model, weft_comm_p2p_verdict); to a GPU this process cannot see (peer device -1) only
 * on the model's yes; never on its no; then SHM on one host unless NCCL_SHM_DISABLE says no (except
 * between host ranks of one process, which share the process's memory); else NET. Devices are
 * never asked whether they map each other here (no GPU needed). */
static void expect_verdict(const char* env, int gpu, int my_dev, int peer_dev, int remote, int verdict,
                           const struct weft_transport_ops* want) {
  struct weft_link_peer p = {.gpu = gpu,
                             .my_dev = my_dev,
                             .peer_dev = peer_dev,
                             .same_device = gpu && my_dev == peer_dev,
                             .remote = remote,
                             .topo_p2p = verdict};
  const struct weft_transport_ops* got = weft_transport_choose(&p);
  EXPECT_MSG(got == want, "%s%s peer (devices %d, %d, verdict %d)%s: chose %s, not %s", env,
             gpu ? " GPU" : " host", my_dev, peer_dev, verdict, remote ? " on another host" : "", got->name,
             want->name);
}

static void expect_choice(const char* env, int gpu, int my_dev, int peer_dev, int remote,
                          const struct weft_transport_ops* want) {
  struct weft_comm_ctx no_model = {.rank = 0, .nranks = 2};
  expect_verdict(env, gpu, my_dev, peer_dev, remote, weft_comm_p2p_verdict(&no_model, 1), want);
}

static void run_choice(void) {
#if WEFT_CUDA
  const struct weft_transport_ops* own_device = &weft_transport_p2p;
#else
  const struct weft_transport_ops* own_device = &weft_transport_shm;
#endif
  expect_choice("defaults:", 1, 0, 0, 0, own_device);
  expect_choice("defaults:", 1, 0, 0, 1, &weft_transport_net);
  expect_choice("defaults (peer's GPU not visible):", 1, 0, -1, 0, &weft_transport_shm);
  /* The topology model's verdicts (by the path between the GPUs and NCCL_P2P_LEVEL). */
#if WEFT_CUDA
  expect_verdict("model allows:", 1, 0, -1, 0, WEFT_TOPO_P2P_ALLOWED, &weft_transport_p2p);
#endif
  expect_verdict("model denies:", 1, 0, 1, 0, WEFT_TOPO_P2P_DENIED, &weft_transport_shm);
  expect_verdict("model denies:", 1, 0, -1, 0, WEFT_TOPO_P2P_DENIED, &weft_transport_shm);
  expect_verdict("model denies:", 1, 0, 0, 0, WEFT_TOPO_P2P_DENIED, own_device);
  expect_verdict("model allows:", 1, 0, -1, 1, WEFT_TOPO_P2P_ALLOWED, &weft_transport_net);
  expect_choice("defaults:", 0, -1, -1, 0, &weft_transport_shm);
  expect_choice("defaults:", 0, -1, -1, 1, &weft_transport_net);
  setenv("NCCL_P2P_LEVEL", "LOC", 1);
  expect_choice("NCCL_P2P_LEVEL=LOC:", 1, 0, 1, 0, &weft_transport_shm);
  expect_choice("NCCL_P2P_LEVEL=LOC:", 1, 0, 0, 0, own_device);
  unsetenv("NCCL_P2P_LEVEL");
  setenv("NCCL_P2P_DISABLE", "1", 1);
  expect_choice("NCCL_P2P_DISABLE=1:", 1, 0, 1, 0, &weft_transport_shm);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  expect_choice("NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1:", 1, 0, 1, 0, &weft_transport_net);
  expect_choice("NCCL_SHM_DISABLE=1:", 0, -1, -1, 0, &weft_transport_net);
  struct weft_link_peer thread_rank = {.same_process = 1}; /* host ranks of one process: its memory */
  EXPECT_MSG(weft_transport_choose(&thread_rank) == &weft_transport_shm,
             "NCCL_SHM_DISABLE=1: a host rank of this process: chose %s, not SHM",
             weft_transport_choose(&thread_rank)->name);
  unsetenv("NCCL_P2P_DISABLE");
  unsetenv("NCCL_SHM_DISABLE");
}

int main(void) {
  snprintf(shm_dir, sizeof(shm_dir), "%s/weft-tconf.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(shm_dir) == NULL) test_skip("no temporary directory");
  setenv("WEFT_SHM_DIR", shm_dir, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_NET", "Socket", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("WEFT_TIMEOUT", "20", 1);
  int dev_shm = count_entries("/dev/shm", "weft");
  run_choice();
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    run_case(&cases[i], NOBODY_DIES);
    if (cases[i].procs) {
      run_case(&cases[i], 1);
      run_case(&cases[i], 0);
    }
  }
  EXPECT_MSG(count_entries("/dev/shm", "weft") <= dev_shm, "segments of ours left in /dev/shm");
  rmdir(shm_dir);
  return test_finish("test_transport_conformance");
}
