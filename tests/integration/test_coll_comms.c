/* Several communicators at once: two communicators over the same ranks used interleaved (and
 * in one group), a split communicator running beside its parent, and ncclCommInitAll driving
 * every rank from one thread through groups. Ranks as threads and as processes. */
#include "check.h"
#include "coll_util.h"

struct two_comms {
  ncclUniqueId second;
  struct case_list a, b;
};

/* Cases of list a on the first comm and list b on the second, alternating; then both comms'
 * all-reduces inside one group. */
static int body_two_comms(ncclComm_t comm, int rank, int nranks, void* arg) {
  struct two_comms* t = arg;
  ncclComm_t other = NULL;
  ncclResult_t res = ncclCommInitRank(&other, nranks, t->second, rank);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: second ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  int problems = 0;
  for (int i = 0; i < t->a.n || i < t->b.n; i++) {
    if (i < t->a.n) problems += run_case(&t->a.v[i], comm, rank, nranks) != 0;
    if (i < t->b.n) problems += run_case(&t->b.v[i], other, rank, nranks) != 0;
  }
  enum { N = 1001 };
  static __thread int32_t in1[N], in2[N], out1[N], out2[N];
  for (int i = 0; i < N; i++) {
    in1[i] = rank + i;
    in2[i] = 2 * rank - i;
  }
  ncclResult_t r1 = ncclGroupStart();
  ncclResult_t r2 = ncclAllReduce(in1, out1, N, ncclInt32, ncclSum, comm, NULL);
  ncclResult_t r3 = ncclAllReduce(in2, out2, N, ncclInt32, ncclMax, other, NULL);
  ncclResult_t r4 = ncclGroupEnd();
  if (r1 || r2 || r3 || r4) {
    fprintf(stderr, "FAILED rank %d: grouped all-reduces on two comms: %d %d %d %d: %s\n", rank, r1, r2, r3,
            r4, ncclGetLastError(NULL));
    problems++;
  } else {
    for (int i = 0; i < N; i++) {
      int32_t sum = nranks * (nranks - 1) / 2 + nranks * i, max = 2 * (nranks - 1) - i;
      if (out1[i] != sum || out2[i] != max) {
        fprintf(stderr, "FAILED rank %d: grouped all-reduces, element %d: %d %d want %d %d\n", rank, i,
                out1[i], out2[i], sum, max);
        problems++;
        break;
      }
    }
  }
  if (ncclCommDestroy(other) != ncclSuccess) problems++;
  return problems;
}

