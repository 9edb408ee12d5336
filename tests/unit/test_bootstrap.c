/* Bootstrap on the good paths: 1-16 ranks as threads and as processes, NCCL_COMM_ID (IPv4, IPv6,
 * hostname), several roots, split, and garbage connections to the root and to ranks. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>

#include "bootstrap/internal.h"
#include "test_bootstrap_common.h"
#include "uid.h"

static void test_threads(void) {
  for (int n = 1; n <= 16; n++) {
    ncclUniqueId id;
    EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
    EXPECT_MSG(run_threads(&id, 1, n, 0) == 0, "%d ranks as threads", n);
  }
}

/* The id's root runs in a helper process, so no thread of ours exists when the ranks fork. */
static void test_processes(void) {
  static const int counts[] = {2, 7, 13, 16};
  for (int i = 0; i < 4; i++) {
    ncclUniqueId id;
    struct test_uid_holder root;
    EXPECT(test_uid_from_child(&id, &root) == ncclSuccess);
    EXPECT_MSG(run_procs(&id, 1, counts[i], 0) == 0, "%d ranks as processes", counts[i]);
    test_uid_release(&root);
  }
}

static void test_unique_ids(void) {
  ncclUniqueId a, b;
  EXPECT(weft_bootstrap_get_unique_id(&a) == ncclSuccess);
  EXPECT(weft_bootstrap_get_unique_id(&b) == ncclSuccess);
  struct weft_bootstrap_handle ha, hb;
  memcpy(&ha, &a, sizeof(ha));
  memcpy(&hb, &b, sizeof(hb));
  EXPECT(ha.magic != hb.magic && ha.magic != WEFT_BOOTSTRAP_COMM_ID_MAGIC);
  EXPECT(weft_socket_addr_port(&ha.addr) > 0 &&
         weft_socket_addr_port(&ha.addr) != weft_socket_addr_port(&hb.addr));
  for (size_t i = sizeof(ha); i < sizeof(a); i++) EXPECT(a.internal[i] == 0);
  /* The roots of unused ids must not disturb anything: join a job with one of them. */
  EXPECT(run_threads(&b, 1, 3, 0) == 0);
}

static int ipv6_loopback(void) {
  union weft_socket_addr a;
  int fd;
  if (weft_socket_addr_parse("[::1]:0", AF_INET6, &a) != ncclSuccess) return 0;
  if (weft_socket_listen(&a, &fd) != ncclSuccess) return 0;
  weft_socket_close(fd);
  return 1;
}

/* Every rank derives the id from NCCL_COMM_ID; rank 0 hosts the root. */
static void comm_id_case(const char* fmt, int nranks, int procs) {
  char value[64];
  snprintf(value, sizeof(value), fmt, test_free_port());
  setenv("NCCL_COMM_ID", value, 1);
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  struct weft_bootstrap_handle h;
  memcpy(&h, &id, sizeof(h));
  EXPECT(h.magic == WEFT_BOOTSTRAP_COMM_ID_MAGIC);
  int failed = procs ? run_procs(&id, 1, nranks, 1) : run_threads(&id, 1, nranks, 1);
  EXPECT_MSG(failed == 0, "NCCL_COMM_ID=%s, %d ranks as %s", value, nranks, procs ? "processes" : "threads");
  /* The same address works again for a second job once the first root is done. */
  if (!procs) EXPECT_MSG(run_threads(&id, 1, 2, 1) == 0, "second job on NCCL_COMM_ID=%s", value);
  unsetenv("NCCL_COMM_ID");
}

/* Ranks as processes, rank 0's process hosting the root: run before any thread exists. */
static void test_comm_id_processes(void) { comm_id_case("127.0.0.1:%d", 4, 1); }

static void test_comm_id(void) {
  comm_id_case("127.0.0.1:%d", 5, 0);
  comm_id_case("localhost:%d", 3, 0);
  if (ipv6_loopback()) comm_id_case("[::1]:%d", 3, 0);
}

