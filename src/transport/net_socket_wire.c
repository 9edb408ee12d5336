/* Pure checks of what the socket network reads off a socket before trusting it: the hello that
 * opens every socket and the header of every message. */
#include "transport/net_socket_wire.h"

#include <stdio.h>

int weft_net_socket_hello_fits(int have_id, uint64_t id, uint32_t nsocks, const int* fds,
                               const struct weft_net_socket_hello* h, char* why, size_t len) {
  if (h->magic != WEFT_NET_SOCKET_MAGIC || h->nsocks > WEFT_NET_SOCKET_MAX_SOCKS || h->index > h->nsocks) {
    snprintf(why, len, "malformed hello");
    return 0;
  }
  /* Before the first hello any well-formed one fits: it fixes the connection's id and count. */
  if (have_id && (h->id != id || h->nsocks != nsocks || fds[h->index] >= 0)) {
    snprintf(why, len, "hello does not match the pending connection");
    return 0;
  }
  return 1;
}

int weft_net_socket_match(const struct weft_net_socket_msg_hdr* hdr, int nbuf, const int* tags,
                          const size_t* sizes) {
  if (hdr->magic != (uint32_t)WEFT_NET_SOCKET_MAGIC) return -1;
  for (int i = 0; i < nbuf; i++)
    if (tags[i] == hdr->tag) return hdr->size > sizes[i] ? -2 : i;
  return -2;
}
