/* Shared by the network unit tests: a connected send/receive pair over net's loopback, and the
 * test verbs provider for the IB network. */
#ifndef WEFT_TESTS_UNIT_NET_PAIR_H
#define WEFT_TESTS_UNIT_NET_PAIR_H

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "transport/net.h"

/* Listen, then connect and accept until both ends exist (10 s at most); 0 on success. */
static inline int net_pair(const struct weft_net_ops* net, void** s, void** r) {
  char handle[WEFT_NET_HANDLE_BYTES];
  void* l = NULL;
  *s = *r = NULL;
  if (net->listen(0, NULL, handle, &l) != ncclSuccess) return -1;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (t = t0; (*s == NULL || *r == NULL) && t.tv_sec - t0.tv_sec < 10; clock_gettime(CLOCK_MONOTONIC, &t)) {
    if (*s == NULL && net->connect(0, NULL, handle, s) != ncclSuccess) return -1;
    if (*r == NULL && net->accept(l, r) != ncclSuccess) return -1;
  }
  net->close_listen(l);
  return *s && *r ? 0 : -1;
}

/* Points the library at the test verbs provider built beside this test (tests/ibemu), with one
 * InfiniBand device, before the IB network first loads; 0 when it was not built (no verbs header). */
static inline int net_use_test_verbs(void) {
  char self[PATH_MAX], lib[PATH_MAX + 64];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return 0;
  self[len] = 0;
  snprintf(lib, sizeof(lib), "%s/../lib/libweft_fake_verbs.so", dirname(self));
  if (access(lib, R_OK) != 0) return 0;
  setenv("WEFT_IBVERBS_LIB", lib, 1);
  setenv("WEFT_FAKE_IB_DEVICES", "mlx5_0", 1);
  return 1;
}

#endif
