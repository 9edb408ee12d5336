/* Shared by the GPU tests: SKIP without a usable GPU (probed in a child process, so that a
 * parent that forks ranks never initializes CUDA itself), checked runtime calls, and a
 * collective call on a stream (coll_util.h's case_call passes the NULL stream). */
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
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 77);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("SKIP: no usable CUDA device\n");
    exit(77);
  }
  setenv("WEFT_BACKEND", "cuda", 1);
}

static inline ncclResult_t case_call_stream(const struct coll_case* c, ncclComm_t comm, int me, int n,
                                            const void* send, void* recv, ncclRedOp_t op, cudaStream_t st) {
  ncclDataType_t dt = (ncclDataType_t)c->dt;
  size_t cnt = c->count, bytes = cnt * dt_table[c->dt].size;
  switch (c->coll) {
    case C_ALLREDUCE:
      return ncclAllReduce(send, recv, cnt, dt, op, comm, st);
    case C_BROADCAST:
      if (c->in_place && (c->seed & 1)) return ncclBcast(recv, cnt, dt, c->root, comm, st);
      return ncclBroadcast(send, recv, cnt, dt, c->root, comm, st);
    case C_REDUCE:
      return ncclReduce(send, recv, cnt, dt, op, c->root, comm, st);
    case C_ALLGATHER:
      return ncclAllGather(send, recv, cnt, dt, comm, st);
    case C_REDUCESCATTER:
      return ncclReduceScatter(send, recv, cnt, dt, op, comm, st);
    case C_ALLTOALL:
      return ncclAlltoAll(send, recv, cnt, dt, comm, st);
    case C_GATHER:
      return ncclGather(send, recv, cnt, dt, c->root, comm, st);
    case C_SCATTER:
      return ncclScatter(send, recv, cnt, dt, c->root, comm, st);
    case C_SENDRECV: {
      ncclResult_t r[6];
      r[0] = ncclGroupStart();
      r[1] = ncclSend(send, cnt, dt, (me + 1) % n, comm, st);
      r[2] = ncclRecv(recv, cnt, dt, (me + n - 1) % n, comm, st);
      r[3] = ncclSend(send, cnt, dt, me, comm, st);
      r[4] = ncclRecv((char*)recv + bytes, cnt, dt, me, comm, st);
      r[5] = ncclGroupEnd();
      for (int i = 0; i < 6; i++)
        if (r[i] != ncclSuccess) return r[i];
      return ncclSuccess;
    }
  }
  return ncclInternalError;
}

#endif
