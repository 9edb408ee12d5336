/* CUDA backend launch: a group's tasks for one communicator become one kernel on the caller's
 * stream, whatever their number (a list that outgrows the kernel arguments goes to device
 * memory), so that matching sends and receives always run together. Collectives use blocks
 * [0, channels) in call order; each peer and direction of the sends and receives gets a block of
 * its own after those, so sends and receives to different peers progress together. */
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/cuda/engine_cuda.h"
#include "collectives/dev_types.h"
#include "collectives/fingerprint.h"
#include "collectives/plan.h"
#include "collectives/profiler.h"
#include "collectives/trace.h"
#include "proxy/proxy.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

#if WEFT_CUDA
#include "collectives/cuda/state.h"
#include "util/cuda_check.h"

_Static_assert(WEFT_CUDA_MAX_CHANNELS <= WEFT_PROGRESS_SLOTS, "every channel's block reports its progress");

_Static_assert(sizeof(struct weft_cuda_kargs) <= 4096, "kernel arguments fit in 4 KiB");
_Static_assert(WEFT_CUDA_ALGO_TREE == WEFT_PLAN_TREE, "the kernel's Tree is the planner's");

#define MAX_STREAMS 8

static void fill_common(struct weft_cuda_work* w, const struct weft_task* t) {
  memset(w, 0, sizeof(*w));
  w->coll = (uint8_t)t->coll;
  w->dtype = (uint8_t)t->dtype;
  w->op_kind = (uint8_t)t->op.kind;
  w->root = t->root;
  w->count = t->count;
  w->seq = (uint32_t)t->seq;
  w->scalar = t->op.scalar;
  w->divisor = t->op.divisor;
  w->scalar_ptr = t->op.scalar_ptr;
  w->sendbuff = t->sendbuff;
  w->recvbuff = t->recvbuff;
}

/* The planner (collectives/plan.c) decides, as for the host backend, from what every rank agreed
 * on at init (engine_cuda.c agree_shape); this only packs its choice for the kernel. */
static ncclResult_t plan_coll(const struct weft_comm_ctx* comm, const struct weft_cuda_state* s,
                              const struct weft_task* t, struct weft_cuda_work* w) {
  size_t bytes = weft_plan_task_bytes(t, comm->nranks);
  int algo, proto, n;
  fill_common(w, t);
  WEFT_CHECK(weft_plan_choose(&s->env, t->coll, bytes, &t->opts, &algo, &proto, &n));
  int tree = algo == WEFT_PLAN_TREE; /* all-reduce on 2+ ranks only, on s->env.tree_channels */
  w->algo = tree ? WEFT_CUDA_ALGO_TREE : 0;
  w->proto = (uint8_t)proto;
  w->nchannels = (int16_t)n;
  w->chunk = (uint32_t)weft_plan_chunk_elems(&s->env, proto, weft_dt_size(t->dtype));
  if (comm->trace) weft_trace_plan(comm->trace, t, tree ? WEFT_TRACE_TREE : WEFT_TRACE_RING, proto, n);
  WEFT_INFO(WEFT_TUNING,
            "%s seq %llu: %zu bytes, algo %s proto %s, %d channel(s), chunk %llu elements (CUDA)%s",
            weft_coll_name(t->coll), (unsigned long long)t->seq, bytes, tree ? "Tree" : "Ring",
            proto == WEFT_PROTO_LL ? "LL" : "Simple", n, (unsigned long long)w->chunk,
            t->opts.sig ? " (per-call config)" : "");
  return ncclSuccess;
}

static void plan_p2p(const struct weft_cuda_state* s, const struct weft_task* t, int block,
                     struct weft_cuda_work* w) {
  size_t es = weft_dt_size(t->dtype);
  fill_common(w, t);
  const struct weft_plan_params* env = &s->env;
  w->proto = env->ll_ok && ((int64_t)(t->count * es) <= s->p2p_ll_threshold || !env->simple_ok)
                 ? WEFT_PROTO_LL
                 : WEFT_PROTO_SIMPLE;
  w->chunk = (uint32_t)weft_plan_chunk_elems(env, w->proto, es);
  w->block = block;
  w->nchannels = 0;
}

