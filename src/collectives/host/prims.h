/* Host executor prims: the interface the algo/ bodies are written against, implemented with CPU
 * loops over a channel's send connector (to the next rank) and receive connector (from the
 * previous rank). Errors are sticky: after one, every later prim returns at once. */
#ifndef WEFT_COLLECTIVES_HOST_PRIMS_H
#define WEFT_COLLECTIVES_HOST_PRIMS_H

#include "collectives/dev_types.h"
#include "collectives/host/wait.h"
#include "nccl.h"
#include "transport/connector.h"

struct weft_prims {
  struct weft_conn* send; /* to the next rank; NULL when there is none */
  struct weft_conn* recv; /* from the previous rank */
  struct weft_waiter* waiter;
  int channel;
  int proto;
  int dtype;
  size_t esize;
  struct weft_dev_redop op;
  int reducing; /* apply the pre-op to own input and the post-op to final results */
  const char* in;
  char* out;
  void* tmp_recv;   /* LL: unpacked payload of one slot */
  void* tmp_send;   /* LL: payload to pack into one slot */
  size_t tmp_bytes; /* of each */
  ncclResult_t err;
  int by_ref;    /* Simple sends to a network connector: unchanged data is sent from where it lies */
  int refs_sent; /* some were: the user's buffers are in use until the proxy has sent them */
  struct weft_host_sched* sched; /* set: waits yield to the other interleaved channels */
};

/* Prepare prims for one operation on one channel. tmp buffers are allocated when LL is used. */
ncclResult_t weft_prims_setup(struct weft_prims* p, struct weft_conn* send, struct weft_conn* recv,
                              struct weft_waiter* waiter, int channel, int proto, int dtype,
                              const struct weft_dev_redop* op, int reducing, const void* in, void* out);
void weft_prims_teardown(struct weft_prims* p);
/* Wait until every step sent by reference has left, so the caller may reuse its buffers. */
ncclResult_t weft_prims_flush(struct weft_prims* p);
/* Most elements one step can carry with proto over conn memory of these sizes. */
size_t weft_prims_max_chunk_bytes(int proto, size_t simple_slot, size_t ll_slot);

void weft_prims_send(struct weft_prims* p, size_t in_off, size_t n);
void weft_prims_copy_send(struct weft_prims* p, size_t in_off, size_t out_off, size_t n);
void weft_prims_recv(struct weft_prims* p, size_t out_off, size_t n);
void weft_prims_recv_copy_send(struct weft_prims* p, size_t out_off, size_t n);
void weft_prims_recv_reduce_send(struct weft_prims* p, size_t in_off, size_t n);
void weft_prims_recv_reduce_copy(struct weft_prims* p, size_t in_off, size_t out_off, size_t n);
void weft_prims_recv_reduce_copy_send(struct weft_prims* p, size_t in_off, size_t out_off, size_t n);
void weft_prims_local(struct weft_prims* p, size_t in_off, size_t out_off, size_t n);
static inline int weft_prims_failed(const struct weft_prims* p) { return p->err != ncclSuccess; }

/* Non-blocking checks for progress loops (p2p): whether the next step could start now. */
int weft_conn_send_ready(struct weft_conn* c);
int weft_conn_recv_ready(struct weft_conn* c); /* Simple protocol */
/* Whether the receiver (for a network connector: the proxy) has taken every step sent so far. */
int weft_conn_sends_drained(void* conn);

#endif
