/* Calls told across hosts while ranks wait. Two ranks on different hosts that both wait to
 * receive (each thinks it is a reduce's root) exchange no step, so no step tag shows that their
 * calls differ, and there is no board between hosts. So a wait stalled past a second leaves the
 * rank it waits for, when that one is on another host, a bootstrap note with its call (number and
 * fingerprint) and asks for one back; every stalled wait reads the notes that came and answers
 * them. A note of the same call with another fingerprint is a mismatch, named as on one host. */
#ifndef WEFT_COLLECTIVES_HOST_CALL_NOTE_H
#define WEFT_COLLECTIVES_HOST_CALL_NOTE_H

struct weft_comm_ctx;
struct weft_waiter;

/* Set w's ask hook when comm has ranks on several hosts. */
void weft_call_note_hooks(struct weft_comm_ctx* comm, struct weft_waiter* w);

#endif
