/* WEFT_DETERMINISTIC=1 on the host backend (tests/integration/deterministic.h has the cases). */
#define LARGE 393216 /* Simple, several channels */
#include "deterministic.h"

static void* det_alloc(size_t bytes) { return calloc(1, bytes); }
static void det_put(void* dst, const void* src, size_t bytes) { memcpy(dst, src, bytes); }
static void det_get(void* dst, const void* src, size_t bytes) { memcpy(dst, src, bytes); }
static void det_release(void* p) { free(p); }
static cudaStream_t det_rank_stream(int rank) {
  (void)rank;
  return NULL;
}
static int det_sync(cudaStream_t stream) {
  (void)stream;
  return 1;
}
static void det_stream_done(cudaStream_t stream) { (void)stream; }

int main(void) { return deterministic_main("test_deterministic"); }
