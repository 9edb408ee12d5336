/* CUDA prims: the interface collectives/algo/ bodies are written against, run by all threads of
 * a block over one send and one receive connector (same layout as the host executor's).
 * Simple: thread 0 waits for tail (data) or head (credit), every thread moves its share of the
 * slot, then thread 0 publishes tail after __threadfence_system (or head). LL: every thread
 * polls and writes its own 16-byte lines, whose flags (weft_ll_flag) carry the synchronization.
 * Every wait polls the communicator's host-mapped abort flag (every WEFT_SPINS_PER_CHECK spins;
 * nothing else the kernel reads is host-mapped) and gives up after the timeout.
 * The flight recorder's progress (collectives/progress.h): thread 0 stores the steps passed once
 * per step; a wait notes what it is for and the time at each of its checks (its slow path) and
 * clears that when it ends, if it got that far. */
#ifndef WEFT_COLLECTIVES_CUDA_PRIMS_DEV_CUH
#define WEFT_COLLECTIVES_CUDA_PRIMS_DEV_CUH

#include "collectives/cuda/kernel.h"
#include "collectives/cuda/ptx_dev.cuh"
#include "collectives/cuda/reduce_dev.cuh"

#define WEFT_SPINS_PER_CHECK 2048

struct weft_prims {
  struct weft_cuda_devcomm* comm;
  struct weft_cuda_conn send, recv; /* local copies; steps advance here, written back after */
  int proto, dtype, esize;
  struct weft_dev_redop op;
  int reducing; /* apply the pre-op to own input and the post-op to final results */
  const char* in;
  char* out;
  int channel, send_peer, recv_peer;
  int coll; /* enum weft_coll, for the error report */
  int failed;
  /* The call's step tag; the first step sent (received) on each connector carries (is checked
   * against) it, which costs one fence per collective and connector, not one per step. */
  uint64_t step_tag;
  int tag_send, tag_recv;          /* that first step is still to come */
  int wait_said;                   /* thread 0: this receive wait published wait_tag */
  struct weft_progress_chan* prog; /* this block's progress slot (host-mapped) */
  uint64_t nsteps;                 /* steps passed in this work (thread 0's count) */
};

/* The progress slot of block b: its own, or the shared one nobody reads. */
__device__ __forceinline__ struct weft_progress_chan* weft_progress_slot(struct weft_cuda_devcomm* comm,
                                                                         int b) {
  return &comm->flags->progress.chan[b < WEFT_PROGRESS_SLOTS ? b : WEFT_PROGRESS_SLOTS];
}

/* Thread 0, once per step. */
__device__ __forceinline__ void weft_progress_step(struct weft_prims* p) {
  weft_st_note(&p->prog->steps, ++p->nsteps);
}

/* A wait that passed a check (start set) is over: it no longer waits (nor says what call it
 * waits in, weft_wait_say). */
__device__ __forceinline__ void weft_progress_wait_end(struct weft_prims* p, uint64_t start) {
  if (start == 0) return;
  weft_st_note(&p->prog->wait, 0);
  if (p->wait_said) {
    weft_st_note(&p->recv.ctrl->wait_tag, 0);
    p->wait_said = 0;
  }
}

/* A block that stops because of a mismatched call says so on its connectors, as the host
 * executor does (weft_cause): on the send side's line as the sender ([0]), on the receive side's
 * as the receiver ([1]). A ring neighbour on this host waiting on one of them reads it at its next
 * check and gives up too, instead of waiting until the timeout, and says so on its own: the whole
 * ring learns it. Written: the rank that found it (finder) and the call given up in; state last. */
__device__ __forceinline__ uint32_t weft_mark_call(const struct weft_prims* p) {
  return p->step_tag ? (uint32_t)(p->step_tag >> 48) + 1 : 0;
}
__device__ __forceinline__ void weft_mark_cause(struct weft_cause* c, int finder, uint32_t call) {
  weft_flag_st_release(&c->kind, WEFT_CAUSE_MISMATCH);
  weft_flag_st_release((volatile uint32_t*)&c->rank, (uint32_t)finder);
  weft_flag_st_release(&c->call, call);
  weft_flag_st_release(&c->state, 2);
}
__device__ __noinline__ void weft_mark_connectors(struct weft_prims* p, int finder) {
  uint32_t call = weft_mark_call(p);
  if (p->send.ctrl != NULL) weft_mark_cause(&p->send.ctrl->cause[0], finder, call);
  if (p->recv.ctrl != NULL) weft_mark_cause(&p->recv.ctrl->cause[1], finder, call);
}

