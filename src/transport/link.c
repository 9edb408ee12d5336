/* Connector setup over the bootstrap for both executors: network connectors (transport/net.c)
 * for remote peers, else memory both sides map (transport/connector.c, transport/shm.c). */
#include "transport/link.h"

#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/log.h"

ncclResult_t weft_link_offer(const struct weft_link_peer* p, int tag, size_t simple, size_t ll,
                             struct weft_conn_mem** mem) {
  if (p->remote) return weft_net_offer(&p->net, tag, simple, ll, mem);
  struct weft_conn_handle h;
  WEFT_CHECK(weft_conn_mem_create(simple, ll, !p->same_process, "conn", mem, &h));
  return weft_bootstrap_send(p->net.bootstrap, p->net.peer, tag, &h, sizeof(h));
}

ncclResult_t weft_link_take(const struct weft_link_peer* p, int tag, int ack_tag,
                            struct weft_conn_mem** mem) {
  if (p->remote) return weft_net_take(&p->net, tag, ack_tag, mem);
  struct weft_conn_handle h;
  WEFT_CHECK(weft_bootstrap_recv(p->net.bootstrap, p->net.peer, tag, &h, sizeof(h)));
  ncclResult_t res = weft_conn_mem_attach(&h, mem);
  if (res != ncclSuccess)
    WEFT_WARN("Rank %d could not map the connector of rank %d (host %s, pid %d)", p->net.rank, p->net.peer,
              p->net.peer_host, p->peer_pid);
  int ok = res == ncclSuccess;
  WEFT_CHECK(weft_bootstrap_send(p->net.bootstrap, p->net.peer, ack_tag, &ok, sizeof(ok)));
  return res;
}

ncclResult_t weft_link_finish_offer(const struct weft_link_peer* p, int ack_tag, struct weft_conn_mem* mem) {
  if (p->remote) return weft_net_finish_offer(&p->net, ack_tag, mem);
  int ok = 0;
  ncclResult_t res = weft_bootstrap_recv(p->net.bootstrap, p->net.peer, ack_tag, &ok, sizeof(ok));
  weft_conn_mem_unlink(mem); /* mapped by both sides (or never will be): drop the name now */
  if (res == ncclSuccess && !ok) res = ncclRemoteError;
  return res;
}
