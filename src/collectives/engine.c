/* The collective engine's entry points for core/: connect ring channels at communicator init,
 * run a launch's queued tasks in call order (collectives, then point-to-point), tear down. */
#include "collectives/engine.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "collectives/agree.h"
#include "collectives/coll.h"
#include "collectives/context.h"
#include "collectives/cuda/engine_cuda.h"
#include "collectives/enqueue.h"
#include "collectives/executor.h"
#include "collectives/fingerprint.h"
#include "collectives/host/call_note.h"
#include "collectives/host/direct.h"
#include "collectives/host/exec.h"
#include "collectives/host/interleave.h"
#include "collectives/host/step_tag.h"
#include "collectives/host/wait.h"
#include "collectives/mem.h"
#include "collectives/profiler.h"
#include "collectives/rma.h"
#include "collectives/trace.h"
#include "collectives/tree.h"
#include "collectives/tune_log.h"
#include "collectives/window.h"
#include "proxy/proxy.h"
#include "transport/net.h"
#include "transport/transport.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

#define TAG_RING 0x57450100 /* + channel: a connector handle for the previous rank */
#define TAG_RING_ACK 0x57450200
#define TAG_P2P 0x57450300
#define TAG_P2P_ACK 0x57450400
#define DEFAULT_LL_BYTES (256 * 1024)

void weft_engine_link_peer(struct weft_comm_ctx* comm, int peer, struct weft_link_peer* lp) {
  memset(lp, 0, sizeof(*lp));
  lp->net = (struct weft_net_peer){.bootstrap = comm->bootstrap,
                                   .rank = comm->rank,
                                   .peer = peer,
                                   .peer_host = comm->peers[peer].host_name,
                                   .abort_flag = &comm->abort_flag,
                                   .async_result = &comm->async_result,
                                   .cause = &comm->cause,
                                   .near = &comm->net_near};
  lp->remote = comm->peers[peer].host_hash != comm->peers[comm->rank].host_hash;
  lp->same_process = weft_comm_same_process(comm, peer);
  lp->peer_pid = comm->peers[peer].pid;
  const struct weft_executor* e = weft_executor_of(comm);
  if (e->link_peer) e->link_peer(comm, peer, lp);
}

static void link_peer(struct weft_comm_ctx* comm, const struct weft_engine_link* l,
                      struct weft_link_peer* lp) {
  weft_engine_link_peer(comm, l->peer, lp);
  lp->net.channel = l->channel;
}

static ncclResult_t offer(struct weft_comm_ctx* comm, const struct weft_engine_link* l, size_t simple,
                          size_t ll) {
  struct weft_link_peer lp;
  link_peer(comm, l, &lp);
  return weft_transport_offer(&lp, l->tag, simple, ll, l->recv);
}

static ncclResult_t take(struct weft_comm_ctx* comm, const struct weft_engine_link* l) {
  struct weft_link_peer lp;
  link_peer(comm, l, &lp);
  return weft_transport_take(&lp, l->tag, l->ack_tag, l->send);
}

static ncclResult_t finish_offer(struct weft_comm_ctx* comm, const struct weft_engine_link* l) {
  struct weft_link_peer lp;
  link_peer(comm, l, &lp);
  return weft_transport_finish_offer(&lp, l->ack_tag, *l->recv);
}

ncclResult_t weft_engine_connect(struct weft_comm_ctx* comm, const struct weft_engine_link* links, int n,
                                 size_t simple, size_t ll,
                                 ncclResult_t (*offered)(struct weft_comm_ctx* comm, int peer,
                                                         struct weft_link_mem* mem)) {
  for (int i = 0; i < n; i++) {
    const struct weft_engine_link* l = &links[i];
    if (l->recv == NULL) continue;
    WEFT_CHECK(offer(comm, l, simple, ll));
    if (offered != NULL) WEFT_CHECK(offered(comm, l->peer, *l->recv));
  }
  for (int i = 0; i < n; i++)
    if (links[i].send != NULL) WEFT_CHECK(take(comm, &links[i]));
  for (int i = 0; i < n; i++)
    if (links[i].recv != NULL) WEFT_CHECK(finish_offer(comm, &links[i]));
  return ncclSuccess;
}

static void init_watch(struct weft_comm_ctx* comm, struct weft_coll_state* s) {
  const struct weft_peer_info* me = &comm->peers[comm->rank];
  for (int p = 0; p < comm->nranks; p++) {
    const struct weft_peer_info* pi = &comm->peers[p];
    /* Only processes visible from here (same host, same pid namespace) can be watched; known from
     * what the ranks published, so no system call per peer. */
    s->watch[p] = p != comm->rank && pi->host_hash == me->host_hash && pi->pid_ns != 0 &&
                  pi->pid_ns == me->pid_ns && pi->pid_hash != me->pid_hash && pi->pid > 0;
  }
}

