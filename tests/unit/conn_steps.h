/* Shared by the connector tests (test_proxy, test_transport_conformance): this test playing both
 * executors on one connector, with steps whose size and payload depend on the step number, so a
 * step that arrives in the wrong slot, late, twice or torn is seen. */
#ifndef WEFT_TESTS_UNIT_CONN_STEPS_H
#define WEFT_TESTS_UNIT_CONN_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/host/wait.h"
#include "transport/connector.h"

static uint64_t ld(uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

/* Payload word i of step s (bytes of it: a step's size varies with s). */
static uint32_t word(uint64_t s, size_t i) { return (uint32_t)(s * 2654435761u) ^ (uint32_t)(i * 40503u); }
static size_t step_bytes(uint64_t s, size_t slot) {
  return s % 3 == 0 ? slot : (s * 4093) % slot / 4 * 4 + 4;
}

/* Sender executor: produce step s into its slot if a credit is free (Simple or LL). */
static int try_send(struct weft_conn* c, int ll) {
  if (ld(&c->ctrl->head) + WEFT_NSTEPS <= c->step) return 0;
  int slot = (int)(c->step % WEFT_NSTEPS);
  if (ll) {
    size_t bytes = step_bytes(c->step, c->ll_slot / 2);
    struct weft_ll_line* lines = (struct weft_ll_line*)((char*)c->ll + (size_t)slot * c->ll_slot);
    uint64_t flag = (c->step + 1) << 32;
    for (size_t i = 0; i < bytes / 4; i += 2) {
      lines[i / 2].w[0] = flag | word(c->step, i);
      lines[i / 2].w[1] = flag | (i + 1 < bytes / 4 ? word(c->step, i + 1) : 0);
    }
    weft_conn_note_step(c, bytes, 1);
  } else {
    size_t bytes = step_bytes(c->step, c->simple_slot);
    uint32_t* p = (uint32_t*)(c->simple + (size_t)slot * c->simple_slot);
    for (size_t i = 0; i < bytes / 4; i++) p[i] = word(c->step, i);
    weft_conn_note_step(c, bytes == c->simple_slot ? 0 : bytes, 0);
  }
  c->step++;
  weft_host_post(&c->ctrl->tail, &c->ctrl->tail_waiting, c->step);
  return 1;
}

/* Receiver executor: consume the next step if published; counts bad words into *bad. */
static int try_recv(struct weft_conn* c, int ll, int* bad) {
  uint64_t tail = ld(&c->ctrl->tail), head = ld(&c->ctrl->head);
  if (tail > head + WEFT_NSTEPS) (*bad)++; /* the proxy published more than the FIFO holds */
  if (tail <= c->step) return 0;
  int slot = (int)(c->step % WEFT_NSTEPS);
  if (ll) {
    size_t bytes = step_bytes(c->step, c->ll_slot / 2);
    const struct weft_ll_line* lines = (const struct weft_ll_line*)((char*)c->ll + (size_t)slot * c->ll_slot);
    for (size_t i = 0; i < bytes / 4; i += 2) {
      uint64_t w0 = lines[i / 2].w[0];
      if ((w0 >> 32) != c->step + 1 || (uint32_t)w0 != word(c->step, i)) (*bad)++;
    }
  } else {
    size_t bytes = step_bytes(c->step, c->simple_slot);
    const uint32_t* p = (const uint32_t*)(c->simple + (size_t)slot * c->simple_slot);
    for (size_t i = 0; i < bytes / 4; i++)
      if (p[i] != word(c->step, i)) (*bad)++;
  }
  c->step++;
  weft_host_post(&c->ctrl->head, &c->ctrl->head_waiting, c->step);
  return 1;
}

static int tail_ready(void* a) {
  return ld(&((struct weft_conn*)a)->ctrl->tail) > ((struct weft_conn*)a)->step;
}
static int head_ready(void* a) {
  struct weft_conn* c = a;
  return ld(&c->ctrl->head) + WEFT_NSTEPS > c->step;
}

#endif
