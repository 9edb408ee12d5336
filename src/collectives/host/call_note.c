/* Call notes between stalled ranks on different hosts (call_note.h). */
#include "collectives/host/call_note.h"

#include <stdio.h>
#include <stdlib.h>

#include "bootstrap/bootstrap.h"
#include "collectives/context.h"
#include "collectives/engine.h"
#include "collectives/host/wait.h"
#include "util/check.h"

/* What a note says: the call this rank waits in. */
struct call_note {
  uint64_t seq;
  struct weft_call_fp fp;
  int32_t wants_answer;
  int32_t pad;
};

/* A note the peer's host cannot take within this is not sent (the wait goes on regardless). */
#define NOTE_SEND_MS 200

static int on_other_host(const struct weft_waiter* w, int peer) {
  return w->peers != NULL && peer >= 0 && peer < w->nranks && peer != w->rank &&
         w->peers[peer].host_hash != w->peers[w->rank].host_hash;
}

/* The call this rank waits in (the waiter's recent calls hold it by number). */
static const struct weft_call_fp* my_call(const struct weft_waiter* w) {
  return &w->recent_fp[w->call_seq % WEFT_RECENT_CALLS];
}

static ncclResult_t leave_note(struct weft_comm_ctx* comm, const struct weft_waiter* w, int peer,
                               int wants_answer) {
  struct call_note n = {.seq = w->call_seq, .fp = *my_call(w), .wants_answer = wants_answer};
  return weft_bootstrap_note(comm->bootstrap, peer, &n, sizeof(n), NOTE_SEND_MS);
}

/* A note from rank `from`: answer it when asked, and compare its call with this one. */
static ncclResult_t heard(struct weft_comm_ctx* comm, struct weft_waiter* w, int from,
                          const struct call_note* n) {
  comm->coll->note_asked[from] = 0; /* any note from it answers ours */
  if (n->wants_answer) (void)leave_note(comm, w, from, 0);
  if (n->seq != w->call_seq || weft_call_fp_equal(&n->fp, my_call(w))) return ncclSuccess;
  return weft_host_call_differs(w, from, &n->fp, my_call(w), w->call_seq, "a note it left while both waited");
}

/* The waiter's ask hook, run with a stalled wait's liveness checks (every half second after the
 * first second). At most one question per peer is unanswered: a peer that never stalls (so never
 * reads its notes) holds one. */
static ncclResult_t ask(void* arg, struct weft_waiter* w, int peer) {
  struct weft_comm_ctx* comm = arg;
  struct weft_coll_state* s = comm->coll;
  if (w->step_tag == 0 || w->recent_fp == NULL) return ncclSuccess; /* not a checked collective */
  if (s->note_asked == NULL && (s->note_asked = calloc((size_t)comm->nranks, 1)) == NULL) return ncclSuccess;
  struct call_note n;
  int from;
  while (weft_bootstrap_take_note(comm->bootstrap, &n, sizeof(n), &from) == 1)
    if (from >= 0 && from < comm->nranks) WEFT_CHECK(heard(comm, w, from, &n));
  if (on_other_host(w, peer) && !s->note_asked[peer] && leave_note(comm, w, peer, 1) == ncclSuccess)
    s->note_asked[peer] = 1;
  return ncclSuccess;
}

void weft_call_note_hooks(struct weft_comm_ctx* comm, struct weft_waiter* w) {
  if (comm->nnodes < 2 || comm->bootstrap == NULL) return;
  w->ask = ask;
  w->ask_arg = comm;
}
