/* Emulated CUDA runtime: streams. Each stream is a FIFO of operations run in order by one worker
 * thread of its own; the legacy default stream's implicit ordering with blocking streams is made
 * of wait operations queued at submit time. */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_DEVICES 64

pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t rt_progress = PTHREAD_COND_INITIALIZER;
unsigned rt_fork_gen;

static struct rt_stream* all_streams;
static struct rt_stream* legacy[MAX_DEVICES];
static unsigned long long next_stream_id = 1;
static pthread_key_t per_thread_key;

/* This host thread's cudaStreamPerThread of each device. */
struct per_thread {
  unsigned gen;
  struct rt_stream* s[MAX_DEVICES];
};

struct rt_op* rt_op_new(enum rt_op_kind kind) {
  struct rt_op* op = calloc(1, sizeof(*op));
  if (op) op->kind = kind;
  return op;
}

void rt_op_discard_locked(struct rt_op* op) {
  if (!op) return;
  switch (op->kind) {
    case RT_OP_COPY:
      free(op->u.copy.staged);
      break;
    case RT_OP_KERNEL:
      if (op->u.kernel.packed && !op->u.kernel.borrowed) {
        if (op->u.kernel.k->destroy) op->u.kernel.k->destroy(op->u.kernel.packed);
        free(op->u.kernel.packed);
      }
      break;
    case RT_OP_RECORD:
    case RT_OP_WAIT_EVENT:
      rt_event_unref_locked(op->u.event.ev);
      break;
    case RT_OP_WAIT_STREAM:
      rt_stream_unref_locked(op->u.wait.s);
      break;
    case RT_OP_GRAPH:
      rt_graph_exec_unref_locked(op->u.graph.exec);
      free(op->u.graph.event_gens);
      break;
    default:
      break;
  }
  free(op);
}

static void run_kernel(struct rt_stream* s, struct rt_op* op) {
  int err =
      weft_emu_grid_run(op->u.kernel.k, op->u.kernel.packed, op->u.kernel.grid, op->u.kernel.block, s->dev);
  if (err) {
    pthread_mutex_lock(&rt_lock);
    if (s->async_err == cudaSuccess) s->async_err = (cudaError_t)err;
    pthread_mutex_unlock(&rt_lock);
  }
}

void rt_op_run(struct rt_stream* s, struct rt_op* op) {
  switch (op->kind) {
    case RT_OP_COPY:
      memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.n);
      break;
    case RT_OP_SET:
      memset(op->u.set.dst, op->u.set.value, op->u.set.n);
      break;
    case RT_OP_KERNEL:
      run_kernel(s, op);
      break;
    case RT_OP_HOST:
      op->u.host.fn(op->u.host.arg);
      break;
    case RT_OP_CALLBACK:
      op->u.callback.fn(op->u.callback.handle, cudaSuccess, op->u.callback.arg);
      break;
    case RT_OP_RECORD:
      rt_event_complete(op->u.event.ev, op->u.event.gen);
      break;
    case RT_OP_WAIT_EVENT:
      rt_event_wait(op->u.event.ev, op->u.event.gen);
      break;
    case RT_OP_WAIT_STREAM:
      pthread_mutex_lock(&rt_lock);
      while (op->u.wait.s->done < op->u.wait.seq) pthread_cond_wait(&rt_progress, &rt_lock);
      pthread_mutex_unlock(&rt_lock);
      break;
    case RT_OP_GRAPH:
      rt_graph_run(s, op);
      break;
  }
}

static void* worker_main(void* arg) {
  struct rt_stream* s = arg;
  pthread_mutex_lock(&rt_lock);
  for (;;) {
    while (!s->head && !s->destroyed) pthread_cond_wait(&s->work, &rt_lock);
    struct rt_op* op = s->head;
    if (!op) break; /* destroyed and drained */
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&rt_lock);
    /* A record completes its event in the same locked step that counts it done, so that a
     * stream whose last event has completed queries as idle. */
    if (op->kind != RT_OP_RECORD) rt_op_run(s, op);
    uint64_t now = rt_now_ns();
    pthread_mutex_lock(&rt_lock);
    if (op->kind == RT_OP_RECORD) rt_event_complete_locked(op->u.event.ev, op->u.event.gen, now);
    rt_op_discard_locked(op);
    s->done++;
    pthread_cond_broadcast(&rt_progress);
  }
  s->has_worker = 0;
  rt_stream_unref_locked(s);
  pthread_mutex_unlock(&rt_lock);
  return NULL;
}

