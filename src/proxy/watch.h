/* Watching what the proxy thread does for one operation on one network connector, for the
 * profiler's ProxyOp and ProxyStep events. The executor opens a watch at the connector's step
 * count before the operation and closes it at the count after; the proxy thread, which alone
 * knows when each step goes out or comes in, reports the operation's start, each step's start and
 * stop, and the operation's stop once every step before the close has stopped. Steps outside
 * every watch are not reported. */
#ifndef WEFT_PROXY_WATCH_H
#define WEFT_PROXY_WATCH_H

#include <stdint.h>

#define WEFT_PROXY_WATCHES 4 /* operations a connector can have watched at once */

enum weft_proxy_watch_what {
  WEFT_PROXY_OP_START,
  WEFT_PROXY_OP_STOP,
  WEFT_PROXY_STEP_START,
  WEFT_PROXY_STEP_STOP
};

struct weft_proxy_watch {
  /* Called on the proxy thread, or on the thread removing the connector; step counts from 0 at
   * the watch's first step. */
  void (*event)(struct weft_proxy_watch* w, enum weft_proxy_watch_what what, uint64_t step);
  uint64_t first; /* the connector's step count at open */
  uint64_t last;  /* its count at close; UINT64_MAX while open (atomic) */
  int busy;       /* from open until the proxy is done with it; the owner reuses it at 0 (atomic) */
  int started;    /* proxy side: the operation's start was reported */
};

/* Per connector, in the proxy's connection. */
struct weft_proxy_watchq {
  struct weft_proxy_watch* ring[WEFT_PROXY_WATCHES];
  uint64_t w, r;                       /* pushed by the executor (atomic), consumed by the proxy */
  uint64_t started_upto, stopped_upto; /* proxy side: steps reported so far */
};

/* Executor: watch w from step first on (w->event set). 0 when the queue is full: not watched. */
int weft_proxy_watch_open(struct weft_proxy_watchq* q, struct weft_proxy_watch* w, uint64_t first);
void weft_proxy_watch_close(struct weft_proxy_watch* w, uint64_t last);
/* Proxy: report what moved: steps below started have started, those below stopped have stopped. */
void weft_proxy_watch_sweep(struct weft_proxy_watchq* q, uint64_t started, uint64_t stopped);
/* The connector goes away: every watch still queued ends now, its started steps stopped. */
void weft_proxy_watch_flush(struct weft_proxy_watchq* q);

#endif
