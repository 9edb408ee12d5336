/* ncclCommRevoke and ncclCommShrink on the CUDA backend: a kernel waiting for a rank that never
 * joins its all-reduce has ended once ncclCommRevoke (or ncclCommShrink with NCCL_SHRINK_ABORT)
 * returns, and the survivors' shrunk comm runs a checked all-reduce on device buffers. Three ranks
 * as threads on one GPU; rank 2 joins the communicator, never the collective. SKIP without a GPU. */
#include <time.h>

#include "gpu_util.h"

#define N 3
#define COUNT 4096
#define TIMEOUT_S 100 /* WEFT_TIMEOUT: far beyond a stop, so a kernel that only timed out is told apart */

struct sr_rank {
  pthread_t th;
  ncclUniqueId id;
  int rank, use_revoke, problems;
  volatile int* survivors_done;
};

/* Ranks 0 and 1 add rank+1+j at element j of their shrunk comm. */
static int checked_allreduce(ncclComm_t sub, int rank, float* d, cudaStream_t st) {
  static float host[N][COUNT];
  float* h = host[rank];
  for (int j = 0; j < COUNT; j++) h[j] = (float)(rank + 1 + j);
  GPU_CHECK(cudaMemcpy(d, h, COUNT * sizeof(float), cudaMemcpyHostToDevice));
  ncclResult_t res = ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, sub, st);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: all-reduce on the shrunk comm: %s\n", rank, ncclGetLastError(sub));
    return 1;
  }
  GPU_CHECK(cudaStreamSynchronize(st));
  GPU_CHECK(cudaMemcpy(h, d, COUNT * sizeof(float), cudaMemcpyDeviceToHost));
  for (int j = 0; j < COUNT; j++) {
    if (h[j] == (float)(3 + 2 * j)) continue;
    fprintf(stderr, "FAILED rank %d: element %d is %g, want %d\n", rank, j, h[j], 3 + 2 * j);
    return 1;
  }
  return 0;
}

/* Stop the comm (revoke, then shrink; or shrink with NCCL_SHRINK_ABORT); returns the shrunk comm. */
static ncclComm_t stop_and_shrink(ncclComm_t comm, int rank, int use_revoke, int* bad) {
  int excluded[] = {N - 1};
  ncclComm_t sub = NULL;
  ncclResult_t res;
  if (use_revoke) {
    res = ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT);
    ncclResult_t state = ncclInternalError;
    ncclCommGetAsyncError(comm, &state);
    if (res != ncclSuccess || state != ncclSuccess) {
      fprintf(stderr, "FAILED rank %d: revoke gave %s, then the state is %s\n", rank, ncclGetErrorString(res),
              ncclGetErrorString(state));
      ++*bad;
    }
    res = ncclCommShrink(comm, excluded, 1, &sub, NULL, NCCL_SHRINK_DEFAULT);
  } else {
    res = ncclCommShrink(comm, excluded, 1, &sub, NULL, NCCL_SHRINK_ABORT);
  }
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: shrink: %s\n", rank, ncclGetLastError(NULL));
    ++*bad;
  }
  return sub;
}

static int survivor(ncclComm_t comm, int rank, int use_revoke) {
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* d;
  GPU_CHECK(cudaMalloc((void**)&d, COUNT * sizeof(float)));
  int bad = 0;
  if (rank == 0) {
    if (ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st) != ncclSuccess) bad++;
    usleep(300 * 1000);
    if (cudaStreamQuery(st) != cudaErrorNotReady) {
      fprintf(stderr, "FAILED: the all-reduce finished without rank 2\n");
      bad++;
    }
  }
  double t0 = now_s();
  ncclComm_t sub = stop_and_shrink(comm, rank, use_revoke, &bad);
  double took = now_s() - t0;
  const char* how = use_revoke ? "revoked" : "shrunk with NCCL_SHRINK_ABORT";
  if (rank == 0 && cudaStreamQuery(st) != cudaSuccess) {
    fprintf(stderr, "FAILED: the waiting kernel still runs after the comm was %s\n", how);
    bad++;
  }
  if (rank == 0 && took > TIMEOUT_S / 2) {
    fprintf(stderr, "FAILED: the comm was %s after %.1f s: its kernel timed out instead of being stopped\n",
            how, took);
    bad++;
  }
  if (sub != NULL) {
    bad += checked_allreduce(sub, rank, d, st);
    if (ncclCommDestroy(sub) != ncclSuccess) bad++;
  }
  if (ncclCommDestroy(comm) != ncclSuccess) bad++;
  cudaFree(d);
  cudaStreamDestroy(st);
  return bad;
}

static void* rank_main(void* p) {
  struct sr_rank* r = p;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, N, r->id, r->rank) != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: init: %s\n", r->rank, ncclGetLastError(NULL));
    r->problems = 1;
    return NULL;
  }
  if (r->rank < N - 1) {
    r->problems = survivor(comm, r->rank, r->use_revoke);
    return NULL;
  }
  while (!__atomic_load_n(r->survivors_done, __ATOMIC_ACQUIRE)) usleep(10000);
  ncclCommAbort(comm);
  return NULL;
}

static int run(int use_revoke) {
  struct sr_rank r[N];
  volatile int done = 0;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int i = 0; i < N; i++) {
    r[i] = (struct sr_rank){.id = id, .rank = i, .use_revoke = use_revoke, .survivors_done = &done};
    pthread_create(&r[i].th, NULL, rank_main, &r[i]);
  }
  int problems = 0;
  for (int i = 0; i < N - 1; i++) {
    pthread_join(r[i].th, NULL);
    problems += r[i].problems;
  }
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  pthread_join(r[N - 1].th, NULL);
  return problems + r[N - 1].problems;
}

int main(void) {
  gpu_require();
  char t[16];
  snprintf(t, sizeof(t), "%d", TIMEOUT_S);
  setenv("WEFT_TIMEOUT", t, 1);
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "30", 0); /* a broken shrink fails in seconds, not minutes */
  int failed = run(1) + run(0);
  printf("%s\n",
         failed ? "FAILED" : "revoke and NCCL_SHRINK_ABORT end a waiting kernel; the shrunk comm works");
  return failed ? 1 : 0;
}
