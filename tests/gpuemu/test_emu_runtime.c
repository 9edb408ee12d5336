/* Tests of the emulated CUDA runtime (libcudart.so.13 built from rt_*.c): memory kinds, pointer
 * checks, stream and event ordering, last-error rules, IPC between processes, capture and graphs,
 * the emulated driver entry points (DMA-BUF export for GPUDirect RDMA). Prints PASS/FAIL per check; exits
 * nonzero when any failed. Kernel launches are tested with grid.c. */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu_dmabuf.h"

static int failures;

#define EXPECT(cond, ...)                               \
  do {                                                  \
    if (!(cond)) {                                      \
      fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                     \
      fprintf(stderr, " (%s)\n", #cond);                \
      ok = 0;                                           \
    }                                                   \
  } while (0)
#define EXPECT_ERR(call, want)                                                                            \
  do {                                                                                                    \
    cudaError_t e_ = (call);                                                                              \
    EXPECT(e_ == (want), "%s returned %s, want %s", #call, cudaGetErrorName(e_), cudaGetErrorName(want)); \
  } while (0)
#define EXPECT_OK(call) EXPECT_ERR(call, cudaSuccess)

static void report(const char* name, int ok) {
  printf("%s %s\n", ok ? "PASS" : "FAIL", name);
  fflush(stdout);
  if (!ok) failures++;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* A gate a host function blocks on until the test opens it. */
struct gate {
  pthread_mutex_t m;
  pthread_cond_t c;
  int open, passed;
};
#define GATE_INIT \
  { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 }

static void gate_wait_fn(void* p) {
  struct gate* g = p;
  pthread_mutex_lock(&g->m);
  while (!g->open) pthread_cond_wait(&g->c, &g->m);
  g->passed = 1;
  pthread_mutex_unlock(&g->m);
}

static void gate_open(struct gate* g) {
  pthread_mutex_lock(&g->m);
  g->open = 1;
  pthread_cond_broadcast(&g->c);
  pthread_mutex_unlock(&g->m);
}

static int gate_passed(struct gate* g) {
  pthread_mutex_lock(&g->m);
  int v = g->passed;
  pthread_mutex_unlock(&g->m);
  return v;
}

/* Host functions that log the order they ran in. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int order_log[16], order_n;
static void log_fn(void* p) {
  pthread_mutex_lock(&log_lock);
  order_log[order_n++] = (int)(intptr_t)p;
  pthread_mutex_unlock(&log_lock);
}
static void slow_log_fn(void* p) {
  sleep_ms(60);
  log_fn(p);
}
static void sleep20_fn(void* p) {
  (void)p;
  sleep_ms(20);
}

static void test_devices(void) {
  int ok = 1, n = 0, v = 0, dev = -1;
  EXPECT_OK(cudaGetDeviceCount(&n));
  EXPECT(n == 2, "device count %d", n);
  struct cudaDeviceProp p0, p1;
  EXPECT_OK(cudaGetDeviceProperties(&p0, 0));
  EXPECT_OK(cudaGetDeviceProperties(&p1, 1));
  EXPECT(strstr(p0.name, "Weft emulated GPU 0") != NULL, "name %s", p0.name);
  EXPECT(p0.warpSize == 32 && p0.maxThreadsPerBlock == 1024 && p0.major == 9 && p0.minor == 0, "shape");
  EXPECT(p0.multiProcessorCount == 132 && p0.unifiedAddressing == 1 && p0.canMapHostMemory == 1, "features");
  EXPECT(p0.pciBusID != p1.pciBusID && memcmp(&p0.uuid, &p1.uuid, sizeof(p0.uuid)) != 0, "distinct ids");
  EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 1));
  EXPECT(v == 132, "SM count %d", v);
  char bus[16];
  EXPECT_OK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 1));
  EXPECT_OK(cudaDeviceGetByPCIBusId(&dev, bus));
  EXPECT(dev == 1, "bus id %s -> device %d", bus, dev);
  EXPECT_ERR(cudaSetDevice(2), cudaErrorInvalidDevice);
  EXPECT_ERR(cudaGetDeviceProperties(&p0, 5), cudaErrorInvalidDevice);
  EXPECT_OK(cudaDeviceCanAccessPeer(&v, 0, 1));
  EXPECT(v == 1, "peer 0->1");
  EXPECT_OK(cudaDeviceCanAccessPeer(&v, 0, 0));
  EXPECT(v == 0, "peer 0->0");
  EXPECT_OK(cudaDeviceEnablePeerAccess(1, 0));
  EXPECT_ERR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_OK(cudaDeviceDisablePeerAccess(1));
  EXPECT_ERR(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  EXPECT_OK(cudaFree(NULL));
  EXPECT_OK(cudaRuntimeGetVersion(&v));
  EXPECT(v == 13000, "runtime version %d", v);
  cudaGetLastError();
  report("devices", ok);
}

/* CUDA_VISIBLE_DEVICES over 4 emulated devices: this process's ordinals name the listed physical
 * devices in order, PCI ids follow the physical device, the list ends at its first invalid entry. */
static int visible_count(const char* list) {
  int n = -1;
  if (list)
    setenv("CUDA_VISIBLE_DEVICES", list, 1);
  else
    unsetenv("CUDA_VISIBLE_DEVICES");
  if (cudaGetDeviceCount(&n) != cudaSuccess) cudaGetLastError();
  return n;
}

static void test_visible_devices(void) {
  int ok = 1, dev = -1, v = 0;
  setenv("WEFT_EMU_DEVICES", "4", 1);
  struct cudaDeviceProp phys[4], p;
  EXPECT(visible_count(NULL) == 4, "4 devices without CUDA_VISIBLE_DEVICES");
  for (int d = 0; d < 4; d++) EXPECT_OK(cudaGetDeviceProperties(&phys[d], d));
  EXPECT(visible_count("2,0") == 2, "2,0: 2 devices");
  EXPECT_OK(cudaGetDeviceProperties(&p, 0));
  EXPECT(p.pciBusID == phys[2].pciBusID && !memcmp(&p.uuid, &phys[2].uuid, sizeof(p.uuid)),
         "ordinal 0 is GPU 2");
  EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, 1));
  EXPECT(v == phys[0].pciBusID, "ordinal 1 is GPU 0 (bus %#x)", v);
  char bus[16], want[16];
  EXPECT_OK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0));
  snprintf(want, sizeof(want), "0000:%02x:00.0", phys[2].pciBusID);
  EXPECT(strcmp(bus, want) == 0, "ordinal 0's bus id %s, want %s", bus, want);
  EXPECT_OK(cudaDeviceGetByPCIBusId(&dev, want));
  EXPECT(dev == 0, "GPU 2's bus id -> ordinal %d", dev);
  snprintf(want, sizeof(want), "0000:%02x:00.0", phys[1].pciBusID);
  EXPECT_ERR(cudaDeviceGetByPCIBusId(&dev, want), cudaErrorInvalidDevice); /* GPU 1 is not visible */
  EXPECT_ERR(cudaSetDevice(2), cudaErrorInvalidDevice);
  EXPECT_OK(cudaDeviceCanAccessPeer(&v, 0, 1));
  EXPECT(v == 1, "peer 0->1 across a reordered list");
  EXPECT(visible_count("0,2,-1,1") == 2, "the list ends at -1");
  EXPECT(visible_count("1,7,0") == 1, "the list ends at a device past the last");
  EXPECT(visible_count("3,3,0") == 1, "the list ends at a repeated device");
  EXPECT(visible_count("GPU-12345678,0") == 0, "a UUID the devices do not have ends the list");
  EXPECT(visible_count("") == 0, "an empty list hides every device");
  EXPECT_ERR(cudaGetDeviceCount(&v), cudaErrorNoDevice);
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("WEFT_EMU_DEVICES", "2", 1);
  cudaGetLastError();
  report("visible_devices", ok);
}

