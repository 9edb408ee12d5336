/* CUDA backend: two ranks that disagree on a collective (count on LL and on Simple, datatype of
 * the same size, op, collective) fail with ncclInvalidUsage and a WARN naming the mismatch,
 * found by the kernel on the first step each receives (collectives/fingerprint.h), and the field
 * that differs as the steps' tags tell it; a rank that
 * receives nothing in its call may finish it. A matching call before it still succeeds. Without the check
 * they would wait until WEFT_TIMEOUT (ncclTimeout) or finish with wrong results. Rank r on device r % count,
 * its own stream; a fresh communicator per case. SKIP without a GPU. */
#include <pthread.h>
#include <string.h>

#include "gpu_util.h"

struct call {
  int coll; /* C_ALLREDUCE, C_BROADCAST or C_REDUCE */
  size_t count;
  ncclDataType_t dt;
  ncclRedOp_t op;
  int root;
};

struct mcase {
  const char* name;
  struct call base, odd; /* rank 1 makes the odd call */
  int late;              /* rank 1 only sends in its call: it may finish before rank 0 finds the difference */
  const char* says;      /* the field and rank 1's value, told from its steps' tags */
};

#define AR(n, t, o) \
  { C_ALLREDUCE, n, t, o, 0 }
static const struct mcase cases[] = {
    {"allreduce count (LL)", AR(256, ncclFloat32, ncclSum), AR(320, ncclFloat32, ncclSum), 0,
     "with count 320"},
    {"allreduce count (Simple)", AR(262144, ncclFloat32, ncclSum), AR(196608, ncclFloat32, ncclSum), 0,
     "with count 196608"},
    {"allreduce datatype float/int32", AR(4096, ncclFloat32, ncclSum), AR(4096, ncclInt32, ncclSum), 0,
     "with datatype 2"},
    {"allreduce op sum/max", AR(4096, ncclFloat32, ncclSum), AR(4096, ncclFloat32, ncclMax), 0,
     "with op ncclMax"},
    {"collective allreduce/reduce",
     AR(4096, ncclFloat32, ncclSum),
     {C_REDUCE, 4096, ncclFloat32, ncclSum, 0},
     1,
     "called ncclReduce"},
    {"collective allreduce/broadcast",
     AR(4096, ncclFloat32, ncclSum),
     {C_BROADCAST, 4096, ncclFloat32, ncclSum, 1},
     1,
     "called ncclBroadcast"},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))
#define MAX_COUNT 262144

static ncclResult_t issue(const struct call* k, const void* s, void* r, ncclComm_t comm, cudaStream_t st) {
  if (k->coll == C_BROADCAST) return ncclBroadcast(s, r, k->count, k->dt, k->root, comm, st);
  if (k->coll == C_REDUCE) return ncclReduce(s, r, k->count, k->dt, k->op, k->root, comm, st);
  return ncclAllReduce(s, r, k->count, k->dt, k->op, comm, st);
}

struct rank_arg {
  ncclUniqueId id;
  int rank;
  const struct mcase* c;
  int problems;
};

static int check_case(ncclComm_t comm, int rank, const struct mcase* c, cudaStream_t st, float* d) {
  int bad = 0;
  WANT_RES(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm, st), ncclSuccess);
  GPU_CHECK(cudaStreamSynchronize(st));
  ncclResult_t async = ncclInProgress;
  WANT(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess,
       "%s: the matching call before it failed (%s)", c->name, ncclGetErrorString(async));
  const struct call* k = rank == 1 ? &c->odd : &c->base;
  ncclResult_t res = issue(k, d, d + MAX_COUNT, comm, st);
  if (res == ncclSuccess) cudaStreamSynchronize(st);
  if (res == ncclSuccess && ncclCommGetAsyncError(comm, &async) == ncclSuccess) res = async;
  if (c->late && rank == 1 && res == ncclSuccess) return bad;
  WANT(res == ncclInvalidUsage, "case \"%s\", rank %d: %s, want invalid usage", c->name, rank,
       ncclGetErrorString(res));
  const char* why = ncclGetLastError(comm);
  WANT(strstr(why, "mismatched collective") != NULL && (c->says == NULL || strstr(why, c->says) != NULL),
       "case \"%s\": last error \"%s\" (want \"%s\")", c->name, why, c->says ? c->says : "");
  return bad;
}

static void* rank_main(void* p) {
  struct rank_arg* a = p;
  int n = 0;
  GPU_CHECK(cudaGetDeviceCount(&n));
  GPU_CHECK(cudaSetDevice(a->rank % n));
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* d;
  GPU_CHECK(cudaMalloc((void**)&d, 2 * MAX_COUNT * sizeof(float)));
  GPU_CHECK(cudaMemset(d, 0, 2 * MAX_COUNT * sizeof(float)));
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, a->id, a->rank) != ncclSuccess) {
    a->problems = 1;
    return NULL;
  }
  a->problems = check_case(comm, a->rank, a->c, st, d);
  ncclCommAbort(comm);
  GPU_CHECK(cudaFree(d));
  GPU_CHECK(cudaStreamDestroy(st));
  return NULL;
}

int main(void) {
  gpu_require();
  setenv("WEFT_TIMEOUT", "20", 1); /* a missed mismatch is a timeout, not a hang */
  int failures = 0;
  for (int i = 0; i < NCASES; i++) {
    struct rank_arg a[2];
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    pthread_t t[2];
    for (int r = 0; r < 2; r++) {
      a[r] = (struct rank_arg){.id = id, .rank = r, .c = &cases[i]};
      pthread_create(&t[r], NULL, rank_main, &a[r]);
    }
    int f = 0;
    for (int r = 0; r < 2; r++) {
      pthread_join(t[r], NULL);
      f += a[r].problems;
    }
    printf("%s %s\n", f ? "FAIL" : "ok  ", cases[i].name);
    failures += f != 0;
  }
  printf("%d of %d mismatch cases failed\n", failures, NCASES);
  return failures ? 1 : 0;
}