/* Split by parity with ranks reversed by key; cases alternate between parent and child. */
static int body_split(ncclComm_t comm, int rank, int nranks, void* arg) {
  struct case_list* l = arg;
  ncclComm_t sub = NULL;
  ncclResult_t res = ncclCommSplit(comm, rank % 2, -rank, &sub, NULL);
  if (res != ncclSuccess || sub == NULL) {
    fprintf(stderr, "FAILED rank %d: ncclCommSplit: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  int problems = 0, subrank = -1, subn = -1;
  ncclCommUserRank(sub, &subrank);
  ncclCommCount(sub, &subn);
  int want_n = (nranks - rank % 2 + 1) / 2, want_rank = want_n - 1 - rank / 2;
  if (subn != want_n || subrank != want_rank) {
    fprintf(stderr, "FAILED rank %d: split gives rank %d of %d, want %d of %d\n", rank, subrank, subn,
            want_rank, want_n);
    return 1;
  }
  for (int i = 0; i < l->n; i++) {
    struct coll_case c = l->v[i];
    if (i % 2) {
      c.root %= subn;
      c.seed ^= (uint64_t)(rank % 2) << 60; /* the two children run different data */
      problems += run_case(&c, sub, subrank, subn) != 0;
    } else {
      problems += run_case(&c, comm, rank, nranks) != 0;
    }
  }
  if (ncclCommDestroy(sub) != ncclSuccess) problems++;
  return problems;
}

/* ncclCommInitAll: one thread drives all ranks, every collective inside a group. */
static int run_init_all(int nranks, const struct case_list* l) {
  ncclComm_t comms[8];
  ncclResult_t res = ncclCommInitAll(comms, nranks, NULL);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED ncclCommInitAll(%d): %s\n", nranks, ncclGetLastError(NULL));
    return 1;
  }
  int problems = 0;
  for (int i = 0; i < l->n; i++) {
    const struct coll_case* c = &l->v[i];
    struct case_bufs b[8];
    uint64_t scalars[8];
    ncclRedOp_t ops[8];
    int setup_ok = 1;
    for (int r = 0; r < nranks; r++) {
      setup_ok &= case_setup(c, r, nranks, &b[r]) == 0;
      ops[r] = case_op(c, comms[r], &scalars[r], &res);
      setup_ok &= res == ncclSuccess;
    }
    ncclResult_t rs = ncclGroupStart();
    for (int r = 0; r < nranks && setup_ok && rs == ncclSuccess; r++)
      rs = case_call(c, comms[r], r, nranks, b[r].send, b[r].recv, ops[r]);
    ncclResult_t re = ncclGroupEnd();
    if (!setup_ok || rs != ncclSuccess || re != ncclSuccess) {
      fprintf(stderr, "FAILED " CASE_FMT ": grouped over ncclCommInitAll comms: %d %d: %s\n",
              CASE_ARGS(c, nranks, 0), rs, re, ncclGetLastError(NULL));
      problems++;
    } else {
      for (int r = 0; r < nranks; r++) problems += case_check(c, r, nranks, &b[r]) != 0;
    }
    for (int r = 0; r < nranks; r++) {
      if (c->op == O_PMS_HOST || c->op == O_PMS_DEV) ncclRedOpDestroy(ops[r], comms[r]);
      free(b[r].alloc_send);
      free(b[r].alloc_recv);
    }
  }
  for (int r = 0; r < nranks; r++) {
    if (ncclCommDestroy(comms[r]) != ncclSuccess) problems++;
  }
  return problems;
}

/* Buffers from ncclMemAlloc, registered with the comm, used by an all-reduce and a broadcast. */
static int body_memalloc(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  enum { N = 100003 };
  int64_t *send = NULL, *recv = NULL;
  void *hs = NULL, *hr = NULL;
  int problems = 0;
  if (ncclMemAlloc((void**)&send, N * sizeof(int64_t)) != ncclSuccess ||
      ncclMemAlloc((void**)&recv, N * sizeof(int64_t)) != ncclSuccess ||
      ncclCommRegister(comm, send, N * sizeof(int64_t), &hs) != ncclSuccess ||
      ncclCommRegister(comm, recv, N * sizeof(int64_t), &hr) != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: ncclMemAlloc/ncclCommRegister: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  for (int i = 0; i < N; i++) send[i] = (int64_t)i * (rank + 1);
  if (ncclAllReduce(send, recv, N, ncclInt64, ncclSum, comm, NULL) != ncclSuccess) problems++;
  for (int i = 0; i < N && !problems; i++) {
    if (recv[i] != (int64_t)i * nranks * (nranks + 1) / 2) {
      fprintf(stderr, "FAILED rank %d: all-reduce on ncclMemAlloc memory, element %d: %lld\n", rank, i,
              (long long)recv[i]);
      problems++;
    }
  }
  if (ncclBroadcast(send, send, N, ncclInt64, nranks - 1, comm, NULL) != ncclSuccess) problems++;
  for (int i = 0; i < N && !problems; i++) {
    if (send[i] != (int64_t)i * nranks) {
      fprintf(stderr, "FAILED rank %d: broadcast on ncclMemAlloc memory, element %d\n", rank, i);
      problems++;
    }
  }
  if (ncclCommDeregister(comm, hs) != ncclSuccess || ncclCommDeregister(comm, hr) != ncclSuccess) problems++;
  if (ncclMemFree(send) != ncclSuccess || ncclMemFree(recv) != ncclSuccess) problems++;
  return problems;
}

static void cases_some(struct case_list* l, int nranks, uint64_t seed, int stride) {
  struct case_list all = {0};
  cases_matrix(&all, nranks, seed, 3000);
  for (int i = 0; i < all.n; i += stride) case_add(l, all.v[i]);
  free(all.v);
}

int main(void) {
  coll_base_seed = pick_seed();
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  alarm(400);
  for (int procs = 0; procs < 2; procs++) {
    int n = procs ? 3 : 4;
    struct two_comms t = {0};
    struct test_uid_holder second_root; /* processes fork from a single-threaded test (uid.h) */
    EXPECT_EQ_INT(test_uid_from_child(&t.second, &second_root), ncclSuccess);
    cases_some(&t.a, n, coll_base_seed + 1, 7);
    cases_some(&t.b, n, coll_base_seed + 2, 11);
    int bad = procs ? run_procs(n, body_two_comms, &t, 200) : run_threads(n, body_two_comms, &t);
    EXPECT_MSG(bad == 0, "two communicators, %d ranks as %s (base seed 0x%llx)", n,
               procs ? "processes" : "threads", (unsigned long long)coll_base_seed);
    printf("two communicators, %d ranks as %s: %s\n", n, procs ? "processes" : "threads",
           bad ? "FAILED" : "ok");
    test_uid_release(&second_root);
    free(t.a.v);
    free(t.b.v);
  }
  for (int procs = 0; procs < 2; procs++) {
    int n = procs ? 5 : 4;
    struct case_list l = {0};
    cases_some(&l, n, coll_base_seed + 3, 5);
    for (int i = 0; i < l.n; i++) l.v[i].root %= (n / 2); /* valid in both children */
    int bad = procs ? run_procs(n, body_split, &l, 200) : run_threads(n, body_split, &l);
    EXPECT_MSG(bad == 0, "split beside its parent, %d ranks as %s (base seed 0x%llx)", n,
               procs ? "processes" : "threads", (unsigned long long)coll_base_seed);
    printf("split beside its parent, %d ranks as %s: %s\n", n, procs ? "processes" : "threads",
           bad ? "FAILED" : "ok");
    free(l.v);
  }
  for (int procs = 0; procs < 2; procs++) {
    int bad = procs ? run_procs(3, body_memalloc, NULL, 100) : run_threads(3, body_memalloc, NULL);
    EXPECT_MSG(bad == 0, "ncclMemAlloc buffers, registered, 3 ranks as %s", procs ? "processes" : "threads");
    printf("ncclMemAlloc buffers, 3 ranks as %s: %s\n", procs ? "processes" : "threads",
           bad ? "FAILED" : "ok");
  }
  EXPECT_EQ_INT(shm_leftovers(getpid(), 1), 0);
  for (int n = 1; n <= 4; n += 3) {
    struct case_list l = {0};
    cases_some(&l, n, coll_base_seed + 4, 9);
    int bad = run_init_all(n, &l);
    EXPECT_MSG(bad == 0, "ncclCommInitAll(%d) from one thread (base seed 0x%llx)", n,
               (unsigned long long)coll_base_seed);
    printf("ncclCommInitAll(%d) from one thread: %s\n", n, bad ? "FAILED" : "ok");
    free(l.v);
  }
  return test_finish("test_coll_comms");
}
