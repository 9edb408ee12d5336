/* Shared by test_deterministic (host backend) and test_gpu_deterministic (CUDA backend):
 * WEFT_DETERMINISTIC=1 makes AllReduce, Reduce and ReduceScatter give the same bytes whatever the
 * algorithm, protocol and channel count. Each setting runs in its own process (parameters are
 * read once), 4 thread ranks, on float and half inputs whose sums depend on their order; the
 * same settings without the mode must disagree somewhere, or the inputs prove nothing. The
 * includer defines LARGE (elements) and the det_* memory functions declared below. */
#ifndef WEFT_TESTS_DETERMINISTIC_H
#define WEFT_TESTS_DETERMINISTIC_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "uid.h"

#define NRANKS 4
#define SMALL 1000 /* LL territory */
#define OUT_BYTES (2 * LARGE * 4 + 2 * SMALL * 4 + LARGE * 2 + LARGE / NRANKS * 4)

static const char* settings[][2] = {
    {"", ""},
    {"NCCL_PROTO", "LL"},
    {"NCCL_PROTO", "Simple"},
    {"NCCL_ALGO", "Tree"},
    {"NCCL_MIN_NCHANNELS", "4"},
    {"NCCL_MAX_NCHANNELS", "1"},
    {"WEFT_DIRECT", "0"},
};
#define NSETTINGS (int)(sizeof(settings) / sizeof(settings[0]))

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

/* Values spanning many binades, so that float sums depend on their order. */
static float input(int rank, size_t i) {
  uint64_t h = mix((uint64_t)rank * 0x9e3779b97f4a7c15ULL + i + 1);
  float mant = (float)(h & 0xffffff) / (float)0x1000000 - 0.5f;
  int exp = (int)((h >> 24) % 24) - 12;
  return mant * (float)(1 << 12) / (float)(1 << (exp + 12));
}

/* IEEE half from float (round to nearest even), inputs kept within half's range. */
static uint16_t to_half(float f) {
  union {
    float f;
    uint32_t u;
  } v = {f};
  uint32_t sign = (v.u >> 16) & 0x8000, e = (v.u >> 23) & 0xff, m = v.u & 0x7fffff;
  int he = (int)e - 127 + 15;
  if (he <= 0) return (uint16_t)sign;
  if (he >= 31) return (uint16_t)(sign | 0x7bff);
  uint32_t r = m >> 13, rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) r++;
  return (uint16_t)(sign | (((uint32_t)he << 10) + r));
}

struct rank_arg {
  ncclUniqueId id;
  int rank;
  char* out; /* rank 0 writes its results here (shared with the parent) */
  int ok;
};

/* The backend's memory: host buffers, or device buffers with copies (test_gpu_deterministic.c).
 * The includer defines these. */
static void* det_alloc(size_t bytes);
static void det_put(void* dst, const void* src, size_t bytes);
static void det_get(void* dst, const void* src, size_t bytes);
static void det_release(void* p);
static cudaStream_t det_rank_stream(int rank); /* also selects the rank's device */
static int det_sync(cudaStream_t stream);
static void det_stream_done(cudaStream_t stream);

/* Rank 0 keeps every result but the one Reduce rooted at rank 2, which rank 2 keeps. */
static void keep(char* out, size_t* off, const void* result, size_t bytes, int mine) {
  if (out != NULL && mine) det_get(out + *off, result, bytes);
  *off += bytes;
}

static int run_calls(ncclComm_t comm, int rank, char* out, cudaStream_t st) {
  float* host_f = malloc(LARGE * sizeof(float));
  uint16_t* host_h = malloc(LARGE * sizeof(uint16_t));
  for (size_t i = 0; i < LARGE; i++) {
    host_f[i] = input(rank, i);
    host_h[i] = to_half(input(rank, i) / 64.0f);
  }
  float *f = det_alloc(LARGE * 4), *fr = det_alloc(LARGE * 4);
  uint16_t *h = det_alloc(LARGE * 2), *hr = det_alloc(LARGE * 2);
  det_put(f, host_f, LARGE * 4);
  det_put(h, host_h, LARGE * 2);
  int ok = 1, r0 = rank == 0;
  size_t off = 0;
#define CALL(expr) ok &= (expr) == ncclSuccess && det_sync(st)
  CALL(ncclAllReduce(f, fr, LARGE, ncclFloat32, ncclSum, comm, st));
  keep(out, &off, fr, LARGE * 4, r0);
  CALL(ncclAllReduce(f, fr, SMALL, ncclFloat32, ncclSum, comm, st));
  keep(out, &off, fr, SMALL * 4, r0);
  CALL(ncclAllReduce(h, hr, LARGE, ncclFloat16, ncclSum, comm, st));
  keep(out, &off, hr, LARGE * 2, r0);
  CALL(ncclReduce(f, fr, LARGE, ncclFloat32, ncclAvg, 2, comm, st));
  keep(out, &off, fr, LARGE * 4, rank == 2);
  CALL(ncclReduce(f, fr, SMALL, ncclFloat32, ncclSum, 0, comm, st));
  keep(out, &off, fr, SMALL * 4, r0);
  CALL(ncclReduceScatter(f, fr, LARGE / NRANKS, ncclFloat32, ncclSum, comm, st));
  keep(out, &off, fr, LARGE / NRANKS * 4, r0);
#undef CALL
  det_release(f);
  det_release(fr);
  det_release(h);
  det_release(hr);
  free(host_f);
  free(host_h);
  return ok;
}

