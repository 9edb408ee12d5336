/* A unique id whose root runs in a helper process, for tests that fork their ranks: the test
 * process stays single-threaded, so the children it forks may start threads (ThreadSanitizer
 * kills, and its allocator can deadlock, a child forked from a multi-threaded process). */
#ifndef WEFT_TESTS_UID_H
#define WEFT_TESTS_UID_H

#include <sys/types.h>

#include "nccl.h"

struct test_uid_holder {
  pid_t pid; /* the helper, which keeps the root until released */
  int fd;    /* our end of its pipe; closing it lets the helper exit */
};

/* ncclGetUniqueId in a forked helper; returns its result (ncclSystemError if the helper failed). */
ncclResult_t test_uid_from_child(ncclUniqueId* id, struct test_uid_holder* holder);
/* Once every rank is done with the id: ends and reaps the helper. */
void test_uid_release(struct test_uid_holder* holder);

#endif