static void test_scalable(void) {
  static const int cases[][3] = {{7, 2, 0}, {16, 3, 0}, {3, 3, 0}, {2, 2, 0}, {7, 3, 1}, {13, 2, 1}};
  for (int c = 0; c < 6; c++) {
    int n = cases[c][0], nids = cases[c][1], procs = cases[c][2];
    ncclUniqueId ids[3];
    for (int k = 0; k < nids; k++) EXPECT(weft_bootstrap_get_unique_id(&ids[k]) == ncclSuccess);
    int failed = procs ? run_procs(ids, nids, n, 0) : run_threads(ids, nids, n, 0);
    EXPECT_MSG(failed == 0, "%d ranks, %d roots, %s", n, nids, procs ? "processes" : "threads");
  }
  int lo, hi;
  weft_bs_block(10, 3, 0, &lo, &hi);
  EXPECT(lo == 0 && hi == 4);
  weft_bs_block(10, 3, 2, &lo, &hi);
  EXPECT(lo == 7 && hi == 10);
  for (int r = 0; r < 10; r++) EXPECT_EQ_INT(weft_bs_root_of(10, 3, r), r < 4 ? 0 : r < 7 ? 1 : 2);
}

/* Split tests: parent of 9 ranks; split A by rank % 3 with keys reversing the order, then split
 * B into {0-3}, {4-7}, {8} (a singleton). */
#define SPLIT_N 9
struct split_job {
  const ncclUniqueId* id;
  int rank;
  int* counters; /* [2][3] */
  int bad;
};

static int color_of(int split, int r) { return split == 0 ? r % 3 : r < 4 ? 0 : r < 8 ? 1 : 2; }
static int key_of(int split, int r) { return split == 0 ? -r : r; }

static int do_split(struct weft_bootstrap* parent, int split, int rank, int* counters,
                    struct weft_bootstrap** child) {
  int members[SPLIT_N], n = 0, me = -1;
  for (int r = 0; r < SPLIT_N; r++)
    if (color_of(split, r) == color_of(split, rank)) members[n++] = r;
  for (int i = 1; i < n; i++) /* insertion sort by key */
    for (int j = i; j > 0 && key_of(split, members[j]) < key_of(split, members[j - 1]); j--) {
      int t = members[j];
      members[j] = members[j - 1];
      members[j - 1] = t;
    }
  for (int i = 0; i < n; i++)
    if (members[i] == rank) me = i;
  if (weft_bootstrap_split(parent, me, n, members, NULL, child) != ncclSuccess) return 1;
  if (weft_bootstrap_rank(*child) != me || weft_bootstrap_nranks(*child) != n) return 1;
  return exercise(*child, &counters[split * 3 + color_of(split, rank)]);
}

static void* split_main(void* p) {
  struct split_job* j = p;
  struct weft_bootstrap *parent = NULL, *a = NULL, *b = NULL;
  if (weft_bootstrap_init(j->id, j->rank, SPLIT_N, NULL, &parent) != ncclSuccess) {
    j->bad++;
    return NULL;
  }
  j->bad += do_split(parent, 0, j->rank, j->counters, &a);
  if (!j->bad) j->bad += do_split(parent, 1, j->rank, j->counters, &b);
  /* The parent and the first child still work after the second split. */
  if (!j->bad) j->bad += check_allgather(parent);
  if (!j->bad) j->bad += check_p2p(a, 7);
  weft_bootstrap_destroy(b);
  weft_bootstrap_destroy(a);
  weft_bootstrap_destroy(parent);
  return NULL;
}

static void test_split(void) {
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  int counters[6] = {0};
  struct split_job jobs[SPLIT_N];
  pthread_t t[SPLIT_N];
  for (int r = 0; r < SPLIT_N; r++) {
    jobs[r] = (struct split_job){&id, r, counters, 0};
    pthread_create(&t[r], NULL, split_main, &jobs[r]);
  }
  for (int r = 0; r < SPLIT_N; r++) {
    pthread_join(t[r], NULL);
    EXPECT_MSG(jobs[r].bad == 0, "split, parent rank %d", r);
  }
}

static int connect_to(const union weft_socket_addr* a) {
  int fd = -1;
  EXPECT(weft_socket_connect(a, "test target", NULL, weft_socket_deadline(5), &fd) == ncclSuccess);
  return fd;
}

static void send_and_close(const union weft_socket_addr* a, const void* data, size_t len) {
  int fd = connect_to(a);
  if (fd < 0) return;
  EXPECT(weft_socket_send_all(fd, data, len, "test target", NULL, weft_socket_deadline(5)) == ncclSuccess);
  weft_socket_close(fd);
}

