/* What the proxy tests' fake networks share: closing does nothing, and an ops table is the
 * test's own isend, irecv and test plus that (FAKE_NET_OPS, inside the table's initializer). */
#ifndef WEFT_TESTS_FAKE_NET_OPS_H
#define WEFT_TESTS_FAKE_NET_OPS_H

#include "transport/net.h"

static inline ncclResult_t fake_close(void* comm) {
  (void)comm;
  return ncclSuccess;
}

#define FAKE_NET_OPS(isend_fn, irecv_fn, test_fn)                                                        \
  .name = "fake", .isend = (isend_fn), .irecv = (irecv_fn), .test = (test_fn), .close_send = fake_close, \
  .close_recv = fake_close

#endif
