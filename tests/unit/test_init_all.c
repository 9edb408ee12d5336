/* ncclCommInitAll's argument checks and its cleanup when it fails: it must never touch entries
 * of the caller's array it did not write, and refuses absurd ndev values at once. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nccl.h"

#define NDEV 4

/* The array holds garbage, as a caller's uninitialised array would. */
static void fill_garbage(ncclComm_t* comms, int n) { memset(comms, 0x41, sizeof(*comms) * (size_t)n); }

static void test_ndev_bounds(void) {
  ncclComm_t comms[NDEV];
  fill_garbage(comms, NDEV);
  EXPECT_EQ_INT(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclCommInitAll(comms, -1, NULL), ncclInvalidArgument);
  /* Far more than one process can drive: refused before any allocation. */
  EXPECT_EQ_INT(ncclCommInitAll(comms, (1 << 24) + 1, NULL), ncclInvalidArgument);
  EXPECT_MSG(strstr(ncclGetLastError(NULL), "ndev 16777217") != NULL,
             "last error \"%s\" lacks the ndev value", ncclGetLastError(NULL));
  /* Nothing was written: the caller's bytes are untouched. */
  unsigned char expect[sizeof(comms)];
  memset(expect, 0x41, sizeof(expect));
  EXPECT(memcmp(comms, expect, sizeof(comms)) == 0);
}

/* The first rank's setup fails (an invalid WEFT_BACKEND): the later entries were never written and
 * hold garbage, which must be neither freed nor read. */
static void test_failed_setup_leaves_garbage_alone(void) {
  ncclComm_t comms[NDEV];
  fill_garbage(comms, NDEV);
  setenv("WEFT_BACKEND", "no-such-backend", 1);
  ncclResult_t res = ncclCommInitAll(comms, NDEV, NULL);
  unsetenv("WEFT_BACKEND");
  EXPECT_EQ_INT(res, ncclInvalidArgument);
  EXPECT(comms[0] == NULL);
}

int main(void) {
  test_ndev_bounds();
  test_failed_setup_leaves_garbage_alone();
  return test_finish("test_init_all");
}
