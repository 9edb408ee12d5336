/* Shared by the GPU tests: SKIP without a usable GPU (probed in a child process, so that a
 * parent that forks ranks never initializes CUDA itself) and checked runtime calls; collectives
 * go through coll_util.h's case_call_stream. */
#ifndef WEFT_TESTS_GPU_UTIL_H
#define WEFT_TESTS_GPU_UTIL_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll_util.h"

#define GPU_CHECK(call)                                                                             \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) {                                                                        \
      fprintf(stderr, "FAILED %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                                      \
    }                                                                                               \
  } while (0)

/* Exit 77 unless a GPU is usable; selects the CUDA backend for the library. */
static inline void gpu_require(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    /* Why, for a machine that has a GPU (a driver older than this runtime, for one). */
    if (err != cudaSuccess) printf("cudaGetDeviceCount: %s\n", cudaGetErrorString(err));
    fflush(stdout);
    _exit(err == cudaSuccess && n > 0 ? 0 : 77);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("SKIP: no usable CUDA device\n");
    exit(77);
  }
  setenv("WEFT_BACKEND", "cuda", 1);
}

#endif