/* This block gives up: the first block to do so says why (racing ones leave its report whole),
 * and every wait of the communicator stops. finder: the rank that found a mismatched call (-1:
 * not a mismatch). */
__device__ __noinline__ void weft_give_up(struct weft_prims* p, uint32_t code, int peer, uint64_t theirs,
                                          int finder) {
  struct weft_cuda_hostcomm* c = p->comm->flags;
  if (weft_flag_claim(&c->err_claim)) {
    c->err_channel = p->channel;
    c->err_peer = peer;
    c->err_coll = p->coll;
    c->err_theirs = theirs;
    c->err_mine = p->step_tag;
    weft_flag_st_release((volatile uint32_t*)&c->err_finder, (uint32_t)finder);
    weft_flag_st_release(&c->error, code);
  }
  if (finder >= 0) weft_mark_connectors(p, finder);
  weft_flag_st_release(&c->abort, 1);
}

/* Whether this block heeds a neighbour's mark: one made in a later call than this block's is not
 * about it (the neighbour finished this call first, so what this call needs of it is there; the
 * rank still in it whom this block waits for may be another), and this block sees it again in
 * that call. */
__device__ __forceinline__ int weft_mark_heeded(const struct weft_prims* p, const struct weft_cause* c) {
  if (weft_flag_ld(&c->state) != 2 || weft_flag_ld(&c->kind) != WEFT_CAUSE_MISMATCH) return 0;
  uint32_t theirs = weft_flag_ld(&c->call), mine = weft_mark_call(p);
  return theirs == 0 || mine == 0 || (int16_t)(uint16_t)(mine - theirs) >= 0;
}

/* The rank that found a mismatched call, when a neighbour wrote it on one of this block's
 * connectors (its data: the sender's line of the receive side; its credit: the receiver's line of
 * the send side); *from: that neighbour. -1: none did. */
__device__ __forceinline__ int weft_neighbour_finder(const struct weft_prims* p, int* from) {
  if (p->recv.ctrl != NULL && weft_mark_heeded(p, &p->recv.ctrl->cause[0])) {
    *from = p->recv_peer;
    return (int)weft_flag_ld((volatile uint32_t*)&p->recv.ctrl->cause[0].rank);
  }
  if (p->send.ctrl != NULL && weft_mark_heeded(p, &p->send.ctrl->cause[1])) {
    *from = p->send_peer;
    return (int)weft_flag_ld((volatile uint32_t*)&p->send.ctrl->cause[1].rank);
  }
  return -1;
}

/* The abort flag is up: when a mismatched call raised it (this rank found it, or a neighbour
 * told it), this block passes that on through its own connectors too. */
__device__ __noinline__ void weft_pass_on_cause(struct weft_prims* p) {
  struct weft_cuda_hostcomm* c = p->comm->flags;
  uint32_t err = weft_flag_ld(&c->error);
  if (err == WEFT_CUDA_ERR_MISMATCH || err == WEFT_CUDA_ERR_TOLD)
    weft_mark_connectors(p, (int)weft_flag_ld((volatile uint32_t*)&c->err_finder));
}

/* Two ranks that each wait to receive from the other (each thinks it is a reduce's root) exchange
 * no step, so no tag shows that their calls differ. So thread 0 of a receive that waits past its
 * first check says which call it waits in (wait_tag, on the line its sender reads for credit,
 * cleared when the wait ends), and every check compares what the rank this block sends to says:
 * the same call's number with another tag is a mismatch. */
