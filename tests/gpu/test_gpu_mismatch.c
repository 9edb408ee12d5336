/* CUDA backend: two ranks that disagree on a collective (count on LL and on Simple, datatype of
 * the same size, op, collective) fail with ncclInvalidUsage and a WARN naming the mismatch,
 * found by the kernel on the first step each receives (collectives/fingerprint.h), and the field
 * that differs as the steps' tags tell it; a rank that
 * receives nothing in its call may finish it. A matching call before it still succeeds. Without the check
 * they would wait until WEFT_TIMEOUT (ncclTimeout) or finish with wrong results. With 4 ranks, a
 * rank further round the ring, which sees only matching calls, learns it from its ring
 * neighbours' marks on the connectors they share (else it would wait until WEFT_TIMEOUT).
 * Rank r on device r % count, its own stream; a fresh communicator per case. SKIP without a GPU. */
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
  int nranks;            /* 2, or 4: rank 3 sees only matching calls (its sender 2 and its receiver 0
                          * call as it does), so a ring neighbour must tell it (prims_dev.cuh,
                          * weft_mark_connectors); rank 0 may be told or find it from the call rank
                          * 1's receive waits in */
};

#define AR(n, t, o) \
  { C_ALLREDUCE, n, t, o, 0 }
static const struct mcase cases[] = {
    {"allreduce count (LL)", AR(256, ncclFloat32, ncclSum), AR(320, ncclFloat32, ncclSum), 0,
     "with count 320", 2},
    {"allreduce count (Simple)", AR(262144, ncclFloat32, ncclSum), AR(196608, ncclFloat32, ncclSum), 0,
     "with count 196608", 2},
    {"allreduce datatype float/int32", AR(4096, ncclFloat32, ncclSum), AR(4096, ncclInt32, ncclSum), 0,
     "with datatype 2", 2},
    {"allreduce op sum/max", AR(4096, ncclFloat32, ncclSum), AR(4096, ncclFloat32, ncclMax), 0,
     "with op ncclMax", 2},
    {"collective allreduce/reduce",
     AR(4096, ncclFloat32, ncclSum),
     {C_REDUCE, 4096, ncclFloat32, ncclSum, 0},
     1,
     "called ncclReduce",
     2},
    {"collective allreduce/broadcast",
     AR(4096, ncclFloat32, ncclSum),
     {C_BROADCAST, 4096, ncclFloat32, ncclSum, 1},
     1,
     "called ncclBroadcast",
     2},
    /* Both wait to receive, no step crosses: the receive waits' wait_tag tells them. */
    {"reduce root (two roots)",
     {C_REDUCE, 4096, ncclFloat32, ncclSum, 0},
     {C_REDUCE, 4096, ncclFloat32, ncclSum, 1},
     0,
     "with root 1",
     2},
    {"allreduce count (LL), 4 ranks", AR(256, ncclFloat32, ncclSum), AR(320, ncclFloat32, ncclSum), 0,
     "with count 320", 4},
    {"allreduce count (Simple), 4 ranks", AR(262144, ncclFloat32, ncclSum), AR(196608, ncclFloat32, ncclSum),
     0, "with count 196608", 4},
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
  int rank, nranks;
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
  return bad;
}

/* The WARNs go to a file (NCCL_DEBUG_FILE): the last error is one per process, which thread ranks
 * overwrite, so a case's WARNs are read from the file instead, from where the case began. */
static char log_path[64];

static char* read_log_from(long offset) {
  FILE* f = fopen(log_path, "r");
  if (f == NULL) return strdup("");
  fseek(f, 0, SEEK_END);
  long end = ftell(f);
  char* text = calloc((size_t)(end > offset ? end - offset : 0) + 1, 1);
  fseek(f, offset, SEEK_SET);
  if (end > offset && fread(text, 1, (size_t)(end - offset), f) != (size_t)(end - offset)) text[0] = 0;
  fclose(f);
  return text;
}

static int count_of(const char* text, const char* what) {
  int n = 0;
  for (const char* p = text; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
  return n;
}

/* Each rank WARNs once. The ranks that found the mismatch (on a step they received, or from the
 * call their receiver waits in) name the field; others may learn it first from a ring neighbour's
 * connector and name the finder. With 4 ranks, rank 3 can only have been told. */
static int check_warns(const struct mcase* c, int nranks, long offset) {
  int bad = 0, rank = -1; /* WANT names a rank: these are every rank's */
  char* text = read_log_from(offset);
  int named = count_of(text, c->says), told = count_of(text, "reported by ring neighbour");
  WANT(count_of(text, "mismatched collective") >= nranks - (c->late ? 1 : 0),
       "case \"%s\": fewer mismatch WARNs than ranks in:\n%s", c->name, text);
  WANT(named >= 1, "case \"%s\": no WARN names the difference (\"%s\") in:\n%s", c->name, c->says, text);
  WANT(nranks < 4 || told >= 1, "case \"%s\": rank 3 was not told by a neighbour in:\n%s", c->name, text);
  free(text);
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
  if (ncclCommInitRank(&comm, a->nranks, a->id, a->rank) != ncclSuccess) {
    a->problems = 1;
    return NULL;
  }
  a->problems = check_case(comm, a->rank, a->c, st, d);
  ncclCommAbort(comm);
  GPU_CHECK(cudaFree(d));
  GPU_CHECK(cudaStreamDestroy(st));
  return NULL;
}

/* `test_gpu_mismatch N`: only the cases of N ranks (ThreadSanitizer runs them in two processes:
 * it allows 8,128 threads over a process's life, and every emulated kernel block is one). */
int main(int argc, char** argv) {
  int only = argc > 1 ? atoi(argv[1]) : 0;
  gpu_require();
  setenv("WEFT_TIMEOUT", "20", 1); /* a missed mismatch is a timeout, not a hang */
  snprintf(log_path, sizeof(log_path), "/tmp/weft-gpu-mismatch-%d.log", (int)getpid());
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  int failures = 0, ran = 0;
  for (int i = 0; i < NCASES; i++) {
    if (only && cases[i].nranks != only) continue;
    ran++;
    FILE* log = fopen(log_path, "a");
    long offset = log ? ftell(log) : 0;
    if (log) fclose(log);
    struct rank_arg a[4];
    int nranks = cases[i].nranks;
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    pthread_t t[4];
    for (int r = 0; r < nranks; r++) {
      a[r] = (struct rank_arg){.id = id, .rank = r, .nranks = nranks, .c = &cases[i]};
      pthread_create(&t[r], NULL, rank_main, &a[r]);
    }
    int f = 0;
    for (int r = 0; r < nranks; r++) {
      pthread_join(t[r], NULL);
      f += a[r].problems;
    }
    f += check_warns(&cases[i], nranks, offset);
    printf("%s %s\n", f ? "FAIL" : "ok  ", cases[i].name);
    failures += f != 0;
  }
  printf("%d of %d mismatch cases failed\n", failures, ran);
  unlink(log_path);
  return failures ? 1 : 0;
}
