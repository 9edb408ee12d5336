/* ncclCommRegister's ranges on the network (weft_proxy_keep_registered): a network that keeps
 * registrations is asked to keep each range on every send connection of the communicator that
 * registered it, those made before and after, never on its receive connections or another
 * communicator's, and to drop it once deregistered, whichever place the range has in the list. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fake_net_ops.h"
#include "proxy/proxy.h"
#include "transport/connector.h"
#include "transport/net.h"

/* A network that only records what it is asked to keep: per comm, the net count of keeps of
 * each user range (the connector's own ranges are not counted). */
#define RANGES 3
static char user_mem[RANGES][4096];
struct fake_comm {
  int keeps[RANGES];
};
static int dummy_request;

static int range_of(const void* data, size_t size) {
  for (int i = 0; i < RANGES; i++)
    if (data == user_mem[i] && size == sizeof(user_mem[i])) return i;
  return -1;
}
static ncclResult_t keep(void* comm, void* data, size_t size) {
  int i = range_of(data, size);
  if (i >= 0) ((struct fake_comm*)comm)->keeps[i]++;
  return ncclSuccess;
}
static void drop(void* comm, void* data, size_t size) {
  int i = range_of(data, size);
  if (i >= 0) ((struct fake_comm*)comm)->keeps[i]--;
}
static ncclResult_t isend(void* comm, const void* data, size_t size, int tag, void** request) {
  (void)comm, (void)data, (void)size, (void)tag;
  *request = &dummy_request; /* the goodbye at teardown: sent at once */
  return ncclSuccess;
}
static ncclResult_t irecv(void* comm, int n, void* const* data, const size_t* sizes, const int* tags,
                          void** request) {
  (void)comm, (void)n, (void)data, (void)sizes, (void)tags;
  *request = NULL; /* nothing arrives */
  return ncclSuccess;
}
static ncclResult_t test(void* request, int* done, size_t* sizes) {
  (void)request, (void)sizes;
  *done = 1;
  return ncclSuccess;
}
static const struct weft_net_ops fake_net = {FAKE_NET_OPS(isend, irecv, test), .keep_registered = keep,
                                             .drop_registered = drop};

struct side {
  struct weft_conn_mem* mem;
  struct weft_proxy_conn* px;
  struct fake_comm comm;
};

static void side_start(struct side* sd, int is_send, volatile uint32_t* owner) {
  struct weft_conn_handle h;
  memset(sd, 0, sizeof(*sd));
  EXPECT(weft_conn_mem_create(4096, 4096, 0, "tkeep", &sd->mem, &h) == ncclSuccess);
  struct weft_proxy_conn_desc d = {
      .is_send = is_send, .mem = sd->mem, .net = &fake_net, .net_comm = &sd->comm, .abort_flag = owner};
  snprintf(d.peer_host, sizeof(d.peer_host), "fake");
  EXPECT(weft_proxy_conn_add(&d, &sd->px) == ncclSuccess);
}

static void side_stop(struct side* sd) {
  weft_proxy_conn_remove(sd->px);
  weft_conn_mem_release(sd->mem);
}

static void expect_keeps(const struct side* sd, int r0, int r1, int r2, const char* when) {
  int want[RANGES] = {r0, r1, r2};
  for (int i = 0; i < RANGES; i++)
    EXPECT_MSG(sd->comm.keeps[i] == want[i], "%s: range %d kept %d times, want %d", when, i,
               sd->comm.keeps[i], want[i]);
}

int main(void) {
  static volatile uint32_t comm_a, comm_b; /* two communicators' abort flags */
  EXPECT(weft_proxy_keep_registered(&comm_a, user_mem[0], sizeof(user_mem[0]), 1) == ncclSuccess);
  EXPECT(weft_proxy_keep_registered(&comm_a, user_mem[1], sizeof(user_mem[1]), 1) == ncclSuccess);
  struct side a_send, a_recv, b_send;
  side_start(&a_send, 1, &comm_a);
  side_start(&a_recv, 0, &comm_a);
  side_start(&b_send, 1, &comm_b);
  expect_keeps(&a_send, 1, 1, 0, "A's send connection made after two registrations");
  expect_keeps(&a_recv, 0, 0, 0, "A's receive connection");
  expect_keeps(&b_send, 0, 0, 0, "B's send connection");
  /* Registered later: kept on the connection that exists. */
  EXPECT(weft_proxy_keep_registered(&comm_a, user_mem[2], sizeof(user_mem[2]), 1) == ncclSuccess);
  expect_keeps(&a_send, 1, 1, 1, "a third registration");
  /* The first registered is the list's last entry; then the newest (its first), then the middle. */
  weft_proxy_keep_registered(&comm_a, user_mem[0], sizeof(user_mem[0]), 0);
  expect_keeps(&a_send, 0, 1, 1, "the oldest deregistered");
  weft_proxy_keep_registered(&comm_a, user_mem[2], sizeof(user_mem[2]), 0);
  expect_keeps(&a_send, 0, 1, 0, "the newest deregistered");
  /* Another communicator's deregistration of the same memory, and a second one, change nothing. */
  weft_proxy_keep_registered(&comm_b, user_mem[1], sizeof(user_mem[1]), 0);
  weft_proxy_keep_registered(&comm_a, user_mem[0], sizeof(user_mem[0]), 0);
  expect_keeps(&a_send, 0, 1, 0, "deregistrations of ranges not kept");
  weft_proxy_keep_registered(&comm_a, user_mem[1], sizeof(user_mem[1]), 0);
  expect_keeps(&a_send, 0, 0, 0, "every range deregistered");
  /* A connection made now keeps nothing. */
  struct side late;
  side_start(&late, 1, &comm_a);
  expect_keeps(&late, 0, 0, 0, "a connection made after every deregistration");
  side_stop(&late);
  side_stop(&a_send);
  side_stop(&a_recv);
  side_stop(&b_send);
  return test_finish("test_proxy_keep");
}