/* The CUDA backend works on memory the GPU can address: refuse plain host memory up front. */
static ncclResult_t check_buffer(const struct weft_comm_ctx* comm, const struct weft_task* t, const void* p,
                                 const char* what) {
  if (p == NULL) return ncclSuccess;
  struct cudaPointerAttributes a;
  cudaError_t err = cudaPointerGetAttributes(&a, p);
  if (err != cudaSuccess) {
    cudaGetLastError();
    a.type = cudaMemoryTypeUnregistered;
  }
  if (a.type != cudaMemoryTypeUnregistered) return ncclSuccess;
  WEFT_WARN(
      "comm %p rank %d: %s %p of call %llu is host memory the GPU cannot address; the CUDA backend needs "
      "device (or registered host) memory; set WEFT_BACKEND=host to run on host buffers",
      (void*)comm, comm->rank, what, p, (unsigned long long)t->seq);
  return ncclInvalidArgument;
}

/* Sends and receives with peers not connected yet are connected now (both sides do it). */
static ncclResult_t connect_p2p(struct weft_comm_ctx* comm, struct weft_task* tasks) {
  struct weft_cuda_state* s = comm->cuda;
  int k = comm->nranks, need = 0;
  uint8_t* flags = calloc(2 * (size_t)k, 1);
  if (flags == NULL) return ncclSystemError;
  for (struct weft_task* t = tasks; t; t = t->next) {
    if (t->coll == WEFT_COLL_SEND && s->p2p_send_mem[t->root] == NULL) flags[t->root] = need = 1;
    if (t->coll == WEFT_COLL_RECV && s->p2p_recv_mem[t->root] == NULL) flags[k + t->root] = need = 1;
  }
  ncclResult_t res = ncclSuccess;
  if (need) {
    /* A first send/recv may come under stream capture: its connectors' cudaMalloc and setup
     * copies (on the private setup stream) are not part of the graph and must not end it. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    WEFT_CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    res = weft_cuda_p2p_connect(comm, flags, flags + k);
    cudaThreadExchangeStreamCaptureMode(&mode);
  }
  free(flags);
  return res;
}

/* Tree connectors are made at the first tree all-reduce, as NCCL does; every rank plans the same
 * calls alike, so all connect at the same launch. Under capture, like connect_p2p. */
static ncclResult_t connect_tree(struct weft_comm_ctx* comm) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  WEFT_CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  ncclResult_t res = weft_cuda_tree_connect(comm);
  cudaThreadExchangeStreamCaptureMode(&mode);
  return res;
}

/* Streams of the launch besides the first; the first carries the kernel. */
struct stream_set {
  cudaStream_t v[MAX_STREAMS];
  int n;
};

static ncclResult_t collect_streams(const struct weft_comm_ctx* comm, struct weft_task* tasks,
                                    struct stream_set* ss) {
  ss->n = 0;
  for (struct weft_task* t = tasks; t; t = t->next) {
    int found = 0;
    for (int i = 0; i < ss->n; i++) found |= ss->v[i] == t->stream;
    if (found) continue;
    if (ss->n == MAX_STREAMS) {
      WEFT_WARN("comm %p rank %d: one group uses more than %d streams", (void*)comm, comm->rank, MAX_STREAMS);
      return ncclInvalidUsage;
    }
    ss->v[ss->n++] = t->stream;
  }
  return ncclSuccess;
}

/* from -> to: to's later work waits for what from has queued so far. */
static ncclResult_t stream_after(cudaStream_t to, cudaStream_t from) {
  cudaEvent_t ev;
  WEFT_CUDACHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(ev, from);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(to, ev, 0);
  cudaEventDestroy(ev);
  WEFT_CUDACHECK(err);
  return ncclSuccess;
}

static ncclResult_t launch_batch(struct weft_cuda_state* s, struct weft_cuda_kargs* args, int nblocks,
                                 cudaStream_t stream) {
  args->comm = s->devcomm;
  int err = weft_cuda_kernel_launch(args, nblocks, s->nthreads, stream);
  if (err != cudaSuccess) {
    WEFT_WARN("Launching the collective kernel (%d blocks of %d threads, %d works) failed: %s", nblocks,
              s->nthreads, args->nworks, cudaGetErrorString((cudaError_t)err));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

/* Plan the group's tasks into w (call order, empty tasks left out), with the blocks needed.
 * owner: 2 * nranks ints, (direction, peer) -> its block among the send/recv blocks. */
static ncclResult_t plan_group(struct weft_comm_ctx* comm, struct weft_task* tasks, struct weft_cuda_work* w,
                               int* owner, int* nblocks, int* uses_tree) {
  struct weft_cuda_state* s = comm->cuda;
  int ncoll_blocks = 0, np2p = 0, n = 0;
  for (int i = 0; i < 2 * comm->nranks; i++) owner[i] = -1;
  for (struct weft_task* t = tasks; t; t = t->next) {
    if (t->count == 0) continue;
    if (t->coll == WEFT_COLL_SEND || t->coll == WEFT_COLL_RECV) {
      int key = (t->coll == WEFT_COLL_RECV) * comm->nranks + t->root;
      if (owner[key] < 0) owner[key] = np2p++;
      plan_p2p(s, t, -1 - owner[key], &w[n]); /* block fixed below, after the collectives' blocks */
      weft_prof_task_start(comm->prof, t, NULL, NULL, 1);
    } else {
      WEFT_CHECK(plan_coll(comm, s, t, &w[n]));
      weft_prof_task_start(comm->prof, t, w[n].algo == WEFT_CUDA_ALGO_TREE ? "TREE" : "RING",
                           w[n].proto == WEFT_PROTO_LL ? "LL" : "SIMPLE", w[n].nchannels);
      *uses_tree |= w[n].algo == WEFT_CUDA_ALGO_TREE;
      struct weft_call_fp fp = weft_call_fp_of(t);
      w[n].step_tag = s->check_calls ? weft_step_tag_make(s->coll_seq, weft_call_fp_hash(&fp), fp.count) : 0;
      s->recent_fp[s->coll_seq % WEFT_RECENT_CALLS] = fp;
      s->coll_seq++;
      if (w[n].nchannels > ncoll_blocks) ncoll_blocks = w[n].nchannels;
    }
    n++;
  }
  for (int i = 0; i < n; i++)
    if (w[i].block < 0) w[i].block = ncoll_blocks + (-1 - w[i].block);
  *nblocks = ncoll_blocks + np2p;
  return ncclSuccess;
}

/* Device memory for n works: a list of this comm whose kernel has ended, or a new one. */
static ncclResult_t get_wlist(struct weft_cuda_state* s, int n, struct weft_cuda_wlist** out) {
  for (struct weft_cuda_wlist* l = s->wlists; l; l = l->next) {
    if (l->captured || l->cap < n) continue;
    if (l->busy) {
      cudaError_t err = cudaEventQuery(l->done);
      if (err == cudaErrorNotReady) continue;
      WEFT_CUDACHECK(err);
      l->busy = 0;
    }
    *out = l;
    return ncclSuccess;
  }
  struct weft_cuda_wlist* l = calloc(1, sizeof(*l));
  if (l == NULL) return ncclSystemError;
  l->next = s->wlists;
  s->wlists = l; /* freed with the comm even if the rest fails */
  l->cap = 64;
  while (l->cap < n) l->cap *= 2;
  WEFT_CUDACHECK(cudaEventCreateWithFlags(&l->done, cudaEventDisableTiming));
  WEFT_CUDACHECK(cudaMalloc((void**)&l->dev, (size_t)l->cap * sizeof(struct weft_cuda_work)));
  *out = l;
  return ncclSuccess;
}

/* The list goes to device memory now, by a synchronous copy on the private setup stream: it waits
 * for no kernel and leaves w free at once. A captured launch's list stays the graph's (every
 * replay reads it); it is never reused, and freed with the comm. */
static ncclResult_t upload_works(struct weft_cuda_state* s, const struct weft_cuda_work* w, int n,
                                 int captured, struct weft_cuda_wlist** out) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  WEFT_CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode)); /* cudaMalloc may run under capture */
  ncclResult_t res = get_wlist(s, n, out);
  cudaThreadExchangeStreamCaptureMode(&mode);
  WEFT_CHECK(res);
  (*out)->busy = 1;
  (*out)->captured = captured;
  return weft_cuda_copy_now(s, (*out)->dev, w, (size_t)n * sizeof(*w));
}