static struct rt_stream* stream_new_locked(enum rt_stream_role role, int dev, unsigned flags, int prio) {
  struct rt_stream* s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->magic = RT_STREAM_MAGIC;
  s->gen = rt_fork_gen;
  s->role = role, s->dev = dev, s->flags = flags, s->priority = prio;
  s->id = next_stream_id++;
  s->refs = 1; /* the handle */
  pthread_cond_init(&s->work, NULL);
  s->next_all = all_streams;
  if (all_streams) all_streams->prev_all = s;
  all_streams = s;
  return s;
}

void rt_stream_unref_locked(struct rt_stream* s) {
  if (--s->refs > 0) return;
  if (s->prev_all)
    s->prev_all->next_all = s->next_all;
  else
    all_streams = s->next_all;
  if (s->next_all) s->next_all->prev_all = s->prev_all;
  s->magic = 0;
  pthread_cond_destroy(&s->work);
  free(s);
}

static void per_thread_exit(void* p) {
  struct per_thread* pt = p;
  pthread_mutex_lock(&rt_lock);
  for (int d = 0; d < MAX_DEVICES && pt->gen == rt_fork_gen; d++) {
    if (!pt->s[d]) continue;
    pt->s[d]->destroyed = 1;
    pthread_cond_signal(&pt->s[d]->work);
    rt_stream_unref_locked(pt->s[d]);
  }
  pthread_mutex_unlock(&rt_lock);
  free(pt);
}

static struct rt_stream* per_thread_locked(int dev) {
  struct per_thread* pt = pthread_getspecific(per_thread_key);
  if (pt && pt->gen != rt_fork_gen) memset(pt, 0, sizeof(*pt)), pt->gen = rt_fork_gen;
  if (!pt) {
    pt = calloc(1, sizeof(*pt));
    if (!pt) return NULL;
    pt->gen = rt_fork_gen;
    pthread_setspecific(per_thread_key, pt);
  }
  if (!pt->s[dev]) pt->s[dev] = stream_new_locked(RT_STREAM_PER_THREAD, dev, 0, 0);
  return pt->s[dev];
}

struct rt_stream* rt_stream_resolve_locked(cudaStream_t h, cudaError_t* err) {
  int dev = rt_device_current();
  struct rt_stream* s;
  if (h == 0 || h == cudaStreamLegacy) {
    if (!legacy[dev]) legacy[dev] = stream_new_locked(RT_STREAM_LEGACY, dev, 0, 0);
    s = legacy[dev];
  } else if (h == cudaStreamPerThread) {
    s = per_thread_locked(dev);
  } else {
    s = (struct rt_stream*)h;
    if (s->magic != RT_STREAM_MAGIC || s->gen != rt_fork_gen || s->destroyed) {
      *err = cudaErrorInvalidResourceHandle;
      return NULL;
    }
  }
  if (!s) *err = cudaErrorMemoryAllocation;
  return s;
}

static int blocking(const struct rt_stream* s) {
  return s->role != RT_STREAM_LEGACY && !(s->flags & cudaStreamNonBlocking);
}

static cudaError_t enqueue_locked(struct rt_stream* s, struct rt_op* op) {
  if (!s->has_worker) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (rc) {
      rt_op_discard_locked(op);
      return cudaErrorMemoryAllocation;
    }
    s->has_worker = 1;
    s->refs++; /* the worker's */
  }
  op->next = NULL;
  if (s->tail)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  s->issued++;
  pthread_cond_signal(&s->work);
  return cudaSuccess;
}

static void wait_for_locked(struct rt_stream* s, struct rt_stream* on) {
  struct rt_op* op = rt_op_new(RT_OP_WAIT_STREAM);
  if (!op) return;
  op->u.wait.s = on, op->u.wait.seq = on->issued;
  on->refs++;
  enqueue_locked(s, op);
}

/* The legacy stream waits for what every blocking stream of its device has queued; a blocking
 * stream waits for what the legacy stream has queued. Idle streams need no wait. */
