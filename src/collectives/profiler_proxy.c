/* ProxyOp and ProxyStep events of host rings over the network: the executor opens a watch on each
 * network connector of a channel (proxy/watch.h) and the proxy thread reports through event(). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/profiler.h"
#include "proxy/proxy.h"
#include "transport/connector.h"
#include "transport/net.h"

#define WANT_OP (ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin)
#define WANT_STEP (ncclProfileProxyStep | ncclProfileNetPlugin)

_Static_assert(WEFT_PROF_STEPS == WEFT_NSTEPS, "one ProxyStep handle per FIFO slot");

/* On the proxy thread: a send step starts when it is handed to the network and stops when the
 * network completes it; a receive step is reported (started and stopped) once it has arrived and
 * the executor has taken it, the first moment it is known to belong to this operation. */
static void pop_event(struct weft_proxy_watch* w, enum weft_proxy_watch_what what, uint64_t step) {
  struct weft_prof_pop* o = (struct weft_prof_pop*)w;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.rank = o->p->rank;
  void** slot = &o->steps[step % WEFT_PROF_STEPS];
  switch (what) {
    case WEFT_PROXY_OP_START:
      d.type = ncclProfileProxyOp;
      d.parentObj = o->parent;
      d.proxyOp.pid = getpid();
      d.proxyOp.channelId = (uint8_t)o->channel;
      d.proxyOp.peer = o->conn->peer;
      d.proxyOp.nSteps = 0; /* not known before the operation ends (see README) */
      d.proxyOp.chunkSize = (int)o->conn->simple_slot;
      d.proxyOp.isSend = o->is_send;
      weft_prof_plugin_start(o->p->ctx, &o->op, &d, &o->p->id);
      break;
    case WEFT_PROXY_STEP_START:
      if (!o->steps_wanted || o->op == NULL) break;
      d.type = ncclProfileProxyStep;
      d.parentObj = o->op;
      d.proxyStep.step = (int)step;
      weft_prof_plugin_start(o->p->ctx, slot, &d, &o->p->id);
      break;
    case WEFT_PROXY_STEP_STOP:
      weft_prof_plugin_stop(*slot);
      *slot = NULL;
      break;
    case WEFT_PROXY_OP_STOP:
      weft_prof_plugin_stop(o->op);
      o->op = NULL;
      break;
  }
}

/* A record of this channel and direction the proxy is done with. */
static struct weft_prof_pop* free_pop(struct weft_prof* p, int channel, int dir) {
  for (int i = 0; i < WEFT_PROXY_WATCHES; i++) {
    struct weft_prof_pop* o = &p->pops[channel][dir][i];
    if (!__atomic_load_n(&o->w.busy, __ATOMIC_ACQUIRE)) return o;
  }
  return NULL;
}

static void open_one(struct weft_prof* p, int channel, int dir, const struct weft_conn* conn) {
  struct weft_proxy_conn* pc = conn ? weft_net_proxy_conn(conn->mem) : NULL;
  struct weft_prof_pop* o = pc ? free_pop(p, channel, dir) : NULL;
  if (o == NULL) return;
  o->p = p;
  o->conn = conn;
  o->parent = p->coll;
  o->channel = channel;
  o->is_send = dir == 0;
  o->steps_wanted = (p->active & WANT_STEP) != 0;
  o->op = NULL;
  memset(o->steps, 0, sizeof(o->steps));
  o->w.event = pop_event;
  if (weft_proxy_watch_open(weft_proxy_conn_watchq(pc), &o->w, conn->step)) p->open_pops[channel][dir] = o;
}

void weft_prof_proxy_open_(struct weft_prof* p, int channel, const struct weft_conn* send,
                           const struct weft_conn* recv) {
  if (!(p->active & WANT_OP) || p->coll == NULL || channel < 0 || channel >= WEFT_PROF_CHANNELS) return;
  open_one(p, channel, 0, send);
  open_one(p, channel, 1, recv);
}

void weft_prof_proxy_close(struct weft_prof* p) {
  for (int c = 0; c < WEFT_PROF_CHANNELS; c++)
    for (int dir = 0; dir < 2; dir++) {
      struct weft_prof_pop* o = p->open_pops[c][dir];
      if (o == NULL) continue;
      weft_proxy_watch_close(&o->w, o->conn->step);
      p->open_pops[c][dir] = NULL;
    }
}
