/* The IB network's connections, shared by its setup (net_ib.c) and data path (net_ib_data.c).
 * Every connection is 1 to 4 RC queue pairs plus an authenticated socket connection (the socket
 * network's) from sender to receiver that carries the sender's address at setup and then tells
 * the receiver when the sender is gone; the sender finds a receiver that is gone by writing.
 * The receiver advertises each posted receive in a slot of the sender's "clear to send" FIFO
 * with an RDMA write; the sender writes the message straight into the buffer its tag picks,
 * with an immediate that names the buffer and the size. On a merged device (several ports of one
 * card, NCCL_IB_MERGE_NICS) queue pair i joins our member i % nmembers to the peer's member
 * i % peer_members; every member has its own protection domain, completion queue and keys, so a
 * buffer has a registration per member and an offer an rkey per receiving member. */
#ifndef WEFT_TRANSPORT_NET_IB_COMM_H
#define WEFT_TRANSPORT_NET_IB_COMM_H

#include "transport/net.h"
#include "transport/net_ib.h"
#include "transport/net_regcache.h"
#include "util/auth.h"

#if WEFT_IBVERBS_HEADERS

#define IB_SLOTS WEFT_NET_MAX_REQUESTS
#define IB_MAX_MEMBERS WEFT_IB_MAX_MEMBERS
#define IB_MAX_QPS 4        /* NCCL_IB_QPS_PER_CONNECTION's bound here (it fits the 128-byte handle) */
#define IB_IMM_SIZE_BITS 30 /* an immediate holds the buffer index (2 bits) and the size */
#define IB_MAX_MESSAGE ((size_t)1 << IB_IMM_SIZE_BITS)
/* An immediate no message has (its size field is past the largest): the sender found no offered
 * buffer that takes its message, and the receive fails too. */
#define IB_IMM_REJECT 0xffffffffu
#define IB_WR_CTS (1ull << 32)    /* wr_id flags: the receiver's FIFO writes, */
#define IB_WR_PROBE (1ull << 33)  /* the sender's empty writes that find a receiver gone, */
#define IB_WR_CLOSE (1ull << 34)  /* and the receiver's word saying it closed, */
#define IB_WR_REJECT (1ull << 35) /* and the sender's answer to an offer its message fits in no buffer of */
#define IB_WR_META (1ull << 36)   /* and the sender's write of a message's metadata word, */
#define IB_WR_DATA (1ull << 37)   /* and a part's data ahead of its empty write (adaptive routing) */
#define IB_WR_SETUP (1ull << 38)  /* and the receiver's write of its members' addresses */
/* The FIFO has one slot more: its seq word is set when the receiver closes, so that a send
 * still waiting for an offer fails at once instead of waiting for one forever. */
#define IB_CLOSED_SLOT IB_SLOTS

/* One posted receive as the sender sees it. seq is written last, by its own RDMA write. A key
 * per receiving member: the queue pair a message goes on picks one (0: not registered there). */
struct ib_cts_entry {
  uint64_t addr, size;
  uint32_t rkey[IB_MAX_MEMBERS];
  int32_t tag, pad;
};
struct ib_cts_slot {
  struct ib_cts_entry e[WEFT_NET_MAX_RECVS];
  uint32_t n, pad;
  uint32_t meta_rkey[IB_MAX_MEMBERS];
  uint64_t meta_addr; /* where the sender writes the message's metadata (isend_meta), before it */
  uint64_t seq;       /* irecv number + 1 */
};

/* What each side tells the other at setup (the receiver's goes in the handle): its first
 * member's address, the rest in struct ib_members. */
struct ib_info {
  uint32_t magic;
  uint8_t mtu, nqps, split, ar; /* nqps, split, ar: the receiver's choice, which the sender adopts */
  uint32_t qpn[IB_MAX_QPS];
  uint8_t gid[16];
  uint16_t lid;
  uint8_t nmembers, pad2;
  uint32_t fifo_rkey;
  uint64_t fifo_addr; /* the sender's FIFO (0 from the receiver) */
};
_Static_assert(sizeof(struct ib_info) == 56, "the IB setup message is 56 bytes");
/* The listen handle: the socket network's, then the receiver's queue pairs. */
struct ib_handle {
  uint8_t sock[WEFT_NET_SOCKET_HANDLE_BYTES];
  struct ib_info info;
};
_Static_assert(sizeof(struct ib_handle) <= WEFT_NET_HANDLE_BYTES, "IB handle too large");