static void implicit_waits_locked(struct rt_stream* s) {
  if (s->role == RT_STREAM_LEGACY) {
    for (struct rt_stream* t = all_streams; t; t = t->next_all)
      if (t != s && t->dev == s->dev && blocking(t) && t->done < t->issued && !t->cap) wait_for_locked(s, t);
  } else if (blocking(s)) {
    struct rt_stream* l = legacy[s->dev];
    if (l && l->done < l->issued) wait_for_locked(s, l);
  }
}

cudaError_t rt_stream_submit_locked(struct rt_stream* s, struct rt_op* op) {
  if (s->cap) return rt_capture_add_locked(s, op);
  if (s->role == RT_STREAM_LEGACY && rt_capture_legacy_conflict_locked(s->dev)) {
    rt_op_discard_locked(op);
    return cudaErrorStreamCaptureImplicit;
  }
  implicit_waits_locked(s);
  return enqueue_locked(s, op);
}

/* Queue op on stream h; with wait, return once it has run (unless it was captured). */
static cudaError_t submit(cudaStream_t h, struct rt_op* op, int wait) {
  if (!op) return rt_error(cudaErrorMemoryAllocation);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  if (s)
    err = rt_stream_submit_locked(s, op);
  else
    rt_op_discard_locked(op);
  if (wait && err == cudaSuccess && !s->cap) rt_stream_wait_idle_locked(s);
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

cudaError_t rt_stream_submit(cudaStream_t h, struct rt_op* op) { return submit(h, op, 0); }
cudaError_t rt_stream_submit_wait(cudaStream_t h, struct rt_op* op) { return submit(h, op, 1); }

int rt_stream_capturing(cudaStream_t h) {
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  int capturing = s && s->cap;
  pthread_mutex_unlock(&rt_lock);
  return capturing;
}

void rt_stream_wait_idle_locked(struct rt_stream* s) {
  uint64_t target = s->issued;
  while (s->done < target) pthread_cond_wait(&rt_progress, &rt_lock);
}

/* Takes a reference on every stream of dev first: one may be destroyed while we wait. */
cudaError_t rt_device_sync(int dev) {
  pthread_mutex_lock(&rt_lock);
  size_t n = 0, i = 0;
  for (struct rt_stream* t = all_streams; t; t = t->next_all) n += t->dev == dev;
  struct rt_stream** v = malloc((n ? n : 1) * sizeof(*v));
  for (struct rt_stream* t = all_streams; t && v; t = t->next_all)
    if (t->dev == dev) v[i++] = t, t->refs++;
  cudaError_t err = v ? cudaSuccess : cudaErrorMemoryAllocation;
  for (size_t j = 0; j < i; j++) {
    rt_stream_wait_idle_locked(v[j]);
    if (err == cudaSuccess) err = v[j]->async_err;
    v[j]->async_err = cudaSuccess;
    rt_stream_unref_locked(v[j]);
  }
  pthread_mutex_unlock(&rt_lock);
  free(v);
  return err;
}

RT_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* h, unsigned int flags, int priority) {
  if (!h || (flags & ~(unsigned)cudaStreamNonBlocking)) return rt_error(cudaErrorInvalidValue);
  /* Out-of-range priorities are clamped, as CUDA does; lower numbers are higher priority. */
  priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = stream_new_locked(RT_STREAM_USER, rt_device_current(), flags, priority);
  pthread_mutex_unlock(&rt_lock);
  if (!s) return rt_error(cudaErrorMemoryAllocation);
  *h = (cudaStream_t)s;
  return cudaSuccess;
}

RT_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* h, unsigned int flags) {
  return cudaStreamCreateWithPriority(h, flags, 0);
}

RT_API cudaError_t cudaStreamCreate(cudaStream_t* h) { return cudaStreamCreateWithPriority(h, 0, 0); }

