/* The profiler plugin on the CUDA backend: 2 thread ranks on the GPU, with the counting plugin
 * (tests/plugin/profiler_count.c, $(BUILD)/tests/plugin/libnccl-profiler-count.so) named by
 * NCCL_PROFILER_PLUGIN, run 3 all-reduces and a group of a broadcast, a send and a receive on a
 * stream. Each rank's plugin must have seen, and closed, 4 Group, 4 Coll, 2 P2p events with their
 * API-level parents and one KernelLaunch per launch, no KernelCh (not emitted on CUDA), RING and
 * the protocol the launch chose for each collective, and no errors of its own checks. */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu_util.h"

#define N 4096

static int body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  cudaStream_t st;
  float *a, *s, *r;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  GPU_CHECK(cudaMalloc((void**)&a, N * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&s, N * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&r, N * sizeof(float)));
  GPU_CHECK(cudaMemset(a, 0, N * sizeof(float)));
  int bad = 0;
  for (int i = 0; i < 3; i++) bad |= ncclAllReduce(a, a, N, ncclFloat32, ncclSum, comm, st) != ncclSuccess;
  bad |= ncclGroupStart() != ncclSuccess;
  bad |= ncclBroadcast(s, s, N / 2, ncclInt32, 0, comm, st) != ncclSuccess;
  bad |= ncclSend(s, N / 4, ncclFloat32, (rank + 1) % nranks, comm, st) != ncclSuccess;
  bad |= ncclRecv(r, N / 4, ncclFloat32, (rank + nranks - 1) % nranks, comm, st) != ncclSuccess;
  bad |= ncclGroupEnd() != ncclSuccess;
  GPU_CHECK(cudaStreamSynchronize(st));
  cudaFree(a);
  cudaFree(s);
  cudaFree(r);
  cudaStreamDestroy(st);
  if (bad) fprintf(stderr, "FAILED rank %d: a call failed\n", rank);
  return bad;
}

/* The count of "WHAT TYPE N" in file f, or -1 without such a line. */
static long count_of(const char* f, const char* what, const char* type) {
  FILE* fp = fopen(f, "r");
  char line[512], w[64], t[64];
  long n, found = -1;
  while (fp && fgets(line, sizeof(line), fp))
    if (sscanf(line, "%63s %63s %ld", w, t, &n) == 3 && strcmp(w, what) == 0 && strcmp(t, type) == 0)
      found = n;
  if (fp) fclose(fp);
  return found;
}

static void check_rank_file(const char* dir, int rank) {
  char cmd[3 * PATH_MAX], f[PATH_MAX];
  snprintf(cmd, sizeof(cmd), "ls %s/prof-r%d-*.txt 2>/dev/null", dir, rank);
  FILE* p = popen(cmd, "r");
  int got = p && fgets(f, sizeof(f), p) != NULL;
  if (p) pclose(p);
  EXPECT_MSG(got, "rank %d wrote no counts (finalize not called?)", rank);
  if (!got) return;
  f[strcspn(f, "\n")] = 0;
  static const struct {
    const char* type;
    long n;
  } want[] = {{"Group", 4},   {"Coll", 4},   {"P2p", 2},          {"GroupApi", 4},
              {"CollApi", 4}, {"P2pApi", 2}, {"KernelLaunch", 4}, {"KernelCh", -1}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    EXPECT_MSG(count_of(f, "start", want[i].type) == want[i].n, "rank %d: start %s %ld, expected %ld", rank,
               want[i].type, count_of(f, "start", want[i].type), want[i].n);
    EXPECT_MSG(count_of(f, "stop", want[i].type) == want[i].n, "rank %d: stop %s %ld, expected %ld", rank,
               want[i].type, count_of(f, "stop", want[i].type), want[i].n);
  }
  snprintf(cmd, sizeof(cmd), "grep -qx 'open 0' %s && grep -qx 'errors 0' %s", f, f);
  EXPECT_MSG(system(cmd) == 0, "rank %d: events left open or the plugin's checks failed (%s)", rank, f);
  /* The CUDA launch plans every collective as a ring, Simple or LL. */
  snprintf(cmd, sizeof(cmd), "[ $(grep -c '^coll .* algo=RING proto=[LS][LI]' %s) = 4 ]", f);
  EXPECT_MSG(system(cmd) == 0, "rank %d: collectives without the CUDA launch's algorithm and protocol", rank);
}

int main(void) {
  gpu_require();
  char exe[PATH_MAX], plugin[PATH_MAX + 64], dir[] = "/tmp/weft-gpu-prof.XXXXXX";
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0 || mkdtemp(dir) == NULL) return 1;
  exe[n] = 0;
  *strrchr(exe, '/') = 0; /* $(BUILD)/tests/gpu */
  snprintf(plugin, sizeof(plugin), "%s/../plugin/libnccl-profiler-count.so", exe);
  if (access(plugin, R_OK) != 0) {
    printf("FAILED: %s not built\n", plugin);
    return 1;
  }
  setenv("NCCL_PROFILER_PLUGIN", plugin, 1);
  setenv("PROF_COUNT_DIR", dir, 1);
  EXPECT(run_threads(2, body, NULL) == 0);
  for (int r = 0; r < 2; r++) check_rank_file(dir, r);
  char cmd[PATH_MAX];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return test_finish("test_gpu_profiler");
}