/* Every member's address (and, from the sender, the key of its FIFO in that member). The handle
 * has no room for them: the sender's go with its setup message over the socket; the receiver's
 * (when it has more than one) are RDMA-written on queue pair 0 into the sender's FIFO memory,
 * after the FIFO's slots, ready last, before any offer. */
struct ib_addr {
  uint8_t gid[16];
  uint16_t lid;
  uint8_t mtu, pad;
  uint32_t fifo_rkey;
};
struct ib_members {
  struct ib_addr a[IB_MAX_MEMBERS];
  uint64_t ready;
};
/* The sender's setup message. */
struct ib_hello {
  struct ib_info info;
  struct ib_members m;
};

enum ib_stage {
  IB_R_WAIT_HELLO, /* receiver: the sender's address is on its way */
  IB_READY
};

/* One buffer's registrations, one per member (NULL where it is not registered). */
struct ib_mrs {
  struct ibv_mr* mr[IB_MAX_MEMBERS];
};

/* What a connection has on one member port. */
struct ib_member {
  const struct weft_ib_port* port;
  struct ibv_pd* pd;
  struct ibv_cq* cq; /* its queue pairs' */
  struct ibv_mr* fifo_mr;
  struct ibv_mr* seq_mr; /* receiver */
  struct ibv_mr* meta_mr;
};

struct ib_comm;
struct ib_req {
  struct ib_comm* c;
  int used, done, nbuf;
  int pending;   /* completions still to come (one per queue pair a message is split over) */
  int got_index; /* irecv: the buffer the message landed in */
  size_t got_size;
  uint64_t seq;
  uint64_t meta;    /* isend_meta's word */
  const void* data; /* isend */
  size_t size;
  int tag;
  size_t sizes[WEFT_NET_MAX_RECVS]; /* irecv: capacities, then what arrived (SIZE_MAX: nothing) */
  /* The registrations each buffer goes with: a kept one (non-NULL; its handle is a struct
   * ib_mrs), else its own, in the members whose queue pairs the message takes. */
  struct weft_net_kept* kept[WEFT_NET_MAX_RECVS];
  struct ib_mrs own[WEFT_NET_MAX_RECVS];
};

struct ib_comm {
  int is_send;
  int stage; /* enum ib_stage; IB_READY when data may flow */
  const struct weft_ib_device* dev;
  struct weft_auth_key key;
  void* ctrl;                 /* the socket comm: the sender's send side, the receiver's receive side */
  void* ctrl_req;             /* sender: its address on the way; receiver: awaiting it, then the receive
                                 that ends when the sender goes */
  int peer_gone;              /* receiver: the sender closed its end; nothing more will come */
  int64_t probe_ns;           /* sender: when the last probe write went out */
  int probing;                /* sender: a probe write is in flight */
  struct ib_hello info, peer; /* ours; the peer's (a sender has the receiver's members once ready) */
  uint8_t live_byte;
  struct ib_member m[IB_MAX_MEMBERS];
  int nmembers;     /* members used: the device's, but a sender's no more than its queue pairs */
  int peer_members; /* the peer's */
  int qps_up;       /* every queue pair connected (a sender's to the receiver's later members wait for
                       their addresses) */
  struct ibv_qp* qp[IB_MAX_QPS];
  int nqps;  /* NCCL_IB_QPS_PER_CONNECTION per receiving member, at most 4: messages go round them, */
  int split; /* or with NCCL_IB_SPLIT_DATA_ON_QPS=1 each is split over all of them */
  /* Adaptive routing (NCCL_IB_ADAPTIVE_ROUTING): the fabric may deliver a write's packets out of
   * order, so a part of ar_threshold bytes or more goes as a plain write followed by an empty
   * write with its immediate, which completes only once the data before it has landed. */
  int ar;
  size_t ar_threshold;
  int relaxed; /* data buffers registered with IBV_ACCESS_RELAXED_ORDERING */
  /* Sender: written by the receiver; receiver: what it writes from. IB_SLOTS + 1 slots, then the
   * receiver's members (struct ib_members, IB_FIFO_MEMBERS). */
  struct ib_cts_slot* fifo;
  uint64_t seq_out[IB_SLOTS + 1]; /* receiver: the seq words its writes carry, then its closed word */
  uint64_t meta[IB_SLOTS];        /* per request slot: the sender writes from it, the receiver is written */
  struct weft_net_regcache regs;  /* the ranges the proxy keeps registered (its connector's buffers) */
  uint64_t own_regs;              /* buffers registered for their request alone (INFO at close) */
  struct ib_req reqs[IB_SLOTS];
  uint64_t issued, posted; /* requests made; sender: writes posted, in order */
  ncclResult_t error;
  /* A failed completion: requests done before it still complete, the rest fail with it. */
  int broken;
  char broken_why[160];
  char peer_addr[64];
};

