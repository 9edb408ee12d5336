/* A producer block publishes data to a consumer block through a flag, with the library's own
 * accessors (ptx_dev.cuh), so that a ThreadSanitizer build (make emu-tsan) can be shown to see a
 * missing fence: `fence` (the default) is the correct protocol and must run clean; `nofence`
 * drops the producer's __threadfence_system() and must be reported as a data race; `nosync`
 * reads another CUDA thread's write of the same block without __syncthreads and must be reported
 * too (the fibers of one block are not ordered between barriers). Without ThreadSanitizer every
 * variant only checks what the consumer read (nosync: nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/cuda/ptx_dev.cuh"

#define THREADS 64
#define WORDS (4 * THREADS)

/* Block 0 writes data with all its threads and raises the flag; block 1 waits for the flag and
 * checks data with all its threads. */
__global__ void publish_kernel(uint64_t* data, uint64_t* flag, int* wrong, int fenced) {
  if (blockIdx.x == 0) {
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) data[i] = 1000 + i;
    __syncthreads();
    if (threadIdx.x == 0) {
      if (fenced) __threadfence_system();
      weft_st_relaxed(flag, 1);
    }
  } else {
    if (threadIdx.x == 0)
      while (weft_ld_acquire(flag) != 1) weft_globaltimer(); /* lets the producer run */
    __syncthreads();
    int bad = 0;
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) bad += data[i] != (uint64_t)(1000 + i);
    if (bad) __atomic_fetch_add(wrong, bad, __ATOMIC_RELAXED);
  }
}

/* Thread 0 reads what the last thread of its block writes, with no barrier between. */
__global__ void nosync_kernel(uint64_t* data, uint64_t* out) {
  data[threadIdx.x] = 1000 + threadIdx.x;
  if (threadIdx.x == 0) *out = data[blockDim.x - 1];
}

WEFT_EMU_KERNEL(publish_kernel);
WEFT_EMU_KERNEL(nosync_kernel);

template <typename... A>
static int launch(void (*fn)(A...), unsigned blocks, A... args) {
  const struct weft_emu_kernel* k = weft_emu_find_kernel((const void*)fn);
  if (k == NULL) return -1;
  void* params[] = {(void*)&args...};
  void* packed = malloc(k->args_bytes);
  k->pack(packed, params);
  int err = weft_emu_grid_run(k, packed, {blocks, 1, 1}, {THREADS, 1, 1}, 0);
  k->destroy(packed);
  free(packed);
  return err;
}

int main(int argc, char** argv) {
  const char* variant = argc > 1 ? argv[1] : "fence";
  uint64_t* data = (uint64_t*)calloc(WORDS, sizeof(uint64_t));
  uint64_t flag = 0, out = 0;
  int wrong = 0, err;
  if (!strcmp(variant, "fence") || !strcmp(variant, "nofence")) {
    err = launch(publish_kernel, 2, data, &flag, &wrong, (int)!strcmp(variant, "fence"));
  } else if (!strcmp(variant, "nosync")) {
    err = launch(nosync_kernel, 1, data, &out);
  } else {
    fprintf(stderr, "usage: %s [fence|nofence|nosync]\n", argv[0]);
    return 2;
  }
  free(data);
  if (err != 0 || wrong != 0) {
    fprintf(stderr, "FAIL: %s: launch error %d, %d words wrong\n", variant, err, wrong);
    return 1;
  }
  printf("%s: %s\n", variant,
         !strcmp(variant, "nosync") ? "ran; only the race detector can tell"
                                    : "the consumer read what the producer wrote");
  return 0;
}