/* ncclCollConfig_t.launchCompletionEvent: recorded on the launch stream right after the kernel
 * that carries the call (one kernel per group, so every event of the group marks the same point). */
static ncclResult_t record_completion(const struct weft_comm_ctx* comm, const struct weft_task* tasks,
                                      cudaStream_t stream) {
  for (const struct weft_task* t = tasks; t; t = t->next) {
    if (t->opts.completion_event == NULL || t->count == 0) continue;
    cudaError_t err = cudaEventRecord(t->opts.completion_event, stream);
    if (err != cudaSuccess) {
      cudaGetLastError();
      WEFT_WARN("comm %p rank %d: recording launchCompletionEvent %p of call %llu failed: %s", (void*)comm,
                comm->rank, (void*)t->opts.completion_event, (unsigned long long)t->seq,
                cudaGetErrorString(err));
      return ncclInvalidArgument;
    }
  }
  return ncclSuccess;
}

/* The flight recorder follows the kernel through the progress area beside its abort flag: the
 * launch gets the number under which the kernel reports it ended. */
static uint32_t trace_launch(struct weft_comm_ctx* comm, const struct weft_task* tasks) {
  if (comm->trace == NULL) return 0;
  uint64_t last = 0;
  for (const struct weft_task* t = tasks; t; t = t->next)
    if (t->seq > last) last = t->seq;
  return weft_trace_dev_launch(comm->trace, &comm->cuda->host->progress, last);
}