__device__ __forceinline__ void weft_wait_say(struct weft_prims* p, int what) {
  if (threadIdx.x != 0 || p->recv.ctrl == NULL) return;
  if (what != WEFT_PROGRESS_DATA && what != WEFT_PROGRESS_LL_DATA) return;
  uint64_t tag = p->step_tag != 0 ? p->step_tag : p->recv.proxied ? WEFT_WAIT_TAG_UNTAGGED : 0;
  if (tag == 0) return;
  weft_st_note(&p->recv.ctrl->wait_tag, tag);
  p->wait_said = 1;
}
__device__ __forceinline__ uint64_t weft_receiver_waits_in(const struct weft_prims* p) {
  if (p->step_tag == 0 || p->send.ctrl == NULL) return 0;
  uint64_t theirs = weft_ld_acquire(&p->send.ctrl->wait_tag);
  return theirs != 0 && theirs != p->step_tag && theirs >> 48 == p->step_tag >> 48 ? theirs : 0; /* same call number */
}

/* Called every WEFT_SPINS_PER_CHECK spins of a wait: 1 when the wait must give up (abort
 * raised, or this wait has lasted longer than the timeout, which then raises abort for all).
 * clk: when the wait's time began (0: not yet) and its previous check. */
__device__ __noinline__ int weft_wait_check(struct weft_prims* p, uint64_t* clk, int peer, int what) {
  if (weft_flag_ld(&p->comm->flags->abort)) {
    weft_pass_on_cause(p);
    return 1;
  }
  int from = -1, finder = weft_neighbour_finder(p, &from);
  if (finder >= 0) {
    weft_give_up(p, WEFT_CUDA_ERR_TOLD, from, 0, finder);
    return 1;
  }
  uint64_t theirs = weft_receiver_waits_in(p);
  if (theirs != 0) {
    weft_give_up(p, WEFT_CUDA_ERR_MISMATCH, p->send_peer, theirs, p->comm->rank);
    return 1;
  }
  uint64_t now = weft_globaltimer();
  /* The recorder's view: set at every check, as LL threads that end their waits clear it. */
  weft_st_note(&p->prog->wait, (uint64_t)(peer + 1) << 8 | (uint64_t)what);
  weft_st_note(&p->prog->beat, now);
  uint64_t timeout_ns = p->comm->timeout_ns;
  /* A waiter that did not run for half the timeout (its process stopped, its GPU time-sliced
   * away) starts its clock again: only time it was there to wait counts, and what it waits for
   * may have come meanwhile (the loop looks again before the next check). */
  if (clk[0] == 0 || (timeout_ns != 0 && now - clk[1] > timeout_ns / 2)) {
    if (clk[0] == 0) weft_wait_say(p, what);
    clk[0] = clk[1] = now;
    weft_st_note(&p->prog->since, now);
    return 0;
  }
  clk[1] = now;
  if (timeout_ns == 0 || now - clk[0] < timeout_ns) return 0;
  weft_give_up(p, WEFT_CUDA_ERR_TIMEOUT, peer, 0, -1);
  return 1;
}

/* A step from the peer carries another call's tag (its collective, count, datatype, op or root
 * differ, or a call is missing): report it, stop every wait of the communicator; returns 0. */
__device__ __noinline__ int weft_tag_mismatch(struct weft_prims* p, uint64_t theirs) {
  weft_give_up(p, WEFT_CUDA_ERR_MISMATCH, p->recv_peer, theirs, p->comm->rank);
  return 0;
}

/* Spin until *ctr >= need (thread 0 only); 0 when given up. */
__device__ __forceinline__ int weft_wait_ge(struct weft_prims* p, const uint64_t* ctr, uint64_t need,
                                            int peer, int what);

/* Thread 0, once the first step of this call from the peer is visible: do our calls agree? */
__device__ __forceinline__ int weft_tag_ok(struct weft_prims* p) {
  const uint64_t* tag = &p->recv.ctrl->step_tag[p->recv.step % WEFT_NSTEPS];
  uint64_t theirs = weft_ld_acquire(tag);
  if (theirs == p->step_tag || theirs == 0) return 1; /* 0: the sender does not check */
  if (p->recv.tag_late) { /* the tag may not be there yet: it is once the proxy's tail is */
    if (!weft_wait_ge(p, &p->recv.ctrl->tail, p->recv.step + 1, p->recv_peer, WEFT_PROGRESS_DATA)) return 0;
    theirs = weft_ld_acquire(tag);
    if (theirs == p->step_tag || theirs == 0) return 1;
  }
  return weft_tag_mismatch(p, theirs);
}

