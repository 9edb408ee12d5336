/* One accounting of connector memory for both backends (weft_mem_usage_add_link): a P2P
 * connector's GPU memory and an SHM segment count once, on the side that owns them (the receiver);
 * a network connector's FIFO counts on both sides, each having allocated its own. */
#include <string.h>

#include "check.h"
#include "collectives/memstat.h"
#include "transport/transport.h"

static uint64_t total(const struct weft_mem_usage* u, enum weft_mem_kind k) { return u->suspendable[k]; }

int main(void) {
  int proxy_conn = 0; /* any non-NULL transport: a network connector */
  struct weft_conn_mem shm_owner = {.size = 4096, .is_shm = 1, .owner = 1};
  struct weft_conn_mem shm_peer = {.size = 4096, .is_shm = 1, .owner = 0};
  struct weft_conn_mem net_recv = {.size = 8192, .owner = 1, .transport = &proxy_conn};
  struct weft_conn_mem net_send = {.size = 8192, .owner = 0, .transport = &proxy_conn};
  struct weft_p2p_mem gpu_owner = {.size = 65536, .owner = 1}, gpu_peer = {.size = 65536, .owner = 0};
  struct weft_link_mem links[] = {{.host = &shm_owner}, {.host = &shm_peer}, {.host = &net_recv},
                                  {.host = &net_send},  {.p2p = &gpu_owner}, {.p2p = &gpu_peer}};
  struct weft_mem_usage u;
  memset(&u, 0, sizeof(u));
  for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) weft_mem_usage_add_link(&u, &links[i]);
  weft_mem_usage_add_link(&u, NULL);
  EXPECT_EQ_INT(total(&u, WEFT_MEM_SHM), 4096);
  EXPECT_EQ_INT(total(&u, WEFT_MEM_CONNECTORS), 2 * 8192);
  EXPECT_EQ_INT(total(&u, WEFT_MEM_DEVICE), 65536);
  return test_finish("memstat_links");
}