/* Plan every task and launch them as one kernel: the work list in the kernel arguments when it
 * fits, else in device memory. A group split over several kernels could deadlock (a send in one
 * kernel, its receive in the next, each rank waiting in a different one). */
static ncclResult_t launch_works(struct weft_comm_ctx* comm, struct weft_task* tasks, cudaStream_t stream,
                                 int capturing) {
  struct weft_cuda_state* s = comm->cuda;
  int n = 0;
  for (struct weft_task* t = tasks; t; t = t->next) n += t->count != 0;
  if (n == 0) return ncclSuccess;
  struct weft_cuda_kargs args;
  memset(&args, 0, sizeof(args));
  struct weft_cuda_work* w = n <= WEFT_CUDA_MAX_WORKS ? args.works : malloc((size_t)n * sizeof(*w));
  int* owner = malloc(2 * (size_t)comm->nranks * sizeof(int));
  ncclResult_t res = w != NULL && owner != NULL ? ncclSuccess : ncclSystemError;
  struct weft_cuda_wlist* l = NULL;
  int nblocks = 0, uses_tree = 0;
  weft_tune_log_start(s->env.tune_log); /* the choice to time is this launch's */
  if (res == ncclSuccess) res = plan_group(comm, tasks, w, owner, &nblocks, &uses_tree);
  if (res == ncclSuccess && uses_tree && !s->tree_connected) res = connect_tree(comm);
  if (res == ncclSuccess && nblocks > s->max_blocks) {
    WEFT_WARN(
        "comm %p rank %d: a group needing %d blocks (its channels, plus one per peer and direction of its "
        "sends and receives) exceeds the %d that this rank's share of device %d runs at once",
        (void*)comm, comm->rank, nblocks, s->max_blocks, s->dev);
    res = ncclInvalidUsage;
  }
  args.nworks = n;
  if (res == ncclSuccess && w != args.works) {
    res = upload_works(s, w, n, capturing, &l);
    if (res == ncclSuccess) args.list = l->dev;
    WEFT_INFO(WEFT_COLL, "comm %p rank %d: a group of %d tasks, its work list in device memory", (void*)comm,
              comm->rank, n);
  }
  if (res == ncclSuccess) args.launch = trace_launch(comm, tasks);
  if (res == ncclSuccess) {
    struct weft_cuda_timer* timer = weft_cuda_timer_begin(s, tasks, stream, capturing);
    res = launch_batch(s, &args, nblocks, stream);
    weft_cuda_timer_end(timer, stream, res == ncclSuccess);
  }
  if (res == ncclSuccess) res = record_completion(comm, tasks, stream);
  if (l != NULL && !l->captured) {
    cudaError_t err = res == ncclSuccess ? cudaEventRecord(l->done, stream) : cudaSuccess;
    if (err != cudaSuccess) l->captured = 1; /* cannot tell when it is free: never reuse it */
  }
  if (w != args.works) free(w);
  free(owner);
  return res;
}

/* The peer's call of the number its step carries, told from the step's tag and this rank's
 * call of that number (see weft_call_fp_guess): how the two differ in what; returns whether it
 * could tell. */