__device__ __forceinline__ int weft_wait_ge(struct weft_prims* p, const uint64_t* ctr, uint64_t need,
                                            int peer, int what) {
  uint64_t clk[2] = {0, 0};
  int spins = 0;
  while (weft_ld_acquire(ctr) < need) {
    if (++spins == WEFT_SPINS_PER_CHECK) {
      spins = 0;
      if (weft_wait_check(p, clk, peer, what)) return 0; /* the wait stays noted, for the dump */
    }
  }
  weft_progress_wait_end(p, clk[0]);
  return 1;
}

enum { WEFT_P_RECV = 1, WEFT_P_SEND = 2, WEFT_P_REDUCE = 4, WEFT_P_COPY = 8 };

/* The calculation and buffers of one step of a prim with these flags. */
__device__ __forceinline__ void weft_prim_plan(const struct weft_prims* p, int flags, const char* r,
                                               const char* in, char* out, char* s, size_t bytes,
                                               struct dev_move* m, struct dev_calc* c, int* typed) {
  m->a = NULL;
  m->b = NULL;
  m->d1 = NULL;
  m->d2 = NULL;
  m->bytes = bytes;
  m->esize = p->esize;
  c->has_a = c->has_b = c->pre = c->post = 0;
  c->scalar = p->op.scalar;
  c->divisor = p->op.divisor;
  int pms = p->reducing && p->op.kind == WEFT_RED_PREMULSUM;
  int postdiv = p->reducing && p->op.kind == WEFT_RED_SUMPOSTDIV && p->op.divisor > 1;
  switch (flags) {
    case WEFT_P_SEND: /* own input, pre-op applied, to the next rank */
      m->b = in;
      m->d1 = s;
      c->pre = pms;
      break;
    case WEFT_P_SEND | WEFT_P_COPY:
      m->b = in;
      m->d1 = s;
      m->d2 = out != in ? out : NULL;
      break;
    case WEFT_P_RECV:
      m->a = r;
      m->d1 = out;
      break;
    case WEFT_P_RECV | WEFT_P_SEND | WEFT_P_COPY:
      m->a = r;
      m->d1 = out;
      m->d2 = s;
      break;
    case WEFT_P_RECV | WEFT_P_SEND | WEFT_P_REDUCE:
      m->a = r;
      m->b = in;
      m->d1 = s;
      c->pre = pms;
      break;
    case WEFT_P_RECV | WEFT_P_REDUCE | WEFT_P_COPY:
      m->a = r;
      m->b = in;
      m->d1 = out;
      c->pre = pms;
      c->post = postdiv;
      break;
    default: /* RECV | SEND | REDUCE | COPY */
      m->a = r;
      m->b = in;
      m->d1 = out;
      m->d2 = s;
      c->pre = pms;
      c->post = postdiv;
      break;
  }
  c->has_a = m->a != NULL;
  c->has_b = m->b != NULL;
  *typed = (c->has_a && c->has_b) || c->pre; /* the post-division runs as a pass of its own */
}

__device__ __forceinline__ int weft_dev_op(int kind) {
  switch (kind) {
    case WEFT_RED_PROD:
      return DOP_PROD;
    case WEFT_RED_MAX:
      return DOP_MAX;
    case WEFT_RED_MIN:
      return DOP_MIN;
    case WEFT_RED_PREMULSUM:
      return DOP_PMS;
    default:
      return DOP_SUM;
  }
}

/* Thread 0 waits for what the step needs; every thread learns the outcome from the barrier
 * itself (__syncthreads_or), not from a shared flag thread 0 could set again in the next step
 * before a slow thread has read it. */
__device__ __forceinline__ int weft_prim_wait(struct weft_prims* p, int flags) {
  int bad = 0;
  if (threadIdx.x == 0) {
    int ok = 1;
    if (flags & WEFT_P_RECV)
      ok = weft_wait_ge(p, &p->recv.ctrl->tail, p->recv.step + 1, p->recv_peer, WEFT_PROGRESS_DATA);
    if (ok && (flags & WEFT_P_RECV) && p->tag_recv) ok = weft_tag_ok(p);
    if (ok && (flags & WEFT_P_SEND)) {
      uint64_t need = p->send.step + 1 > WEFT_NSTEPS ? p->send.step + 1 - WEFT_NSTEPS : 0;
      ok = weft_wait_ge(p, &p->send.ctrl->head, need, p->send_peer, WEFT_PROGRESS_CREDIT);
    }
    bad = !ok;
  }
  if (__syncthreads_or(bad)) p->failed = 1;
  return !p->failed;
}