/* A ring neighbour on this host shares connector pages with this rank: when it gives up or leaves
 * it writes its cause there (publish_pages), as the sender of this rank's receive connector and
 * as the receiver of its send connector. With boards (every rank on this host), every other peer
 * writes it on its board. Network connectors carry notices instead. */
static void find_peer_causes(const struct weft_comm_ctx* comm, struct weft_coll_state* s) {
  int k = comm->nranks, prev = (comm->rank + k - 1) % k, next = (comm->rank + 1) % k;
  if (s->recv_mem[0]->tr != &weft_transport_net) s->peer_cause[prev] = &s->recv[0].ctrl->cause[0];
  if (s->send_mem[0]->tr != &weft_transport_net) s->peer_cause[next] = &s->send[0].ctrl->cause[1];
  for (int p = 0; s->direct != NULL && p < k; p++)
    if (p != comm->rank && s->peer_cause[p] == NULL) s->peer_cause[p] = weft_host_direct_cause(s->direct, p);
}

/* Write cause c where this rank's peers on this host read it: its ring connector pages and its
 * board. */
static void publish_pages(struct weft_comm_ctx* comm, const struct weft_cause* c) {
  struct weft_coll_state* s = comm->coll;
  for (int ch = 0; ch < s->pp.nchannels; ch++) { /* a comm whose init failed may lack some */
    if (s->send[ch].ctrl)
      weft_cause_set_kind(&s->send[ch].ctrl->cause[0], (int)c->kind, c->rank, c->host, c->what);
    if (s->recv[ch].ctrl)
      weft_cause_set_kind(&s->recv[ch].ctrl->cause[1], (int)c->kind, c->rank, c->host, c->what);
  }
  struct weft_cause* board = weft_host_direct_cause(s->direct, comm->rank);
  if (board != NULL) weft_cause_set_kind(board, (int)c->kind, c->rank, c->host, c->what);
}

/* Whether comm has the pages its peers read (a comm whose init failed, or a suspended one, may not). */
static int has_pages(const struct weft_comm_ctx* comm) {
  return comm->coll != NULL && comm->nranks >= 2 &&
         !__atomic_load_n(&comm->suspend_released, __ATOMIC_ACQUIRE);
}

/* Before an error leaves a launch, or a call of a failed comm is refused: tell the ring neighbours
 * on this host (shared pages) and the network peers (notices) which rank was lost, or found a
 * mismatched call. */
void weft_coll_publish_cause(struct weft_comm_ctx* comm) {
  struct weft_cause c;
  if (!has_pages(comm) || !weft_cause_get(&comm->cause, &c)) return;
  publish_pages(comm, &c);
  weft_proxy_announce(&comm->abort_flag, &comm->cause);
}

/* A healthy host comm destroyed or aborted: peers on this host still waiting for this rank give up
 * naming it instead of waiting until WEFT_TIMEOUT (network peers hear the proxy's goodbye).
 * Written after this rank's last step, so a peer that sees it and then finds nothing to take
 * knows nothing more will come. CUDA kernels read these pages for their own marks: not there. */
static void publish_left(struct weft_comm_ctx* comm) {
  struct weft_cause c = {0};
  if (!has_pages(comm) || comm->backend == WEFT_BACKEND_CUDA || weft_cause_get(&comm->cause, &c)) return;
  weft_cause_set_kind(&c, WEFT_CAUSE_LEFT, comm->rank, comm->peers[comm->rank].host_name, NULL);
  publish_pages(comm, &c);
}

/* A send connector; network ones may send steps from the user's buffer (WEFT_NET_SEND_BY_REF). */
static void bind_send(const struct weft_coll_state* s, struct weft_conn* c, struct weft_link_mem* m,
                      int peer) {
  weft_conn_bind(c, m->host, peer);
  c->by_ref = s->send_by_ref && weft_conn_sends_by_ref(c);
}

static ncclResult_t connect_ring(struct weft_comm_ctx* comm, struct weft_coll_state* s) {
  int k = comm->nranks, prev = (comm->rank + k - 1) % k, next = (comm->rank + 1) % k;
  int nch = s->pp.nchannels;
  struct weft_engine_link links[2 * WEFT_PLAN_MAX_CHANNELS] = {{0}};
  int n = 0;
  for (int c = 0; c < nch; c++) {
    links[n++] = (struct weft_engine_link){prev, TAG_RING + c, TAG_RING_ACK + c, &s->recv_mem[c], NULL, c};
    links[n++] = (struct weft_engine_link){next, TAG_RING + c, TAG_RING_ACK + c, NULL, &s->send_mem[c], c};
  }
  WEFT_CHECK(weft_engine_connect(comm, links, n, s->simple_bytes, s->ll_bytes, NULL));
  for (int c = 0; c < nch; c++) {
    bind_send(s, &s->send[c], s->send_mem[c], next);
    weft_conn_bind(&s->recv[c], s->recv_mem[c]->host, prev);
  }
  return ncclSuccess;
}