static int tell_call(const struct weft_comm_ctx* comm, const struct weft_cuda_state* s, uint64_t theirs,
                     char* what, size_t n) {
  uint64_t their_seq = weft_step_tag_seq(theirs, s->coll_seq);
  if (their_seq >= s->coll_seq || s->coll_seq - their_seq > WEFT_RECENT_CALLS) return 0;
  const struct weft_call_fp* mine = &s->recent_fp[their_seq % WEFT_RECENT_CALLS];
  struct weft_call_fp guess;
  if (!weft_call_fp_guess(mine, theirs, comm->nranks, &guess)) return 0;
  weft_call_fp_describe(s->host->err_peer, &guess, comm->rank, mine, what, n);
  return 1;
}

/* A kernel found that a peer's first step of a collective belongs to another call. The tags
 * carry the call numbers and fingerprint hashes: the WARN says how the calls differ where that
 * can be told from them, else which call of which peer differs and what this rank called. */
static ncclResult_t report_mismatch(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  uint64_t theirs = s->host->err_theirs, mine = s->host->err_mine;
  uint64_t their_seq = weft_step_tag_seq(theirs, s->coll_seq), my_seq = weft_step_tag_seq(mine, s->coll_seq);
  if (!__atomic_exchange_n(&s->error_reported, 1, __ATOMIC_ACQ_REL)) {
    char what[WEFT_CALL_FP_TEXT] = "";
    /* Ranks on other hosts may wait for steps this rank's kernel will not send: they fail too. */
    int told = tell_call(comm, s, theirs, what, sizeof(what));
    weft_proxy_announce_mismatch(&s->host->abort, comm->rank, comm->peers[comm->rank].host_name,
                                 told ? what : NULL);
    if (told)
      WEFT_WARN(
          "comm %p rank %d: mismatched collective on device %d (collective #%llu): %s; every rank must "
          "call the same collectives with the same count, datatype, op and root; the communicator is "
          "unusable",
          (void*)comm, comm->rank, s->dev, (unsigned long long)their_seq, what);
    else
      WEFT_WARN(
          "comm %p rank %d: mismatched collective on device %d: a step from rank %d on channel %d belongs to "
          "its "
          "collective #%llu (fingerprint %08x), this rank's %s is collective #%llu (%08x); every rank must "
          "call "
          "the same collectives with the same count, datatype, op and root; the communicator is unusable",
          (void*)comm, comm->rank, s->dev, s->host->err_peer, s->host->err_channel,
          (unsigned long long)their_seq, (unsigned)theirs, weft_coll_name(s->host->err_coll),
          (unsigned long long)my_seq, (unsigned)mine);
  }
  weft_comm_set_async_error(comm, ncclInvalidUsage);
  return ncclInvalidUsage;
}

/* A kernel gave up because a ring neighbour on this host wrote on a connector they share that it
 * had (a mismatched call, found by err_finder): this rank names the same cause, and tells its
 * network peers, as the host executor's ranks do. */
static ncclResult_t report_told(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  int finder = s->host->err_finder, from = s->host->err_peer;
  const char* host = finder >= 0 && finder < comm->nranks ? comm->peers[finder].host_name : "?";
  if (!__atomic_exchange_n(&s->error_reported, 1, __ATOMIC_ACQ_REL)) {
    weft_proxy_announce_mismatch(&s->host->abort, finder, host, NULL);
    WEFT_WARN(
        "comm %p rank %d: mismatched collective, found by rank %d (host %s) and reported by ring neighbour "
        "rank %d on channel %d (the %s kernel on device %d gave up): every rank must call the same "
        "collectives with the same count, datatype, op and root; the communicator is unusable",
        (void*)comm, comm->rank, finder, host, from, s->host->err_channel, weft_coll_name(s->host->err_coll),
        s->dev);
  }
  weft_comm_set_async_error(comm, ncclInvalidUsage);
  return ncclInvalidUsage;
}

/* A kernel that gave up (timeout) left its reason in the host-mapped device state, which the host
 * reads at any time: the next launch, ncclCommGetAsyncError, Finalize and Destroy all see it. */