/* An LL line's flag for a step. step + 1 truncated to 32 bits would reach 0, the flag of fresh
 * (zeroed) lines, and repeat every 2^32 steps, when a line no step has rewritten since would pass
 * for new data. Flags run 1 .. 2^32 - 1 instead: a zeroed line never matches, and a written one
 * only after 8 x (2^32 - 1) steps (flag and slot both recurring), by which time weft_ll_clear has
 * zeroed its slot (once every 2^32 steps). */
__device__ __forceinline__ uint32_t weft_ll_flag(uint64_t step) {
  return (uint32_t)(step % 0xffffffffull) + 1;
}

/* The receiver zeroes LL slot rl of the step it just consumed (whichever protocol that step used)
 * in the first WEFT_NSTEPS steps of every 2^32, so each slot once: the sender rewrites the slot
 * only after the head that follows, and the fence keeps every thread's zeros ahead of it. */
__device__ __noinline__ void weft_ll_clear(struct weft_prims* p, const struct weft_ll_line* rl) {
  struct weft_ll_line* slot = (struct weft_ll_line*)rl;
  size_t nlines = p->recv.ll_slot / sizeof(struct weft_ll_line);
  for (size_t i = threadIdx.x; i < nlines; i += blockDim.x) weft_ll_store(slot + i, 0, 0);
  __syncthreads();
  if (threadIdx.x == 0) __threadfence_system();
}

/* What the step about to be published carries, for the proxy that forwards it (a network
 * connector): payload bytes, WEFT_STEP_LL for LL lines. Read by the proxy after it acquires tail. */
__device__ __forceinline__ void weft_note_step(struct weft_prims* p, uint32_t info) {
  *(volatile uint32_t*)&p->send.ctrl->step_info[p->send.step % WEFT_NSTEPS] = info;
}

/* After a step: the connectors move on, and their first steps of this call are behind us. */
__device__ __forceinline__ void weft_prim_advance(struct weft_prims* p, int flags) {
  if (flags & WEFT_P_SEND) p->send.step++, p->tag_send = 0;
  if (flags & WEFT_P_RECV) p->recv.step++, p->tag_recv = 0;
}

__device__ __forceinline__ void weft_prim_simple(struct weft_prims* p, int flags, size_t in_off,
                                                 size_t out_off, size_t n) {
  size_t bytes = n * p->esize;
  if (!weft_prim_wait(p, flags)) return;
  const char* r =
      (flags & WEFT_P_RECV) ? p->recv.simple + (p->recv.step % WEFT_NSTEPS) * p->recv.simple_slot : NULL;
  char* s =
      (flags & WEFT_P_SEND) ? p->send.simple + (p->send.step % WEFT_NSTEPS) * p->send.simple_slot : NULL;
  struct dev_move m;
  struct dev_calc c;
  int typed;
  weft_prim_plan(p, flags, r, p->in + in_off * p->esize, p->out + out_off * p->esize, s, bytes, &m, &c,
                 &typed);
  if (typed)
    calc_move(p->dtype, weft_dev_op(p->op.kind), m, c);
  else
    copy_loop(m);
  if (c.post) {
    __syncthreads();
    div_loop(p->dtype, m.d1, bytes, p->esize, c.divisor);
    if (m.d2) div_loop(p->dtype, m.d2, bytes, p->esize, c.divisor);
  }
  __syncthreads(); /* every thread's stores and loads of the slots are done */
  if ((flags & WEFT_P_RECV) && (uint32_t)p->recv.step < WEFT_NSTEPS) /* steps of both protocols count */
    weft_ll_clear(p, (const struct weft_ll_line*)((const char*)p->recv.ll +
                                                  (p->recv.step % WEFT_NSTEPS) * p->recv.ll_slot));
  if (threadIdx.x == 0) {
    if (flags & WEFT_P_SEND) {
      if (p->tag_send) weft_st_relaxed(&p->send.ctrl->step_tag[p->send.step % WEFT_NSTEPS], p->step_tag);
      if (p->send.proxied) weft_note_step(p, (uint32_t)bytes);
      __threadfence_system(); /* the data, written by all threads, before the tail that announces it */
      weft_st_relaxed(&p->send.ctrl->tail, p->send.step + 1);
    }
    /* Release: the block's reads of the slot come before the sender may overwrite it. */
    if (flags & WEFT_P_RECV) weft_st_release(&p->recv.ctrl->head, p->recv.step + 1);
    weft_progress_step(p);
  }
  weft_prim_advance(p, flags);
}