/* Point-to-point and tree connectors that existed when the comm was suspended are connected
 * again at resume: their peers had them too (both sides of a pair connect together, and every
 * rank connects its trees at the same collective), so every rank restores the same pairs. */
static ncclResult_t restore_lazy(struct weft_comm_ctx* comm, struct weft_coll_state* s) {
  ncclResult_t res = ncclSuccess;
  if (s->restore_p2p != NULL)
    res = weft_engine_p2p_connect(comm, s->restore_p2p, s->restore_p2p + comm->nranks);
  free(s->restore_p2p);
  s->restore_p2p = NULL;
  if (res == ncclSuccess && s->restore_tree)
    res = weft_tree_connect(comm, s->pp.nchannels, s->simple_bytes, s->ll_bytes, &s->tree);
  s->restore_tree = 0;
  return res;
}

/* The comm's buffers: the ring connectors of every channel, the direct paths' boards, and what
 * restore_lazy brings back. Init and ncclCommResume both build them here (collective: every
 * rank calls it together); buffers_release undoes it for ncclCommSuspend and teardown. */
static ncclResult_t buffers_create(struct weft_comm_ctx* comm, struct weft_coll_state* s) {
  if (comm->nranks > 1) WEFT_CHECK(connect_ring(comm, s));
  /* Network rings only: there a step's wire time is long enough to hide another channel's work. */
  s->interleave = comm->nranks > 1 && weft_param_int("WEFT_NET_INTERLEAVE") != 0 &&
                  (s->send_mem[0]->tr == &weft_transport_net || s->recv_mem[0]->tr == &weft_transport_net);
  WEFT_CHECK(weft_host_direct_init(comm, &s->direct));
  if (comm->nranks > 1) find_peer_causes(comm, s);
  return restore_lazy(comm, s);
}

/* NULL-safe on every part, so a half-built or already released comm is fine. */
static void buffers_release(struct weft_comm_ctx* comm, struct weft_coll_state* s) {
  weft_host_direct_fini(s->direct);
  s->direct = NULL;
  weft_host_interleave_free(s->co_stacks, WEFT_PLAN_MAX_CHANNELS);
  weft_tree_free(s->tree);
  s->tree = NULL;
  for (int c = 0; c < WEFT_PLAN_MAX_CHANNELS; c++) {
    weft_transport_release(s->send_mem[c]);
    weft_transport_release(s->recv_mem[c]);
    s->send_mem[c] = s->recv_mem[c] = NULL;
    memset(&s->send[c], 0, sizeof(s->send[c]));
    memset(&s->recv[c], 0, sizeof(s->recv[c]));
  }
  for (int p = 0; s->p2p && p < comm->nranks; p++) {
    weft_transport_release(s->p2p[p].send_mem);
    weft_transport_release(s->p2p[p].recv_mem);
    memset(&s->p2p[p], 0, sizeof(s->p2p[p]));
  }
  if (s->peer_cause) memset(s->peer_cause, 0, comm->nranks * sizeof(*s->peer_cause)); /* in connector pages */
  free(s->restore_p2p);
  s->restore_p2p = NULL;
}

/* Note what restore_lazy must bring back, then release. Nothing is released on failure. */
static ncclResult_t host_suspend(struct weft_comm_ctx* comm) {
  struct weft_coll_state* s = comm->coll;
  int k = comm->nranks;
  uint8_t* flags = calloc(2 * (size_t)k, 1);
  if (flags == NULL) {
    WEFT_WARN("comm %p rank %d: out of memory suspending the communicator", (void*)comm, comm->rank);
    return ncclSystemError;
  }
  for (int p = 0; p < k; p++) {
    flags[p] = s->p2p[p].send_mem != NULL;
    flags[k + p] = s->p2p[p].recv_mem != NULL;
  }
  int tree = s->tree != NULL;
  buffers_release(comm, s);
  s->restore_p2p = flags;
  s->restore_tree = tree;
  return ncclSuccess;
}

static ncclResult_t host_resume(struct weft_comm_ctx* comm) { return buffers_create(comm, comm->coll); }

