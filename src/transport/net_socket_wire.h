/* Wire formats of the socket network (src/transport/net_socket.c) and the pure checks of what
 * arrives on them, shared with tests/fuzz/fuzz_wire.c. */
#ifndef WEFT_TRANSPORT_NET_SOCKET_WIRE_H
#define WEFT_TRANSPORT_NET_SOCKET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "util/auth.h"

#define WEFT_NET_SOCKET_MAGIC 0x5745465453434b54ull /* "WEFTSCKT" */
#define WEFT_NET_SOCKET_MAX_SOCKS 64                /* data sockets of one connection */

struct weft_net_socket_hello {
  uint64_t magic, id;
  uint32_t index, nsocks; /* index 0 is the control socket */
};

/* First bytes on every socket: the answer covers the hello. */
struct weft_net_socket_opening {
  uint8_t mac[WEFT_AUTH_MAC_BYTES];
  struct weft_net_socket_hello h;
};

struct weft_net_socket_msg_hdr {
  uint64_t size;
  int32_t tag;
  uint32_t magic;
  uint64_t meta; /* isend_meta's value (a step's call tag), else 0 */
};

/* Whether an authenticated hello's socket joins the connection a listener is assembling: none
 * yet (have_id 0: the hello fixes its id and socket count), or connection id with nsocks data
 * sockets whose fds[index] are taken where >= 0. 1, or 0 with the reason in why. */
int weft_net_socket_hello_fits(int have_id, uint64_t id, uint32_t nsocks, const int* fds,
                               const struct weft_net_socket_hello* h, char* why, size_t len);
/* The posted buffer (of nbuf, with tags and sizes) a received header goes to; -1 when the header
 * is garbled (magic), -2 when no buffer has its tag and room for its size. */
int weft_net_socket_match(const struct weft_net_socket_msg_hdr* hdr, int nbuf, const int* tags,
                          const size_t* sizes);

#endif