/* Connections a broken or hostile client might make to the root; returns a silent one to hold. */
static int garbage_to_root(const struct weft_bootstrap_handle* h, int nranks) {
  char noise[200];
  for (size_t i = 0; i < sizeof(noise); i++) noise[i] = (char)(i * 37 + 11);
  send_and_close(&h->addr, noise, sizeof(noise));
  uint64_t wrong = h->magic ^ 1;
  send_and_close(&h->addr, &wrong, sizeof(wrong));
  send_and_close(&h->addr, &h->magic, sizeof(h->magic)); /* right magic, then an early close */
  struct weft_bs_checkin m = {.magic = h->magic,
                              .type = WEFT_SOCKET_BOOTSTRAP,
                              .kind = WEFT_BS_CHECKIN,
                              .rank = 0,
                              .nranks = 1 << 30,
                              .nroots = 1,
                              .iroot = 0};
  send_and_close(&h->addr, &m, sizeof(m)); /* huge nranks */
  m.nranks = nranks;
  m.rank = nranks + 5;
  send_and_close(&h->addr, &m, sizeof(m)); /* rank out of range */
  m.rank = 0;
  m.kind = 99;
  send_and_close(&h->addr, &m, sizeof(m)); /* unknown kind */
  m.kind = WEFT_BS_CHECKIN;
  m.type = WEFT_SOCKET_PROXY;
  send_and_close(&h->addr, &m, sizeof(m)); /* wrong connection type */
  int silent = connect_to(&h->addr);
  if (silent >= 0)
    EXPECT(weft_socket_send_all(silent, "x", 1, "root", NULL, weft_socket_deadline(5)) == ncclSuccess);
  return silent;
}

/* The same for a rank's listen socket, while the job runs. */
static void garbage_to_rank(struct weft_bootstrap* bs, int target) {
  const union weft_socket_addr* a = &bs->peers[target].addr;
  char noise[300];
  for (size_t i = 0; i < sizeof(noise); i++) noise[i] = (char)(i * 53 + 7);
  send_and_close(a, noise, sizeof(noise));
  struct weft_bs_header h = {.magic = bs->magic,
                             .type = WEFT_SOCKET_BOOTSTRAP,
                             .kind = WEFT_BS_P2P,
                             .src = bs->rank,
                             .dst = target,
                             .tag = 100,
                             .seq = 1000,
                             .size = 1ULL << 40};
  send_and_close(a, &h, sizeof(h)); /* huge length */
  h.size = 1u << 30;
  send_and_close(a, &h, sizeof(h)); /* big length, then an early close */
  h.size = 100;
  h.dst = target + 1;
  send_and_close(a, &h, sizeof(h)); /* addressed to someone else */
  h.dst = target;
  h.kind = WEFT_BS_RING;
  h.size = 0;
  send_and_close(a, &h, sizeof(h)); /* a second ring predecessor */
  h.magic ^= 0xff;
  send_and_close(a, &h, sizeof(h));
}

struct garbage_job {
  const ncclUniqueId* id;
  int rank, nranks, *counter, bad;
};

static void* garbage_rank_main(void* p) {
  struct garbage_job* j = p;
  struct weft_bootstrap* bs;
  if (weft_bootstrap_init(j->id, j->rank, j->nranks, NULL, &bs) != ncclSuccess) {
    j->bad++;
    return NULL;
  }
  if (j->rank == 0) garbage_to_rank(bs, 1);
  j->bad += exercise(bs, j->counter);
  weft_bootstrap_destroy(bs);
  return NULL;
}

static void test_garbage(void) {
  enum { N = 4 };
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  struct weft_bootstrap_handle h;
  memcpy(&h, &id, sizeof(h));
  int silent = garbage_to_root(&h, N);
  int counter = 0;
  struct garbage_job jobs[N];
  pthread_t t[N];
  for (int r = 0; r < N; r++) {
    jobs[r] = (struct garbage_job){&id, r, N, &counter, 0};
    pthread_create(&t[r], NULL, garbage_rank_main, &jobs[r]);
  }
  for (int r = 0; r < N; r++) {
    pthread_join(t[r], NULL);
    EXPECT_MSG(jobs[r].bad == 0, "rank %d with garbage connections around", r);
  }
  weft_socket_close(silent);
}