#define IB_FIFO_MEMBERS ((IB_SLOTS + 1) * sizeof(struct ib_cts_slot)) /* offset of ib_members */
#define IB_FIFO_BYTES (IB_FIFO_MEMBERS + sizeof(struct ib_members))
static inline struct ib_members* ib_fifo_members(struct ib_comm* c) {
  return (struct ib_members*)((char*)c->fifo + IB_FIFO_MEMBERS);
}
/* Queue pair i's member on our side and on the peer's. */
static inline int ib_qp_member(const struct ib_comm* c, int i) { return i % c->nmembers; }
static inline int ib_qp_peer_member(const struct ib_comm* c, int i) { return i % c->peer_members; }

/* net_ib_data.c */
ncclResult_t weft_ib_isend(void* send_comm, const void* data, size_t size, int tag, void** request);
ncclResult_t weft_ib_irecv(void* recv_comm, int n, void* const* data, const size_t* sizes, const int* tags,
                           void** request);
ncclResult_t weft_ib_test(void* request, int* done, size_t* sizes);
ncclResult_t weft_ib_isend_meta(void* send_comm, const void* data, size_t size, int tag, uint64_t meta,
                                void** request);
ncclResult_t weft_ib_test_meta(void* request, int* done, size_t* sizes, uint64_t* meta);
/* Records the first failure of c (WARN naming the device and the peer) and returns it. */
ncclResult_t weft_ib_fail(struct ib_comm* c, ncclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Receiver, closing: tells the sender (best effort, a short wait for the write). */
void weft_ib_say_closed(struct ib_comm* c);
/* Deregisters what a finished or abandoned request registered, and lets go of the kept
 * registrations it used. */
void weft_ib_req_release(struct ib_req* r);
/* keep_registered / drop_registered, and the cache's registration of a kept range. */
ncclResult_t weft_ib_keep_registered(void* comm, void* data, size_t size);
void weft_ib_drop_registered(void* comm, void* data, size_t size);
/* GPUDirect RDMA (net_ib_gdr.c): what port dev can register of GPU memory (WEFT_NET_GPU_*), the
 * proxy's keep of a GPU range, and the cache's registration of one. */
int weft_ib_gpu_direct(int dev);
/* What may touch a comm's memory (IBV_ACCESS_*): a sender's is only read by its own writes; a
 * receiver's is written by the peer. */
int weft_ib_access_of(const struct ib_comm* c);
/* Host memory, or GPU memory by address (peer memory) or from its DMA-BUF (dmabuf_fd >= 0):
 * registered in member k with the comm's access flags. */
struct ibv_mr* weft_ib_register_range(struct ib_comm* c, int k, void* p, size_t n, int dmabuf_fd);
/* A range to keep, registered so in every member (any queue pair may carry a message from or into
 * it); NULL when a member refuses it (*failed: that member, errno: why) or memory runs out (-1). */
struct ib_mrs* weft_ib_mrs_keep(struct ib_comm* c, void* p, size_t n, int dmabuf_fd, int* failed);
/* Deregisters what out holds. */
void weft_ib_mrs_release(struct ib_mrs* out);
ncclResult_t weft_ib_keep_registered_gpu(void* comm, void* data, size_t size, int dmabuf_fd);
ncclResult_t weft_ib_reg_gpu(void* owner, void* data, size_t size, int dmabuf_fd, void** mh);
void weft_ib_regcache_init(struct ib_comm* c);

/* Receiver with several members: writes their addresses into the sender's FIFO memory. */
ncclResult_t weft_ib_send_members(struct ib_comm* c);

/* net_ib.c: moves c's setup on; ncclSuccess while it is still under way. */
ncclResult_t weft_ib_progress_setup(struct ib_comm* c);
/* Sender: connects the queue pairs to the receiver's later members once their addresses have
 * landed (c->qps_up then); ncclSuccess while they have not. */
ncclResult_t weft_ib_connect_rest(struct ib_comm* c);

#endif
#endif