/* Returns at once; queued work still runs, then the worker exits and frees the stream. */
RT_API cudaError_t cudaStreamDestroy(cudaStream_t h) {
  if (h == 0 || h == cudaStreamLegacy || h == cudaStreamPerThread)
    return rt_error(cudaErrorInvalidResourceHandle);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  if (s) {
    if (s->cap) rt_capture_fail_locked(s);
    s->destroyed = 1;
    pthread_cond_signal(&s->work);
    rt_stream_unref_locked(s);
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  cudaError_t err = cudaSuccess;
  if (h == 0 || h == cudaStreamLegacy) err = rt_capture_check_unsafe();
  if (err != cudaSuccess) return rt_error(err);
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  if (s && s->cap) {
    err = rt_capture_fail_locked(s);
  } else if (s) {
    /* Synchronizing the legacy stream is a barrier: it includes the blocking streams' work. */
    if (s->role == RT_STREAM_LEGACY) implicit_waits_locked(s);
    rt_stream_wait_idle_locked(s);
    err = s->async_err;
    s->async_err = cudaSuccess;
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

/* cudaErrorNotReady is an answer, not an error: it is not recorded as the last error. */
RT_API cudaError_t cudaStreamQuery(cudaStream_t h) {
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  if (s && s->cap)
    err = rt_capture_fail_locked(s);
  else if (s)
    err = s->done < s->issued ? cudaErrorNotReady : s->async_err;
  pthread_mutex_unlock(&rt_lock);
  return err == cudaErrorNotReady ? err : rt_error(err);
}

RT_API cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags) {
  if (flags & ~(unsigned)cudaEventWaitExternal) return rt_error(cudaErrorInvalidValue);
  struct rt_op* op = rt_op_new(RT_OP_WAIT_EVENT);
  if (!op) return rt_error(cudaErrorMemoryAllocation);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_event* ev;
  struct rt_stream* s = rt_stream_event_locked(h, e, &ev, &err);
  if (ev && (s->cap || ev->cap_id)) {
    err = rt_capture_wait_locked(s, ev, flags); /* a join, or a wait the capture's rules decide on */
    free(op);
  } else if (ev && ev->recorded > ev->completed) {
    op->u.event.ev = ev, op->u.event.gen = ev->recorded; /* the latest record as of this call */
    ev->refs++;
    err = rt_stream_submit_locked(s, op);
  } else {
    free(op); /* never recorded, or already complete: nothing to wait for */
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaStreamAddCallback(cudaStream_t h, cudaStreamCallback_t fn, void* arg,
                                         unsigned int flags) {
  if (!fn || flags) return rt_error(cudaErrorInvalidValue);
  struct rt_op* op = rt_op_new(RT_OP_CALLBACK);
  if (!op) return rt_error(cudaErrorMemoryAllocation);
  op->u.callback.fn = fn, op->u.callback.arg = arg, op->u.callback.handle = h;
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  if (s && s->cap) { /* CUDA does not capture callbacks (cudaLaunchHostFunc is the capturable one) */
    err = rt_capture_fail_locked(s);
    free(op);
  } else if (s) {
    err = rt_stream_submit_locked(s, op);
  } else {
    free(op);
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

static cudaError_t stream_field(cudaStream_t h, int which, void* out) {
  if (!out) return rt_error(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  if (s && which == 0) *(unsigned*)out = s->flags;
  if (s && which == 1) *(int*)out = s->priority;
  if (s && which == 2) *(int*)out = s->dev;
  if (s && which == 3) *(unsigned long long*)out = s->id;
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int* flags) {
  return stream_field(h, 0, flags);
}
RT_API cudaError_t cudaStreamGetPriority(cudaStream_t h, int* prio) { return stream_field(h, 1, prio); }
RT_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int* dev) { return stream_field(h, 2, dev); }
RT_API cudaError_t cudaStreamGetId(cudaStream_t h, unsigned long long* id) { return stream_field(h, 3, id); }

/* A forked child has no context: every stream of the parent (and its worker) is gone there. The
 * objects are left as they are (their memory is the parent's copy) and recognized as stale. */
static void stream_fork_child(void) {
  pthread_mutex_init(&rt_lock, NULL);
  pthread_cond_init(&rt_progress, NULL);
  rt_fork_gen++;
  all_streams = NULL;
  memset(legacy, 0, sizeof(legacy));
  rt_graph_fork_child();
}
static void stream_fork_prepare(void) { pthread_mutex_lock(&rt_lock); }
static void stream_fork_parent(void) { pthread_mutex_unlock(&rt_lock); }

__attribute__((constructor)) static void stream_init(void) {
  pthread_key_create(&per_thread_key, per_thread_exit);
  pthread_atfork(stream_fork_prepare, stream_fork_parent, stream_fork_child);
}
