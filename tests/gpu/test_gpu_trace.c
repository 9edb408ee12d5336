/* The flight recorder on the CUDA backend, which follows each kernel through the progress area
 * beside its abort flag. Default: three ranks as threads on one device, rank 1 skips one of the
 * OPS all-reduces, so the others' last kernel waits until WEFT_TIMEOUT. Rank 0's dump (on the
 * async error, then on ncclCommAbort) has the operations before done (the kernel said they ended),
 * the last failed and in flight with a channel that passed steps and waits for its ring neighbour
 * since about WEFT_TIMEOUT before it failed; weft-trace names rank 1 as the rank that did not
 * enter the last operation.
 * `test_gpu_trace matrix`: the fault matrix of tests/integration's trace tests on CUDA ranks, each
 * case in a child process, named by weft-trace: a rank that skips a call (threads and processes),
 * one killed and one stalled mid-transfer (processes), on 2-4 ranks, Ring and Tree. A stall is a
 * SIGSTOP, which stops a rank's kernel only on the emulated GPU (its blocks are threads of the
 * process): on a real GPU those cases are left out. tests/gpuemu/test_emu_trace.sh runs the
 * matrix. SKIP without a GPU. */
#include <string.h>

#include "gpu_util.h"
#include "trace_util.h"

#define DEFAULT_COUNT (1u << 12)
#define TIMEOUT_S 2             /* WEFT_TIMEOUT of the default case */
#define MATRIX_COUNT (1u << 18) /* floats: an operation of the matrix lasts long enough to stop in */

/* One rank's job on its own stream: OPS all-reduces of count floats; the culprit lets its
 * earlier ones end and says so (ready_fd) right before FAULT_OP, which it leaves out for SKIP.
 * Then the rank waits for its kernels as a framework's watchdog does, polling the stream and the
 * async error (which observes the kernels' progress while they wait; a kernel that gave up: the
 * dump on failure). Returns problems. */
static int cuda_rank_ops(ncclComm_t comm, const struct tcase* c, int rank, int ready_fd, size_t count) {
  cudaStream_t st;
  float* d;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  GPU_CHECK(cudaMalloc((void**)&d, count * sizeof(float)));
  GPU_CHECK(cudaMemset(d, 0, count * sizeof(float)));
  for (int op = 1; op <= OPS; op++) {
    if (rank == c->culprit && op == FAULT_OP) {
      cudaStreamSynchronize(st);
      if (ready_fd >= 0 && write(ready_fd, "x", 1) != 1) perror("write");
      if (c->fault == SKIP) continue;
    }
    if (ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, st) != ncclSuccess) break;
  }
  ncclResult_t async = ncclSuccess;
  while (cudaStreamQuery(st) == cudaErrorNotReady) {
    ncclCommGetAsyncError(comm, &async);
    usleep(20000);
  }
  ncclCommGetAsyncError(comm, &async);
  /* The culprit of a skip ends its calls; everyone else's kernel gave up. */
  int problems = (async == ncclSuccess) != (c->fault == SKIP && rank == c->culprit);
  if (problems) fprintf(stderr, "FAILED: rank %d's async error is %s\n", rank, ncclGetErrorString(async));
  return problems;
}

static size_t thread_count; /* of the threads' all-reduces */

static void* cuda_thread_main(void* p) {
  struct trace_thread* t = p;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, t->c->nranks, t->id, t->rank) != ncclSuccess) {
    t->problems++;
    pthread_barrier_wait(t->bar);
    return NULL;
  }
  t->problems += cuda_rank_ops(comm, t->c, t->rank, -1, thread_count);
  pthread_barrier_wait(t->bar); /* every kernel has ended before any rank frees its memory */
  ncclCommAbort(comm);
  return NULL;
}

static int count_of(const char* text, const char* s) {
  int n = 0;
  for (const char* p = text; (p = strstr(p, s)) != NULL; p += strlen(s)) n++;
  return n;
}

