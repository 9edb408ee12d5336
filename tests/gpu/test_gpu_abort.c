/* A kernel waiting for a rank that never comes must end: by ncclCommAbort (the host-mapped
 * abort flag every device wait polls), and by WEFT_TIMEOUT, after which ncclCommGetAsyncError
 * reports the error (naming the operation and the peer) and the next call fails. Two ranks as
 * threads; rank 1 joins the communicator but never calls the collective, and in the last run
 * aborts at once, which must not wait for rank 0's kernel. SKIP without a GPU. */
#include <string.h>
#include <time.h>

#include "gpu_util.h"

#define COUNT (1u << 16)

struct ab_rank {
  pthread_t th;
  ncclUniqueId id;
  int rank, use_abort, problems;
  int abort_early; /* rank 1 aborts at once, beside rank 0's waiting kernel, and times its abort */
};

/* Rank 1's abort must not wait for rank 0's kernel (same device, this process) to time out. */
static int timed_abort(ncclComm_t comm) {
  usleep(300 * 1000);
  double t0 = now_s();
  ncclCommAbort(comm);
  double took = now_s() - t0;
  printf("ncclCommAbort beside a peer's waiting kernel returned after %.2f s\n", took);
  if (took <= 1.5) return 0;
  fprintf(stderr, "FAILED: ncclCommAbort took %.2f s: it waited for the other rank's kernel\n", took);
  return 1;
}

/* Rank 0 waits until the kernel has given up (timeout) or aborts the comm itself. */
static int lone_rank(ncclComm_t comm, int use_abort) {
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* d;
  GPU_CHECK(cudaMalloc((void**)&d, COUNT * sizeof(float)));
  int bad = 0;
  if (ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st) != ncclSuccess) return 1;
  usleep(500 * 1000);
  if (cudaStreamQuery(st) != cudaErrorNotReady) {
    fprintf(stderr, "FAILED: the all-reduce finished without its peer\n");
    bad++;
  }
  double t0 = now_s();
  if (use_abort) {
    if (ncclCommAbort(comm) != ncclSuccess) bad++;
    if (cudaStreamQuery(st) != cudaSuccess) {
      fprintf(stderr, "FAILED: the kernel still runs after ncclCommAbort returned\n");
      bad++;
    }
  } else {
    GPU_CHECK(cudaStreamSynchronize(st)); /* returns once the kernel timed out */
    if (now_s() - t0 > 30) {
      fprintf(stderr, "FAILED: the kernel took %.1f s to time out (WEFT_TIMEOUT=3)\n", now_s() - t0);
      bad++;
    }
    /* The error reaches the async error without another launch, naming the peer it waited for. */
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async == ncclSuccess) {
      fprintf(stderr, "FAILED: ncclCommGetAsyncError reports %s after the kernel timed out\n",
              ncclGetErrorString(async));
      bad++;
    }
    const char* why = ncclGetLastError(comm);
    if (strstr(why, "AllReduce") == NULL || strstr(why, "rank 1") == NULL) {
      fprintf(stderr, "FAILED: the last error does not name the operation and the peer: %s\n", why);
      bad++;
    }
    ncclResult_t res = ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st);
    if (res == ncclSuccess) {
      fprintf(stderr, "FAILED: the call after a timed-out kernel succeeded\n");
      bad++;
    }
    ncclCommAbort(comm);
  }
  printf("%s ended the waiting kernel after %.2f s\n", use_abort ? "ncclCommAbort" : "WEFT_TIMEOUT",
         now_s() - t0);
  cudaFree(d);
  cudaStreamDestroy(st);
  return bad;
}

static void* rank_main(void* p) {
  struct ab_rank* r = p;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, r->id, r->rank) != ncclSuccess) {
    r->problems = 1;
    return NULL;
  }
  if (r->rank == 0) {
    r->problems = lone_rank(comm, r->use_abort);
  } else if (r->abort_early) {
    r->problems = timed_abort(comm);
  } else {
    sleep(r->use_abort ? 2 : 6);
    ncclCommAbort(comm);
  }
  return NULL;
}

static int run(int use_abort, int abort_early) {
  struct ab_rank r[2];
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int i = 0; i < 2; i++) {
    r[i] = (struct ab_rank){.id = id, .rank = i, .use_abort = use_abort, .abort_early = abort_early};
    pthread_create(&r[i].th, NULL, rank_main, &r[i]);
  }
  int problems = 0;
  for (int i = 0; i < 2; i++) {
    pthread_join(r[i].th, NULL);
    problems += r[i].problems;
  }
  return problems;
}

int main(void) {
  gpu_require();
  setenv("WEFT_TIMEOUT", "3", 1);
  int failed = run(1, 0) + run(0, 0) + run(0, 1);
  printf("%s\n", failed ? "FAILED" : "abort and timeout end a waiting kernel");
  return failed ? 1 : 0;
}