static ncclResult_t kernel_error(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  uint32_t err = __atomic_load_n(&s->host->error, __ATOMIC_ACQUIRE); /* then its fields */
  if (err == WEFT_CUDA_ERR_NONE) return ncclSuccess;
  if (err == WEFT_CUDA_ERR_MISMATCH) return report_mismatch(comm, s);
  if (err == WEFT_CUDA_ERR_TOLD) return report_told(comm, s);
  /* A kernel stopped by the abort flag reports nothing: the user's abort, or the proxy's, which
   * names the rank lost in its own WARN and async error. */
  if (!__atomic_exchange_n(&s->error_reported, 1, __ATOMIC_ACQ_REL))
    WEFT_WARN("comm %p rank %d: a %s kernel on device %d %s waiting for rank %d on channel %d", (void*)comm,
              comm->rank, weft_coll_name(s->host->err_coll), s->dev,
              err == WEFT_CUDA_ERR_TIMEOUT ? "timed out (WEFT_TIMEOUT)" : "failed", s->host->err_peer,
              s->host->err_channel);
  /* A timeout is NCCL's ncclTimeout; no kernel writes any other code here. */
  ncclResult_t res = err == WEFT_CUDA_ERR_TIMEOUT ? ncclTimeout : ncclInternalError;
  weft_comm_set_async_error(comm, res);
  return res;
}

/* The same moments show the flight recorder what the kernels did (progress area). */
ncclResult_t weft_cuda_check_error(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm->cuda;
  if (s == NULL || s->host == NULL) return ncclSuccess;
  if (comm->trace) weft_trace_dev_observe(comm->trace);
  ncclResult_t res = kernel_error(comm, s);
  if (res != ncclSuccess && comm->trace) weft_trace_dev_failed(comm->trace, res);
  return res;
}

/* Finalize: the comm's launched work has run (or given up), and any kernel error is reported. */
ncclResult_t weft_cuda_flush(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm->cuda;
  if (s == NULL) return ncclSuccess;
  if (s->have_last) WEFT_CUDACHECK(cudaEventSynchronize(s->last_event));
  return weft_cuda_check_error(comm);
}

static ncclResult_t check_buffers(struct weft_comm_ctx* comm, struct weft_task* tasks) {
  for (struct weft_task* t = tasks; t; t = t->next) {
    if (t->count == 0) continue;
    WEFT_CHECK(check_buffer(comm, t, t->sendbuff, "sendbuff"));
    WEFT_CHECK(check_buffer(comm, t, t->recvbuff, "recvbuff"));
    if (t->op.scalar_ptr) WEFT_CHECK(check_buffer(comm, t, t->op.scalar_ptr, "PreMulSum scalar"));
  }
  return ncclSuccess;
}

/* The legacy default stream runs one kernel at a time, so ranks of one process on one device
 * cannot all be running on it: the first kernel waits for peers queued behind it. */
static ncclResult_t check_stream(const struct weft_comm_ctx* comm, const struct weft_cuda_state* s,
                                 cudaStream_t st) {
  if ((st != NULL && st != cudaStreamLegacy) || !s->device_shared_in_process) return ncclSuccess;
  WEFT_WARN(
      "comm %p rank %d: the legacy default stream (NULL) cannot carry the collectives of several ranks "
      "of one process on device %d: each rank's kernel would wait for the others queued behind it. Give "
      "each rank its own stream (cudaStreamCreate) or use cudaStreamPerThread",
      (void*)comm, comm->rank, s->dev);
  return ncclInvalidUsage;
}

/* Launches of one comm run one after another whatever streams carry them, graph replays
 * included: they share the comm's connectors. A captured launch orders itself through external
 * event nodes, which act at each replay as these calls would on the replay's stream (NCCL does the
 * same by default, NCCL_GRAPH_MIXING_SUPPORT). Eager launches on one stream need no wait until a
 * graph may have recorded in between. */
static ncclResult_t after_last_launch(const struct weft_cuda_state* s, cudaStream_t stream, int capturing) {
  if (capturing) {
    WEFT_CUDACHECK(cudaStreamWaitEvent(stream, s->last_event, cudaEventWaitExternal));
  } else if (s->captured || (s->have_last && s->last_stream != stream)) {
    WEFT_CUDACHECK(cudaStreamWaitEvent(stream, s->last_event, 0));
  }
  return ncclSuccess;
}

static ncclResult_t mark_last_launch(struct weft_cuda_state* s, cudaStream_t stream, int capturing) {
  WEFT_CUDACHECK(cudaEventRecordWithFlags(s->last_event, stream, capturing ? cudaEventRecordExternal : 0));
  s->have_last = 1;
  s->last_stream = stream;
  return ncclSuccess;
}

