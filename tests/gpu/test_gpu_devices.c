/* The CUDA backend with more than one GPU in a process: init gives the caller back its current
 * device (ncclCommInitAll over devices {1, 0} from a thread on device 1), one thread drives a
 * group across both devices, a failed init leaks no device memory (GPUs whose peer mapping
 * fails: WEFT_EMU_PEER_ENABLE_FAILS, emulated GPU only), and a send/recv whose connector cannot be
 * allocated (a full device) leaves no error for the application's next cudaGetLastError. SKIP
 * with fewer than 2 GPUs. */
#include <string.h>

#include "gpu_util.h"

#define N 4096

static int emulated(void) {
  struct cudaDeviceProp p;
  return cudaGetDeviceProperties(&p, 0) == cudaSuccess && strstr(p.name, "emulated") != NULL;
}

static int current_device(void) {
  int d = -1;
  GPU_CHECK(cudaGetDevice(&d));
  return d;
}

/* One thread, two comms on devices 1 and 0, one grouped all-reduce. */
static int init_all_keeps_device(void) {
  int devs[2] = {1, 0}, bad = 0;
  ncclComm_t comms[2];
  GPU_CHECK(cudaSetDevice(1));
  if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) return 1;
  if (current_device() != 1) {
    fprintf(stderr, "FAILED: ncclCommInitAll left device %d current (the caller had 1)\n", current_device());
    bad++;
  }
  float* buf[2];
  cudaStream_t st[2];
  float host[N];
  for (int i = 0; i < 2; i++) {
    GPU_CHECK(cudaSetDevice(devs[i]));
    GPU_CHECK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    GPU_CHECK(cudaMalloc((void**)&buf[i], N * sizeof(float)));
    for (int k = 0; k < N; k++) host[k] = (float)(i + 1);
    GPU_CHECK(cudaMemcpy(buf[i], host, sizeof(host), cudaMemcpyHostToDevice));
  }
  GPU_CHECK(cudaSetDevice(1));
  ncclGroupStart();
  for (int i = 0; i < 2; i++) ncclAllReduce(buf[i], buf[i], N, ncclFloat32, ncclSum, comms[i], st[i]);
  if (ncclGroupEnd() != ncclSuccess) bad++;
  if (current_device() != 1) {
    fprintf(stderr, "FAILED: a grouped launch on devices 1 and 0 left device %d current\n", current_device());
    bad++;
  }
  for (int i = 0; i < 2; i++) {
    GPU_CHECK(cudaSetDevice(devs[i]));
    GPU_CHECK(cudaStreamSynchronize(st[i]));
    GPU_CHECK(cudaMemcpy(host, buf[i], sizeof(host), cudaMemcpyDeviceToHost));
    for (int k = 0; k < N && !bad; k++)
      if (host[k] != 3.0f) {
        fprintf(stderr, "FAILED: device %d element %d is %g, want 3\n", devs[i], k, host[k]);
        bad++;
      }
    cudaFree(buf[i]);
    cudaStreamDestroy(st[i]);
  }
  GPU_CHECK(cudaSetDevice(1));
  for (int i = 0; i < 2; i++) ncclCommDestroy(comms[i]);
  if (current_device() != 1) {
    fprintf(stderr, "FAILED: ncclCommDestroy left device %d current\n", current_device());
    bad++;
  }
  return bad;
}

static size_t used_on(int dev) {
  size_t free_b = 0, total = 0;
  GPU_CHECK(cudaSetDevice(dev));
  GPU_CHECK(cudaMemGetInfo(&free_b, &total));
  return total - free_b;
}

/* Both inits must fail; returns the number that succeeded. */
static int failing_init_all(void) {
  int devs[2] = {0, 1};
  ncclComm_t comms[2] = {NULL, NULL};
  ncclResult_t res = ncclCommInitAll(comms, 2, devs);
  if (res == ncclSuccess) {
    for (int i = 0; i < 2; i++) ncclCommDestroy(comms[i]);
    return 1;
  }
  return 0;
}

