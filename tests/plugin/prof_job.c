/* The job the profiler plugin tests run (tests/plugin/test_profiler_plugin.sh): on communicators
 * named "prof-job", each rank does 3 all-reduces, then one group of a broadcast, a send to the
 * next rank and a receive from the previous one, checking the results. Public API only: the
 * plugin is whatever NCCL_PROFILER_PLUGIN names.
 *   prof_job [NRANKS]            NRANKS (default 3) thread ranks in this process
 *   prof_job proc RANK NRANKS    one rank of a job of processes joined through NCCL_COMM_ID */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nccl.h"

#define COUNT 1000
#define BCAST 500
#define P2P 256

static int nranks = 3;
static ncclUniqueId id;

#define NCHECK(call)                                                                                \
  do {                                                                                              \
    ncclResult_t r_ = (call);                                                                       \
    if (r_ != ncclSuccess) {                                                                        \
      fprintf(stderr, "FAILED %s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      test_failures++;                                                                              \
      return NULL;                                                                                  \
    }                                                                                               \
  } while (0)

static void* rank_main(void* arg) {
  int rank = (int)(long)arg, next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "prof-job";
  ncclComm_t comm;
  NCHECK(ncclCommInitRankConfig(&comm, nranks, id, rank, &config));
  float* a = malloc(COUNT * sizeof(float));
  int* b = malloc(BCAST * sizeof(int));
  float *s = malloc(P2P * sizeof(float)), *r = malloc(P2P * sizeof(float));
  for (int it = 0; it < 3; it++) {
    for (int i = 0; i < COUNT; i++) a[i] = (float)(rank + 1);
    NCHECK(ncclAllReduce(a, a, COUNT, ncclFloat32, ncclSum, comm, NULL));
    EXPECT(a[COUNT - 1] == (float)(nranks * (nranks + 1) / 2));
  }
  for (int i = 0; i < BCAST; i++) b[i] = rank == 0 ? 7 : 0;
  for (int i = 0; i < P2P; i++) s[i] = (float)rank;
  NCHECK(ncclGroupStart());
  NCHECK(ncclBroadcast(b, b, BCAST, ncclInt32, 0, comm, NULL));
  NCHECK(ncclSend(s, P2P, ncclFloat32, next, comm, NULL));
  NCHECK(ncclRecv(r, P2P, ncclFloat32, prev, comm, NULL));
  NCHECK(ncclGroupEnd());
  EXPECT(b[BCAST - 1] == 7);
  EXPECT(r[P2P - 1] == (float)prev);
  NCHECK(ncclCommDestroy(comm));
  free(a);
  free(b);
  free(s);
  free(r);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "proc") == 0) {
    nranks = atoi(argv[3]);
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1; /* NCCL_COMM_ID names the root: the same id */
    rank_main((void*)(long)atoi(argv[2]));
    return test_finish("prof_job");
  }
  if (argc > 1) nranks = atoi(argv[1]);
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  pthread_t t[16];
  for (long i = 0; i < nranks; i++) pthread_create(&t[i], NULL, rank_main, (void*)i);
  for (int i = 0; i < nranks; i++) pthread_join(t[i], NULL);
  return test_finish("prof_job");
}
