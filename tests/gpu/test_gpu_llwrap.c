/* LL flags are 32 bits on 64-bit step counters: a connector's steps cross a multiple of 2^32
 * after enough traffic, and a line no step has rewritten for 2^32 steps then carries the flag the
 * receiver waits for. Without 2^32 real steps: WEFT_CUDA_STEP_BASE starts every connector (ring
 * and send/recv, both sides) 4 steps before 2^32, so slot 7 is first used by step 2^32 - 1, whose
 * flag was 0 (step + 1 truncated): exactly what its zeroed lines, never written, carry. All-reduces,
 * all-gathers and sends of growing sizes (rank 0 late, so receivers already poll) run on the LL
 * protocol across the boundary and through the slot clearing of steps 2^32 .. 2^32 + 7; every
 * result is checked. Usage: test_gpu_llwrap [threads|procs] [nranks]. SKIP without a GPU. */
#include "gpu_util.h"

#define ITERS 80
/* Elements of each op of iteration it: each step has more lines than the step 8 before it on the
 * same connector, and fewer than a block has threads, so a thread's first line can be stale. */
#define OP_COUNT(it) (16 + 48 * (size_t)(it))
#define MAX_ELEMS OP_COUNT(ITERS)

static int check(const float* h, size_t n, int me, int it, const char* what,
                 float (*want)(size_t, int, int, int), int nranks) {
  for (size_t i = 0; i < n; i++)
    if (h[i] != want(i, it, me, nranks)) {
      fprintf(stderr, "FAILED %s rank %d iteration %d: element %zu of %zu is %g, want %g\n", what, me, it, i,
              n, h[i], want(i, it, me, nranks));
      return 1;
    }
  return 0;
}

static float in_value(int rank, size_t i, int it) { return (float)(rank + (int)(i % 13) + it); }
static float sum_want(size_t i, int it, int me, int n) {
  (void)me;
  return (float)(n * (n - 1) / 2 + n * ((int)(i % 13) + it));
}
static size_t gather_part(int it, int n) { return OP_COUNT(it) / n + 1; }
static float gather_want(size_t i, int it, int me, int n) {
  (void)me;
  size_t part = gather_part(it, n);
  return in_value((int)(i / part), i % part, it);
}
static float recv_want(size_t i, int it, int me, int n) { return in_value((me + n - 1) % n, i, it); }

/* Rank 0 comes late to every op, so that the others' receives are already polling their lines. */
static void late(int me) {
  if (me == 0) usleep(5000);
}

static int fetch_check(const float* d_out, float* h, size_t n, int me, int it, cudaStream_t st,
                       const char* what, float (*want)(size_t, int, int, int), int nranks) {
  GPU_CHECK(cudaMemcpyAsync(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost, st));
  GPU_CHECK(cudaStreamSynchronize(st));
  return check(h, n, me, it, what, want, nranks);
}

static int one_iter(ncclComm_t comm, int me, int n, int it, cudaStream_t st, float* d_in, float* d_out,
                    float* h) {
  size_t ar = OP_COUNT(it), part = gather_part(it, n), sr = OP_COUNT(it);
  for (size_t i = 0; i < MAX_ELEMS; i++) h[i] = in_value(me, i, it);
  GPU_CHECK(cudaMemcpyAsync(d_in, h, MAX_ELEMS * sizeof(float), cudaMemcpyHostToDevice, st));
  GPU_CHECK(cudaStreamSynchronize(st));
  int bad = 0;
  late(me);
  if (ncclAllReduce(d_in, d_out, ar, ncclFloat32, ncclSum, comm, st) != ncclSuccess) return 1;
  bad += fetch_check(d_out, h, ar, me, it, st, "all-reduce", sum_want, n);
  late(me);
  if (ncclAllGather(d_in, d_out, part, ncclFloat32, comm, st) != ncclSuccess) return 1;
  bad += fetch_check(d_out, h, part * n, me, it, st, "all-gather", gather_want, n);
  late(me);
  if (ncclGroupStart() != ncclSuccess ||
      ncclSend(d_in, sr, ncclFloat32, (me + 1) % n, comm, st) != ncclSuccess ||
      ncclRecv(d_out, sr, ncclFloat32, (me + n - 1) % n, comm, st) != ncclSuccess ||
      ncclGroupEnd() != ncclSuccess)
    return 1;
  bad += fetch_check(d_out, h, sr, me, it, st, "send/recv", recv_want, n);
  return bad;
}

static int wrap_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  size_t bytes = (MAX_ELEMS + 1) * nranks * sizeof(float);
  float *d_in, *d_out, *h = malloc(bytes);
  GPU_CHECK(cudaMalloc((void**)&d_in, bytes));
  GPU_CHECK(cudaMalloc((void**)&d_out, bytes));
  int bad = 0;
  for (int it = 0; it < ITERS && bad == 0; it++) bad += one_iter(comm, rank, nranks, it, st, d_in, d_out, h);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaStreamDestroy(st);
  free(h);
  return bad;
}

int main(int argc, char** argv) {
  gpu_require();
  const char* mode = argc > 1 ? argv[1] : "threads";
  int nranks = argc > 2 ? atoi(argv[2]) : 3;
  setenv("WEFT_CUDA_STEP_BASE", "4294967292", 0); /* 2^32 - 4 */
  setenv("NCCL_PROTO", "LL", 1);
  setenv("NCCL_MIN_NCHANNELS", "2", 0);
  setenv("NCCL_MAX_NCHANNELS", "2", 0);
  setenv("WEFT_TIMEOUT", "30", 0);
  printf("%s, %d ranks, LL, connectors from step %s\n", mode, nranks, getenv("WEFT_CUDA_STEP_BASE"));
  fflush(stdout);
  int failed = strcmp(mode, "procs") == 0 ? run_procs(nranks, wrap_body, NULL, 600)
                                          : run_threads(nranks, wrap_body, NULL);
  printf("%s\n", failed ? "FAILED" : "LL results match across the 2^32 step boundary");
  return failed ? 1 : 0;
}
