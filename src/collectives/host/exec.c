/* Host executor entry: bind prims to a channel's connectors and run the algorithm body. */
#include "collectives/host/exec.h"

#include "collectives/host/prims.h"
/* The bodies after the prims they call. */
#include "collectives/algo/ring.h"
#include "collectives/task.h"

ncclResult_t weft_host_run_work(const struct weft_dev_work* w, struct weft_conn* send, struct weft_conn* recv,
                                struct weft_waiter* waiter, int channel, const void* in, void* out) {
  return weft_host_run_work_sched(w, send, recv, waiter, channel, in, out, NULL);
}

ncclResult_t weft_host_run_work_sched(const struct weft_dev_work* w, struct weft_conn* send,
                                      struct weft_conn* recv, struct weft_waiter* waiter, int channel,
                                      const void* in, void* out, struct weft_host_sched* sched) {
  int reducing =
      w->coll == WEFT_COLL_ALLREDUCE || w->coll == WEFT_COLL_REDUCE || w->coll == WEFT_COLL_REDUCESCATTER;
  struct weft_prims p;
  ncclResult_t res =
      weft_prims_setup(&p, send, recv, waiter, channel, w->proto, w->dtype, &w->op, reducing, in, out);
  if (res != ncclSuccess) return res;
  p.sched = sched;
  switch (w->coll) {
    case WEFT_COLL_ALLREDUCE:
      weft_ring_allreduce(&p, w);
      break;
    case WEFT_COLL_ALLGATHER:
      weft_ring_allgather(&p, w);
      break;
    case WEFT_COLL_REDUCESCATTER:
      weft_ring_reducescatter(&p, w);
      break;
    case WEFT_COLL_BROADCAST:
      weft_ring_broadcast(&p, w);
      break;
    case WEFT_COLL_REDUCE:
      weft_ring_reduce(&p, w);
      break;
    default:
      p.err = ncclInternalError;
      break;
  }
  res = weft_prims_flush(&p);
  weft_prims_teardown(&p);
  return res;
}