/* Wait for line l to carry flag in both halves; returns its 8 data bytes, or sets *bad. */
__device__ __forceinline__ uint64_t weft_ll_wait(struct weft_prims* p, const struct weft_ll_line* l,
                                                 uint32_t flag, int* bad) {
  uint32_t d1, f1, d2, f2;
  uint64_t clk[2] = {0, 0};
  int spins = 0;
  for (;;) {
    weft_ll_load(l, &d1, &f1, &d2, &f2);
    if (f1 == flag && f2 == flag) break;
    if (++spins == WEFT_SPINS_PER_CHECK) {
      spins = 0;
      if (weft_wait_check(p, clk, p->recv_peer, WEFT_PROGRESS_LL_DATA)) {
        *bad = 1;
        return 0;
      }
    }
  }
  weft_progress_wait_end(p, clk[0]);
  return (uint64_t)d1 | ((uint64_t)d2 << 32);
}

__device__ __forceinline__ void weft_prim_ll(struct weft_prims* p, int flags, size_t in_off, size_t out_off,
                                             size_t n) {
  size_t bytes = n * p->esize;
  /* Only credit needs a wait up front; data readiness is in each line's flags. */
  if (!weft_prim_wait(p, flags & WEFT_P_SEND)) return;
  const struct weft_ll_line* rl =
      (flags & WEFT_P_RECV) ? (const struct weft_ll_line*)((const char*)p->recv.ll +
                                                           (p->recv.step % WEFT_NSTEPS) * p->recv.ll_slot)
                            : NULL;
  struct weft_ll_line* sl =
      (flags & WEFT_P_SEND)
          ? (struct weft_ll_line*)((char*)p->send.ll + (p->send.step % WEFT_NSTEPS) * p->send.ll_slot)
          : NULL;
  uint32_t rflag = weft_ll_flag(p->recv.step), sflag = weft_ll_flag(p->send.step);
  const char* in = p->in + in_off * p->esize;
  char* out = p->out + out_off * p->esize;
  struct dev_move m;
  struct dev_calc c;
  int typed;
  /* Placeholder non-NULL addresses: only which roles are present matters here. */
  weft_prim_plan(p, flags, (const char*)rl, in, out, (char*)sl, bytes, &m, &c, &typed);
  int op = weft_dev_op(p->op.kind), es = p->esize, bad = 0;
  size_t nlines = (bytes + 7) / 8;
  if (threadIdx.x == 0 && sl && p->tag_send) { /* the tag before this thread's first line */
    weft_st_relaxed(&p->send.ctrl->step_tag[p->send.step % WEFT_NSTEPS], p->step_tag);
    __threadfence_system();
  }
  for (size_t i = threadIdx.x; i < nlines && !bad; i += blockDim.x) {
    int nb = (int)(bytes - 8 * i < 8 ? bytes - 8 * i : 8);
    uint64_t a = m.a ? weft_ll_wait(p, rl + i, rflag, &bad) : 0;
    if (bad) break;
    if (i == 0 && m.a && p->tag_recv) { /* line 0 came after the sender's tag */
      __threadfence();
      if (!weft_tag_ok(p)) {
        bad = 1;
        break;
      }
    }
    uint64_t b = m.b ? load_part(in + 8 * i, nb, es) : 0;
    uint64_t v = typed ? calc_pack(p->dtype, op, c, a, b) : (m.a ? a : b);
    if (c.post) v = calc_div(p->dtype, v, c.divisor);
    if (sl) weft_ll_store(sl + i, v, sflag);
    char* o = m.d1 == (char*)sl ? m.d2 : m.d1; /* the user-buffer destination, if any */
    if (o) store_part(out + 8 * i, v, nb, es);
  }
  if (__syncthreads_or(bad)) { /* all lines of the slot read (and written), or given up */
    p->failed = 1;
    return;
  }
  if ((flags & WEFT_P_RECV) && (uint32_t)p->recv.step < WEFT_NSTEPS) weft_ll_clear(p, rl);
  if (threadIdx.x == 0) {
    if (flags & WEFT_P_RECV) weft_st_release(&p->recv.ctrl->head, p->recv.step + 1); /* as in Simple */
    if ((flags & WEFT_P_SEND) && p->send.proxied) { /* the proxy reads the lines once it sees tail */
      weft_note_step(p, (uint32_t)bytes | WEFT_STEP_LL);
      __threadfence_system();
    }
    if (flags & WEFT_P_SEND) weft_st_relaxed(&p->send.ctrl->tail, p->send.step + 1); /* doorbell only */
    weft_progress_step(p);
  }
  weft_prim_advance(p, flags);
}

