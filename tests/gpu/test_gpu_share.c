/* Ranks sharing one GPU must never deadlock for want of room on it: (1) the legacy default
 * stream, which runs one kernel at a time, is refused when several ranks of one process use the
 * device; (2) each rank's kernel uses at most its share of the blocks the device holds at once,
 * so all ranks' kernels run together; (3) a device too small for one block per rank is an init
 * error, not a hang. (2) and (3) shrink the emulated GPU (WEFT_EMU_SMS) and run only there; on a
 * real GPU they report what they skip. SKIP without a GPU. */
#include <string.h>

#include "gpu_util.h"

#define BIG (1u << 20) /* floats: 4 MiB, enough for 4 channels */

static int emulated(void) {
  struct cudaDeviceProp p;
  return cudaGetDeviceProperties(&p, 0) == cudaSuccess && strstr(p.name, "emulated") != NULL;
}

static int null_stream_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)rank, (void)nranks, (void)arg;
  float* d;
  GPU_CHECK(cudaMalloc((void**)&d, 1024 * sizeof(float)));
  ncclResult_t res = ncclAllReduce(d, d, 1024, ncclFloat32, ncclSum, comm, NULL);
  int bad = res != ncclInvalidUsage;
  if (bad)
    fprintf(stderr, "FAILED: an all-reduce of 2 ranks of one process on the NULL stream returned %s\n",
            ncclGetErrorString(res));
  cudaFree(d);
  return bad;
}

/* Every rank adds its rank + 1 over BIG floats on many channels; each sees the sum. */
static int big_allreduce_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *d, *h = malloc(BIG * sizeof(float));
  GPU_CHECK(cudaMalloc((void**)&d, BIG * sizeof(float)));
  for (size_t i = 0; i < BIG; i++) h[i] = (float)(rank + 1);
  GPU_CHECK(cudaMemcpy(d, h, BIG * sizeof(float), cudaMemcpyHostToDevice));
  int bad = ncclAllReduce(d, d, BIG, ncclFloat32, ncclSum, comm, st) != ncclSuccess;
  GPU_CHECK(cudaStreamSynchronize(st));
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  bad |= async != ncclSuccess;
  GPU_CHECK(cudaMemcpy(h, d, BIG * sizeof(float), cudaMemcpyDeviceToHost));
  float want = (float)(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < BIG && !bad; i++) bad = h[i] != want;
  if (bad)
    fprintf(stderr, "FAILED: rank %d: the all-reduce on a shared small device failed (%s)\n", rank,
            ncclGetErrorString(async));
  cudaFree(d);
  free(h);
  cudaStreamDestroy(st);
  return bad;
}

struct init_rank {
  pthread_t th;
  ncclUniqueId id;
  int rank, nranks;
  ncclResult_t res;
};

static void* init_only(void* p) {
  struct init_rank* r = p;
  ncclComm_t comm = NULL;
  r->res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (r->res == ncclSuccess) ncclCommDestroy(comm);
  return NULL;
}

/* 3 ranks on a device that holds 2 blocks at once: every rank's init must fail. */
static int too_small(void) {
  struct init_rank r[3];
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int i = 0; i < 3; i++) {
    r[i] = (struct init_rank){.id = id, .rank = i, .nranks = 3};
    pthread_create(&r[i].th, NULL, init_only, &r[i]);
  }
  int bad = 0;
  for (int i = 0; i < 3; i++) {
    pthread_join(r[i].th, NULL);
    if (r[i].res == ncclSuccess) {
      fprintf(stderr, "FAILED: rank %d joined a device that cannot run 3 ranks' kernels at once\n", i);
      bad = 1;
    }
  }
  return bad;
}

int main(void) {
  gpu_require();
  setenv("WEFT_TIMEOUT", "20", 1);
  int failed = run_threads(2, null_stream_body, NULL);
  /* Read once both ranks are done: the last-error text is one buffer for the process. */
  if (strstr(ncclGetLastError(NULL), "legacy default stream") == NULL) {
    fprintf(stderr, "FAILED: the error does not say why: %s\n", ncclGetLastError(NULL));
    failed++;
  }
  if (!emulated()) {
    printf("a real GPU: the small-device cases run on the emulated GPU only\n");
  } else {
    setenv("WEFT_EMU_SMS", "4", 1); /* 4 blocks of 512 threads at once */
    setenv("NCCL_MIN_NCHANNELS", "4", 1);
    failed += run_threads(3, big_allreduce_body, NULL);
    unsetenv("NCCL_MIN_NCHANNELS");
    setenv("WEFT_EMU_SMS", "2", 1);
    failed += too_small();
    unsetenv("WEFT_EMU_SMS");
  }
  printf("%s\n", failed ? "FAILED" : "ranks sharing a GPU fit on it or are refused");
  return failed ? 1 : 0;
}
