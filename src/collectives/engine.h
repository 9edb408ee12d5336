/* Per-communicator state of the collective engine: ring connectors per channel, lazily
 * connected point-to-point connectors, and what the planner needs. */
#ifndef WEFT_COLLECTIVES_ENGINE_H
#define WEFT_COLLECTIVES_ENGINE_H

#include <stdint.h>

#include "collectives/fingerprint.h"
#include "collectives/host/wait.h"
#include "collectives/plan.h"
#include "transport/connector.h"

struct weft_comm_ctx;
struct weft_link_mem;

struct weft_p2p_conn {
  struct weft_conn send, recv; /* to / from this peer */
  struct weft_link_mem *send_mem, *recv_mem;
};

struct weft_coll_state {
  struct weft_plan_params pp;
  struct weft_plan_memo plan_memo; /* the planner's last choice (plan.h) */
  size_t simple_bytes, ll_bytes, p2p_bytes;
  struct weft_conn send[WEFT_PLAN_MAX_CHANNELS],
      recv[WEFT_PLAN_MAX_CHANNELS]; /* ring: to next, from previous */
  struct weft_link_mem *send_mem[WEFT_PLAN_MAX_CHANNELS], *recv_mem[WEFT_PLAN_MAX_CHANNELS];
  struct weft_p2p_conn* p2p;  /* [nranks] */
  uint8_t* watch;             /* [nranks] peer processes on this host whose death we can see */
  struct weft_direct* direct; /* host direct paths (collectives/host/direct.h); NULL when off */
  /* Every host launch's waiter (and one-sided operations'): set up at init (parameters read
   * once) and kept, since copying it for every call cost a tenth of a small one; each launch
   * clears what the last one found (weft_engine_waiter). */
  struct weft_waiter waiter;
  struct weft_tree_state* tree; /* tree channels, connected at the first tree collective */
  int interleave;               /* ring channels over the network run step by step interleaved */
  int send_by_ref;              /* network sends may read user buffers in place (WEFT_NET_SEND_BY_REF) */
  int check_calls;              /* ring steps carry and check their call's tag (WEFT_CHECK_CALLS) */
  uint64_t coll_seq;            /* collectives run so far: numbered alike on every rank */
  struct weft_call_fp recent_fp[WEFT_RECENT_CALLS]; /* the last ones' fingerprints, by number */
  void* co_stacks[WEFT_PLAN_MAX_CHANNELS];          /* their coroutine stacks, kept between collectives */
  struct weft_cause** peer_cause; /* [nranks]: shared pages where ring neighbours say why they gave up */
  uint8_t* note_asked; /* [nranks] or NULL: a call note to that rank awaits its answer (call_note.h) */
  /* Suspended comm: the p2p pairs ([nranks] sends, then [nranks] receives) and whether the trees
   * were connected, for ncclCommResume to connect again; NULL/0 otherwise. */
  uint8_t* restore_p2p;
  int restore_tree;
};

/* Connect p2p connectors for the peers this launch sends to (send_to[p]) and receives from
 * (recv_from[p]) that are not connected yet. Both sides of a pair must call it. */
ncclResult_t weft_engine_p2p_connect(struct weft_comm_ctx* comm, const uint8_t* send_to,
                                     const uint8_t* recv_from);
/* Run the launch's send/recv tasks (call order) to completion, all progressing together. */
struct weft_waiter;
ncclResult_t weft_host_p2p_run(struct weft_comm_ctx* comm, struct weft_task** tasks, int n,
                               struct weft_waiter* w);
/* Who is at the other end of a connector to peer, for transport/transport.c: peers on other hosts
 * (host_hash, i.e. WEFT_HOSTID) are reached over the network; errors go to comm; a CUDA comm's
 * connectors are for its kernels (its executor's link_peer). */
struct weft_link_peer;
void weft_engine_link_peer(struct weft_comm_ctx* comm, int peer, struct weft_link_peer* lp);
/* One peer's part in weft_engine_connect: recv (when not NULL) gets the connector peer -> me that
 * this rank offers, send (when not NULL) the connector me -> peer it takes from peer's offer. */
struct weft_engine_link {
  int peer, tag, ack_tag;
  struct weft_link_mem **recv, **send;
  int channel; /* picks the network device (weft_net_near_dev); point-to-point links: 0 */
};
/* The connector setup of both executors, with each peer as weft_engine_link_peer describes it:
 * offer every link's receive side, take every send side, then finish the offers (the peers' acks),
 * each phase in list order. Every offer goes before any take because bootstrap sends never block:
 * then any pattern of pairs connects, as long as each peer lists this rank with the same tags.
 * offered (may be NULL) runs right after each offer, before anything else is sent: the peer may
 * be taking that memory already. Stops at the first error; what was made until then stays in the
 * links' slots (for the caller to bind or release). */
ncclResult_t weft_engine_connect(struct weft_comm_ctx* comm, const struct weft_engine_link* links, int n,
                                 size_t simple, size_t ll,
                                 ncclResult_t (*offered)(struct weft_comm_ctx* comm, int peer,
                                                         struct weft_link_mem* mem));
/* The planner settings comm's collectives are planned with (host: the engine's; CUDA: the CUDA
 * backend's; what each executor runs is in them); NULL before the engine is set up. */
const struct weft_plan_params* weft_engine_plan_params(const struct weft_comm_ctx* comm);
/* The waiter a launch of comm starts from: the comm's parameters, its peers and their causes. */
struct weft_waiter* weft_engine_waiter(struct weft_comm_ctx* comm);

#endif