__device__ __noinline__ void weft_prim(struct weft_prims* p, int flags, size_t in_off, size_t out_off,
                                       size_t n) {
  if (p->failed || n == 0) return;
  if (p->proto == WEFT_PROTO_LL)
    weft_prim_ll(p, flags, in_off, out_off, n);
  else
    weft_prim_simple(p, flags, in_off, out_off, n);
}

/* The prims interface of collectives/algo/. */
__device__ __forceinline__ void weft_prims_send(struct weft_prims* p, size_t in_off, size_t n) {
  weft_prim(p, WEFT_P_SEND, in_off, 0, n);
}
__device__ __forceinline__ void weft_prims_copy_send(struct weft_prims* p, size_t in_off, size_t out_off,
                                                     size_t n) {
  weft_prim(p, WEFT_P_SEND | WEFT_P_COPY, in_off, out_off, n);
}
__device__ __forceinline__ void weft_prims_recv(struct weft_prims* p, size_t out_off, size_t n) {
  weft_prim(p, WEFT_P_RECV, 0, out_off, n);
}
__device__ __forceinline__ void weft_prims_recv_copy_send(struct weft_prims* p, size_t out_off, size_t n) {
  weft_prim(p, WEFT_P_RECV | WEFT_P_SEND | WEFT_P_COPY, 0, out_off, n);
}
__device__ __forceinline__ void weft_prims_recv_reduce_send(struct weft_prims* p, size_t in_off, size_t n) {
  weft_prim(p, WEFT_P_RECV | WEFT_P_SEND | WEFT_P_REDUCE, in_off, 0, n);
}
__device__ __forceinline__ void weft_prims_recv_reduce_copy(struct weft_prims* p, size_t in_off,
                                                            size_t out_off, size_t n) {
  weft_prim(p, WEFT_P_RECV | WEFT_P_REDUCE | WEFT_P_COPY, in_off, out_off, n);
}
__device__ __forceinline__ void weft_prims_recv_reduce_copy_send(struct weft_prims* p, size_t in_off,
                                                                 size_t out_off, size_t n) {
  weft_prim(p, WEFT_P_RECV | WEFT_P_SEND | WEFT_P_REDUCE | WEFT_P_COPY, in_off, out_off, n);
}
/* No connector: own input to output, with pre- and post-op when reducing. */
__device__ __noinline__ void weft_prims_local(struct weft_prims* p, size_t in_off, size_t out_off, size_t n) {
  if (p->failed || n == 0) return;
  struct dev_move m = {
      p->in + in_off * p->esize, NULL, p->out + out_off * p->esize, NULL, n * p->esize, p->esize};
  struct dev_calc c = {0, 1, 0, 0, p->op.scalar, p->op.divisor};
  m.b = m.a;
  m.a = NULL;
  c.pre = p->reducing && p->op.kind == WEFT_RED_PREMULSUM;
  c.post = p->reducing && p->op.kind == WEFT_RED_SUMPOSTDIV && p->op.divisor > 1;
  if (c.pre)
    calc_move(p->dtype, weft_dev_op(p->op.kind), m, c);
  else if (m.d1 != m.b)
    copy_loop(m);
  if (c.post) {
    __syncthreads();
    div_loop(p->dtype, m.d1, m.bytes, p->esize, c.divisor);
  }
  __syncthreads();
}
__device__ __forceinline__ int weft_prims_failed(const struct weft_prims* p) { return p->failed; }

#endif
