/* The rank lost first is named even when the peer that reports it closes first: rank 1 lost rank
 * 2, told this rank so (a notice on its connection to us) and closed. Here the close fails this
 * rank's send connection to rank 1 in the same sweep in which the notice lands on its receive
 * connection from rank 1, and the send connection comes first in the proxy's list; the notice must
 * still name rank 2, not rank 1 (a 4-rank kill over IB named the neighbour about once in 50 jobs). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fake_net_ops.h"
#include "proxy/proxy.h"
#include "transport/connector.h"
#include "transport/net.h"

#define TAG_NOTICE 3
struct wire_notice { /* proxy/proxy.c's notice, as it travels */
  int32_t rank, kind;
  char host[120];
  char what[160];
};

static int peer_gone, send_failed; /* set by the test; by the fake network when it said so */
static int send_req, recv_req;
static void* notice_buf;

static ncclResult_t isend(void* comm, const void* data, size_t size, int tag, void** request) {
  (void)comm, (void)data, (void)size, (void)tag;
  *request = &send_req;
  return ncclSuccess;
}
static ncclResult_t irecv(void* comm, int n, void* const* data, const size_t* sizes, const int* tags,
                          void** request) {
  (void)comm, (void)sizes;
  *request = NULL;
  if (notice_buf != NULL) return ncclSuccess; /* one receive in flight is enough */
  for (int i = 0; i < n; i++)
    if (tags[i] == TAG_NOTICE) notice_buf = data[i];
  *request = &recv_req;
  return ncclSuccess;
}
/* The send fails once the peer is gone; the notice lands in the same instant (readable as soon
 * as the failure has been seen). */
static ncclResult_t test(void* request, int* done, size_t* sizes) {
  *done = 0;
  if (request == &send_req) {
    if (!__atomic_load_n(&peer_gone, __ATOMIC_ACQUIRE)) return ncclSuccess;
    send_failed = 1;
    return ncclRemoteError;
  }
  if (!send_failed) return ncclSuccess;
  struct wire_notice n = {.rank = 2, .kind = 0};
  snprintf(n.host, sizeof(n.host), "host-of-rank-2");
  memcpy(notice_buf, &n, sizeof(n));
  for (int i = 0; i < 4; i++) sizes[i] = SIZE_MAX;
  sizes[3] = sizeof(n);
  *done = 1;
  return ncclSuccess;
}
static const struct weft_net_ops fake_net = {FAKE_NET_OPS(isend, irecv, test)};

static volatile uint32_t abort_flag;
static volatile ncclResult_t async_result;
static struct weft_cause cause;

static struct weft_proxy_conn* start(int is_send, struct weft_conn_mem** mem) {
  struct weft_conn_handle h;
  struct weft_proxy_conn* px = NULL;
  EXPECT(weft_conn_mem_create(4096, 4096, 0, "tnotice", mem, &h) == ncclSuccess);
  struct weft_proxy_conn_desc d = {.is_send = is_send,
                                   .mem = *mem,
                                   .net = &fake_net,
                                   .rank = 0,
                                   .peer = 1,
                                   .abort_flag = &abort_flag,
                                   .async_result = &async_result,
                                   .cause = &cause};
  snprintf(d.peer_host, sizeof(d.peer_host), "host-of-rank-1");
  EXPECT(weft_proxy_conn_add(&d, &px) == ncclSuccess);
  return px;
}

int main(void) {
  struct weft_conn_mem *recv_mem, *send_mem;
  struct weft_proxy_conn* from1 = start(0, &recv_mem);
  struct weft_proxy_conn* to1 = start(1, &send_mem); /* added last: first in the proxy's list */
  /* One step to send, so the send connection has a request in flight to fail. */
  struct weft_conn view;
  weft_conn_bind(&view, send_mem, 1);
  __atomic_store_n(&view.ctrl->tail, 1, __ATOMIC_RELEASE);
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 1000 && notice_buf == NULL; i++) nanosleep(&ms, NULL);
  EXPECT_MSG(notice_buf != NULL, "the proxy posted no receive");
  __atomic_store_n(&peer_gone, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 5000 && !__atomic_load_n(&abort_flag, __ATOMIC_ACQUIRE); i++) nanosleep(&ms, NULL);
  EXPECT_MSG(abort_flag == 1 && async_result == ncclRemoteError, "communicator failed (abort %u, result %d)",
             abort_flag, (int)async_result);
  struct weft_cause c;
  EXPECT_MSG(weft_cause_get(&cause, &c), "a cause is recorded");
  EXPECT_MSG(
      c.rank == 2 && strcmp(c.host, "host-of-rank-2") == 0,
      "the rank lost first is named: rank %d (host %s), want rank 2 (the notice's), not the peer that closed",
      c.rank, c.host);
  weft_proxy_conn_remove(to1);
  weft_proxy_conn_remove(from1);
  weft_conn_mem_release(send_mem);
  weft_conn_mem_release(recv_mem);
  return test_finish("test_proxy_notice");
}
