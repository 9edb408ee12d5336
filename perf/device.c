/* Device side of the perf harness: the run-time choice between host buffers and GPUs, devices,
 * streams, buffer copies and CUDA graphs. Only this file calls the CUDA runtime. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#ifdef WEFT_PERF_CUDA
#include <cuda_runtime.h>
#endif

static int cuda_on;   /* set once, before any thread or communicator exists */
static int cuda_ndev; /* devices visible to this process when cuda_on */

int perf_cuda(void) { return cuda_on; }

#ifdef WEFT_PERF_CUDA
/* nccl-tests' "Test CUDA failure" line, then its exit status for CUDA errors. */
static void cuda_fail(cudaError_t err, const char* file, int line) {
  char host[64] = "";
  gethostname(host, sizeof(host) - 1);
  host[strcspn(host, ".")] = '\0';
  printf("%s: Test CUDA failure %s:%d '%s'\n", host, file, line, cudaGetErrorString(err));
  printf(" .. %s pid %d: Test failure %s:%d\n", host, (int)getpid(), file, line);
  fflush(stdout);
  _exit(PERF_CUDA_ERROR);
}

#define PERF_CUDA(call)                                                     \
  do {                                                                      \
    cudaError_t perf_err_ = (call);                                         \
    if (perf_err_ != cudaSuccess) cuda_fail(perf_err_, __FILE__, __LINE__); \
  } while (0)
#endif

/* The library's rule: WEFT_BACKEND=host keeps ranks on the host; otherwise (auto, cuda) a device
 * that answers means GPUs. No driver or no device means the host path, so the CUDA build of the
 * binaries also runs on machines without a GPU. */
void perf_device_setup(void) {
#ifdef WEFT_PERF_CUDA
  const char* backend = getenv("WEFT_BACKEND");
  if (backend && strcmp(backend, "host") == 0) return;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError(); /* clear the probe's error */
    return;
  }
  cuda_on = 1;
  cuda_ndev = n;
#endif
}

/* nccl-tests' choice: devices in turn, wrapping around (one visible device: all ranks on device 0). */
int perf_device_index(int want) { return cuda_on ? want % cuda_ndev : want; }

void perf_device_use(int dev) {
#ifdef WEFT_PERF_CUDA
  if (cuda_on) PERF_CUDA(cudaSetDevice(dev));
#else
  (void)dev;
#endif
}

/* One non-blocking stream per rank: ranks as threads sharing a GPU would serialize (and deadlock)
 * on the legacy NULL stream, which -y 1 asks for anyway. The host backend ignores streams. */
cudaStream_t perf_stream_create(int null_stream) {
  cudaStream_t s = NULL;
#ifdef WEFT_PERF_CUDA
  if (cuda_on && !null_stream) PERF_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
#else
  (void)null_stream;
#endif
  return s;
}

void perf_stream_destroy(cudaStream_t s) {
#ifdef WEFT_PERF_CUDA
  if (cuda_on && s) PERF_CUDA(cudaStreamDestroy(s));
#else
  (void)s;
#endif
}

/* Host backend: every call has completed when it returns. */
void perf_stream_sync(cudaStream_t s) {
#ifdef WEFT_PERF_CUDA
  if (cuda_on) PERF_CUDA(cudaStreamSynchronize(s));
#else
  (void)s;
#endif
}

/* Ordered after the work already on s; does not wait (a collective's own staging copy). */
void perf_mem_copy_async(cudaStream_t s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
#ifdef WEFT_PERF_CUDA
  if (cuda_on) {
    PERF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    return;
  }
#else
  (void)s;
#endif
  memmove(dst, src, bytes);
}

/* Ordered after the work on s, and complete on return (host-side checking). */
void perf_mem_copy(cudaStream_t s, void* dst, const void* src, size_t bytes) {
  perf_mem_copy_async(s, dst, src, bytes);
  if (bytes && dst != src) perf_stream_sync(s);
}

void perf_mem_zero(cudaStream_t s, void* dst, size_t bytes) {
  if (bytes == 0) return;
#ifdef WEFT_PERF_CUDA
  if (cuda_on) {
    PERF_CUDA(cudaMemsetAsync(dst, 0, bytes, s));
    PERF_CUDA(cudaStreamSynchronize(s));
    return;
  }
#else
  (void)s;
#endif
  memset(dst, 0, bytes);
}

/* Device memory is what the GPU path copies to and from; anything else means the library and the
 * harness disagree on the backend, which would otherwise surface as confusing copy errors. */
int perf_buffer_matches(const void* p) {
#ifdef WEFT_PERF_CUDA
  if (!cuda_on) return 1;
  struct cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return attr.type == cudaMemoryTypeDevice;
#else
  (void)p;
  return 1;
#endif
}

/* Name and PCI location of dev for the "#  Rank" lines; returns 0 on the host path. */
int perf_device_describe(int dev, char* name, size_t len, unsigned pci[3]) {
#ifdef WEFT_PERF_CUDA
  if (!cuda_on) return 0;
  struct cudaDeviceProp prop;
  PERF_CUDA(cudaGetDeviceProperties(&prop, dev));
  snprintf(name, len, "%s", prop.name);
  pci[0] = (unsigned)prop.pciDomainID;
  pci[1] = (unsigned)prop.pciBusID;
  pci[2] = (unsigned)prop.pciDeviceID;
  return 1;
#else
  (void)dev, (void)name, (void)len, (void)pci;
  return 0;
#endif
}

/* -G: the timed iterations are captured on each rank's stream (thread-local mode, as ranks of other
 * threads capture at the same time), instantiated, then launched -G times. */
void perf_graph_begin(cudaStream_t s) {
#ifdef WEFT_PERF_CUDA
  PERF_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
#else
  (void)s;
#endif
}

void* perf_graph_end(cudaStream_t s) {
#ifdef WEFT_PERF_CUDA
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  PERF_CUDA(cudaStreamEndCapture(s, &graph));
  PERF_CUDA(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  PERF_CUDA(cudaGraphDestroy(graph)); /* the executable graph does not need it */
  return exec;
#else
  (void)s;
  return NULL;
#endif
}

void perf_graph_launch(void* exec, cudaStream_t s) {
#ifdef WEFT_PERF_CUDA
  PERF_CUDA(cudaGraphLaunch((cudaGraphExec_t)exec, s));
#else
  (void)exec, (void)s;
#endif
}

void perf_graph_destroy(void* exec) {
#ifdef WEFT_PERF_CUDA
  if (exec) PERF_CUDA(cudaGraphExecDestroy((cudaGraphExec_t)exec));
#else
  (void)exec;
#endif
}
