/* Emulated CUDA runtime: stream capture and graphs. A capture records every op issued on the
 * streams taking part into one list in issue order (a valid linearization of the real graph);
 * launching the executable graph runs that list in order as one op of the launch stream. */
#include <stdlib.h>

#include "rt.h"

#define GRAPH_MAGIC 0x47524150u
#define EXEC_MAGIC 0x47455845u

static struct rt_capture* captures; /* in progress */
static unsigned long long next_capture_id = 1;
static __thread enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

static struct rt_graph* graph_new(void) {
  struct rt_graph* g = calloc(1, sizeof(*g));
  if (!g) return NULL;
  g->magic = GRAPH_MAGIC;
  g->gen = rt_fork_gen;
  g->refs = 1;
  return g;
}

static void graph_unref_locked(struct rt_graph* g) {
  if (--g->refs > 0) return;
  for (struct rt_op *n = g->head, *next; n; n = next) {
    next = n->next;
    if (n->kind == RT_OP_KERNEL) n->u.kernel.borrowed = 0; /* the graph owned the arguments */
    rt_op_discard_locked(n);
  }
  g->magic = 0;
  free(g);
}

void rt_graph_exec_unref_locked(struct rt_graph_exec* x) {
  if (--x->refs > 0) return;
  graph_unref_locked(x->graph);
  x->magic = 0;
  free(x);
}

static struct rt_graph* graph_check_locked(cudaGraph_t h) {
  struct rt_graph* g = (struct rt_graph*)h;
  return g && g->magic == GRAPH_MAGIC && g->gen == rt_fork_gen && !g->destroyed ? g : NULL;
}

static struct rt_graph_exec* exec_check_locked(cudaGraphExec_t h) {
  struct rt_graph_exec* x = (struct rt_graph_exec*)h;
  return x && x->magic == EXEC_MAGIC && x->gen == rt_fork_gen && !x->destroyed ? x : NULL;
}

