/* Shared by the bootstrap tests: run ranks as threads or as forked processes, and the workload
 * every rank runs (all-gather contents, p2p between all pairs with out-of-order receives, barrier). */
#ifndef WEFT_TEST_BOOTSTRAP_COMMON_H
#define WEFT_TEST_BOOTSTRAP_COMMON_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "check.h"
#include "util/log.h"
#include "util/socket.h"

struct slot {
  int rank, nranks;
  uint64_t value;
  char text[24];
};

static struct slot make_slot(int rank, int nranks) {
  struct slot s;
  memset(&s, 0, sizeof(s));
  s.rank = rank;
  s.nranks = nranks;
  s.value = 0x9e3779b97f4a7c15ULL * (uint64_t)(rank + 1) ^ (uint64_t)nranks;
  snprintf(s.text, sizeof(s.text), "rank-%d-of-%d", rank, nranks);
  return s;
}

/* Message t from src to dst: t 1 is empty, t 0 is large for a quarter of the pairs. */
static size_t msg_size(int src, int dst, int t) {
  if (t == 1) return 0;
  if (t == 0) return (src + dst) % 4 == 0 ? 300000 : 5000 + (size_t)src;
  return 1 + (size_t)(src * 31 + dst * 7 + t) % 300;
}

static unsigned char msg_byte(int src, int dst, int t, size_t i) {
  return (unsigned char)(src * 131 + dst * 17 + t * 7 + i * 3 + i / 251);
}

/* Tags per message index: 3 and 1 share a tag, so their order matters. */
static const int msg_tag[4] = {0, 1, 2, 1};

static int check_allgather(struct weft_bootstrap* bs) {
  int rank = weft_bootstrap_rank(bs), n = weft_bootstrap_nranks(bs), bad = 0;
  struct slot* all = calloc(n, sizeof(*all));
  all[rank] = make_slot(rank, n);
  if (weft_bootstrap_allgather(bs, all, sizeof(*all)) != ncclSuccess) bad++;
  for (int r = 0; r < n && !bad; r++) {
    struct slot want = make_slot(r, n);
    if (memcmp(&all[r], &want, sizeof(want)) != 0) {
      fprintf(stderr, "rank %d: all-gather slot %d wrong\n", rank, r);
      bad++;
    }
  }
  free(all);
  return bad;
}

/* Every rank sends 4 messages to every rank (itself included), then receives them in another
 * order: tag 2 first, then the two tag-1 messages, which must come in send order. */
static int check_p2p(struct weft_bootstrap* bs, int tag_base) {
  int rank = weft_bootstrap_rank(bs), n = weft_bootstrap_nranks(bs), bad = 0;
  char* buf = malloc(300001);
  for (int d = 0; d < n; d++) {
    int peer = (rank + d) % n;
    for (int t = 0; t < 4; t++) {
      size_t len = msg_size(rank, peer, t);
      for (size_t i = 0; i < len; i++) buf[i] = (char)msg_byte(rank, peer, t, i);
      if (weft_bootstrap_send(bs, peer, tag_base + msg_tag[t], buf, len) != ncclSuccess) bad++;
    }
  }
  static const int order[4] = {2, 1, 0, 3};
  for (int d = 0; d < n && !bad; d++) {
    int peer = (rank - d + n) % n;
    for (int k = 0; k < 4; k++) {
      int t = order[k];
      size_t len = msg_size(peer, rank, t);
      memset(buf, 0xee, len + 1);
      if (weft_bootstrap_recv(bs, peer, tag_base + msg_tag[t], buf, len) != ncclSuccess) {
        bad++;
        break;
      }
      for (size_t i = 0; i < len; i++) {
        if ((unsigned char)buf[i] != msg_byte(peer, rank, t, i)) {
          fprintf(stderr, "rank %d: message %d from rank %d wrong at byte %zu\n", rank, t, peer, i);
          bad++;
          break;
        }
      }
    }
  }
  free(buf);
  return bad;
}

