/* Ranks whose environments disagree on what shapes a ring step (NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE,
 * NCCL_MAX_NCHANNELS, NCCL_PROTO, NCCL_ALGO, WEFT_NET_CHUNKSIZE) still run every collective
 * correctly: the communicator agrees on one step size, channel count and rank 0's choices at
 * init. Without the agreement the ranks cut steps of different sizes and wait for each other
 * until WEFT_TIMEOUT. Ranks are processes (their own environments), with the ring paths forced
 * (WEFT_DIRECT=0); ranks 2 and 3 act as a second host, so two ring hops are network ones. */
#include "check.h"
#include "coll_util.h"
#include "uid.h"

#define NRANKS 4
#define CHILD_LIMIT_S 120

static const char* rank_env[NRANKS][4] = {
    {"NCCL_BUFFSIZE=1048576", "NCCL_PROTO=Simple", "NCCL_MAX_NCHANNELS=2", NULL},
    {NULL},
    {"NCCL_LL_BUFFSIZE=65536", "NCCL_ALGO=Ring", "NCCL_BUFFSIZE=2097152", NULL},
    {"WEFT_NET_CHUNKSIZE=16384", "NCCL_MAX_NCHANNELS=3", NULL},
};

static int rank_main(int rank, ncclUniqueId id, const struct case_list* l) {
  for (int i = 0; rank_env[rank][i] != NULL; i++) putenv((char*)rank_env[rank][i]);
  setenv("WEFT_HOSTID", rank < 2 ? "mismatch-host-a" : "mismatch-host-b", 1);
  ncclComm_t comm = NULL;
  if (ncclCommInitRank(&comm, NRANKS, id, rank) != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    return 2;
  }
  int problems = run_case_list(comm, rank, NRANKS, (void*)l);
  if (ncclCommDestroy(comm) != ncclSuccess) problems++;
  return problems ? 1 : 0;
}

int main(void) {
  setenv("WEFT_DIRECT", "0", 1);
  setenv("WEFT_TIMEOUT", "30", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  coll_base_seed = pick_seed();
  struct case_list l = {0};
  cases_matrix(&l, NRANKS, coll_base_seed, 3000);
  /* Large enough for several loops of the biggest step any rank would take alone. */
  case_add(&l, (struct coll_case){C_ALLREDUCE, ncclFloat32, O_SUM, 0, 0, 3 << 20, coll_base_seed + 1});
  case_add(&l, (struct coll_case){C_ALLGATHER, ncclInt8, O_NONE, 1, 0, 1 << 20, coll_base_seed + 2});
  case_add(&l, (struct coll_case){C_BROADCAST, ncclUint8, O_NONE, 0, 2, 5 << 20, coll_base_seed + 3});
  /* The id's root runs in a helper process: a rank forked while our own root thread held the
   * allocator's lock hung in it under ASan (1 run in about 15). */
  ncclUniqueId id;
  struct test_uid_holder root;
  EXPECT(test_uid_from_child(&id, &root) == ncclSuccess);
  fflush(stdout);
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(CHILD_LIMIT_S);
      _exit(rank_main(r, id, &l));
    }
  }
  for (int r = 0; r < NRANKS; r++) {
    int status = 0;
    EXPECT(pids[r] > 0 && waitpid(pids[r], &status, 0) == pids[r]);
    EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: status 0x%x (base seed 0x%llx)", r,
               status, (unsigned long long)coll_base_seed);
  }
  test_uid_release(&root);
  free(l.v);
  return test_finish("test_coll_env_mismatch");
}