static struct rt_capture* capture_find_locked(unsigned long long id) {
  for (struct rt_capture* c = captures; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

int rt_capture_active_locked(unsigned long long id) { return capture_find_locked(id) != NULL; }

cudaError_t rt_capture_add_locked(struct rt_stream* s, struct rt_op* op) {
  struct rt_capture* c = s->cap;
  if (c->invalidated) {
    rt_op_discard_locked(op);
    return cudaErrorStreamCaptureInvalidated;
  }
  if (op->kind == RT_OP_KERNEL) op->u.kernel.borrowed = 1; /* replayed: kept until the graph dies */
  op->next = NULL;
  if (c->graph->tail)
    c->graph->tail->next = op;
  else
    c->graph->head = op;
  c->graph->tail = op;
  c->graph->nodes++;
  s->cap_ops++;
  return cudaSuccess;
}

cudaError_t rt_capture_event_node_locked(struct rt_stream* s, struct rt_event* ev, enum rt_op_kind kind) {
  struct rt_op* op = rt_op_new(kind);
  if (!op) return cudaErrorMemoryAllocation;
  op->u.event.ev = ev; /* the generation is the launch's (bind_event_nodes_locked) */
  ev->refs++;
  return rt_capture_add_locked(s, op);
}

static int is_event_node(const struct rt_op* n) {
  return n->kind == RT_OP_RECORD || n->kind == RT_OP_WAIT_EVENT;
}

/* Event nodes act at cudaGraphLaunch as the same calls on the launch stream would: a record takes
 * the event's next generation, a wait the latest one recorded so far. */
static cudaError_t bind_event_nodes_locked(struct rt_op* launch) {
  size_t n = 0, i = 0;
  for (struct rt_op* op = launch->u.graph.exec->graph->head; op; op = op->next) n += is_event_node(op);
  if (n == 0) return cudaSuccess;
  uint64_t* gens = calloc(n, sizeof(*gens));
  if (!gens) return cudaErrorMemoryAllocation;
  for (struct rt_op* op = launch->u.graph.exec->graph->head; op; op = op->next) {
    struct rt_event* ev = op->u.event.ev;
    if (op->kind == RT_OP_RECORD) {
      ev->cap_id = 0;
      gens[i++] = ++ev->recorded;
    } else if (op->kind == RT_OP_WAIT_EVENT) {
      gens[i++] = ev->recorded;
    }
  }
  launch->u.graph.event_gens = gens;
  return cudaSuccess;
}

/* A launch that was itself captured (a graph in a graph) has no generations bound: its event
 * nodes do nothing, a limit of the emulator. */
void rt_graph_run(struct rt_stream* s, struct rt_op* launch) {
  const uint64_t* gens = launch->u.graph.event_gens;
  size_t i = 0;
  for (struct rt_op* n = launch->u.graph.exec->graph->head; n; n = n->next) {
    if (!is_event_node(n))
      rt_op_run(s, n);
    else if (gens && n->kind == RT_OP_RECORD)
      rt_event_complete(n->u.event.ev, gens[i++]);
    else if (gens)
      rt_event_wait(n->u.event.ev, gens[i++]);
  }
}

cudaError_t rt_capture_fail_locked(struct rt_stream* s) {
  s->cap->invalidated = 1;
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t rt_capture_record_locked(struct rt_stream* s, struct rt_event* ev) {
  if (s->cap->invalidated) return cudaErrorStreamCaptureInvalidated;
  ev->cap_id = s->cap->id;
  ev->cap_stream = s;
  ev->cap_ops = s->cap_ops;
  return cudaSuccess;
}

static cudaError_t join_locked(struct rt_stream* s, struct rt_capture* c) {
  struct rt_stream** v = realloc(c->joined, (size_t)(c->njoined + 1) * sizeof(*v));
  if (!v) return cudaErrorMemoryAllocation;
  c->joined = v;
  v[c->njoined++] = s;
  s->refs++;
  s->cap = c;
  s->cap_ops = s->cap_joined_ops = 0;
  return cudaSuccess;
}

/* A wait on an event recorded in a capture: a stream outside any capture joins it (the fork of a
 * captured fork/join), one inside it orders two of its streams (here: marks the recording stream's
 * work as joined). Waiting inside a capture on an event from outside it, or from another capture,
 * is what CUDA rejects (Isolation / Merge), and the capture is invalidated. */
cudaError_t rt_capture_wait_locked(struct rt_stream* s, struct rt_event* ev, unsigned flags) {
  struct rt_capture* evc = ev->cap_id ? capture_find_locked(ev->cap_id) : NULL;
  if (!s->cap) return evc ? join_locked(s, evc) : cudaSuccess; /* a stale capture: nothing pending */
  if (s->cap->invalidated) return cudaErrorStreamCaptureInvalidated;
  if (flags & cudaEventWaitExternal) return rt_capture_event_node_locked(s, ev, RT_OP_WAIT_EVENT);
  if (evc != s->cap) {
    s->cap->invalidated = 1;
    return evc ? cudaErrorStreamCaptureMerge : cudaErrorStreamCaptureIsolation;
  }
  if (ev->cap_stream != s && ev->cap_stream->cap_joined_ops < ev->cap_ops)
    ev->cap_stream->cap_joined_ops = ev->cap_ops;
  return cudaSuccess;
}

/* Under the capture-mode rules of cudaThreadExchangeStreamCaptureMode's documentation. */
cudaError_t rt_capture_check_unsafe(void) {
  if (thread_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  int bad = 0;
  pthread_mutex_lock(&rt_lock);
  for (struct rt_capture* c = captures; c; c = c->next) {
    int mine = pthread_equal(c->thread, pthread_self());
    if ((mine && c->mode != cudaStreamCaptureModeRelaxed) ||
        (!mine && c->mode == cudaStreamCaptureModeGlobal && thread_mode == cudaStreamCaptureModeGlobal)) {
      c->invalidated = 1;
      bad = 1;
    }
  }
  pthread_mutex_unlock(&rt_lock);
  return bad ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

static int capture_has_blocking_on(struct rt_capture* c, int dev) {
  struct rt_stream* o = c->origin;
  if (o->dev == dev && !(o->flags & cudaStreamNonBlocking)) return 1;
  for (int i = 0; i < c->njoined; i++)
    if (c->joined[i]->dev == dev && !(c->joined[i]->flags & cudaStreamNonBlocking)) return 1;
  return 0;
}

int rt_capture_legacy_conflict_locked(int dev) {
  int conflict = 0;
  for (struct rt_capture* c = captures; c; c = c->next) {
    if (!capture_has_blocking_on(c, dev)) continue;
    c->invalidated = 1;
    conflict = 1;
  }
  return conflict;
}

RT_API cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return rt_error(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  struct rt_capture* c = NULL;
  if (s && s->role == RT_STREAM_LEGACY)
    err = cudaErrorStreamCaptureUnsupported;
  else if (s && s->cap)
    err = cudaErrorIllegalState;
  else if (s && (!(c = calloc(1, sizeof(*c))) || !(c->graph = graph_new())))
    err = cudaErrorMemoryAllocation;
  if (err == cudaSuccess) {
    c->origin = s, c->mode = mode, c->thread = pthread_self(), c->id = next_capture_id++;
    c->next = captures;
    captures = c;
    s->refs++;
    s->cap = c;
    s->cap_ops = s->cap_joined_ops = 0;
  } else if (c) {
    free(c);
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

/* Detaches every stream from c and forgets c; returns whether a joined stream had unjoined work. */
static int capture_finish_locked(struct rt_capture* c) {
  int unjoined = 0;
  for (int i = 0; i < c->njoined; i++) {
    struct rt_stream* t = c->joined[i];
    unjoined |= t->cap_ops > t->cap_joined_ops;
    t->cap = NULL;
    rt_stream_unref_locked(t);
  }
  c->origin->cap = NULL;
  rt_stream_unref_locked(c->origin);
  for (struct rt_capture** p = &captures; *p; p = &(*p)->next) {
    if (*p == c) {
      *p = c->next;
      break;
    }
  }
  free(c->joined);
  return unjoined;
}

RT_API cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t* graph) {
  if (!graph) return rt_error(cudaErrorInvalidValue);
  *graph = NULL;
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  struct rt_capture* c = s ? s->cap : NULL;
  if (s && !c)
    err = cudaErrorIllegalState;
  else if (c && c->origin != s)
    err = cudaErrorStreamCaptureUnmatched;
  else if (c && c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self()))
    err = cudaErrorStreamCaptureWrongThread;
  if (err == cudaSuccess) {
    int unjoined = capture_finish_locked(c);
    if (c->invalidated || unjoined) {
      err = c->invalidated ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnjoined;
      graph_unref_locked(c->graph);
    } else {
      *graph = (cudaGraph_t)c->graph;
    }
    free(c);
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus* status) {
  if (!status) return rt_error(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  if (s) {
    *status = !s->cap               ? cudaStreamCaptureStatusNone
              : s->cap->invalidated ? cudaStreamCaptureStatusInvalidated
                                    : cudaStreamCaptureStatusActive;
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

/* Dependencies are not tracked (the graph is a list): none are reported. */
RT_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t h, enum cudaStreamCaptureStatus* status,
                                            unsigned long long* id, cudaGraph_t* graph,
                                            const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                            size_t* ndeps) {
  if (!status) return rt_error(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  struct rt_capture* c = s ? s->cap : NULL;
  if (s) {
    *status = !c               ? cudaStreamCaptureStatusNone
              : c->invalidated ? cudaStreamCaptureStatusInvalidated
                               : cudaStreamCaptureStatusActive;
    if (id) *id = c ? c->id : 0;
    if (graph) *graph = c ? (cudaGraph_t)c->graph : NULL;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  if (!mode || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                *mode != cudaStreamCaptureModeRelaxed))
    return rt_error(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return cudaSuccess;
}

RT_API cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  if (!graph || flags) return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt_lock);
  struct rt_graph* g = graph_new();
  pthread_mutex_unlock(&rt_lock);
  if (!g) return rt_error(cudaErrorMemoryAllocation);
  *graph = (cudaGraph_t)g;
  return cudaSuccess;
}

RT_API cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  pthread_mutex_lock(&rt_lock);
  struct rt_graph* g = graph_check_locked(graph);
  if (g) {
    g->destroyed = 1;
    graph_unref_locked(g);
  }
  pthread_mutex_unlock(&rt_lock);
  return g ? cudaSuccess : rt_error(cudaErrorInvalidValue);
}

RT_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* n) {
  if (!n) return rt_error(cudaErrorInvalidValue);
  pthread_mutex_lock(&rt_lock);
  struct rt_graph* g = graph_check_locked(graph);
  if (g && nodes) {
    size_t i = 0;
    for (struct rt_op* op = g->head; op && i < *n; op = op->next) nodes[i++] = (cudaGraphNode_t)op;
    for (; i < *n; i++) nodes[i] = NULL;
  }
  if (g) *n = g->nodes;
  pthread_mutex_unlock(&rt_lock);
  return g ? cudaSuccess : rt_error(cudaErrorInvalidValue);
}

RT_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  (void)flags; /* auto-free-on-launch, upload, device launch, priority: nothing to do here */
  if (!exec) return rt_error(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_graph* g = graph_check_locked(graph);
  struct rt_graph_exec* x = g ? calloc(1, sizeof(*x)) : NULL;
  if (!g)
    err = cudaErrorInvalidValue;
  else if (!x)
    err = cudaErrorMemoryAllocation;
  if (x) {
    x->magic = EXEC_MAGIC, x->gen = rt_fork_gen, x->refs = 1, x->graph = g;
    g->refs++;
    *exec = (cudaGraphExec_t)x;
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                 unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}

RT_API cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                  cudaGraphInstantiateParams* p) {
  if (!p) return rt_error(cudaErrorInvalidValue);
  cudaError_t err = cudaGraphInstantiate(exec, graph, p->flags);
  p->result_out = err == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
  p->errNode_out = NULL;
  return err;
}

RT_API cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t h) {
  struct rt_op* op = rt_op_new(RT_OP_GRAPH);
  if (!op) return rt_error(cudaErrorMemoryAllocation);
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&rt_lock);
  struct rt_stream* s = rt_stream_resolve_locked(h, &err);
  struct rt_graph_exec* x = s ? exec_check_locked(exec) : NULL;
  if (s && !x) err = cudaErrorInvalidValue;
  if (x) {
    op->u.graph.exec = x;
    x->refs++; /* cudaGraphExecDestroy while in flight frees it after the run */
    err = s->cap ? cudaSuccess : bind_event_nodes_locked(op); /* a captured launch: see rt_graph_run */
    if (err == cudaSuccess)
      err = rt_stream_submit_locked(s, op);
    else
      rt_op_discard_locked(op);
  } else {
    free(op);
  }
  pthread_mutex_unlock(&rt_lock);
  return rt_error(err);
}

RT_API cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t h) {
  (void)h;
  pthread_mutex_lock(&rt_lock);
  struct rt_graph_exec* x = exec_check_locked(exec);
  pthread_mutex_unlock(&rt_lock);
  return x ? cudaSuccess : rt_error(cudaErrorInvalidValue);
}

RT_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  pthread_mutex_lock(&rt_lock);
  struct rt_graph_exec* x = exec_check_locked(exec);
  if (x) {
    x->destroyed = 1;
    rt_graph_exec_unref_locked(x);
  }
  pthread_mutex_unlock(&rt_lock);
  return x ? cudaSuccess : rt_error(cudaErrorInvalidValue);
}

void rt_graph_fork_child(void) { captures = NULL; }