/* Misuse of p2p: a too-small receive buffer and a peer out of range fail cleanly. */
static void test_misuse(void) {
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  struct weft_bootstrap* bs;
  EXPECT(weft_bootstrap_init(&id, 0, 1, NULL, &bs) == ncclSuccess);
  char big[64] = "0123456789", small[4];
  EXPECT(weft_bootstrap_send(bs, 0, 5, big, sizeof(big)) == ncclSuccess);
  EXPECT(weft_bootstrap_recv(bs, 0, 5, small, sizeof(small)) == ncclInternalError);
  EXPECT(strstr(weft_log_last_error(), "64 bytes") != NULL);
  EXPECT(weft_bootstrap_send(bs, 1, 5, big, 1) == ncclInvalidArgument);
  EXPECT(weft_bootstrap_recv(bs, -1, 5, big, 1) == ncclInvalidArgument);
  /* A smaller message than the buffer is fine. */
  EXPECT(weft_bootstrap_send(bs, 0, 6, "ab", 2) == ncclSuccess);
  EXPECT(weft_bootstrap_recv(bs, 0, 6, big, sizeof(big)) == ncclSuccess && big[0] == 'a' && big[1] == 'b');
  weft_bootstrap_destroy(bs);
  weft_bootstrap_destroy(NULL);
  EXPECT(weft_bootstrap_init(&id, 2, 2, NULL, &bs) == ncclInvalidArgument);
  EXPECT(weft_bootstrap_init(&id, 0, 0, NULL, &bs) == ncclInvalidArgument);
}

/* Ranks of one process exchange messages in memory (bootstrap/local.c): with their listening
 * sockets closed once the job is formed, they still all-gather, send and meet at barriers. Over
 * TCP every message would need a connection to the receiver's listening socket. */
static void* closed_listener_main(void* p) {
  struct rank_job* j = p;
  struct weft_bootstrap* bs = NULL;
  j->res = weft_bootstrap_init(j->ids, j->rank, j->nranks, NULL, &bs);
  if (j->res != ncclSuccess) return NULL;
  weft_socket_close(bs->listen_fd);
  bs->listen_fd = -1;
  j->bad += exercise(bs, j->counter);
  weft_bootstrap_destroy(bs);
  return NULL;
}

static void test_in_memory(void) {
  enum { N = 6 };
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  struct rank_job jobs[N];
  pthread_t t[N];
  int counter = 0;
  for (int r = 0; r < N; r++) {
    jobs[r] = (struct rank_job){&id, 1, r, N, 0, &counter, NULL, ncclInternalError, 0, 0};
    pthread_create(&t[r], NULL, closed_listener_main, &jobs[r]);
  }
  for (int r = 0; r < N; r++) {
    pthread_join(t[r], NULL);
    EXPECT_MSG(jobs[r].res == ncclSuccess && jobs[r].bad == 0, "rank %d: init %d, %d check(s) failed", r,
               (int)jobs[r].res, jobs[r].bad);
  }
}

static int count_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 4096; fd++) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

/* A finished job leaves no descriptor behind: ranks close theirs, the root thread exits. */
static void test_no_fd_leak(void) {
  int before = count_fds();
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  EXPECT(run_threads(&id, 1, 8, 0) == 0);
  int after = count_fds();
  for (int i = 0; i < 100 && after > before; i++) {
    usleep(10000); /* the root closes its sockets just after the last reply */
    after = count_fds();
  }
  /* Roots of earlier tests may close their sockets meanwhile, so fewer is fine; a leak is more. */
  EXPECT_MSG(after <= before, "%d descriptors before the job, %d after", before, after);
}

int main(void) {
  int64_t t0 = weft_socket_now_ns();
  struct {
    const char* name;
    void (*fn)(void);
  } tests[] = {/* Processes first: they fork, and no thread may exist yet (TSan). */
               {"processes", test_processes},   {"NCCL_COMM_ID procs", test_comm_id_processes},
               {"unique ids", test_unique_ids}, {"threads 1-16", test_threads},
               {"NCCL_COMM_ID", test_comm_id},  {"scalable", test_scalable},
               {"split", test_split},           {"garbage", test_garbage},
               {"misuse", test_misuse},         {"in memory", test_in_memory},
               {"no fd leak", test_no_fd_leak}};
  for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
    int64_t t = weft_socket_now_ns();
    int before = test_failures;
    tests[i].fn();
    printf("%-14s %s in %.2f s\n", tests[i].name, test_failures == before ? "ok" : "FAILED",
           (weft_socket_now_ns() - t) / 1e9);
    fflush(stdout);
  }
  printf("total %.2f s\n", (weft_socket_now_ns() - t0) / 1e9);
  return test_finish("test_bootstrap");
}
