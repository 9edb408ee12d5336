/* Point-to-point on the host: every send and receive of a launch progresses together without
 * blocking (so any pattern, all-to-all included, cannot deadlock); per peer, sends and
 * receives complete in call order. A rank's sends to itself are copied to its receives. */
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/dev_types.h"
#include "collectives/engine.h"
#include "collectives/host/prims.h"
#include "collectives/host/wait.h"
#include "util/check.h"
#include "util/log.h"

#define STEPS_PER_VISIT 4 /* bounded work per peer per sweep keeps all peers moving */

struct p2p_op {
  struct weft_task* t;
  size_t bytes, done;
};

/* Copy self-sends into self-receives in call order (engine.c has paired them and dropped the
 * pairs that copy a buffer onto itself). */
static void run_self(struct weft_comm_ctx* comm, struct weft_task** tasks, int n) {
  int si = 0, ri = 0;
  for (;;) {
    while (si < n && !(tasks[si]->coll == WEFT_COLL_SEND && tasks[si]->root == comm->rank)) si++;
    while (ri < n && !(tasks[ri]->coll == WEFT_COLL_RECV && tasks[ri]->root == comm->rank)) ri++;
    if (si == n || ri == n) return;
    size_t sb = tasks[si]->count * weft_dt_size(tasks[si]->dtype);
    size_t rb = tasks[ri]->count * weft_dt_size(tasks[ri]->dtype);
    memmove(tasks[ri]->recvbuff, tasks[si]->sendbuff, sb < rb ? sb : rb);
    si++, ri++;
  }
}

/* Move as many steps of op as the connector allows now; returns steps moved. */
static int progress(struct weft_conn* c, struct p2p_op* op, int is_send) {
  int moved = 0;
  while (op->done < op->bytes && moved < STEPS_PER_VISIT) {
    if (is_send ? !weft_conn_send_ready(c) : !weft_conn_recv_ready(c)) break;
    size_t n = op->bytes - op->done < c->simple_slot ? op->bytes - op->done : c->simple_slot;
    char* slot = c->simple + (c->step % WEFT_NSTEPS) * c->simple_slot;
    if (is_send) {
      const char* src = (const char*)op->t->sendbuff + op->done;
      weft_conn_note_step(c, n, 0); /* for a network proxy */
      if (c->by_ref)                /* the proxy sends it from the user's buffer; see drain_sends */
        weft_conn_note_ref(c, src);
      else
        memcpy(slot, src, n);
      c->step++;
      weft_host_post(&c->ctrl->tail, &c->ctrl->tail_waiting, c->step);
    } else {
      c->step++;
      memcpy((char*)op->t->recvbuff + op->done, slot, n);
      weft_host_post(&c->ctrl->head, &c->ctrl->head_waiting, c->step);
    }
    op->done += n;
    moved++;
  }
  return moved;
}

/* Network sends by reference read the user's buffers until the proxy has taken them: wait for
 * that before the call returns, so the caller may reuse the buffers. */
static ncclResult_t drain_sends(struct weft_comm_ctx* comm, const struct p2p_op* ops, int n,
                                struct weft_waiter* w) {
  for (int i = 0; i < n; i++) {
    if (ops[i].t->coll != WEFT_COLL_SEND) continue;
    struct weft_conn* c = &comm->coll->p2p[ops[i].t->root].send;
    if (c->by_ref)
      WEFT_CHECK(weft_host_wait(w, weft_conn_sends_drained, c, &c->ctrl->head, &c->ctrl->head_waiting,
                                ops[i].t->root, -1, "the network to send the last steps"));
  }
  return ncclSuccess;
}

/* While nothing moves, say so on the receive connectors still awaited (waiting 1), as a ring wait
 * does on its doorbell: a network proxy that heard such a peer leave after its last step then
 * fails the call at once (proxy/proxy.c) instead of at the timeout. waiting 0 takes it back from
 * those it was said on (marked). */