/* The number after key in text, or -1. */
static long long num_after(const char* text, const char* key) {
  const char* p = text ? strstr(text, key) : NULL;
  return p ? atoll(p + strlen(key)) : -1;
}

/* Rank 0's dump: what the kernel's progress told the recorder. */
static void check_dump(const char* dir, int nranks) {
  char path[4200] = "", text[1 << 15];
  DIR* dd = opendir(dir);
  for (struct dirent* e; dd && (e = readdir(dd));)
    if (strstr(e->d_name, "-r0-")) snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
  if (dd) closedir(dd);
  FILE* f = fopen(path, "r");
  size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
  text[n] = 0;
  if (f) fclose(f);
  EXPECT_MSG(strstr(text, "\"backend\": \"cuda\"") != NULL, "rank 0's dump %s is not a CUDA rank's:\n%s",
             path, text);
  /* The culprit's calls matched the others' first OPS - 1, which ended in the kernel; the last
   * one gave up. */
  EXPECT_MSG(count_of(text, "\"state\": \"done\"") == OPS - 1 &&
                 count_of(text, "\"state\": \"failed\"") == 1 &&
                 count_of(text, "\"state\": \"launched\"") == 0,
             "rank 0's dump does not have %d operations done and 1 failed:\n%s", OPS - 1, text);
  char key[64];
  snprintf(key, sizeof(key), "\"coll_no\": %d,", OPS);
  long long finished = num_after(strstr(text, key), "\"finished_ns\": ");
  long long nch = num_after(strstr(text, key), "\"channels\": ");
  snprintf(key, sizeof(key), "\"in_flight\": {\"seq\": %d,", OPS - 1);
  const char* inflight = strstr(text, key);
  const char* ch = inflight ? strstr(inflight, "\"waiting\": true") : NULL;
  EXPECT_MSG(ch != NULL, "rank 0's dump has no channel of seq %d waiting in flight:\n%s", OPS - 1, text);
  if (ch == NULL) return;
  /* Every channel of the operation reports, past the host's 4 too (the run asks for more):
   * a dump that misses the channel that waits names the wrong rank. */
  EXPECT_MSG(nch > 4 && count_of(inflight, "\"waiting\": true") == nch,
             "rank 0's %lld channels of seq %d should all wait in its dump:\n%s", nch, OPS - 1, text);
  while (ch > inflight && strncmp(ch, "{\"channel\"", 10) != 0) ch--;
  long long steps = num_after(ch, "\"steps\": "), peer = num_after(ch, "\"peer\": ");
  long long since = num_after(ch, "\"since_ns\": ");
  EXPECT_MSG(
      num_after(ch, "\"seq\": ") == OPS - 1 && steps >= 1 && peer == nranks - 1 &&
          strstr(ch, "data from the peer") != NULL,
      "rank 0's waiting channel should run seq %d, have passed a step and wait for data from rank %d:\n%s",
      OPS - 1, nranks - 1, ch);
  /* It began waiting about WEFT_TIMEOUT before the failure was seen. */
  double waited = (double)(finished - since) / 1e9;
  EXPECT_MSG(since > 0 && waited > TIMEOUT_S * 0.75 && waited < TIMEOUT_S * 3,
             "rank 0 waited %.3f s by its dump (since_ns %lld, failed at %lld), not about %d s", waited,
             since, finished, TIMEOUT_S);
}

static int run_default(void) {
  char dir[] = "/tmp/weft-trace-gpu-XXXXXX";
  if (mkdtemp(dir) == NULL) return perror("mkdtemp"), 1;
  static const struct tcase c = {SKIP, 3, "Ring", 1};
  trace_set_env(&c, dir);
  char timeout[16];
  snprintf(timeout, sizeof(timeout), "%d", TIMEOUT_S);
  setenv("WEFT_TIMEOUT", timeout, 1);
  setenv("NCCL_MIN_NCHANNELS", "6", 1); /* more channels than the host backend's 4 */
  thread_count = DEFAULT_COUNT;
  test_failures += trace_run_threads(&c, cuda_thread_main);
  check_dump(dir, c.nranks);
  test_failures += trace_check_verdict(&c, dir, c.nranks);
  if (test_failures == 0) remove_dir(dir);
  return test_finish("test_gpu_trace");
}

