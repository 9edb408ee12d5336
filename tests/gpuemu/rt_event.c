/* Emulated CUDA runtime: events. A record bumps the event's `recorded` generation and queues an
 * op that sets `completed` to it when it runs; waits and synchronizations wait for the generation
 * that was the latest when they were called. */
#include <stdlib.h>

#include "rt.h"

struct rt_event* rt_event_check_locked(cudaEvent_t e) {
  struct rt_event* ev = (struct rt_event*)e;
  if (!ev || ev->magic != RT_EVENT_MAGIC || ev->gen != rt_fork_gen || ev->destroyed) return NULL;
  return ev;
}

void rt_event_unref_locked(struct rt_event* ev) {
  if (--ev->refs > 0) return;
  ev->magic = 0;
  free(ev);
}

void rt_event_complete_locked(struct rt_event* ev, uint64_t gen, uint64_t now) {
  if (gen > ev->completed) {
    ev->completed = gen;
    ev->time_ns = now;
  }
  pthread_cond_broadcast(&rt_progress);
}

void rt_event_complete(struct rt_event* ev, uint64_t gen) {
  uint64_t now = rt_now_ns();
  pthread_mutex_lock(&rt_lock);
  rt_event_complete_locked(ev, gen, now);
  pthread_mutex_unlock(&rt_lock);
}

void rt_event_wait(struct rt_event* ev, uint64_t gen) {
  pthread_mutex_lock(&rt_lock);
  while (ev->completed < gen) pthread_cond_wait(&rt_progress, &rt_lock);
  pthread_mutex_unlock(&rt_lock);
}

RT_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  unsigned ok = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (!e || (flags & ~ok)) return rt_error(cudaErrorInvalidValue);
  /* CUDA requires DisableTiming with Interprocess; the emulator has no event IPC at all. */
  if (flags & cudaEventInterprocess)
    return rt_error(flags & cudaEventDisableTiming ? cudaErrorNotSupported : cudaErrorInvalidValue);
  struct rt_event* ev = calloc(1, sizeof(*ev));
  if (!ev) return rt_error(cudaErrorMemoryAllocation);
  ev->magic = RT_EVENT_MAGIC;
  ev->gen = rt_fork_gen;
  ev->flags = flags;
  ev->refs = 1;
  *e = (cudaEvent_t)ev;
  return cudaSuccess;
}

RT_API cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

/* Destroying an event with records pending is legal: the ops keep it alive until they ran. */
RT_API cudaError_t cudaEventDestroy(cudaEvent_t e) {
  pthread_mutex_lock(&rt_lock);
  struct rt_event* ev = rt_event_check_locked(e);
  if (ev) {
    ev->destroyed = 1;
    rt_event_unref_locked(ev);
  }
  pthread_mutex_unlock(&rt_lock);
  return ev ? cudaSuccess : rt_error(cudaErrorInvalidResourceHandle);
}

struct rt_stream* rt_stream_event_locked(cudaStream_t h, cudaEvent_t e, struct rt_event** ev,
                                         cudaError_t* err) {
  struct rt_stream* s = rt_stream_resolve_locked(h, err);
  *ev = s ? rt_event_check_locked(e) : NULL;
  if (s && !*ev) *err = cudaErrorInvalidResourceHandle;
  return s;
}

RT_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t h, unsigned int flags) {
  if (flags & ~(unsigned)cudaEventRecordExternal) return rt_error(cudaErrorInvalidValue);
  struct rt_op* op = rt_op_new(RT_OP_RECORD);
  if (!op) return rt_error(cudaErrorMemoryAllocation);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_event* ev;
  struct rt_stream* s = rt_stream_event_locked(h, e, &ev, &err);
  if (ev && s->cap && (flags & cudaEventRecordExternal)) {
    err = rt_capture_event_node_locked(s, ev, RT_OP_RECORD);
    free(op);
  } else if (ev && s->cap) {
    err = rt_capture_record_locked(s, ev);
    free(op);
  } else if (ev) {
    ev->cap_id = 0;
    op->u.event.ev = ev, op->u.event.gen = ++ev->recorded;
    ev->refs++;
    err = rt_stream_submit_locked(s, op);
  } else {
    free(op);
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h) {
  return cudaEventRecordWithFlags(e, h, 0);
}

/* An event last recorded inside an active capture cannot be queried or waited for on the host. */
static int captured_locked(const struct rt_event* ev) {
  return ev->cap_id && rt_capture_active_locked(ev->cap_id);
}

RT_API cudaError_t cudaEventQuery(cudaEvent_t e) {
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_event* ev = rt_event_check_locked(e);
  if (!ev)
    err = cudaErrorInvalidResourceHandle;
  else if (captured_locked(ev))
    err = cudaErrorCapturedEvent;
  else if (ev->completed < ev->recorded)
    err = cudaErrorNotReady;
  pthread_mutex_unlock(&rt_lock);
  return err == cudaErrorNotReady ? err : rt_error(err);
}

RT_API cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_event* ev = rt_event_check_locked(e);
  if (!ev) {
    err = cudaErrorInvalidResourceHandle;
  } else if (captured_locked(ev)) {
    err = cudaErrorCapturedEvent;
  } else {
    uint64_t gen = ev->recorded;
    ev->refs++; /* it may be destroyed by another thread while we wait */
    while (ev->completed < gen) pthread_cond_wait(&rt_progress, &rt_lock);
    rt_event_unref_locked(ev);
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return rt_error(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_event* a = rt_event_check_locked(start);
  struct rt_event* b = rt_event_check_locked(end);
  if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming))
    err = cudaErrorInvalidResourceHandle;
  else if (!a->recorded || !b->recorded) /* CUDA: an event never recorded has no time */
    err = cudaErrorInvalidResourceHandle;
  else if (a->completed < a->recorded || b->completed < b->recorded)
    err = cudaErrorNotReady;
  else
    *ms = (float)((double)((int64_t)(b->time_ns - a->time_ns)) / 1e6);
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}