static ncclResult_t host_comm_init(struct weft_comm_ctx* comm) {
  struct weft_coll_state* s = calloc(1, sizeof(*s));
  if (s == NULL) return ncclSystemError;
  comm->coll = s;
  s->p2p = calloc(comm->nranks, sizeof(*s->p2p));
  s->watch = calloc(comm->nranks, 1);
  s->peer_cause = calloc(comm->nranks, sizeof(*s->peer_cause));
  if (s->p2p == NULL || s->watch == NULL || s->peer_cause == NULL) return ncclSystemError;
  int64_t buff = weft_param_int("NCCL_BUFFSIZE");
  int64_t ll = weft_param_is_set("NCCL_LL_BUFFSIZE") ? weft_param_int("NCCL_LL_BUFFSIZE") : DEFAULT_LL_BYTES;
  if (buff < 64 * 1024) buff = 64 * 1024;
  if (ll < 32 * 1024) ll = 32 * 1024;
  s->simple_bytes = (size_t)buff;
  s->ll_bytes = (size_t)ll;
  s->p2p_bytes = s->simple_bytes / 4 < 64 * 1024 ? 64 * 1024 : s->simple_bytes / 4;
  s->pp.comm = comm;
  s->pp.nranks = comm->nranks;
  s->pp.rank = comm->rank;
  s->pp.nchannels = weft_plan_channels_to_connect();
  weft_plan_read_env(&s->pp);
  s->pp.tune_log = weft_tune_log_create(comm);
  s->pp.nnodes = comm->nnodes;
  WEFT_CHECK(weft_plan_agree(comm, &s->pp, s->simple_bytes, s->ll_bytes)); /* before connecting channels */
  s->send_by_ref = weft_param_int("WEFT_NET_SEND_BY_REF") != 0;
  s->check_calls = weft_param_int("WEFT_CHECK_CALLS") != 0;
  init_watch(comm, s);
  WEFT_CHECK(buffers_create(comm, s));
  /* Parameters are read once per communicator: lookups cost microseconds per launch. */
  weft_waiter_init(&s->waiter, &comm->abort_flag, comm->rank, comm->nranks);
  weft_call_note_hooks(comm, &s->waiter); /* once: the waiter is kept */
  WEFT_INFO(WEFT_INIT, "comm %p rank %d: %d ring channel(s), Simple %zu and LL %zu bytes per connector",
            (void*)comm, comm->rank, s->pp.nchannels, s->simple_bytes, s->ll_bytes);
  return ncclSuccess;
}

static void host_comm_fini(struct weft_comm_ctx* comm) {
  struct weft_coll_state* s = comm->coll;
  if (s == NULL) return;
  buffers_release(comm, s);
  weft_tune_log_destroy(s->pp.tune_log);
  free(s->p2p);
  free(s->watch);
  free(s->peer_cause);
  free(s->note_asked);
  free(s);
  comm->coll = NULL;
}

/* What has memory is bound even when the connect failed part way: later launches connect only
 * the peers without memory, and must not find an unbound connector. */
static void bind_p2p(struct weft_coll_state* s, const struct weft_engine_link* links, int n) {
  for (int i = 0; i < n; i++) {
    struct weft_p2p_conn* c = &s->p2p[links[i].peer];
    if (links[i].recv != NULL && c->recv_mem != NULL)
      weft_conn_bind(&c->recv, c->recv_mem->host, links[i].peer);
    if (links[i].send != NULL && c->send_mem != NULL) bind_send(s, &c->send, c->send_mem, links[i].peer);
  }
}

ncclResult_t weft_engine_p2p_connect(struct weft_comm_ctx* comm, const uint8_t* send_to,
                                     const uint8_t* recv_from) {
  struct weft_coll_state* s = comm->coll;
  struct weft_engine_link* links = calloc(comm->nranks, sizeof(*links));
  if (links == NULL) return ncclSystemError;
  int n = 0;
  for (int p = 0; p < comm->nranks; p++) {
    struct weft_p2p_conn* c = &s->p2p[p];
    struct weft_link_mem** recv = recv_from[p] && c->recv_mem == NULL ? &c->recv_mem : NULL;
    struct weft_link_mem** send = send_to[p] && c->send_mem == NULL ? &c->send_mem : NULL;
    if (recv != NULL || send != NULL)
      links[n++] = (struct weft_engine_link){p, TAG_P2P, TAG_P2P_ACK, recv, send, 0};
  }
  ncclResult_t res = weft_engine_connect(comm, links, n, s->p2p_bytes, 0, NULL);
  bind_p2p(s, links, n);
  free(links);
  return res;
}

static const struct weft_plan_params* host_plan_params(const struct weft_comm_ctx* comm) {
  return comm->coll ? &comm->coll->pp : NULL;
}

/* A ring rank that took no step from the previous rank in this call (a broadcast root) looks
 * once whether that rank sent one for this very collective anyway: then their calls differ,
 * as when both think they are the root, and no receive would ever see it. */
static ncclResult_t peek_unexpected(struct weft_coll_state* s, const uint64_t* recv_steps, int nch,
                                    struct weft_waiter* w) {
  for (int c = 0; c < nch && w->step_tag; c++) {
    const struct weft_conn* r = &s->recv[c];
    if (r->step != recv_steps[c] || __atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE) <= r->step) continue;
    uint64_t theirs = __atomic_load_n(&r->ctrl->step_tag[r->step % WEFT_NSTEPS], __ATOMIC_RELAXED);
    if (weft_step_tag_same_call(theirs, w->step_tag) && theirs != w->step_tag)
      return weft_host_bad_step(w, r->peer, theirs);
  }
  return ncclSuccess;
}

