/* Connector step tags: every step a host sender publishes names the collective it belongs to
 * (step_tag in the control page), and the receiver compares it with its own call before it
 * reads the payload. Ranks whose calls differ thus find out from the steps they exchange
 * anyway, with no extra round; the tag costs one store and one load on lines already moving. */
#ifndef WEFT_COLLECTIVES_HOST_STEP_TAG_H
#define WEFT_COLLECTIVES_HOST_STEP_TAG_H

#include <stdint.h>

#include "collectives/fingerprint.h"
#include "collectives/host/wait.h"
#include "transport/connector.h"

/* Sender, before it publishes the step (Simple: tail; LL: the first flagged word). */
static inline void weft_step_tag_put(struct weft_conn* c, uint64_t tag) {
  __atomic_store_n(&c->ctrl->step_tag[c->step % WEFT_NSTEPS], tag, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE); /* the tag is visible to whoever sees the step */
}

/* Receiver, once the step is visible (after the acquire that saw it), before using its payload. */
static inline ncclResult_t weft_step_tag_check(struct weft_waiter* w, const struct weft_conn* c) {
  uint64_t theirs = __atomic_load_n(&c->ctrl->step_tag[c->step % WEFT_NSTEPS], __ATOMIC_RELAXED);
  if (__builtin_expect(theirs == w->step_tag || theirs == 0 || w->step_tag == 0, 1)) return ncclSuccess;
  return weft_host_bad_step(w, c->peer, theirs);
}

#endif