static void note_recv_waits(struct weft_coll_state* s, const int* cur, uint8_t* marked, int k,
                            uint32_t waiting) {
  for (int peer = 0; peer < k; peer++) {
    if (waiting ? cur[2 * peer] < 0 : !marked[peer]) continue;
    __atomic_store_n(&s->p2p[peer].recv.ctrl->tail_waiting, waiting, __ATOMIC_RELEASE);
    marked[peer] = (uint8_t)waiting;
  }
}

/* Per-peer queues as index lists into ops: ops of one peer and direction, in call order. */
static ncclResult_t run_remote(struct weft_comm_ctx* comm, struct p2p_op* ops, int n, struct weft_waiter* w) {
  struct weft_coll_state* s = comm->coll;
  int k = comm->nranks, left = 0, idle_noted = 0;
  int* cur = malloc(2 * k * sizeof(int)); /* current op index per (peer, direction), -1 when none */
  uint8_t* marked = calloc(k, 1);         /* peers whose receive connector says this rank waits */
  if (cur == NULL || marked == NULL) {
    free(cur);
    free(marked);
    return ncclSystemError;
  }
  for (int i = 0; i < 2 * k; i++) cur[i] = -1;
  for (int i = n - 1; i >= 0; i--) { /* first op of each queue */
    int slot = 2 * ops[i].t->root + (ops[i].t->coll == WEFT_COLL_SEND);
    cur[slot] = i;
    left++;
  }
  uint64_t idle_since = weft_time_ns();
  ncclResult_t res = ncclSuccess;
  int last_peer = -1;
  while (left > 0 && res == ncclSuccess) {
    int moved = 0;
    for (int q = 0; q < 2 * k; q++) {
      if (cur[q] < 0) continue;
      int peer = q / 2, is_send = q % 2;
      struct p2p_op* op = &ops[cur[q]];
      moved += progress(is_send ? &s->p2p[peer].send : &s->p2p[peer].recv, op, is_send);
      last_peer = peer;
      if (op->done < op->bytes) continue;
      left--;
      int next = -1; /* next op of the same queue, in call order */
      for (int i = cur[q] + 1; i < n && next < 0; i++)
        if (ops[i].t->root == peer && (ops[i].t->coll == WEFT_COLL_SEND) == is_send) next = i;
      cur[q] = next;
    }
    if (moved) {
      idle_since = weft_time_ns();
      if (idle_noted) note_recv_waits(s, cur, marked, k, 0);
      idle_noted = 0;
    } else if (left > 0) {
      w->opname = ops[0].t->coll == WEFT_COLL_SEND ? "Send" : "Recv";
      if (!idle_noted) note_recv_waits(s, cur, marked, k, 1);
      idle_noted = 1;
      res = weft_host_idle(w, idle_since, last_peer, -1, "send/recv");
    }
  }
  note_recv_waits(s, cur, marked, k, 0);
  free(cur);
  free(marked);
  return res;
}

ncclResult_t weft_host_p2p_run(struct weft_comm_ctx* comm, struct weft_task** tasks, int n,
                               struct weft_waiter* w) {
  int k = comm->nranks;
  uint8_t* need = calloc(2 * k, 1);
  struct p2p_op* ops = calloc(n, sizeof(*ops));
  ncclResult_t res = ncclSuccess;
  if (need == NULL || ops == NULL) {
    res = ncclSystemError;
    goto out;
  }
  int nops = 0;
  for (int i = 0; i < n; i++) {
    struct weft_task* t = tasks[i];
    if (t->root == comm->rank) continue;
    need[(t->coll == WEFT_COLL_SEND ? 0 : k) + t->root] = 1;
    ops[nops].t = t;
    ops[nops].bytes = t->count * weft_dt_size(t->dtype);
    nops++;
  }
  w->seq = tasks[0]->seq;
  WEFT_CHECK_GOTO(weft_engine_p2p_connect(comm, need, need + k), res, out);
  run_self(comm, tasks, n);
  if (nops > 0) res = run_remote(comm, ops, nops, w);
  if (res == ncclSuccess && nops > 0) res = drain_sends(comm, ops, nops, w);
out:
  free(need);
  free(ops);
  return res;
}