static ncclResult_t run_ring(struct weft_comm_ctx* comm, const struct weft_plan* plan,
                             const struct weft_task* t, struct weft_waiter* w) {
  struct weft_coll_state* s = comm->coll;
  int one = comm->nranks == 1;
  if (s->interleave && plan->nchannels > 1) {
    /* The channels run together: their profiler events span the whole call (done ends them). */
    for (int c = 0; c < plan->nchannels; c++) {
      weft_prof_chan_begin(w->prof, c);
      weft_prof_proxy_open(w->prof, c, &s->send[c], &s->recv[c]);
    }
    return weft_host_run_interleaved(plan->work, plan->nchannels, s->send, s->recv, w, t->sendbuff,
                                     t->recvbuff, s->co_stacks);
  }
  uint64_t recv_steps[WEFT_PLAN_MAX_CHANNELS];
  for (int c = 0; c < plan->nchannels; c++) {
    recv_steps[c] = s->recv[c].step;
    weft_prof_chan_begin(w->prof, c);
    if (!one) weft_prof_proxy_open(w->prof, c, &s->send[c], &s->recv[c]);
    WEFT_CHECK(weft_host_run_work(&plan->work[c], one ? NULL : &s->send[c], one ? NULL : &s->recv[c], w, c,
                                  t->sendbuff, t->recvbuff));
    weft_prof_chan_end(w->prof, c);
  }
  return one ? ncclSuccess : peek_unexpected(s, recv_steps, plan->nchannels, w);
}

static ncclResult_t run_coll_body(struct weft_comm_ctx* comm, struct weft_task* t, struct weft_waiter* w) {
  struct weft_coll_state* s = comm->coll;
  w->opname = weft_coll_name(t->coll);
  w->seq = t->seq;
  w->warned = 0;
  /* Collectives are numbered alike on every rank (sends and receives are not: they pair up). */
  uint64_t call_seq = ++s->coll_seq;
  struct weft_call_fp* fp = &s->recent_fp[call_seq % WEFT_RECENT_CALLS];
  *fp = weft_call_fp_of(t);
  w->step_tag = s->check_calls ? weft_step_tag_make(call_seq, weft_call_fp_hash(fp), fp->count) : 0;
  w->call_seq = call_seq;
  int handled = 0;
  /* The direct paths run it, or (shared boards) record which call the ring runs. */
  WEFT_CHECK(weft_host_direct_run(s->direct, t, w, call_seq, &handled));
  if (handled) {
    if (comm->trace) weft_trace_plan(comm->trace, t, WEFT_TRACE_DIRECT, 0xff, 0);
    return ncclSuccess;
  }
  struct weft_plan plan;
  WEFT_CHECK(weft_plan_coll(&s->pp, &s->plan_memo, t, &plan));
  if (comm->trace)
    weft_trace_plan(comm->trace, t, plan.algo == WEFT_PLAN_TREE ? WEFT_TRACE_TREE : WEFT_TRACE_RING,
                    plan.proto, plan.nchannels);
  weft_prof_coll_path(comm->prof, plan.algo == WEFT_PLAN_TREE ? "TREE" : "RING",
                      plan.proto == WEFT_PROTO_LL ? "LL" : "SIMPLE", plan.nchannels);
  if (plan.algo == WEFT_PLAN_TREE) {
    if (s->tree == NULL)
      WEFT_CHECK(weft_tree_connect(comm, s->pp.nchannels, s->simple_bytes, s->ll_bytes, &s->tree));
    for (int c = 0; c < plan.nchannels; c++) {
      weft_prof_chan_begin(comm->prof, c);
      WEFT_CHECK(weft_host_run_tree(&plan.work[c], &s->tree->ch[c], w, c, t->sendbuff, t->recvbuff));
      weft_prof_chan_end(comm->prof, c);
    }
    return ncclSuccess;
  }
  return run_ring(comm, &plan, t, w);
}

/* Timed for the tuning log: measured beside the model's prediction (collectives/tune_log.c). */
static ncclResult_t run_coll(struct weft_comm_ctx* comm, struct weft_task* t, struct weft_waiter* w) {
  uint64_t start = weft_tune_log_start(comm->coll->pp.tune_log);
  ncclResult_t res = run_coll_body(comm, t, w);
  if (res == ncclSuccess) weft_tune_log_measured(comm->coll->pp.tune_log, start);
  return res;
}

/* The next non-empty send to self (or receive from self) from t on. */
static struct weft_task* next_self(struct weft_task* t, enum weft_coll coll, int rank) {
  while (t && !(t->coll == coll && t->root == rank && t->count > 0)) t = t->next;
  return t;
}