static ncclResult_t launch_on_device(struct weft_comm_ctx* comm, struct weft_cuda_state* s,
                                     struct weft_task* tasks) {
  WEFT_CUDACHECK(cudaSetDevice(s->dev));
  WEFT_CHECK(weft_cuda_check_error(comm));
  weft_cuda_timers_collect(s);
  WEFT_CHECK(check_buffers(comm, tasks));
  WEFT_CHECK(connect_p2p(comm, tasks));
  struct stream_set ss;
  WEFT_CHECK(collect_streams(comm, tasks, &ss));
  cudaStream_t stream = ss.v[0];
  WEFT_CHECK(check_stream(comm, s, stream));
  enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  WEFT_CUDACHECK(cudaStreamIsCapturing(stream, &cap));
  int capturing = cap != cudaStreamCaptureStatusNone;
  s->captured |= capturing;
  WEFT_CHECK(after_last_launch(s, stream, capturing));
  for (int i = 1; i < ss.n; i++) WEFT_CHECK(stream_after(stream, ss.v[i]));
  WEFT_CHECK(launch_works(comm, tasks, stream, capturing));
  for (int i = 1; i < ss.n; i++) WEFT_CHECK(stream_after(ss.v[i], stream));
  return mark_last_launch(s, stream, capturing);
}

const struct weft_plan_params* weft_cuda_plan_params(const struct weft_comm_ctx* comm) {
  return comm->cuda ? &comm->cuda->env : NULL;
}

/* Launch on the comm's device and give the caller back its current device, as NCCL does: a
 * thread driving comms on several GPUs keeps the device it selected. */
ncclResult_t weft_cuda_launch(struct weft_comm_ctx* comm, struct weft_task* tasks) {
  struct weft_cuda_state* s = comm->cuda;
  if (s == NULL) {
    WEFT_WARN("comm %p rank %d: CUDA launch on a communicator without CUDA state", (void*)comm, comm->rank);
    return ncclInternalError;
  }
  int caller = -1;
  if (cudaGetDevice(&caller) != cudaSuccess) caller = -1;
  ncclResult_t res = launch_on_device(comm, s, tasks);
  if (caller >= 0 && caller != s->dev) cudaSetDevice(caller);
  return res;
}

/* The model's time for what the planner picks (tuner plugin included), as on the host backend. */
ncclResult_t weft_cuda_predict(const struct weft_comm_ctx* comm, const struct weft_task* t, float* time_us) {
  const struct weft_cuda_state* s = comm->cuda;
  if (s == NULL) {
    WEFT_WARN("comm %p rank %d: simulated CUDA group on a communicator without CUDA state", (void*)comm,
              comm->rank);
    return ncclInternalError;
  }
  if (weft_plan_predict(&s->env, t, time_us)) return ncclSuccess;
  WEFT_WARN(
      "comm %p rank %d: no tuning model predicts %s seq %llu (see NCCL_DEBUG_SUBSYS=INIT,GRAPH); cannot "
      "simulate it",
      (void*)comm, comm->rank, weft_coll_name(t->coll), (unsigned long long)t->seq);
  return ncclInvalidUsage;
}

#else /* no CUDA backend in this build */

ncclResult_t weft_cuda_predict(const struct weft_comm_ctx* comm, const struct weft_task* t, float* time_us) {
  (void)t;
  (void)time_us;
  WEFT_WARN("comm %p rank %d: the CUDA backend is not built in (CUDA=0)", (void*)comm, comm->rank);
  return ncclInvalidUsage;
}

const struct weft_plan_params* weft_cuda_plan_params(const struct weft_comm_ctx* comm) {
  (void)comm;
  return NULL;
}

ncclResult_t weft_cuda_launch(struct weft_comm_ctx* comm, struct weft_task* tasks) {
  (void)tasks;
  WEFT_WARN("comm %p rank %d: the CUDA backend is not built in (CUDA=0)", (void*)comm, comm->rank);
  return ncclInvalidUsage;
}
ncclResult_t weft_cuda_check_error(struct weft_comm_ctx* comm) {
  (void)comm;
  return ncclSuccess;
}
ncclResult_t weft_cuda_flush(struct weft_comm_ctx* comm) {
  (void)comm;
  return ncclSuccess;
}

#endif