static void* rank_main(void* p) {
  struct rank_arg* a = p;
  ncclComm_t comm;
  cudaStream_t st = det_rank_stream(a->rank);
  if (ncclCommInitRank(&comm, NRANKS, a->id, a->rank) != ncclSuccess) return NULL;
  a->ok = run_calls(comm, a->rank, a->out, st);
  ncclCommDestroy(comm);
  det_stream_done(st);
  return NULL;
}

/* One setting in a child process; rank 0's results (and rank 2's Reduce) land in out. */
static int run_setting(int s, int deterministic, char* out) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("WEFT_DETERMINISTIC", deterministic ? "1" : "0", 1);
    if (settings[s][0][0]) setenv(settings[s][0], settings[s][1], 1);
    struct rank_arg a[NRANKS];
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) _exit(2);
    pthread_t t[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
      a[r] = (struct rank_arg){.id = id, .rank = r, .out = out, .ok = 0};
      pthread_create(&t[r], NULL, rank_main, &a[r]);
    }
    int ok = 1;
    for (int r = 0; r < NRANKS; r++) {
      pthread_join(t[r], NULL);
      ok &= a[r].ok;
    }
    _exit(ok ? 0 : 1);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static const char* setting_name(int s) {
  static char buf[64];
  snprintf(buf, sizeof(buf), "%s%s%s", settings[s][0][0] ? settings[s][0] : "defaults",
           settings[s][0][0] ? "=" : "", settings[s][1]);
  return buf;
}

/* The documented orders: AllReduce folds ranks 0, 1, ..., n-1; ReduceScatter's block b starts
 * after rank b and ends at it (b+1, ..., n-1, 0, ..., b). Returns the elements that differ. */
static size_t order_mismatches(const char* out) {
  const float* ar = (const float*)out;
  const float* rs = (const float*)(out + 2 * LARGE * 4 + 2 * SMALL * 4 + LARGE * 2);
  size_t bad = 0, block = LARGE / NRANKS;
  for (size_t i = 0; i < LARGE; i++) {
    float acc = input(0, i);
    for (int r = 1; r < NRANKS; r++) acc += input(r, i);
    bad += memcmp(&acc, &ar[i], sizeof(acc)) != 0;
  }
  for (size_t i = 0; i < block; i++) { /* rank 0's block: ranks 1, 2, 3, then 0 */
    float acc = input(1, i);
    for (int r = 2; r <= NRANKS; r++) acc += input(r % NRANKS, i);
    bad += memcmp(&acc, &rs[i], sizeof(acc)) != 0;
  }
  return bad;
}

/* Runs every setting; returns how many gave other bytes than the first. */
static int differing(int deterministic) {
  char* first = mmap(NULL, OUT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  char* other = mmap(NULL, OUT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_MSG(run_setting(0, deterministic, first), "%s failed", setting_name(0));
  if (deterministic) {
    size_t bad = order_mismatches(first);
    EXPECT_MSG(bad == 0, "%zu elements not folded in the documented order", bad);
  }
  int differ = 0;
  for (int s = 1; s < NSETTINGS; s++) {
    memset(other, 0, OUT_BYTES);
    EXPECT_MSG(run_setting(s, deterministic, other), "%s failed", setting_name(s));
    int same = memcmp(first, other, OUT_BYTES) == 0;
    printf("WEFT_DETERMINISTIC=%d %-22s %s\n", deterministic, setting_name(s),
           same ? "same bytes" : "differs");
    differ += !same;
  }
  munmap(first, OUT_BYTES);
  munmap(other, OUT_BYTES);
  return differ;
}

/* Two process ranks, only rank 1 in the mode: both must fail init with ncclInvalidUsage. */
static void disagreeing_ranks(void) {
  ncclUniqueId id;
  struct test_uid_holder root;
  EXPECT(test_uid_from_child(&id, &root) == ncclSuccess);
  pid_t pids[2];
  fflush(NULL);
  for (int r = 0; r < 2; r++) {
    if ((pids[r] = fork()) == 0) {
      setenv("WEFT_DETERMINISTIC", r == 1 ? "1" : "0", 1);
      ncclComm_t comm = NULL;
      ncclResult_t res = ncclCommInitRank(&comm, 2, id, r);
      if (res == ncclSuccess) ncclCommDestroy(comm);
      _exit(res == ncclInvalidUsage ? 0 : 1);
    }
  }
  for (int r = 0; r < 2; r++) {
    int status;
    waitpid(pids[r], &status, 0);
    EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "rank %d did not fail init with ncclInvalidUsage (status 0x%x)", r, status);
  }
  test_uid_release(&root);
}

/* Both checks, then the init that must fail when ranks disagree. */
static int deterministic_main(const char* name) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  EXPECT_MSG(differing(1) == 0, "deterministic mode gave different bytes across settings");
  EXPECT_MSG(differing(0) > 0, "without the mode every setting agreed: the inputs do not test the order");
  disagreeing_ranks();
  return test_finish(name);
}

#endif