/* A rank's sends to itself pair with its receives from itself in call order, on both backends: an
 * unpaired one is an error, and a pair that moves a buffer onto itself (the root's share of an
 * in-place Gather or Scatter) is dropped, since the copy would change nothing. */
static ncclResult_t match_self(const struct weft_comm_ctx* comm, struct weft_task* tasks) {
  struct weft_task* s = next_self(tasks, WEFT_COLL_SEND, comm->rank);
  struct weft_task* r = next_self(tasks, WEFT_COLL_RECV, comm->rank);
  for (; s && r; s = next_self(s->next, WEFT_COLL_SEND, comm->rank),
                 r = next_self(r->next, WEFT_COLL_RECV, comm->rank)) {
    size_t sb = s->count * weft_dt_size(s->dtype), rb = r->count * weft_dt_size(r->dtype);
    if (sb != rb)
      WEFT_WARN("Rank %d: send to itself of %zu bytes matched with a receive of %zu bytes", comm->rank, sb,
                rb);
    if (r->recvbuff == s->sendbuff && sb == rb) s->count = r->count = 0;
  }
  if (s == NULL && r == NULL) return ncclSuccess;
  WEFT_WARN(
      "Rank %d: a send to itself has no matching receive from itself in the same group (or the reverse) "
      "(seq %llu)",
      comm->rank, (unsigned long long)(s ? s : r)->seq);
  return ncclInvalidUsage;
}

/* The comm's waiter, ready for a launch: what its waits read and report to (which the comm may set
 * up after the waiter), without what the last launch found. Launches of a comm never overlap (one
 * thread drives it, or the group's launch thread for it). Everything else a wait changes is set
 * before it is read (the operation's name and numbers) or may carry over (the liveness scan's
 * place, the sleep count). */
struct weft_waiter* weft_engine_waiter(struct weft_comm_ctx* comm) {
  struct weft_waiter* w = &comm->coll->waiter;
  w->async_result = &comm->async_result;
  w->trace = comm->trace;
  w->prof = comm->prof;
  w->peers = comm->peers;
  w->watch = comm->coll->watch;
  w->cause = &comm->cause;
  w->peer_cause = comm->coll->peer_cause;
  w->recent_fp = comm->coll->recent_fp;
  weft_host_direct_hooks(comm->coll->direct, w);
  w->oversub = 0; /* the direct paths set these three for their own waits */
  w->cpu_slot = NULL;
  w->memory = NULL;
  w->warned = 0;
  w->left_seen = 0;
  w->step_tag = 0;
  w->mismatch = 0;
  w->mismatch_finder = -1;
  w->mismatch_what[0] = 0;
  return w;
}

/* The recorder's view of a launch the engine does not follow step by step (CUDA): state RUNNING
 * when it starts, then LAUNCHED (queued on the stream) or FAILED. */
static void trace_all(struct weft_trace* tr, const struct weft_task* tasks, int state, ncclResult_t res) {
  for (const struct weft_task* t = tasks; tr && t; t = t->next) {
    if (state == WEFT_TRACE_RUNNING)
      weft_trace_start(tr, t);
    else
      weft_trace_launched(tr, t, res);
  }
}

/* The CUDA backend's profiler events cover the launch, as NCCL's host-side Coll and P2p events do
 * (the launch's planning starts each task's, launch_cuda.c): the kernel's own progress is not
 * reported (no KernelCh events). */
static void prof_cuda(struct weft_prof* p, struct weft_task* tasks, int begin) {
  if (p == NULL) return;
  if (begin) {
    weft_prof_group_begin(p);
    weft_prof_launch_begin(p, tasks);
    return;
  }
  for (struct weft_task* t = tasks; t; t = t->next) weft_prof_task_stop(p, t);
  weft_prof_launch_end(p);
  weft_prof_group_end(p);
}

/* A failed launch leaves this rank's view of it in WEFT_TRACE_DIR (when set). */
static void trace_failed(struct weft_comm_ctx* comm, ncclResult_t res) {
  if (res != ncclSuccess && comm->trace) weft_trace_dump(comm, NULL, WEFT_TRACE_ON_FAILURE, 0);
}

ncclResult_t weft_enqueue_launch(struct weft_comm_ctx* comm) {
  /* One-sided operations first, in call order, as NCCL plans them (collectives/rma.c). */
  ncclResult_t rma = weft_rma_launch(comm);
  if (rma != ncclSuccess) {
    weft_enqueue_discard(comm);
    return rma;
  }
  struct weft_task* tasks = comm->tasks.head;
  memset(&comm->tasks, 0, sizeof(comm->tasks));
  if (tasks == NULL) return ncclSuccess;
  /* Queued in a group before a suspend of the same group ran: the buffers are gone. */
  if (__atomic_load_n(&comm->suspend_released, __ATOMIC_ACQUIRE)) {
    WEFT_WARN("comm %p rank %d: operations (seq %llu on) launched on a suspended communicator", (void*)comm,
              comm->rank, (unsigned long long)tasks->seq);
    weft_enqueue_free_tasks(comm, tasks);
    return ncclInvalidUsage;
  }
  ncclResult_t matched = match_self(comm, tasks);
  if (matched == ncclSuccess) matched = weft_plan_agree_calls(comm, tasks);
  if (matched != ncclSuccess) {
    weft_enqueue_free_tasks(comm, tasks);
    return matched;
  }
  return weft_executor_of(comm)->launch(comm, tasks);
}

