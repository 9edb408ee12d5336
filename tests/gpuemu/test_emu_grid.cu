/* The emulated GPU's grid executor on its own (no runtime): thread and block indices in 3-D,
 * __shared__ memory per block, the barrier variants' results, how many blocks are resident at
 * once, and that a divergent barrier is reported. Compiled as C++ with device.h, like the
 * library's kernels. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");                 \
      failures++;                            \
    }                                        \
  } while (0)

__global__ void ids_kernel(unsigned* out) {
  unsigned tpb = blockDim.x * blockDim.y * blockDim.z;
  unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  out[b * tpb + t] = b * 100000u + t;
}

__global__ void shared_kernel(int* out) {
  __shared__ int sum;
  if (threadIdx.x == 0) sum = 0;
  __syncthreads();
  __atomic_fetch_add(&sum, (int)threadIdx.x + 1, __ATOMIC_RELAXED);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

__global__ void votes_kernel(int* out) {
  int odd = threadIdx.x & 1;
  int any = __syncthreads_or(threadIdx.x == 5);
  int all = __syncthreads_and(odd || 1);
  int none = __syncthreads_and(odd);
  int count = __syncthreads_count(odd);
  if (threadIdx.x == 3) {
    out[0] = any;
    out[1] = all;
    out[2] = none;
    out[3] = count;
  }
}

/* Each block counts itself in, records the most blocks it saw at once, then stays until `want`
 * blocks have been seen together or `wait_ms` have passed, and leaves. Waiting for a count
 * rather than a fixed time keeps the co-residency check true on a loaded machine (under
 * ThreadSanitizer on a busy CI host, blocks started more than 100 ms apart). */
__global__ void resident_kernel(int* live, int* most, int want, int wait_ms) {
  if (threadIdx.x == 0) {
    int now = __atomic_add_fetch(live, 1, __ATOMIC_SEQ_CST);
    int seen = __atomic_load_n(most, __ATOMIC_SEQ_CST);
    while (now > seen &&
           !__atomic_compare_exchange_n(most, &seen, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    for (int ms = 0; ms < wait_ms && __atomic_load_n(most, __ATOMIC_SEQ_CST) < want; ms++) usleep(1000);
    __atomic_sub_fetch(live, 1, __ATOMIC_SEQ_CST);
  }
  __syncthreads();
}

__global__ void divergent_kernel(int* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

WEFT_EMU_KERNEL(ids_kernel);
WEFT_EMU_KERNEL(shared_kernel);
WEFT_EMU_KERNEL(votes_kernel);
WEFT_EMU_KERNEL(resident_kernel);
WEFT_EMU_KERNEL(divergent_kernel);

template <typename... A>
static int launch(void (*fn)(A...), struct weft_emu_dim grid, struct weft_emu_dim block, A... args) {
  const struct weft_emu_kernel* k = weft_emu_find_kernel((const void*)fn);
  if (k == NULL) return -1;
  void* params[] = {(void*)&args...};
  void* packed = malloc(k->args_bytes);
  k->pack(packed, params);
  int err = weft_emu_grid_run(k, packed, grid, block, 0);
  k->destroy(packed);
  free(packed);
  return err;
}

static void test_ids(void) {
  struct weft_emu_dim grid = {3, 2, 2}, block = {4, 3, 2};
  unsigned n = 12 * 24;
  unsigned* out = (unsigned*)calloc(n, sizeof(unsigned));
  CHECK(launch(ids_kernel, grid, block, out) == 0, "ids launch");
  for (unsigned i = 0; i < n; i++) CHECK(out[i] == i / 24 * 100000u + i % 24, "ids: out[%u] = %u", i, out[i]);
  free(out);
}

static void test_shared(void) {
  int out[4] = {0};
  CHECK(launch(shared_kernel, {4, 1, 1}, {512, 1, 1}, out) == 0, "shared launch");
  for (int b = 0; b < 4; b++) CHECK(out[b] == 512 * 513 / 2, "shared: block %d sum %d", b, out[b]);
}

static void test_votes(void) {
  int out[4] = {-1, -1, -1, -1};
  CHECK(launch(votes_kernel, {1, 1, 1}, {64, 1, 1}, out) == 0, "votes launch");
  CHECK(out[0] == 1 && out[1] == 1 && out[2] == 0 && out[3] == 32, "votes: or %d and %d and(odd) %d count %d",
        out[0], out[1], out[2], out[3]);
}

static void test_residency(void) {
  setenv("WEFT_EMU_SMS", "2", 1);
  setenv("WEFT_EMU_BLOCKS_PER_SM", "1", 1);
  /* Two at once at most: each block lingers 100 ms hoping for a third, which must never come
   * (a slow machine can only hide a failure here, never invent one). */
  int live = 0, most = 0;
  CHECK(launch(resident_kernel, {6, 1, 1}, {32, 1, 1}, &live, &most, 3, 100) == 0, "residency launch");
  CHECK(most == 2, "residency: %d blocks were resident at once on 2 SMs x 1 block", most);
  /* All six at once: each block stays until it has seen all six (30 s at most). */
  setenv("WEFT_EMU_SMS", "8", 1);
  live = most = 0;
  CHECK(launch(resident_kernel, {6, 1, 1}, {32, 1, 1}, &live, &most, 6, 30000) == 0, "residency launch");
  CHECK(most == 6, "residency: only %d of 6 blocks resident at once on 8 SMs", most);
  unsetenv("WEFT_EMU_SMS");
  unsetenv("WEFT_EMU_BLOCKS_PER_SM");
  CHECK(weft_emu_blocks_per_sm(512) == 1 && weft_emu_blocks_per_sm(256) == 2,
        "blocks per SM from 128 registers: %d at 512 threads, %d at 256", weft_emu_blocks_per_sm(512),
        weft_emu_blocks_per_sm(256));
}

static void run_divergent(void) {
  int out[8];
  launch(divergent_kernel, {1, 1, 1}, {8, 1, 1}, out);
}

/* In a child: the divergent barrier must abort it with a report naming the sites. The child
 * runs this program anew (argument "divergent"): this process has threads by now, and a forked
 * copy that starts threads is unsupported under ThreadSanitizer (make emu-tsan). */
static void test_divergence(void) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 2);
    setenv("WEFT_EMU_STRICT", "1", 1);
    execl("/proc/self/exe", "test_emu_grid", "divergent", (char*)NULL);
    _exit(127);
  }
  close(pipefd[1]);
  char buf[4096] = {0};
  size_t got = 0;
  ssize_t r;
  while (got < sizeof(buf) - 1 && (r = read(pipefd[0], buf + got, sizeof(buf) - 1 - got)) > 0)
    got += (size_t)r;
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "divergence: child was not aborted (status %d)",
        status);
  CHECK(strstr(buf, "barrier divergence") && strstr(buf, "test_emu_grid.cu"),
        "divergence: report does not name the sites: %s", buf);
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "divergent") == 0) {
    run_divergent();
    return 0;
  }
  test_ids();
  test_shared();
  test_votes();
  test_residency();
  test_divergence();
  printf("%s\n", failures ? "FAILED" : "emulated grid: all checks passed");
  return failures ? 1 : 0;
}
