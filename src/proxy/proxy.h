/* The progress thread: one per process, shared by every communicator, that drives network
 * connectors. For a send connector it forwards each FIFO slot the executor publishes (tail) to
 * the network and returns credits (head) when the send completes; for a receive connector it
 * receives into free slots (head) and publishes them (tail), exactly as a local peer would. */
#ifndef WEFT_PROXY_PROXY_H
#define WEFT_PROXY_PROXY_H

#include <stdint.h>

#include "nccl.h"

struct weft_cause;
struct weft_conn_mem;
struct weft_net_ops;
struct weft_proxy_conn;

struct weft_proxy_conn_desc {
  int is_send;
  struct weft_conn_mem* mem; /* the connector FIFO in this process */
  const struct weft_net_ops* net;
  void* net_comm; /* owned by the proxy connection from now on */
  int rank, peer;
  char peer_host[128];           /* "<host id>, <address>": tells hosts apart where host names repeat */
  volatile uint32_t* abort_flag; /* raised, with async_result set, when the connection fails */
  volatile ncclResult_t* async_result;
  struct weft_cause* cause; /* where the rank lost first is recorded; may be NULL */
};

/* Start driving a connector (starts the thread on first use). */
ncclResult_t weft_proxy_conn_add(const struct weft_proxy_conn_desc* desc, struct weft_proxy_conn** out);
/* Stop driving it and close its network comm; returns at once after the current sweep. NULL-safe. */
void weft_proxy_conn_remove(struct weft_proxy_conn* conn);
/* Tell the network peers of the communicator owning abort_flag which rank was lost or found a
 * mismatched call (cause), unless told already, and wait up to a second for those notices to leave:
 * the caller may be about to give up and exit, and a peer that sees the EOF first would name this
 * rank instead. */
void weft_proxy_announce(volatile uint32_t* abort_flag, const struct weft_cause* cause);
/* The same for a mismatched call that rank finder (on host) found (what: how the calls differ, or
 * NULL): the peers fail it too, with ncclInvalidUsage, instead of waiting for steps that will not
 * come. */
void weft_proxy_announce_mismatch(volatile uint32_t* abort_flag, int finder, const char* host,
                                  const char* what);
/* ncclCommRegister's ranges for the network: [data, data+size) stays registered on every send
 * connection of the communicator owning abort_flag (owner), present and future, so steps sent in
 * place from it cost no registration each; keep=0 (ncclCommDeregister) ends that, and the
 * registration goes once no send in flight uses it. Networks that register nothing ignore it. */
ncclResult_t weft_proxy_keep_registered(volatile uint32_t* owner, void* data, size_t size, int keep);
/* The queue of operations the profiler watches on c (proxy/watch.h). */
struct weft_proxy_watchq* weft_proxy_conn_watchq(struct weft_proxy_conn* c);
/* Connections currently driven (tests). */
int weft_proxy_nconns(void);

#endif