/* GPUs that can map each other but fail to (the peer mapping runs out when the P2P connector is
 * attached): init fails, and leaks nothing. (GPUs that cannot map each other at all connect
 * through shared memory instead: test_emu_coll.sh.) */
static int failed_attach_leaks_nothing(void) {
  size_t before0 = used_on(0), before1 = used_on(1);
  setenv("WEFT_EMU_PEER_ENABLE_FAILS", "1", 1);
  int bad = failing_init_all();
  unsetenv("WEFT_EMU_PEER_ENABLE_FAILS");
  if (bad) fprintf(stderr, "FAILED: init succeeded on GPUs whose peer mapping failed\n");
  size_t after0 = used_on(0), after1 = used_on(1);
  if (after0 != before0 || after1 != before1) {
    fprintf(stderr, "FAILED: a failed init left %zd + %zd bytes allocated on devices 0 and 1\n",
            (ssize_t)(after0 - before0), (ssize_t)(after1 - before1));
    bad++;
  }
  return bad;
}

static pthread_barrier_t fill_barrier;

/* Rank 0 fills device 0 (both ranks' device) to its last MiB; then both connect a send/recv pair
 * for the first time, whose connector cudaMalloc fails: the call must fail and leave this
 * thread's last CUDA error clear. */
static int failed_connect_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  void *fill = NULL, *d = NULL;
  GPU_CHECK(cudaMalloc(&d, 4096));
  if (rank == 0) {
    size_t free_b = 0, total = 0;
    GPU_CHECK(cudaMemGetInfo(&free_b, &total));
    GPU_CHECK(cudaMalloc(&fill, free_b - (1u << 20)));
  }
  pthread_barrier_wait(&fill_barrier);
  int peer = (rank + 1) % nranks, bad = 0;
  ncclGroupStart();
  ncclSend(d, 1024, ncclFloat32, peer, comm, cudaStreamPerThread);
  ncclRecv(d, 1024, ncclFloat32, peer, comm, cudaStreamPerThread);
  if (ncclGroupEnd() == ncclSuccess) {
    fprintf(stderr, "FAILED: rank %d: send/recv connected on a full device\n", rank);
    bad = 1;
  }
  cudaError_t left = cudaGetLastError();
  if (left != cudaSuccess) {
    fprintf(stderr, "FAILED: rank %d: the failed connect left '%s' for the application's cudaGetLastError\n",
            rank, cudaGetErrorString(left));
    bad = 1;
  }
  pthread_barrier_wait(&fill_barrier);
  cudaFree(fill);
  cudaFree(d);
  return bad;
}

static int failed_malloc_leaves_no_error(void) {
  pthread_barrier_init(&fill_barrier, NULL, 2);
  GPU_CHECK(cudaSetDevice(0));
  int bad = run_threads(2, failed_connect_body, NULL);
  pthread_barrier_destroy(&fill_barrier);
  return bad;
}

/* A single comm set up on the calling thread, on another device than the caller's. */
static int init_inline_keeps_device(void) {
  int dev = 1, bad = 0;
  ncclComm_t comm;
  GPU_CHECK(cudaSetDevice(0));
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) return 1;
  if (current_device() != 0) {
    fprintf(stderr, "FAILED: a comm set up for device 1 left device %d current (the caller had 0)\n",
            current_device());
    bad++;
  }
  ncclCommDestroy(comm);
  return bad;
}

int main(void) {
  gpu_require();
  int n = 0;
  GPU_CHECK(cudaGetDeviceCount(&n));
  if (n < 2) {
    printf("SKIP: %d GPU(s); this test needs 2\n", n);
    return 77;
  }
  setenv("WEFT_TIMEOUT", "20", 1);
  int failed = init_all_keeps_device() + init_inline_keeps_device();
  if (emulated()) failed += failed_attach_leaks_nothing();
  failed += failed_malloc_leaves_no_error();
  printf("%s\n", failed ? "FAILED" : "two GPUs: devices kept, failed inits clean up");
  return failed ? 1 : 0;
}
