/* The flight recorder on the CUDA backend: three ranks as threads on one device, rank 1 skips
 * the third all-reduce, so the others' fourth kernel waits until WEFT_TIMEOUT. The dumps (on the
 * async error and on ncclCommAbort) record each launch ("launched", backend cuda), and weft-trace
 * names rank 1 as the rank that did not enter operation 4. SKIP without a GPU. */
#include <string.h>

#include "gpu_util.h"
#include "trace_util.h"

#define NRANKS 3
#define CULPRIT 1
#define LAUNCHES 4
#define COUNT (1u << 12)

struct gt_rank {
  pthread_t th;
  ncclUniqueId id;
  int rank, problems;
  pthread_barrier_t* bar;
};

static void* rank_main(void* p) {
  struct gt_rank* r = p;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, NRANKS, r->id, r->rank) != ncclSuccess) {
    r->problems = 1;
    pthread_barrier_wait(r->bar);
    return NULL;
  }
  cudaStream_t st;
  float* d;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  GPU_CHECK(cudaMalloc((void**)&d, COUNT * sizeof(float)));
  for (int op = 1; op <= LAUNCHES; op++)
    if (!(r->rank == CULPRIT && op == 3) &&
        ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st) != ncclSuccess)
      r->problems++;
  cudaStreamSynchronize(st); /* the others' last kernel gives up after WEFT_TIMEOUT */
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if ((async != ncclSuccess) != (r->rank != CULPRIT)) {
    fprintf(stderr, "FAILED: rank %d's async error is %s\n", r->rank, ncclGetErrorString(async));
    r->problems++;
  }
  pthread_barrier_wait(r->bar); /* every kernel has ended before any rank frees its memory */
  ncclCommAbort(comm);
  cudaFree(d);
  cudaStreamDestroy(st);
  return NULL;
}

int main(void) {
  gpu_require();
  char dir[] = "/tmp/weft-trace-gpu-XXXXXX";
  if (mkdtemp(dir) == NULL) return perror("mkdtemp"), 1;
  static const struct tcase c = {SKIP, NRANKS, "Ring", CULPRIT};
  trace_set_env(&c, dir);
  setenv("WEFT_TIMEOUT", "2", 1);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, NRANKS);
  struct gt_rank r[NRANKS];
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int i = 0; i < NRANKS; i++) {
    r[i] = (struct gt_rank){.id = id, .rank = i, .bar = &bar};
    pthread_create(&r[i].th, NULL, rank_main, &r[i]);
  }
  for (int i = 0; i < NRANKS; i++) {
    pthread_join(r[i].th, NULL);
    test_failures += r[i].problems;
  }
  char path[4200], text[1 << 15];
  snprintf(path, sizeof(path), "%s", dir);
  DIR* dd = opendir(dir);
  for (struct dirent* e; dd && (e = readdir(dd));)
    if (strstr(e->d_name, "-r0-")) snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
  if (dd) closedir(dd);
  FILE* f = fopen(path, "r");
  size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
  text[n] = 0;
  if (f) fclose(f);
  EXPECT_MSG(strstr(text, "\"backend\": \"cuda\"") && strstr(text, "\"state\": \"launched\""),
             "rank 0's dump %s does not record CUDA launches:\n%s", path, text);
  test_failures += trace_check_verdict(&c, dir, NRANKS);
  if (test_failures == 0) remove_dir(dir);
  return test_finish("test_gpu_trace");
}
