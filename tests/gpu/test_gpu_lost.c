/* A GPU job across hosts loses a rank: four processes on four emulated hosts (WEFT_HOSTID), CUDA
 * backend, ring neighbours joined over the network through the proxy. Rank 2 is killed with
 * SIGKILL in the middle of a loop of all-reduces; every survivor's kernel must stop (the proxy
 * raises the kernels' abort flag) and the survivor must get an error naming rank 2 long before
 * WEFT_TIMEOUT, rank 0 included, which is not rank 2's neighbour and hears of it from rank 3.
 * Then the same when rank 2 leaves normally after its third all-reduce (ncclCommDestroy, exit 0)
 * while the others go on, calling all-reduces or send/recv: their kernels wait for steps that will
 * never come. SKIP without a GPU. */
#include <regex.h>
#include <signal.h>
#include <sys/mman.h>

#include "gpu_util.h"

#define NRANKS 4
#define VICTIM 2
#define COUNT (1u << 18)  /* floats per all-reduce: several steps per channel */
#define TIMEOUT_S 120     /* WEFT_TIMEOUT: the kernels' own timeout must not be what ends them */
#define DETECT_LIMIT_S 30 /* what the network path must do better than */

struct shared {
  volatile int ready;      /* ranks inside the loop */
  volatile double kill_at; /* CLOCK_MONOTONIC: when rank 2 was killed, or destroyed its communicator */
  int quit;                /* rank 2 leaves normally instead of being killed */
  int p2p;                 /* the calls are send/recv to the ring neighbours, not all-reduces */
};

/* The scenario's call: an all-reduce, or a send to the next rank and a receive from the previous. */
static ncclResult_t one_call(ncclComm_t comm, int rank, const struct shared* sh, float* d, cudaStream_t st) {
  if (!sh->p2p) return ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st);
  size_t half = COUNT / 2;
  ncclGroupStart();
  ncclSend(d, half, ncclFloat32, (rank + 1) % NRANKS, comm, st);
  ncclRecv(d + half, half, ncclFloat32, (rank + NRANKS - 1) % NRANKS, comm, st);
  return ncclGroupEnd();
}

static int names_victim(const char* text) {
  char pattern[64];
  snprintf(pattern, sizeof(pattern), "rank[^0-9]{0,3}%d([^0-9]|$)", VICTIM);
  regex_t re;
  regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
  int ok = regexec(&re, text, 0, NULL, 0) == 0;
  regfree(&re);
  return ok;
}

/* Calls until one fails, on the call or on the stream; then checks when and what. */
static int survivor(ncclComm_t comm, int rank, struct shared* sh, float* d, cudaStream_t st) {
  ncclResult_t res = ncclSuccess, async = ncclSuccess;
  int iters = 0;
  for (; iters < 1000000 && res == ncclSuccess && async == ncclSuccess; iters++) {
    res = one_call(comm, rank, sh, d, st);
    if (res == ncclSuccess && cudaStreamSynchronize(st) != cudaSuccess) res = ncclUnhandledCudaError;
    if (res == ncclSuccess) ncclCommGetAsyncError(comm, &async);
    if (iters == 2) __atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
  }
  double after = now_s() - sh->kill_at;
  const char* text = ncclGetLastError(comm);
  printf("rank %d: %s %d: call %s, async %s, %.2f s after rank %d went: %s\n", rank,
         sh->p2p ? "send/recv" : "all-reduce", iters, ncclGetErrorString(res), ncclGetErrorString(async),
         after, VICTIM, text);
  int bad = 0;
  if (res == ncclSuccess && async == ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: every all-reduce succeeded although rank %d was killed\n", rank, VICTIM);
    bad++;
  }
  if (sh->kill_at <= 0 || after > DETECT_LIMIT_S) {
    fprintf(stderr, "FAILED rank %d: the error came %.1f s after rank %d %s (WEFT_TIMEOUT=%d)\n", rank, after,
            VICTIM, sh->quit ? "left" : "was killed", TIMEOUT_S);
    bad++;
  }
  if (res != ncclRemoteError && async != ncclRemoteError) {
    fprintf(stderr, "FAILED rank %d: want ncclRemoteError for a lost rank\n", rank);
    bad++;
  }
  if (!names_victim(text)) {
    fprintf(stderr, "FAILED rank %d: the error text does not name the lost rank %d: \"%s\"\n", rank, VICTIM,
            text);
    bad++;
  }
  ncclCommAbort(comm);
  return bad;
}

static void rank_main(ncclUniqueId id, int rank, struct shared* sh) {
  char host[32];
  snprintf(host, sizeof(host), "lost-host-%d", rank);
  setenv("WEFT_HOSTID", host, 1);
  alarm(TIMEOUT_S + 60);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, NRANKS, id, rank) != ncclSuccess) {
    fprintf(stderr, "FAILED rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    _exit(2);
  }
  cudaStream_t st;
  float* d;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  GPU_CHECK(cudaMalloc((void**)&d, COUNT * sizeof(float)));
  GPU_CHECK(cudaMemset(d, 0, COUNT * sizeof(float)));
  if (rank == VICTIM && sh->quit) { /* three calls, then a normal goodbye */
    __atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < 3; i++) {
      one_call(comm, rank, sh, d, st);
      cudaStreamSynchronize(st);
    }
    sh->kill_at = now_s();
    _exit(ncclCommDestroy(comm) == ncclSuccess ? 0 : 1);
  }
  if (rank == VICTIM) { /* all-reduces until killed */
    __atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
    for (;;) {
      ncclAllReduce(d, d, COUNT, ncclFloat32, ncclSum, comm, st);
      cudaStreamSynchronize(st);
    }
  }
  int bad = survivor(comm, rank, sh, d, st);
  fflush(stdout);
  _exit(bad ? 1 : 0);
}

static int scenario(int quit, int p2p) {
  struct shared* sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  sh->quit = quit;
  sh->p2p = p2p;
  ncclUniqueId id;
  struct test_uid_holder holder;
  if (test_uid_from_child(&id, &holder) != ncclSuccess) {
    fprintf(stderr, "FAILED ncclGetUniqueId (in a helper process)\n");
    return 1;
  }
  fflush(stdout);
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    pids[r] = fork();
    if (pids[r] == 0) rank_main(id, r, sh);
  }
  double t0 = now_s();
  while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < NRANKS && now_s() - t0 < 120) usleep(10000);
  usleep(200000);
  if (!quit) {
    sh->kill_at = now_s();
    kill(pids[VICTIM], SIGKILL);
  }
  int failed = 0;
  for (int r = 0; r < NRANKS; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if ((r != VICTIM || quit) && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      fprintf(stderr, "FAILED surviving rank %d: %s %d\n", r, WIFSIGNALED(status) ? "signal" : "exit status",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      failed++;
    }
  }
  test_uid_release(&holder);
  printf("%s%s: %s\n", quit ? "rank 2 left" : "rank 2 killed", p2p ? " (send/recv)" : "",
         failed ? "FAILED" : "every survivor named the lost rank in time");
  munmap(sh, sizeof(*sh));
  return failed;
}

int main(void) {
  gpu_require();
  char t[16];
  snprintf(t, sizeof(t), "%d", TIMEOUT_S);
  setenv("WEFT_TIMEOUT", t, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0); /* the emulated hosts are all on this machine */
  int failed = scenario(0, 0) + scenario(1, 0) + scenario(1, 1);
  return failed ? 1 : 0;
}