static ncclResult_t cuda_launch(struct weft_comm_ctx* comm, struct weft_task* tasks) {
  /* The kernel runs after this returns: its progress and end reach the recorder through the
   * progress area beside its abort flag (launch_cuda.c, collectives/progress.h). */
  trace_all(comm->trace, tasks, WEFT_TRACE_RUNNING, ncclSuccess);
  prof_cuda(comm->prof, tasks, 1);
  ncclResult_t res = weft_cuda_launch(comm, tasks);
  prof_cuda(comm->prof, tasks, 0);
  trace_all(comm->trace, tasks, WEFT_TRACE_LAUNCHED, res);
  trace_failed(comm, res);
  weft_enqueue_free_tasks(comm, tasks);
  return res;
}

static ncclResult_t host_launch(struct weft_comm_ctx* comm, struct weft_task* tasks) {
  if (comm->coll == NULL) {
    WEFT_WARN("comm %p rank %d: collectives launched on a communicator that is not initialized", (void*)comm,
              comm->rank);
    weft_enqueue_free_tasks(comm, tasks);
    return ncclInvalidUsage;
  }
  int n = 0, np = 0;
  for (struct weft_task* t = tasks; t; t = t->next) n++;
  struct weft_task* few[16]; /* most launches: no allocation for the list */
  struct weft_task** p2p = n <= 16 ? few : malloc(n * sizeof(*p2p));
  if (p2p == NULL) {
    weft_enqueue_free_tasks(comm, tasks);
    return ncclSystemError;
  }
  struct weft_waiter* w = weft_engine_waiter(comm);
  /* Collectives in call order first (the same order on every rank), then point-to-point. */
  ncclResult_t res = ncclSuccess;
  weft_prof_group_begin(comm->prof);
  for (struct weft_task* t = tasks; t && res == ncclSuccess; t = t->next) {
    if (t->coll == WEFT_COLL_SEND || t->coll == WEFT_COLL_RECV) {
      if (t->count > 0) p2p[np++] = t;
    } else if (t->count > 0) {
      if (comm->trace) weft_trace_start(comm->trace, t);
      weft_prof_coll_queue(comm->prof, t);
      res = run_coll(comm, t, w);
      weft_prof_coll_done(comm->prof);
      if (comm->trace) weft_trace_finish(comm->trace, t, res);
    }
  }
  w->step_tag = 0; /* point-to-point steps are not a collective's */
  if (res == ncclSuccess && np > 0) {
    for (int i = 0; i < np && comm->trace; i++) weft_trace_start(comm->trace, p2p[i]);
    for (int i = 0; i < np && comm->prof; i++) weft_prof_task_start(comm->prof, p2p[i], NULL, NULL, 1);
    res = weft_host_p2p_run(comm, p2p, np, w);
    for (int i = 0; i < np && comm->prof; i++) weft_prof_task_stop(comm->prof, p2p[i]);
    for (int i = 0; i < np && comm->trace; i++) weft_trace_finish(comm->trace, p2p[i], res);
  }
  weft_prof_group_end(comm->prof);
  /* Ranks on this host and others may wait for steps this rank will not send: they fail now too. */
  if (w->mismatch) {
    int finder =
        w->mismatch_finder >= 0 && w->mismatch_finder < comm->nranks ? w->mismatch_finder : comm->rank;
    weft_cause_set_kind(&comm->cause, WEFT_CAUSE_MISMATCH, finder, comm->peers[finder].host_name,
                        w->mismatch_what);
  }
  if (res != ncclSuccess) weft_coll_publish_cause(comm);
  trace_failed(comm, res);
  if (p2p != few) free(p2p);
  weft_enqueue_free_tasks(comm, tasks);
  return res;
}

static ncclResult_t host_predict(const struct weft_comm_ctx* comm, const struct weft_task* t,
                                 float* time_us) {
  if (comm->coll == NULL) {
    WEFT_WARN("comm %p rank %d: a group simulated on a communicator that is not initialized", (void*)comm,
              comm->rank);
    return ncclInvalidUsage;
  }
  if (weft_plan_predict(&comm->coll->pp, t, time_us)) return ncclSuccess;
  /* The planner's defaults choose without predicting; inventing a time would mislead the caller. */
  WEFT_WARN(
      "comm %p rank %d: no tuning model for this communicator (see NCCL_DEBUG_SUBSYS=INIT,GRAPH); "
      "%s seq %llu cannot be simulated",
      (void*)comm, comm->rank, weft_coll_name(t->coll), (unsigned long long)t->seq);
  return ncclInvalidUsage;
}