static void test_memory_kinds(void) {
  int ok = 1;
  void *d0 = NULL, *d1 = NULL, *pinned = NULL, *pd = NULL;
  char* host = malloc(8192);
  struct cudaPointerAttributes a;
  EXPECT_OK(cudaSetDevice(0));
  EXPECT_OK(cudaMalloc(&d0, 1000));
  EXPECT_OK(cudaSetDevice(1));
  EXPECT_OK(cudaMalloc(&d1, 5000));
  EXPECT_OK(cudaSetDevice(0));
  EXPECT_OK(cudaPointerGetAttributes(&a, (char*)d1 + 4999));
  EXPECT(a.type == cudaMemoryTypeDevice && a.device == 1, "device memory: type %d device %d", a.type,
         a.device);
  EXPECT_OK(cudaPointerGetAttributes(&a, d0));
  EXPECT(a.type == cudaMemoryTypeDevice && a.device == 0 && a.devicePointer == d0, "device 0 memory");
  EXPECT_OK(cudaHostAlloc(&pinned, 100, cudaHostAllocMapped | cudaHostAllocPortable));
  EXPECT_OK(cudaPointerGetAttributes(&a, pinned));
  EXPECT(a.type == cudaMemoryTypeHost && a.hostPointer == pinned && a.devicePointer == pinned, "pinned");
  EXPECT_OK(cudaHostGetDevicePointer(&pd, pinned, 0));
  EXPECT(pd == pinned, "pinned device pointer");
  EXPECT_OK(cudaPointerGetAttributes(&a, host));
  EXPECT(a.type == cudaMemoryTypeUnregistered, "malloc memory type %d", a.type);
  EXPECT_ERR(cudaHostGetDevicePointer(&pd, host, 0), cudaErrorInvalidValue);
  EXPECT_OK(cudaHostRegister(host, 4096, cudaHostRegisterDefault));
  EXPECT_ERR(cudaHostRegister(host + 100, 10, 0), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_OK(cudaPointerGetAttributes(&a, host + 10));
  EXPECT(a.type == cudaMemoryTypeHost, "registered memory type %d", a.type);
  EXPECT_OK(cudaHostUnregister(host));
  EXPECT_ERR(cudaHostUnregister(host), cudaErrorHostMemoryNotRegistered);
  EXPECT_ERR(cudaFree(host), cudaErrorInvalidValue);
  EXPECT_ERR(cudaFree((char*)d0 + 8), cudaErrorInvalidValue);
  EXPECT_ERR(cudaFreeHost(d0), cudaErrorInvalidValue);
  size_t free0 = 0, free1 = 0, total = 0;
  EXPECT_OK(cudaMemGetInfo(&free0, &total));
  EXPECT_OK(cudaFree(d0));
  EXPECT_OK(cudaMemGetInfo(&free1, &total));
  EXPECT(free1 > free0 && total >= free1, "free %zu -> %zu of %zu", free0, free1, total);
  EXPECT_ERR(cudaFree(d0), cudaErrorInvalidValue);
  EXPECT_OK(cudaFree(d1));
  EXPECT_OK(cudaFreeHost(pinned));
  cudaGetLastError();
  free(host);
  report("memory_kinds", ok);
}

static void test_host_pointer_checks(void) {
  int ok = 1;
  char* host = malloc(256);
  char src[256] = {1};
  void* d = NULL;
  EXPECT_OK(cudaMalloc(&d, 256));
  EXPECT_ERR(cudaMemcpy(host, src, 256, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(src, host, 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpyAsync(d, host, 256, cudaMemcpyDeviceToDevice, 0), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemset(host, 0, 256), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(d, src, 4097 + 256, cudaMemcpyHostToDevice), cudaErrorInvalidValue); /* overrun */
  EXPECT_OK(cudaMemcpy(d, src, 256, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpy(host, d, 256, cudaMemcpyDefault));
  EXPECT(host[0] == 1, "copied back %d", host[0]);
  EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_OK(cudaFree(d));
  free(host);
  report("host_pointer_as_device_pointer", ok);
}

/* Two streams joined by an event: B's work must wait for A's (slow) host function. */
static void test_stream_order(void) {
  int ok = 1;
  cudaStream_t a, b;
  cudaEvent_t ev;
  int *d = NULL, *pin = NULL, out[64];
  EXPECT_OK(cudaStreamCreate(&a));
  EXPECT_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  EXPECT_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  EXPECT_OK(cudaMalloc((void**)&d, 2 * sizeof(out)));
  EXPECT_OK(cudaMallocHost((void**)&pin, sizeof(out)));
  for (int i = 0; i < 64; i++) pin[i] = i * 3;
  order_n = 0;
  EXPECT_OK(cudaMemcpyAsync(d, pin, sizeof(out), cudaMemcpyHostToDevice, a));
  EXPECT_OK(cudaLaunchHostFunc(a, slow_log_fn, (void*)1));
  EXPECT_OK(cudaMemcpyAsync(d + 64, d, sizeof(out), cudaMemcpyDeviceToDevice, a));
  EXPECT_OK(cudaEventRecord(ev, a));
  EXPECT_OK(cudaStreamWaitEvent(b, ev, 0));
  EXPECT_OK(cudaLaunchHostFunc(b, log_fn, (void*)2));
  EXPECT_OK(cudaMemcpyAsync(out, d + 64, sizeof(out), cudaMemcpyDeviceToHost, b));
  EXPECT_OK(cudaStreamSynchronize(b));
  EXPECT(order_n == 2 && order_log[0] == 1 && order_log[1] == 2, "order %d: %d %d", order_n, order_log[0],
         order_log[1]);
  int same = 1;
  for (int i = 0; i < 64; i++) same &= out[i] == i * 3;
  EXPECT(same, "data through the chain");
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaEventDestroy(ev);
  cudaFree(d);
  cudaFreeHost(pin);
  report("stream_order_across_event", ok);
}

/* Pageable host memory: the source is taken at the call, a copy into it is done at return.
 * Pinned memory is read when the copy runs. */
static void test_pageable_copies(void) {
  int ok = 1, v = 1, out = 0, *pin = NULL, *d = NULL;
  cudaStream_t s;
  struct gate g = GATE_INIT;
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaMalloc((void**)&d, 8));
  EXPECT_OK(cudaMallocHost((void**)&pin, 8));
  pin[0] = 10;
  EXPECT_OK(cudaLaunchHostFunc(s, gate_wait_fn, &g));
  EXPECT_OK(cudaMemcpyAsync(d, &v, sizeof(v), cudaMemcpyHostToDevice, s));
  EXPECT_OK(cudaMemcpyAsync(d + 1, pin, sizeof(v), cudaMemcpyHostToDevice, s));
  v = 2, pin[0] = 20;
  gate_open(&g);
  EXPECT_OK(cudaMemcpyAsync(&out, d, sizeof(out), cudaMemcpyDeviceToHost, s));
  EXPECT(out == 1, "pageable source read late: %d", out); /* no synchronize: done at return */
  EXPECT_OK(cudaMemcpyAsync(&out, d + 1, sizeof(out), cudaMemcpyDeviceToHost, s));
  EXPECT(out == 20, "pinned source read early: %d", out);
  cudaStreamDestroy(s);
  cudaFree(d), cudaFreeHost(pin);
  report("pageable_and_pinned_async_copies", ok);
}

/* Waits up to ms for g to be passed. */
static int wait_passed(struct gate* g, int ms) {
  for (int i = 0; i < ms / 5 && !gate_passed(g); i++) sleep_ms(5);
  return gate_passed(g);
}

static void test_legacy_stream(void) {
  int ok = 1;
  cudaStream_t blk, nb;
  struct gate g1 = GATE_INIT, g2 = GATE_INIT, l1 = GATE_INIT, l2 = GATE_INIT;
  EXPECT_OK(cudaStreamCreate(&blk));
  EXPECT_OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  gate_open(&l1), gate_open(&l2);
  /* Blocking stream: the legacy stream's host function must not run before it. */
  EXPECT_OK(cudaLaunchHostFunc(blk, gate_wait_fn, &g1));
  EXPECT_OK(cudaLaunchHostFunc(0, gate_wait_fn, &l1));
  sleep_ms(50);
  EXPECT(!gate_passed(&l1), "legacy stream ran before a blocking stream's earlier work");
  gate_open(&g1);
  EXPECT(wait_passed(&l1, 2000), "legacy stream work never ran");
  /* Non-blocking stream: the legacy stream does not wait for it. */
  EXPECT_OK(cudaLaunchHostFunc(nb, gate_wait_fn, &g2));
  EXPECT_OK(cudaLaunchHostFunc(cudaStreamLegacy, gate_wait_fn, &l2));
  EXPECT(wait_passed(&l2, 2000), "legacy stream waited for a non-blocking stream");
  gate_open(&g2);
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT(gate_passed(&g2), "device sync returned before the non-blocking stream's work");
  cudaStreamDestroy(blk);
  cudaStreamDestroy(nb);
  report("legacy_stream_vs_blocking_and_nonblocking", ok);
}

static void test_query(void) {
  int ok = 1;
  cudaStream_t s;
  cudaEvent_t ev, never;
  struct gate g = GATE_INIT;
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaEventCreate(&ev));
  EXPECT_OK(cudaEventCreate(&never));
  EXPECT_OK(cudaEventQuery(never));
  EXPECT_OK(cudaStreamQuery(s));
  EXPECT_OK(cudaLaunchHostFunc(s, gate_wait_fn, &g));
  EXPECT_OK(cudaEventRecord(ev, s));
  EXPECT_ERR(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_ERR(cudaEventQuery(ev), cudaErrorNotReady);
  EXPECT_OK(cudaGetLastError()); /* not-ready is an answer, not an error */
  gate_open(&g);
  EXPECT_OK(cudaEventSynchronize(ev));
  EXPECT_OK(cudaEventQuery(ev));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaStreamQuery(s));
  cudaEventDestroy(ev);
  cudaEventDestroy(never);
  cudaStreamDestroy(s);
  cudaGetLastError();
  report("stream_and_event_query", ok);
}

static void test_elapsed(void) {
  int ok = 1;
  cudaStream_t s;
  cudaEvent_t a, b, nt;
  struct gate g = GATE_INIT;
  float ms = -1;
  EXPECT_OK(cudaStreamCreate(&s));
  EXPECT_OK(cudaEventCreate(&a));
  EXPECT_OK(cudaEventCreate(&b));
  EXPECT_OK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
  EXPECT_OK(cudaEventRecord(a, s));
  EXPECT_OK(cudaLaunchHostFunc(s, sleep20_fn, NULL));
  EXPECT_OK(cudaLaunchHostFunc(s, gate_wait_fn, &g));
  EXPECT_OK(cudaEventRecord(b, s));
  EXPECT_ERR(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
  gate_open(&g);
  EXPECT_OK(cudaEventSynchronize(b));
  EXPECT_OK(cudaEventElapsedTime(&ms, a, b));
  EXPECT(ms >= 15.0f && ms < 10000.0f, "elapsed %f ms", ms);
  EXPECT_OK(cudaEventRecord(nt, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_ERR(cudaEventElapsedTime(&ms, a, nt), cudaErrorInvalidResourceHandle);
  cudaEventDestroy(a), cudaEventDestroy(b), cudaEventDestroy(nt);
  cudaStreamDestroy(s);
  cudaGetLastError();
  report("event_elapsed_time", ok);
}

static void* other_thread_error(void* p) {
  (void)p;
  return (void*)(intptr_t)cudaPeekAtLastError();
}

static void test_last_error(void) {
  int ok = 1, n;
  cudaGetLastError();
  EXPECT_ERR(cudaSetDevice(77), cudaErrorInvalidDevice);
  EXPECT_OK(cudaGetDeviceCount(&n)); /* a success does not clear it */
  EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  pthread_t t;
  void* r;
  pthread_create(&t, NULL, other_thread_error, NULL);
  pthread_join(t, &r);
  EXPECT((cudaError_t)(intptr_t)r == cudaSuccess, "another thread sees %d", (int)(intptr_t)r);
  EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_OK(cudaGetLastError());
  EXPECT(!strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue"), "name");
  EXPECT(!strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument"), "string");
  EXPECT(!strcmp(cudaGetErrorString((cudaError_t)12345), "unrecognized error code"), "unknown code");
  report("last_error", ok);
}

static void fill(int* v, int n, int seed) {
  for (int i = 0; i < n; i++) v[i] = seed + i;
}

/* The parent allocates; a forked child (a new context) opens the handle, writes, closes. */
static void test_ipc(void) {
  int ok = 1;
  int* d = NULL;
  cudaIpcMemHandle_t h, zero;
  void* p = NULL;
  EXPECT_OK(cudaMalloc((void**)&d, 1 << 20));
  EXPECT_OK(cudaMemset(d, 0, 1 << 20));
  EXPECT_OK(cudaIpcGetMemHandle(&h, d));
  EXPECT_ERR(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), cudaErrorDeviceUninitialized);
  memset(&zero, 0, sizeof(zero));
  EXPECT_ERR(cudaIpcOpenMemHandle(&p, zero, 0), cudaErrorInvalidValue);
  EXPECT_ERR(cudaIpcGetMemHandle(&h, &p), cudaErrorInvalidValue);
  EXPECT_OK(cudaIpcGetMemHandle(&h, d));
  int done[2], hold[2];
  EXPECT(pipe(done) == 0 && pipe(hold) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    close(done[0]), close(hold[1]);
    int* q = NULL;
    int *q2 = NULL, local[256];
    fill(local, 256, 7);
    struct cudaPointerAttributes a;
    int rc = cudaIpcOpenMemHandle((void**)&q, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess;
    rc |= cudaIpcOpenMemHandle((void**)&q2, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess || q2 != q;
    rc |= cudaPointerGetAttributes(&a, q) != cudaSuccess || a.type != cudaMemoryTypeDevice;
    rc |= cudaMemcpy(q + 1000, local, sizeof(local), cudaMemcpyHostToDevice) != cudaSuccess;
    rc |= cudaIpcCloseMemHandle(q) != cudaSuccess;
    rc |= cudaIpcCloseMemHandle(q) != cudaSuccess;
    rc |= cudaIpcCloseMemHandle(q) != cudaErrorInvalidValue;
    char c = rc ? 'n' : 'y';
    /* Stay alive until the parent has freed the memory: a closed mapping must not count. */
    if (write(done[1], &c, 1) != 1 || read(hold[0], &c, 1) < 0) rc = 1;
    _exit(rc ? 3 : 0);
  }
  close(done[1]), close(hold[0]);
  char c = 0;
  int st = 0, got[256], want[256];
  EXPECT(read(done[0], &c, 1) == 1 && c == 'y', "child's IPC calls failed");
  fill(want, 256, 7);
  EXPECT_OK(cudaMemcpy(got, d + 1000, sizeof(got), cudaMemcpyDeviceToHost));
  EXPECT(!memcmp(got, want, sizeof(got)), "pattern written by the child: got[0]=%d", got[0]);
  EXPECT_OK(cudaFree(d)); /* the (live) child closed it: no fatal report */
  close(hold[1]), close(done[0]);
  waitpid(pid, &st, 0);
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
  cudaGetLastError();
  report("ipc_between_processes", ok);
}

/* A child that sees the devices through CUDA_VISIBLE_DEVICES (and peer access per no_peer) opens
 * the handle of memory on physical device 1: 0 when it gets `want`, the pointer's device being
 * want_dev and its bytes readable. */
static int child_opens(cudaIpcMemHandle_t h, const char* visible, int no_peer, cudaError_t want,
                       int want_dev) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    if (no_peer) setenv("WEFT_EMU_NO_PEER_ACCESS", "1", 1);
    int* q = NULL;
    cudaError_t e = cudaIpcOpenMemHandle((void**)&q, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != want) _exit(2);
    if (e != cudaSuccess) _exit(0);
    struct cudaPointerAttributes a;
    int x = 0;
    int bad = cudaPointerGetAttributes(&a, q) != cudaSuccess || a.device != want_dev;
    bad |= cudaMemcpy(&x, q + 5, sizeof(x), cudaMemcpyDeviceToHost) != cudaSuccess || x != 5;
    bad |= cudaIpcCloseMemHandle(q) != cudaSuccess;
    _exit(bad ? 3 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* IPC names the physical device: processes that see different devices (or the owner's under
 * another ordinal) open each other's memory, which needs peer access unless it is one device. */
static void test_ipc_visible(void) {
  int ok = 1, *d = NULL, five[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  cudaIpcMemHandle_t h;
  EXPECT_OK(cudaSetDevice(1));
  EXPECT_OK(cudaMalloc((void**)&d, 4096));
  EXPECT_OK(cudaMemcpy(d, five, sizeof(five), cudaMemcpyHostToDevice));
  EXPECT_OK(cudaIpcGetMemHandle(&h, d));
  EXPECT_OK(cudaSetDevice(0));
  int rc;
  EXPECT((rc = child_opens(h, "1", 0, cudaSuccess, 0)) == 0, "GPU 1 as ordinal 0: child status %d", rc);
  EXPECT((rc = child_opens(h, "0,1", 0, cudaSuccess, 1)) == 0, "GPU 1 as ordinal 1: child status %d", rc);
  EXPECT((rc = child_opens(h, "1,0", 1, cudaSuccess, 0)) == 0, "same device, no peer access: status %d", rc);
  EXPECT((rc = child_opens(h, "0", 0, cudaSuccess, 0)) == 0, "GPU 1 not visible: child status %d", rc);
  EXPECT((rc = child_opens(h, "0", 1, cudaErrorPeerAccessUnsupported, 0)) == 0,
         "GPU 1 not visible, no peer access: child status %d", rc);
  EXPECT_OK(cudaFree(d));
  cudaGetLastError();
  report("ipc_visible_devices", ok);
}

/* A handle whose owner has exited cannot be opened. */
static void test_ipc_dead_owner(void) {
  int ok = 1, fds[2];
  cudaIpcMemHandle_t h;
  void* p = NULL;
  EXPECT(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    void* d = NULL;
    int bad = cudaMalloc(&d, 4096) != cudaSuccess || cudaIpcGetMemHandle(&h, d) != cudaSuccess;
    if (write(fds[1], &h, sizeof(h)) != (ssize_t)sizeof(h)) bad = 1;
    _exit(bad);
  }
  close(fds[1]);
  ssize_t n = read(fds[0], &h, sizeof(h));
  close(fds[0]);
  int st;
  waitpid(pid, &st, 0);
  EXPECT(n == (ssize_t)sizeof(h) && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child setup");
  EXPECT_ERR(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), cudaErrorMapBufferObjectFailed);
  cudaGetLastError();
  report("ipc_dead_owner", ok);
}

/* Child 1 allocates and frees while its child 2 still has the memory open: fatal report + abort. */
static void free_while_open_child(int errfd) {
  int opened[2], hold[2];
  void* d = NULL;
  cudaIpcMemHandle_t h;
  dup2(errfd, 2);
  setenv("WEFT_EMU_STRICT", "1", 1);
  if (pipe(opened) || pipe(hold) || cudaMalloc(&d, 8192) || cudaIpcGetMemHandle(&h, d)) _exit(10);
  if (fork() == 0) {
    void* q;
    char c = cudaIpcOpenMemHandle(&q, h, 0) == cudaSuccess ? 'y' : 'n';
    close(hold[1]);
    if (write(opened[1], &c, 1) != 1) _exit(1);
    if (read(hold[0], &c, 1) < 0) _exit(1); /* EOF once child 1 is gone */
    _exit(0);
  }
  close(hold[0]);
  char c = 0;
  if (read(opened[0], &c, 1) != 1 || c != 'y') _exit(11);
  cudaFree(d);
  _exit(0); /* not reached when the runtime aborts as it should */
}

static void test_free_while_open(void) {
  int ok = 1, errp[2];
  EXPECT(pipe(errp) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    close(errp[0]);
    free_while_open_child(errp[1]);
  }
  close(errp[1]);
  char buf[4096] = {0};
  size_t len = 0;
  ssize_t n;
  while (len < sizeof(buf) - 1 && (n = read(errp[0], buf + len, sizeof(buf) - 1 - len)) > 0) len += (size_t)n;
  close(errp[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "child status %#x, stderr: %s", st, buf);
  EXPECT(strstr(buf, "still have it open through CUDA IPC") != NULL, "report: %s", buf);
  report("cudaFree_while_ipc_open_is_fatal", ok);
}

static int replay_count, replay_seen[8];
static int* replay_dst;
static void replay_fn(void* p) {
  (void)p;
  replay_seen[replay_count++ & 7] = replay_dst[0];
}

static void test_capture_replay(void) {
  int ok = 1;
  cudaStream_t s, side;
  cudaEvent_t fork_ev, join_ev;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  int *d, *src, *dst;
  enum cudaStreamCaptureStatus cs;
  size_t nodes = 0;
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  EXPECT_OK(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
  EXPECT_OK(cudaEventCreateWithFlags(&join_ev, cudaEventDisableTiming));
  EXPECT_OK(cudaMalloc((void**)&d, 4096));
  EXPECT_OK(cudaMallocHost((void**)&src, 4096));
  EXPECT_OK(cudaMallocHost((void**)&dst, 4096));
  replay_dst = dst, replay_count = 0, src[0] = 100, dst[0] = -1;
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_OK(cudaStreamIsCapturing(s, &cs));
  EXPECT(cs == cudaStreamCaptureStatusActive, "capture status %d", cs);
  EXPECT_OK(cudaMemcpyAsync(d, src, 4096, cudaMemcpyHostToDevice, s));
  EXPECT_OK(cudaEventRecord(fork_ev, s));
  EXPECT_OK(cudaStreamWaitEvent(side, fork_ev, 0)); /* side joins the capture */
  EXPECT_OK(cudaMemcpyAsync(dst, d, 4096, cudaMemcpyDeviceToHost, side));
  EXPECT_OK(cudaEventRecord(join_ev, side));
  EXPECT_OK(cudaStreamWaitEvent(s, join_ev, 0));
  EXPECT_OK(cudaLaunchHostFunc(s, replay_fn, NULL));
  EXPECT_OK(cudaStreamEndCapture(s, &graph));
  EXPECT_OK(cudaStreamIsCapturing(side, &cs));
  EXPECT(cs == cudaStreamCaptureStatusNone, "side still capturing");
  sleep_ms(20);
  EXPECT(replay_count == 0 && dst[0] == -1, "captured work ran during capture");
  EXPECT_OK(cudaGraphGetNodes(graph, NULL, &nodes));
  EXPECT(nodes == 3, "%zu nodes", nodes);
  EXPECT_OK(cudaGraphInstantiate(&exec, graph, 0));
  EXPECT_OK(cudaGraphDestroy(graph)); /* the executable graph keeps what it needs */
  for (int it = 0; it < 3; it++) {
    src[0] = it + 1;
    EXPECT_OK(cudaGraphLaunch(exec, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT(replay_count == it + 1 && replay_seen[it] == it + 1, "replay %d: count %d saw %d", it,
           replay_count, replay_seen[it]);
  }
  EXPECT_OK(cudaGraphExecDestroy(exec));
  /* A side stream that never rejoins: EndCapture fails. */
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_OK(cudaEventRecord(fork_ev, s));
  EXPECT_OK(cudaStreamWaitEvent(side, fork_ev, 0));
  EXPECT_OK(cudaLaunchHostFunc(side, replay_fn, NULL));
  EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureUnjoined);
  EXPECT(graph == NULL, "graph from an unjoined capture");
  cudaStreamDestroy(s), cudaStreamDestroy(side);
  cudaEventDestroy(fork_ev), cudaEventDestroy(join_ev);
  cudaFree(d), cudaFreeHost(src), cudaFreeHost(dst);
  cudaGetLastError();
  report("capture_and_replay", ok);
}

/* External event nodes (how a library orders its graph replays with its eager launches): a record
 * node records at each launch as cudaEventRecord on the launch stream would, and a wait node waits
 * for the latest record made before the launch. */
static void test_external_event_nodes(void) {
  int ok = 1;
  cudaStream_t s, other;
  cudaEvent_t ev;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t rec_exec = NULL, wait_exec = NULL;
  struct gate g1 = GATE_INIT, g2 = GATE_INIT;
  size_t nodes = 0;
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  EXPECT_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  /* Record node: eager work waiting on the event waits for the replay. */
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_OK(cudaLaunchHostFunc(s, gate_wait_fn, &g1));
  EXPECT_OK(cudaEventRecordWithFlags(ev, s, cudaEventRecordExternal));
  EXPECT_OK(cudaStreamEndCapture(s, &graph));
  EXPECT_OK(cudaGraphGetNodes(graph, NULL, &nodes));
  EXPECT(nodes == 2, "%zu nodes in the record graph", nodes);
  EXPECT_OK(cudaGraphInstantiate(&rec_exec, graph, 0));
  EXPECT_OK(cudaGraphDestroy(graph));
  EXPECT_OK(cudaEventQuery(ev)); /* nothing recorded yet: captured nodes do not record */
  order_n = 0;
  EXPECT_OK(cudaGraphLaunch(rec_exec, s));
  EXPECT_ERR(cudaEventQuery(ev), cudaErrorNotReady);
  EXPECT_OK(cudaStreamWaitEvent(other, ev, 0));
  EXPECT_OK(cudaLaunchHostFunc(other, log_fn, (void*)1));
  sleep_ms(20);
  EXPECT(order_n == 0, "work waiting on a record node ran before the replay reached it");
  gate_open(&g1);
  EXPECT_OK(cudaStreamSynchronize(other));
  EXPECT(order_n == 1 && gate_passed(&g1), "order %d after the replay", order_n);
  EXPECT_OK(cudaStreamSynchronize(s));
  /* Wait node: the replay waits for the record made before its launch. */
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_OK(cudaStreamWaitEvent(s, ev, cudaEventWaitExternal));
  EXPECT_OK(cudaLaunchHostFunc(s, log_fn, (void*)2));
  EXPECT_OK(cudaStreamEndCapture(s, &graph));
  EXPECT_OK(cudaGraphInstantiate(&wait_exec, graph, 0));
  EXPECT_OK(cudaGraphDestroy(graph));
  EXPECT_OK(cudaLaunchHostFunc(other, gate_wait_fn, &g2));
  EXPECT_OK(cudaEventRecord(ev, other));
  EXPECT_OK(cudaGraphLaunch(wait_exec, s));
  sleep_ms(20);
  EXPECT(order_n == 1, "a wait node did not wait for the record before its launch");
  gate_open(&g2);
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT(order_n == 2 && order_log[1] == 2, "order %d after the record", order_n);
  cudaGraphExecDestroy(rec_exec), cudaGraphExecDestroy(wait_exec);
  cudaStreamDestroy(s), cudaStreamDestroy(other);
  cudaEventDestroy(ev);
  cudaGetLastError();
  report("external_event_nodes", ok);
}

static void test_capture_invalidation(void) {
  int ok = 1;
  cudaStream_t s;
  cudaEvent_t outside;
  cudaGraph_t graph = NULL;
  enum cudaStreamCaptureStatus cs;
  char host[64], *d;
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaEventCreate(&outside));
  EXPECT_OK(cudaMalloc((void**)&d, 64));
  EXPECT_ERR(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  /* Synchronizing the capturing stream. */
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_OK(cudaMemcpyAsync(d, host, 64, cudaMemcpyHostToDevice, s));
  EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_OK(cudaStreamIsCapturing(s, &cs));
  EXPECT(cs == cudaStreamCaptureStatusInvalidated, "status %d", cs);
  EXPECT_ERR(cudaMemcpyAsync(d, host, 64, cudaMemcpyHostToDevice, s), cudaErrorStreamCaptureInvalidated);
  EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT(graph == NULL, "graph from an invalidated capture");
  /* A synchronous copy (legacy stream) during a global-mode capture, then the relaxed escape. */
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  EXPECT_OK(cudaThreadExchangeStreamCaptureMode(&mode));
  void* tmp = NULL;
  EXPECT_OK(cudaMalloc(&tmp, 64));
  EXPECT_OK(cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT(mode == cudaStreamCaptureModeRelaxed, "mode exchange");
  EXPECT_ERR(cudaMemcpy(d, host, 64, cudaMemcpyHostToDevice), cudaErrorStreamCaptureUnsupported);
  EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  /* Waiting inside a capture on an event recorded outside it. */
  EXPECT_OK(cudaEventRecord(outside, 0));
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_ERR(cudaStreamWaitEvent(s, outside, 0), cudaErrorStreamCaptureIsolation);
  EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorIllegalState);
  EXPECT_OK(cudaStreamSynchronize(s));
  cudaFree(tmp), cudaFree(d);
  cudaEventDestroy(outside);
  cudaStreamDestroy(s);
  cudaGetLastError();
  report("capture_invalidation", ok);
}

/* cudaFree waits for the device's queued work; cudaStreamDestroy returns at once. */
static void test_free_syncs_and_destroy(void) {
  int ok = 1;
  cudaStream_t s;
  struct gate g = GATE_INIT, g2 = GATE_INIT;
  void* d = NULL;
  EXPECT_OK(cudaMalloc(&d, 64));
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaLaunchHostFunc(s, gate_wait_fn, &g));
  EXPECT_OK(cudaStreamDestroy(s)); /* returns with the work still queued */
  EXPECT(!gate_passed(&g), "destroy waited for the work");
  EXPECT_ERR(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaLaunchHostFunc(s, slow_log_fn, (void*)9));
  EXPECT_OK(cudaLaunchHostFunc(s, gate_wait_fn, &g2));
  gate_open(&g);
  gate_open(&g2);
  EXPECT_OK(cudaFree(d));
  EXPECT(gate_passed(&g) && gate_passed(&g2), "cudaFree returned before the device's work ended");
  cudaStreamDestroy(s);
  cudaGetLastError();
  report("cudaFree_syncs_device_and_destroy_is_async", ok);
}

/* Many host threads using the runtime at once, each with its own stream and buffers. */
static void* hammer(void* p) {
  int id = (int)(intptr_t)p, bad = 0, host[512], back[512];
  cudaSetDevice(id & 1);
  cudaStream_t s;
  if (cudaStreamCreate(&s)) return (void*)1;
  for (int it = 0; it < 100 && !bad; it++) {
    int* d = NULL;
    fill(host, 512, id * 1000 + it);
    bad |= cudaMalloc((void**)&d, sizeof(host)) != cudaSuccess;
    bad |= cudaMemcpyAsync(d, host, sizeof(host), cudaMemcpyHostToDevice, s) != cudaSuccess;
    bad |= cudaMemcpyAsync(back, d, sizeof(host), cudaMemcpyDeviceToHost, s) != cudaSuccess;
    bad |= cudaStreamSynchronize(s) != cudaSuccess || memcmp(host, back, sizeof(host)) != 0;
    bad |= cudaFree(d) != cudaSuccess;
  }
  cudaStreamDestroy(s);
  return (void*)(intptr_t)bad;
}

static void test_threads(void) {
  int ok = 1;
  pthread_t t[8];
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, hammer, (void*)(intptr_t)i);
  for (int i = 0; i < 8; i++) {
    void* r;
    pthread_join(t[i], &r);
    EXPECT(r == NULL, "thread %d failed", i);
  }
  report("concurrent_host_threads", ok);
}

/* The driver API as cuda.h declares it (CUresult, CUdevice as int; CUdeviceptr as unsigned long
 * long), with cuda.h's values: the test builds against the runtime headers only. */
typedef int (*get_handle_fn)(void* handle, unsigned long long dptr, size_t size, int type,
                             unsigned long long flags);
typedef int (*get_attribute_fn)(int* pi, int attrib, int dev);
enum { DRV_SUCCESS = 0, DRV_INVALID_VALUE = 1, DRV_INVALID_DEVICE = 101, DRV_NOT_SUPPORTED = 801 };
enum { DRV_ATTR_GPU_DIRECT_RDMA = 116, DRV_ATTR_DMA_BUF = 124, DRV_DMA_BUF_FD = 1, DRV_FLAG_PCIE = 1 };

static void* driver_symbol(const char* name, unsigned version, enum cudaDriverEntryPointQueryResult* st) {
  void* fn = NULL;
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, st) != cudaSuccess) return NULL;
  return fn;
}

/* fd is a close-on-exec memfd named WEFT_EMU_DMABUF_NAME whose record names [dptr, dptr+size) of
 * this process, as the test verbs provider will read it. */
static int dmabuf_names(int fd, const void* dptr, size_t size) {
  char link[64], target[128] = "", prefix[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n > 0) target[n] = 0;
  snprintf(prefix, sizeof(prefix), "/memfd:%s", WEFT_EMU_DMABUF_NAME);
  struct weft_emu_dmabuf rec;
  memset(&rec, 0, sizeof(rec));
  return pread(fd, &rec, sizeof(rec), 0) == (ssize_t)sizeof(rec) &&
         memcmp(rec.magic, WEFT_EMU_DMABUF_MAGIC, sizeof(rec.magic)) == 0 && rec.dptr == (uintptr_t)dptr &&
         rec.size == size && rec.pid == getpid() && rec.pad == 0 &&
         strncmp(target, prefix, strlen(prefix)) == 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

/* One refused export: the driver's error, and no descriptor written. */
static int export_refused(get_handle_fn get, const void* p, size_t size, int type, unsigned long long flags) {
  int fd = -1;
  int res = get(&fd, (uintptr_t)p, size, type, flags);
  if (fd >= 0) close(fd);
  return fd < 0 ? res : -1;
}

/* GPUDirect RDMA's driver calls: the entry points resolve, the device says it exports DMA-BUF, and
 * cuMemGetHandleForAddressRange exports whole pages of one cudaMalloc and refuses the rest as the
 * driver does; none of it touches the runtime's last error. */
static void test_dmabuf_export(void) {
  int ok = 1, v = -1;
  enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
  get_handle_fn get = (get_handle_fn)driver_symbol("cuMemGetHandleForAddressRange", 12000, &st);
  EXPECT(get && st == cudaDriverEntryPointSuccess, "cuMemGetHandleForAddressRange: status %d", st);
  get_attribute_fn attr = (get_attribute_fn)driver_symbol("cuDeviceGetAttribute", 12000, &st);
  EXPECT(attr && st == cudaDriverEntryPointSuccess, "cuDeviceGetAttribute: status %d", st);
  EXPECT(!driver_symbol("cuMemGetHandleForAddressRange", 11000, &st) &&
             st == cudaDriverEntryPointVersionNotSufficent,
         "older than CUDA 11.7: status %d", st);
  void* fn = (void*)1;
  EXPECT_ERR(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &st),
             cudaErrorNotSupported);
  EXPECT(fn == NULL && st == cudaDriverEntryPointSymbolNotFound, "other symbols: status %d", st);
  cudaGetLastError();
  if (!get || !attr) {
    report("dmabuf_export", 0);
    return;
  }
  EXPECT(attr(&v, DRV_ATTR_DMA_BUF, 0) == DRV_SUCCESS && v == 1, "DMA_BUF_SUPPORTED %d", v);
  EXPECT(attr(&v, DRV_ATTR_GPU_DIRECT_RDMA, 1) == DRV_SUCCESS && v == 1, "GPU_DIRECT_RDMA_SUPPORTED %d", v);
  EXPECT(attr(&v, cudaDevAttrMultiProcessorCount, 0) == DRV_SUCCESS && v == 132, "SMs through the driver %d",
         v);
  EXPECT(attr(&v, DRV_ATTR_DMA_BUF, 7) == DRV_INVALID_DEVICE, "device 7");
  EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMASupported, 0));
  EXPECT(v == 1, "cudaDevAttrGPUDirectRDMASupported %d", v);

  size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 2u << 20;
  char* d = NULL;
  EXPECT_OK(cudaMalloc((void**)&d, len));
  EXPECT((uintptr_t)d % page == 0, "cudaMalloc %p is not page aligned", (void*)d);
  int fd = -1;
  EXPECT(get(&fd, (uintptr_t)d, len, DRV_DMA_BUF_FD, 0) == DRV_SUCCESS && fd >= 0, "export all: fd %d", fd);
  EXPECT(fd >= 0 && dmabuf_names(fd, d, len), "record of the whole allocation");
  if (fd >= 0) close(fd);
  fd = -1;
  EXPECT(get(&fd, (uintptr_t)(d + page), 2 * page, DRV_DMA_BUF_FD, 0) == DRV_SUCCESS && fd >= 0, "sub-range");
  EXPECT(fd >= 0 && dmabuf_names(fd, d + page, 2 * page), "record of pages 1-2");
  if (fd >= 0) close(fd);

  EXPECT(export_refused(get, d + 256, page, DRV_DMA_BUF_FD, 0) == DRV_INVALID_VALUE, "unaligned start");
  EXPECT(export_refused(get, d, page + 256, DRV_DMA_BUF_FD, 0) == DRV_INVALID_VALUE, "unaligned size");
  EXPECT(export_refused(get, d, 0, DRV_DMA_BUF_FD, 0) == DRV_INVALID_VALUE, "empty range");
  EXPECT(export_refused(get, d + len - page, 2 * page, DRV_DMA_BUF_FD, 0) == DRV_INVALID_VALUE,
         "range past the allocation's end");
  EXPECT(export_refused(get, d, page, 2, 0) == DRV_INVALID_VALUE, "handle type 2");
  EXPECT(export_refused(get, d, page, DRV_DMA_BUF_FD, DRV_FLAG_PCIE) == DRV_NOT_SUPPORTED, "PCIe mapping");
  EXPECT(export_refused(get, d, page, DRV_DMA_BUF_FD, 4) == DRV_INVALID_VALUE, "unknown flag");
  /* page aligned, so that only its being host memory refuses it */
  void *host = NULL, *pinned = NULL;
  EXPECT(posix_memalign(&host, page, 2 * page) == 0, "posix_memalign");
  EXPECT(export_refused(get, host, page, DRV_DMA_BUF_FD, 0) == DRV_INVALID_VALUE, "malloc memory");
  free(host);
  EXPECT_OK(cudaMallocHost(&pinned, 2 * page));
  EXPECT(export_refused(get, pinned, page, DRV_DMA_BUF_FD, 0) == DRV_INVALID_VALUE, "pinned host memory");
  EXPECT_OK(cudaFreeHost(pinned));
  EXPECT_OK(cudaFree(d));
  EXPECT(export_refused(get, d, page, DRV_DMA_BUF_FD, 0) == DRV_INVALID_VALUE, "freed device memory");
  EXPECT_OK(cudaGetLastError()); /* driver errors are not the runtime's */
  report("dmabuf_export", ok);
}

/* A NIC's writes to device memory: ordered for the owner as on Hopper, or not (and then flushed)
 * with WEFT_EMU_GDR_UNORDERED=1, neither with =noflush; the flush takes only the runtime's values. */
static void test_gdr_flush(void) {
  int ok = 1, v = -1;
  EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAWritesOrdering, 0), cudaSuccess);
  EXPECT(v == cudaGPUDirectRDMAWritesOrderingOwner, "ordering %d, want owner", v);
  EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAFlushWritesOptions, 0), cudaSuccess);
  EXPECT(v == cudaFlushGPUDirectRDMAWritesOptionHost, "flush options %d, want host", v);
  setenv("WEFT_EMU_GDR_UNORDERED", "1", 1);
  EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAWritesOrdering, 0), cudaSuccess);
  EXPECT(v == cudaGPUDirectRDMAWritesOrderingNone, "unordered: ordering %d, want none", v);
  setenv("WEFT_EMU_GDR_UNORDERED", "noflush", 1);
  EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAFlushWritesOptions, 0), cudaSuccess);
  EXPECT(v == 0, "noflush: flush options %d, want 0", v);
  unsetenv("WEFT_EMU_GDR_UNORDERED");
  EXPECT_ERR(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                                cudaFlushGPUDirectRDMAWritesToOwner),
             cudaSuccess);
  EXPECT_ERR(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                                (enum cudaFlushGPUDirectRDMAWritesScope)7),
             cudaErrorInvalidValue);
  cudaGetLastError();
  report("gdr_flush", ok);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_devices();
  test_visible_devices();
  test_memory_kinds();
  test_host_pointer_checks();
  test_stream_order();
  test_pageable_copies();
  test_legacy_stream();
  test_query();
  test_elapsed();
  test_last_error();
  test_ipc();
  test_ipc_dead_owner();
  test_ipc_visible();
  test_free_while_open();
  test_capture_replay();
  test_external_event_nodes();
  test_capture_invalidation();
  test_free_syncs_and_destroy();
  test_threads();
  test_dmabuf_export();
  test_gdr_flush();
  printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
