/* Shared by the network unit tests: a connected send/receive pair over net's loopback. */
#ifndef WEFT_TESTS_UNIT_NET_PAIR_H
#define WEFT_TESTS_UNIT_NET_PAIR_H

#include <time.h>

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

#endif
