/* The tuning log on the CUDA backend (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING): the first
 * all-reduce of a size class is explained once; with a model (NCCL_TOPO_FILE) the model's pick
 * among what the kernel runs is the reason and Tree is excluded as not implemented here, without
 * one the planner's defaults for this backend (Ring, a channel per 256 KiB). With a model, the
 * kernels are timed by events and one measured line follows (median of the first 5 calls);
 * without one there is no prediction to measure against, and no such line. 2 ranks as threads
 * sharing the GPU, in a child whose log goes to NCCL_DEBUG_FILE. SKIP without a GPU. */
#include <errno.h>

#include "gpu_util.h"

#define COUNT 65536 /* 256 KiB of floats */
#define CALLS 7

static int body(ncclComm_t comm, int me, int n, void* arg) {
  (void)me, (void)n, (void)arg;
  float* d = NULL;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  GPU_CHECK(cudaMalloc((void**)&d, COUNT * sizeof(float)));
  GPU_CHECK(cudaMemset(d, 0, COUNT * sizeof(float)));
  int bad = 0;
  for (int i = 0; i < CALLS && !bad; i++)
    bad = ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st) != ncclSuccess;
  GPU_CHECK(cudaStreamSynchronize(st));
  cudaFree(d);
  cudaStreamDestroy(st);
  return bad;
}

static int count_lines(const char* path, const char* a, const char* b) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "FAILED cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  char line[2048];
  int n = 0;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, a) && (!b || strstr(line, b))) n++;
  fclose(f);
  return n;
}

int main(void) {
  gpu_require();
  char log[128];
  snprintf(log, sizeof(log), "/tmp/weft-test-gpu-tune-log-%d.log", (int)getpid());
  unlink(log);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
    setenv("NCCL_DEBUG_FILE", log, 1);
    /* A model on the emulated GPU (which NVML does not see); on a real one whose bus id the file
     * lacks, no model, and the rule is still the reason. */
    setenv("NCCL_TOPO_FILE", "tests/data/topo/nvlink-bridge-2gpu.xml", 0);
    alarm(120);
    _exit(run_threads(2, body, NULL) ? 1 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
  const char* ar = "size class 256 KiB: AllReduce 262144 B: ";
  int chose = count_lines(log, ar, "chose Ring/");
  EXPECT_MSG(chose == 1, "%d choice line(s), want 1", chose);
  int modelled = count_lines(log, ar, "candidates on");
  const char* reason = modelled > 0 ? "reason: model, fastest of"
                                    : "reason: planner defaults, no tuning model (Ring; LL up to 64 KiB, a "
                                      "channel per 256 KiB)";
  int rule = count_lines(log, ar, reason);
  EXPECT_MSG(rule == 1, "%d line(s) with \"%s\", want 1", rule, reason);
  if (modelled > 0) { /* a topology model (the file or NVML saw the GPU): Tree is the host backend's only */
    int tree = count_lines(
        log, ar, "excluded CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT (not in the model); Tree");
    int impl = count_lines(log, ar, "(not implemented on this backend)");
    EXPECT_MSG(tree == 1 && impl == 1, "Tree not shown as not implemented on this backend");
  }
  int measured = count_lines(log, "size class 256 KiB: AllReduce Ring/", "measured");
  int want = modelled > 0 ? 1 : 0;
  EXPECT_MSG(measured == want, "%d measured line(s) for the all-reduce, want %d", measured, want);
  int others = count_lines(log, "measured", NULL) - measured;
  EXPECT_MSG(others == 0, "%d other measured line(s)", others);
  printf("CUDA backend: explained once (%s), %d measured line(s): %s\n",
         modelled > 0 ? "with a model" : "no model", measured, test_failures ? "FAILED" : "ok");
  if (test_failures == 0) unlink(log);
  return test_finish("test_gpu_tune_log");
}