/* Sends, receives, one-sided and empty operations have no tuning prediction (NCCL's simulation
 * times only what its tuner sizes), so they add nothing. */
ncclResult_t weft_enqueue_simulate(struct weft_comm_ctx* comm, float* time_us) {
  *time_us = 0;
  ncclResult_t res = ncclSuccess;
  for (struct weft_task* t = comm->tasks.head; t && res == ncclSuccess; t = t->next) {
    if (t->coll == WEFT_COLL_SEND || t->coll == WEFT_COLL_RECV || t->count == 0) continue;
    float us = 0;
    res = weft_executor_of(comm)->predict(comm, t, &us);
    if (res != ncclSuccess) break;
    WEFT_INFO(WEFT_TUNING, "%s seq %llu: %zu bytes simulated, %.3f us predicted", weft_coll_name(t->coll),
              (unsigned long long)t->seq, weft_plan_task_bytes(t, comm->nranks), us);
    *time_us += us;
  }
  weft_enqueue_discard(comm);
  return res;
}

void weft_enqueue_discard(struct weft_comm_ctx* comm) {
  if (comm == NULL) return;
  weft_rma_discard(comm);
  weft_enqueue_free_tasks(comm, comm->tasks.head);
  memset(&comm->tasks, 0, sizeof(comm->tasks));
}

const struct weft_executor weft_executor_host = {
    .name = "host",
    .comm_init = host_comm_init,
    .comm_fini = host_comm_fini,
    .launch = host_launch,
    .predict = host_predict,
    .plan_params = host_plan_params,
    .suspend = host_suspend,
    .resume = host_resume,
};

const struct weft_executor weft_executor_cuda = {
    .name = "cuda",
    .comm_init = weft_cuda_comm_init,
    .comm_fini = weft_cuda_comm_fini,
    .launch = cuda_launch,
    .predict = weft_cuda_predict,
    .plan_params = weft_cuda_plan_params,
    .suspend = weft_cuda_comm_suspend,
    .resume = weft_cuda_comm_resume,
    .drain = weft_cuda_comm_drain,
    .check_error = weft_cuda_check_error,
    .flush = weft_cuda_flush,
    .stop = weft_cuda_stop,
    .link_peer = weft_cuda_link_peer,
};

const struct weft_executor* weft_executor_of(const struct weft_comm_ctx* comm) {
  return comm->backend == WEFT_BACKEND_CUDA ? &weft_executor_cuda : &weft_executor_host;
}

/* ---- What core/ calls (coll.h): the comm's executor, and what every executor shares ---- */

ncclResult_t weft_coll_comm_init(struct weft_comm_ctx* comm) {
  return weft_executor_of(comm)->comm_init(comm);
}

void weft_coll_comm_fini(struct weft_comm_ctx* comm) {
  if (comm == NULL) return;
  weft_coll_publish_cause(comm); /* a failed comm destroyed or aborted: its neighbours learn why */
  publish_left(comm);            /* a healthy one: that it left */
  weft_mem_comm_fini(comm);      /* registrations of ncclCommRegister die with the comm */
  weft_window_comm_fini(comm);   /* so do windows and the signal boards */
  weft_rma_comm_fini(comm);
  weft_executor_of(comm)->comm_fini(comm);
}

ncclResult_t weft_coll_comm_suspend(struct weft_comm_ctx* comm) {
  /* CUDA kernels write into peers' connectors: every rank's must have ended (waited for here)
   * before any rank frees memory (after the barrier). Host work ends with each call. */
  const struct weft_executor* e = weft_executor_of(comm);
  if (e->drain) WEFT_CHECK(e->drain(comm));
  WEFT_CHECK(weft_bootstrap_barrier(comm->bootstrap));
  return e->suspend(comm);
}

ncclResult_t weft_coll_comm_resume(struct weft_comm_ctx* comm) {
  return weft_executor_of(comm)->resume(comm);
}

ncclResult_t weft_coll_check_error(struct weft_comm_ctx* comm) {
  const struct weft_executor* e = weft_executor_of(comm);
  return e->check_error ? e->check_error(comm) : ncclSuccess;
}

ncclResult_t weft_coll_flush(struct weft_comm_ctx* comm) {
  const struct weft_executor* e = weft_executor_of(comm);
  return e->flush ? e->flush(comm) : ncclSuccess;
}

void weft_coll_stop(struct weft_comm_ctx* comm) {
  const struct weft_executor* e = weft_executor_of(comm);
  if (e->stop) e->stop(comm);
}

const struct weft_plan_params* weft_engine_plan_params(const struct weft_comm_ctx* comm) {
  return weft_executor_of(comm)->plan_params(comm);
}