/* ---- the matrix ---- */

/* The dumps say the case's algorithm ran (NCCL_ALGO, as the CUDA launch planned it). */
static int expect_algo(const struct tcase* c, const char* dir) {
  char want[32];
  snprintf(want, sizeof(want), "\"algo\": \"%s\"", strcmp(c->algo, "Tree") == 0 ? "tree" : "ring");
  if (trace_dump_says(dir, want)) return 0;
  fprintf(stderr, "FAILED %s on %d ranks (%s): no dump has %s\n", fault_names[c->fault], c->nranks, c->algo,
          want);
  return 1;
}

/* Twice the fault tests' WEFT_TIMEOUT: a stalled rank comes back that much later than its victims
 * began to wait, far more than the emulated GPU's ranks lag behind each other on a busy machine. */
#define MATRIX_TIMEOUT "2"

static int matrix_threads(const struct tcase* c, const char* dir) {
  setenv("WEFT_TIMEOUT", MATRIX_TIMEOUT, 1);
  thread_count = MATRIX_COUNT;
  return trace_run_threads(c, cuda_thread_main) + expect_algo(c, dir);
}

static void matrix_proc_main(const struct tcase* c, const ncclUniqueId* id, int rank, int ready_fd) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, c->nranks, *id, rank) != ncclSuccess) _exit(3);
  int problems = cuda_rank_ops(comm, c, rank, rank == c->culprit ? ready_fd : -1, MATRIX_COUNT);
  ncclCommAbort(comm);
  _exit(problems ? 1 : 0);
}

static int matrix_procs(const struct tcase* c, const char* dir) {
  setenv("WEFT_TIMEOUT", MATRIX_TIMEOUT, 1);
  int problems = trace_run_procs(c, matrix_proc_main);
  return problems + expect_algo(c, dir);
}

/* The emulated GPU's blocks are threads of the rank's process, which SIGSTOP stops. */
static int emulated_gpu(void) {
  struct cudaDeviceProp prop;
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && strstr(prop.name, "emulated") != NULL;
}

static int run_matrix(int only) {
  static const struct {
    struct tcase c;
    int procs;
  } cases[] = {
      {{SKIP, 2, "Ring", 1}, 0},  {{SKIP, 4, "Tree", 2}, 0},  {{SKIP, 3, "Tree", 0}, 1},
      {{KILL, 2, "Ring", 1}, 1},  {{KILL, 4, "Tree", 3}, 1},  {{STALL, 4, "Ring", 2}, 1},
      {{STALL, 3, "Tree", 0}, 1}, {{STALL, 2, "Ring", 1}, 1},
  };
  int emulated = -1;
  for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
    const struct tcase* c = &cases[i].c;
    if (only >= 0 && only != i) continue;
    if (c->fault == STALL) {
      if (emulated < 0) { /* in a child: the test process itself never initializes CUDA */
        pid_t pid = fork();
        if (pid == 0) _exit(emulated_gpu());
        int status = 0;
        waitpid(pid, &status, 0);
        emulated = WIFEXITED(status) && WEXITSTATUS(status) == 1;
      }
      if (!emulated) {
        printf("%-15s %d ranks %-4s: left out (a stall needs the emulated GPU)\n", fault_names[c->fault],
               c->nranks, c->algo);
        continue;
      }
    }
    test_failures +=
        trace_run_case(c, cases[i].procs ? matrix_procs : matrix_threads, c->nranks - (c->fault == KILL));
  }
  return test_finish("test_gpu_trace matrix");
}

int main(int argc, char** argv) {
  gpu_require();
  if (argc > 1 && strcmp(argv[1], "matrix") == 0) return run_matrix(argc > 2 ? atoi(argv[2]) : -1);
  return run_default();
}
