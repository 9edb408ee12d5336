/* Shared by the direct-path tests (test_coll_direct, test_coll_direct_colls): a case of
 * coll_util.h run on buffers moved into ncclMemAlloc memory (which ranks of one host share) or
 * malloc memory (which they do not), checked as run_case checks it. */
#ifndef WEFT_TESTS_DIRECT_UTIL_H
#define WEFT_TESTS_DIRECT_UTIL_H

#include "coll_util.h"

enum { SHARED_ALL, SHARED_BUT_RANK0, SHARED_NONE };

struct direct_run {
  struct case_list l;
  int mode;
};

/* Run case c with its buffers moved into memory of the mode's kind; checks as run_case does. */
static inline int run_shared_case(const struct coll_case* c, ncclComm_t comm, int me, int n, int mode) {
  struct case_bufs b;
  if (case_setup(c, me, n, &b) != 0) return 1;
  int shared = mode == SHARED_ALL || (mode == SHARED_BUT_RANK0 && me != 0);
  size_t send_bytes = b.alloc_send ? in_elems(c, n) * dt_table[c->dt].size + 1 : 0;
  char *recv = NULL, *send = NULL;
  int bad = 0;
  if (shared) {
    bad |= ncclMemAlloc((void**)&recv, b.alloc_bytes) != ncclSuccess;
    if (send_bytes) bad |= ncclMemAlloc((void**)&send, send_bytes) != ncclSuccess;
  } else {
    recv = malloc(b.alloc_bytes);
    if (send_bytes) send = malloc(send_bytes);
    bad |= recv == NULL || (send_bytes && send == NULL);
  }
  if (bad) {
    fprintf(stderr, "FAILED " CASE_FMT ": allocation failed\n", CASE_ARGS(c, n, me));
    case_fail();
    return 1;
  }
  memcpy(recv, b.alloc_recv, b.alloc_bytes);
  if (send_bytes) memcpy(send, b.alloc_send, send_bytes);
  const void* s = send_bytes ? send : recv + ((const char*)b.send - b.alloc_recv);
  void* r = recv + ((char*)b.recv - b.alloc_recv);
  uint64_t scalar[1] = {0};
  ncclResult_t res;
  ncclRedOp_t op = case_op(c, comm, scalar, &res);
  if (res == ncclSuccess) res = case_call(c, comm, me, n, s, r, op);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED " CASE_FMT " (mode %d): returned %s: %s\n", CASE_ARGS(c, n, me), mode,
            ncclGetErrorString(res), ncclGetLastError(comm));
    bad = 1;
  } else {
    memcpy(b.alloc_recv, recv, b.alloc_bytes);
    bad = case_check(c, me, n, &b);
    if (bad)
      fprintf(stderr, "  (buffers: mode %d, this rank %s)\n", mode, shared ? "ncclMemAlloc" : "malloc");
  }
  if (c->op == O_PMS_HOST || c->op == O_PMS_DEV) ncclRedOpDestroy(op, comm);
  if (shared) {
    ncclMemFree(recv);
    if (send) ncclMemFree(send);
  } else {
    free(recv);
    free(send);
  }
  free(b.alloc_send);
  free(b.alloc_recv);
  if (bad) case_fail();
  return bad;
}

#endif