/* counter is shared by all ranks; the last rank is slow, so a barrier that does not wait is caught. */
static int check_barrier(struct weft_bootstrap* bs, int* counter) {
  int rank = weft_bootstrap_rank(bs), n = weft_bootstrap_nranks(bs), bad = 0;
  for (int b = 0; b < 3; b++) {
    if (rank == n - 1) usleep(30000);
    __atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
    if (weft_bootstrap_barrier(bs) != ncclSuccess) bad++;
    int seen = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
    if (seen < n * (b + 1)) {
      fprintf(stderr, "rank %d: barrier %d passed with %d of %d arrivals\n", rank, b, seen, n * (b + 1));
      bad++;
    }
  }
  return bad;
}

static int exercise(struct weft_bootstrap* bs, int* counter) {
  int bad = check_allgather(bs);
  if (!bad) bad += check_p2p(bs, 100);
  if (!bad) bad += check_barrier(bs, counter);
  return bad;
}

/* One rank's job: join (ids, nids) and run the workload. */
struct rank_job {
  const ncclUniqueId* ids;
  int nids, rank, nranks;
  int from_env; /* take the id from weft_bootstrap_get_unique_id (NCCL_COMM_ID) */
  int* counter;
  volatile uint32_t* abort_flag;
  ncclResult_t res;
  int bad;
  double secs;
};

static void* rank_main(void* p) {
  struct rank_job* j = p;
  int64_t t0 = weft_socket_now_ns();
  ncclUniqueId id;
  const ncclUniqueId* ids = j->ids;
  if (j->from_env) {
    j->res = weft_bootstrap_get_unique_id(&id);
    if (j->res != ncclSuccess) return NULL;
    if (j->ids && memcmp(&id, j->ids, sizeof(id)) != 0) {
      fprintf(stderr, "rank %d: NCCL_COMM_ID gave a different id\n", j->rank);
      j->bad++;
    }
    ids = &id;
  }
  struct weft_bootstrap* bs = NULL;
  j->res = weft_bootstrap_init_scalable(ids, j->nids, j->rank, j->nranks, j->abort_flag, &bs);
  j->secs = (weft_socket_now_ns() - t0) / 1e9;
  if (j->res != ncclSuccess) return NULL;
  if (weft_bootstrap_rank(bs) != j->rank || weft_bootstrap_nranks(bs) != j->nranks) j->bad++;
  if (j->counter) j->bad += exercise(bs, j->counter);
  weft_bootstrap_destroy(bs);
  return NULL;
}

static int* shared_counter(void) {
  int* c = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  *c = 0;
  return c;
}

/* Ranks as threads; skip[r] != 0 leaves rank r out. Returns the number of failed ranks. */
static int run_threads_skip(const ncclUniqueId* ids, int nids, int nranks, int from_env, const char* skip,
                            struct rank_job* jobs) {
  pthread_t* t = calloc(nranks, sizeof(*t));
  int* counter = shared_counter();
  for (int r = 0; r < nranks; r++) {
    jobs[r] = (struct rank_job){ids, nids, r, nranks, from_env, counter, NULL, ncclInternalError, 0, 0};
    if (!skip || !skip[r]) pthread_create(&t[r], NULL, rank_main, &jobs[r]);
  }
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    if (skip && skip[r]) continue;
    pthread_join(t[r], NULL);
    failed += jobs[r].res != ncclSuccess || jobs[r].bad;
  }
  munmap(counter, sizeof(int));
  free(t);
  return failed;
}

static inline int run_threads(const ncclUniqueId* ids, int nids, int nranks, int from_env) {
  struct rank_job* jobs = calloc(nranks, sizeof(*jobs));
  int failed = run_threads_skip(ids, nids, nranks, from_env, NULL, jobs);
  free(jobs);
  return failed;
}

/* Ranks as forked processes; each exits 0 when its job passed. Returns the number that failed. */
static inline int run_procs(const ncclUniqueId* ids, int nids, int nranks, int from_env) {
  pid_t* pids = calloc(nranks, sizeof(*pids));
  int* counter = shared_counter();
  fflush(NULL);
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(60); /* a hung child must not hang the test */
      struct rank_job j = {ids, nids, r, nranks, from_env, counter, NULL, ncclInternalError, 0, 0};
      rank_main(&j);
      _exit(j.res == ncclSuccess && j.bad == 0 ? 0 : 1);
    }
  }
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    int status;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "process of rank %d of %d failed (status 0x%x)\n", r, nranks, status);
      failed++;
    }
  }
  munmap(counter, sizeof(int));
  free(pids);
  return failed;
}

#endif
