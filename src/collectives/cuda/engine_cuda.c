/* CUDA backend setup and teardown: device state in device memory, ring connectors of every
 * channel and lazily connected send/recv connectors in GPU memory (transport/p2p.c), exchanged
 * over the bootstrap as the host engine does: offer own memory, take the peer's, acknowledge. */
#include "collectives/cuda/engine_cuda.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "collectives/agree.h"
#include "collectives/context.h"
#include "collectives/engine.h"
#include "collectives/memstat.h"
#include "collectives/tree.h"
#include "collectives/tune_log.h"
#include "collectives/tuned.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"
#include "util/param.h"

#if WEFT_CUDA
#include "collectives/cuda/state.h"
#include "util/cuda_check.h"

#define TAG_RING 0x57460100 /* + channel */
#define TAG_RING_ACK 0x57460200
#define TAG_P2P 0x57460300
#define TAG_P2P_ACK 0x57460400
#define TAG_RING_CLOSED 0x57460500 /* + channel */
#define TAG_P2P_CLOSED 0x57460600
#define TAG_TREE 0x57460700 /* + channel */
#define TAG_TREE_ACK 0x57460800
#define TAG_TREE_CLOSED 0x57460900 /* + channel */
#define CLOSE_WAIT_S 5             /* how long an owner waits for its importer's "closed" note at teardown */
#define DEFAULT_CHANNELS 16
#define DEFAULT_LL_BYTES (256 * 1024)
#define BYTES_PER_CHANNEL (256 * 1024) /* the planner's defaults: a channel more per 256 KiB */

/* Both sides of a connector start at step_base (0 but in tests of the LL flag wrap), as do the
 * counters of its control page (start_ctrl). A network connector's two FIFOs are counted from 0
 * by the proxies that join them. */
static void bind(struct weft_cuda_conn* c, const struct weft_link_mem* m, uint64_t step_base, int is_send) {
  /* A NET receiver with GPUDirect RDMA has its FIFOs in this GPU's memory, apart from the page. */
  char* fifo = m->host != NULL && m->host->fifo != NULL ? m->host->fifo : m->base + WEFT_CTRL_BYTES;
  c->ctrl = (struct weft_conn_ctrl*)m->base;
  c->simple = fifo;
  c->ll = (struct weft_ll_line*)(fifo + m->simple_bytes);
  c->simple_slot = m->simple_bytes / WEFT_NSTEPS;
  c->ll_slot = m->ll_bytes / WEFT_NSTEPS;
  c->step = m->tr == &weft_transport_net ? 0 : step_base;
  c->proxied = m->tr == &weft_transport_net;
  c->tag_late = !is_send && m->host != NULL && m->host->fifo != NULL;
}

ncclResult_t weft_cuda_copy_now(struct weft_cuda_state* s, void* dev_dst, const void* src, size_t bytes) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  WEFT_CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  cudaError_t err = cudaMemcpyAsync(dev_dst, src, bytes, cudaMemcpyHostToDevice, s->setup_stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s->setup_stream);
  cudaThreadExchangeStreamCaptureMode(&mode);
  WEFT_CUDACHECK(err);
  return ncclSuccess;
}

/* The owner's counters start where both sides' steps do; the memory came zeroed. Host memory
 * (shared memory) is written in place. */
static ncclResult_t start_ctrl(struct weft_cuda_state* s, struct weft_link_mem* m) {
  if (s->step_base == 0 || m->tr == &weft_transport_net) return ncclSuccess;
  if (m->tr == &weft_transport_shm) {
    struct weft_conn_ctrl* c = (struct weft_conn_ctrl*)m->host->base;
    c->tail = c->head = s->step_base;
    return ncclSuccess;
  }
  struct weft_conn_ctrl* c = (struct weft_conn_ctrl*)m->base;
  WEFT_CHECK(weft_cuda_copy_now(s, &c->tail, &s->step_base, sizeof(uint64_t)));
  return weft_cuda_copy_now(s, &c->head, &s->step_base, sizeof(uint64_t));
}

/* Two ranks on one GPU: one host, one bus id. Each process numbers its devices its own way
 * (CUDA_VISIBLE_DEVICES), so ordinals are compared only when a bus id is unknown, in one process. */
static int same_gpu(const struct weft_peer_info* a, const struct weft_peer_info* b) {
  if (a->host_hash != b->host_hash) return 0;
  if (a->bus_id >= 0 && b->bus_id >= 0) return a->bus_id == b->bus_id;
  return a->pid_hash == b->pid_hash && a->cuda_dev == b->cuda_dev;
}

/* A network connector's proxy stops this comm's kernels (their abort flag) when it loses the
 * peer, and records whom it lost. */
void weft_cuda_link_peer(struct weft_comm_ctx* comm, int peer, struct weft_link_peer* lp) {
  struct weft_cuda_state* s = comm->cuda;
  lp->net.abort_flag = &s->host->abort;
  lp->gpu = 1;
  lp->my_dev = s->dev;
  const struct weft_peer_info *me = &comm->peers[comm->rank], *p = &comm->peers[peer];
  if (weft_comm_same_process(comm, peer)) { /* one process numbers its devices one way */
    lp->peer_dev = p->cuda_dev;
  } else {
    lp->peer_dev = weft_cuda_device_by_busid(p->bus_id);
  }
  lp->same_device = same_gpu(me, p);
  lp->topo_p2p = weft_comm_p2p_verdict(comm, peer);
  lp->stream = s->setup_stream;
}

/* Each connector peer -> me that this rank offers (in my GPU's memory, or host memory): its
 * counters start where both sides' steps do. */
static ncclResult_t offered(struct weft_comm_ctx* comm, int peer, struct weft_link_mem* mem) {
  (void)peer;
  return start_ctrl(comm->cuda, mem);
}

static ncclResult_t connect_ring(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  int k = comm->nranks, prev = (comm->rank + k - 1) % k, next = (comm->rank + 1) % k;
  struct weft_engine_link links[2 * WEFT_CUDA_MAX_CHANNELS];
  int n = 0;
  for (int c = 0; c < s->nchannels; c++) {
    links[n++] =
        (struct weft_engine_link){prev, TAG_RING + c, TAG_RING_ACK + c, &s->ring_recv_mem[c], NULL, c};
    links[n++] =
        (struct weft_engine_link){next, TAG_RING + c, TAG_RING_ACK + c, NULL, &s->ring_send_mem[c], c};
  }
  WEFT_CHECK(weft_engine_connect(comm, links, n, s->simple_bytes, s->ll_bytes, offered));
  for (int c = 0; c < s->nchannels; c++) {
    bind(&s->mirror.ring_send[c], s->ring_send_mem[c], s->step_base, 1);
    bind(&s->mirror.ring_recv[c], s->ring_recv_mem[c], s->step_base, 0);
  }
  /* No kernel runs yet: the device state is written whole. */
  return weft_cuda_copy_now(s, s->devcomm, &s->mirror, sizeof(s->mirror));
}

/* A connector just connected is bound and written to the device state; no kernel uses it yet,
 * and kernels running now only write other connectors' steps. */
static ncclResult_t push_p2p(struct weft_cuda_state* s, struct weft_cuda_conn* dev_array, int peer,
                             const struct weft_link_mem* m, int is_send) {
  struct weft_cuda_conn c;
  bind(&c, m, s->step_base, is_send);
  return weft_cuda_copy_now(s, &dev_array[peer], &c, sizeof(c));
}

/* What has memory is pushed even when the connect failed part way: later launches connect only
 * the peers without memory, and must not find an unbound connector. */
static ncclResult_t push_connected(struct weft_cuda_state* s, const struct weft_engine_link* links, int n) {
  for (int i = 0; i < n; i++) {
    int p = links[i].peer;
    if (links[i].send != NULL && s->p2p_send_mem[p] != NULL)
      WEFT_CHECK(push_p2p(s, s->mirror.p2p_send, p, s->p2p_send_mem[p], 1));
    if (links[i].recv != NULL && s->p2p_recv_mem[p] != NULL)
      WEFT_CHECK(push_p2p(s, s->mirror.p2p_recv, p, s->p2p_recv_mem[p], 0));
  }
  return ncclSuccess;
}

ncclResult_t weft_cuda_p2p_connect(struct weft_comm_ctx* comm, const uint8_t* send_to,
                                   const uint8_t* recv_from) {
  struct weft_cuda_state* s = comm->cuda;
  struct weft_engine_link* links = calloc(comm->nranks, sizeof(*links));
  if (links == NULL) return ncclSystemError;
  int n = 0;
  for (int p = 0; p < comm->nranks; p++) {
    struct weft_link_mem** recv = recv_from[p] && s->p2p_recv_mem[p] == NULL ? &s->p2p_recv_mem[p] : NULL;
    struct weft_link_mem** send = send_to[p] && s->p2p_send_mem[p] == NULL ? &s->p2p_send_mem[p] : NULL;
    if (recv != NULL || send != NULL)
      links[n++] = (struct weft_engine_link){p, TAG_P2P, TAG_P2P_ACK, recv, send, 0};
  }
  ncclResult_t res = weft_engine_connect(comm, links, n, s->simple_bytes, s->ll_bytes, offered);
  ncclResult_t pushed = push_connected(s, links, n);
  free(links);
  return res != ncclSuccess ? res : pushed;
}

/* Tree channel c's connector k: its peer (-1: none), and whether this side sends on it. */
static int tree_peer(const struct weft_cuda_devcomm* m, int c, int k) {
  return k < WEFT_TREE_DOWN ? m->tree_up[c] : m->tree_down[c][(k - WEFT_TREE_DOWN) / 2];
}
static int tree_sends(int k) { return k % 2 == 0; }

_Static_assert(WEFT_CUDA_TREE_DOWN == WEFT_TREE_MAX_DOWN, "a tree node's children, device and host");

/* Connectors k and k + 1 (k even) go to and come from the same peer: one link. */
static ncclResult_t connect_tree_links(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  struct weft_cuda_devcomm* m = &s->mirror;
  struct weft_engine_link links[WEFT_CUDA_TREE_CHANNELS * WEFT_TREE_CONNS / 2];
  int n = 0;
  for (int c = 0; c < s->env.tree_channels; c++)
    for (int k = 0; k < WEFT_TREE_CONNS; k += 2)
      if (tree_peer(m, c, k) >= 0)
        links[n++] = (struct weft_engine_link){tree_peer(m, c, k),     TAG_TREE + c,       TAG_TREE_ACK + c,
                                               &s->tree_mem[c][k + 1], &s->tree_mem[c][k], c};
  return weft_engine_connect(comm, links, n, s->simple_bytes, s->ll_bytes, offered);
}

ncclResult_t weft_cuda_tree_connect(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm->cuda;
  struct weft_cuda_devcomm* m = &s->mirror;
  for (int c = 0; c < s->env.tree_channels; c++)
    weft_tree_links(comm->nranks, comm->rank_to_node, comm->nnodes, comm->rank, c % 2, &m->tree_up[c],
                    m->tree_down[c]);
  WEFT_CHECK(connect_tree_links(comm, s));
  memset(m->tree, 0, sizeof(m->tree));
  for (int c = 0; c < s->env.tree_channels; c++) {
    for (int k = 0; k < WEFT_TREE_CONNS; k++)
      if (s->tree_mem[c][k] != NULL) bind(&m->tree[c][k], s->tree_mem[c][k], s->step_base, tree_sends(k));
    WEFT_INFO(WEFT_INIT, "comm %p rank %d: tree [%d] %d/%d/%d->%d->%d (CUDA)", (void*)comm, comm->rank, c,
              m->tree_down[c][0], m->tree_down[c][1], m->tree_down[c][2], comm->rank, m->tree_up[c]);
  }
  /* No kernel uses the tree part of the device state before this launch. */
  size_t at = offsetof(struct weft_cuda_devcomm, tree_up);
  WEFT_CHECK(weft_cuda_copy_now(s, (char*)s->devcomm + at, (char*)m + at, sizeof(*m) - at));
  s->tree_connected = 1;
  return ncclSuccess;
}

static int channels_wanted(void) {
  int n = DEFAULT_CHANNELS;
  if (weft_param_is_set("NCCL_MAX_NCHANNELS")) n = (int)weft_param_int("NCCL_MAX_NCHANNELS");
  if (weft_param_is_set("NCCL_MIN_NCHANNELS") && weft_param_int("NCCL_MIN_NCHANNELS") > n)
    n = (int)weft_param_int("NCCL_MIN_NCHANNELS");
  if (n < 1) n = 1;
  if (n > WEFT_CUDA_MAX_CHANNELS) n = WEFT_CUDA_MAX_CHANNELS;
  return n;
}

static void read_sizes(struct weft_cuda_state* s) {
  int64_t buff = weft_param_int("NCCL_BUFFSIZE");
  int64_t ll = weft_param_is_set("NCCL_LL_BUFFSIZE") ? weft_param_int("NCCL_LL_BUFFSIZE") : DEFAULT_LL_BYTES;
  if (buff < 64 * 1024) buff = 64 * 1024;
  if (ll < 32 * 1024) ll = 32 * 1024;
  s->simple_bytes = (size_t)buff;
  s->ll_bytes = (size_t)ll;
  int64_t nt = weft_param_int("NCCL_NTHREADS");
  if (nt < 64) nt = 64;
  if (nt > WEFT_CUDA_MAX_THREADS) nt = WEFT_CUDA_MAX_THREADS;
  s->nthreads = (int)(nt / 32 * 32);
  s->nchannels = channels_wanted();
  weft_plan_read_env(&s->env);
  s->env.impl_algos = WEFT_TUNED_ALGO_RING | WEFT_TUNED_ALGO_TREE; /* Tree: all-reduce (kernel.cu) */
  s->env.bytes_per_channel = BYTES_PER_CHANNEL;
  s->p2p_ll_threshold = weft_param_int("NCCL_P2P_LL_THRESHOLD");
  s->check_calls = weft_param_int("WEFT_CHECK_CALLS") != 0;
}

/* The device state (connectors, their steps) in device memory, which kernels read per work and
 * keep their step counters in between launches; only the flags the host raises or reads while
 * kernels run (abort, errors) are in pinned host memory the GPU maps. The host keeps the state as
 * it set it up (mirror): the device copy's steps move on. */
static ncclResult_t alloc_devcomm(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  size_t conns = (size_t)comm->nranks * sizeof(struct weft_cuda_conn);
  void* host = NULL;
  WEFT_CUDACHECK(cudaHostAlloc(&host, sizeof(*s->host), cudaHostAllocMapped | cudaHostAllocPortable));
  memset(host, 0, sizeof(*s->host));
  s->host = host;
  void* flags = NULL;
  WEFT_CUDACHECK(cudaHostGetDevicePointer(&flags, host, 0));
  void* dev = NULL;
  WEFT_CUDACHECK(cudaMalloc(&dev, sizeof(struct weft_cuda_devcomm) + 2 * conns));
  s->devcomm = dev;
  struct weft_cuda_devcomm* m = &s->mirror;
  memset(m, 0, sizeof(*m));
  m->flags = flags;
  m->p2p_send = (struct weft_cuda_conn*)(s->devcomm + 1);
  m->p2p_recv = m->p2p_send + comm->nranks;
  m->rank = comm->rank;
  m->nranks = comm->nranks;
  int64_t timeout = weft_param_int("WEFT_TIMEOUT");
  m->timeout_ns = timeout > 0 ? (uint64_t)timeout * 1000000000ull : 0;
  s->step_base = (uint64_t)weft_param_int("WEFT_CUDA_STEP_BASE");
  WEFT_CHECK(weft_cuda_copy_now(s, s->devcomm, m, sizeof(*m)));
  /* Send/recv connectors are unconnected (zeros) until their first use. */
  WEFT_CUDACHECK(cudaMemsetAsync(m->p2p_send, 0, 2 * conns, s->setup_stream));
  WEFT_CUDACHECK(cudaStreamSynchronize(s->setup_stream));
  return ncclSuccess;
}

static void wlist_free(struct weft_cuda_wlist* l) {
  cudaFree(l->dev);
  if (l->done) cudaEventDestroy(l->done);
  free(l);
}

void weft_cuda_devcomm_free(struct weft_cuda_state* s) {
  if (s == NULL) return;
  for (struct weft_cuda_wlist *l = s->wlists, *next; l; l = next) {
    next = l->next;
    wlist_free(l);
  }
  s->wlists = NULL;
  cudaFree(s->devcomm);
  s->devcomm = NULL;
}

/* Ranks of this host on this device, this one included. */
static int ranks_on_device(const struct weft_comm_ctx* comm, int* in_process) {
  int n = 0;
  *in_process = 0;
  const struct weft_peer_info* me = &comm->peers[comm->rank];
  for (int p = 0; p < comm->nranks; p++) {
    if (!same_gpu(me, &comm->peers[p])) continue;
    n++;
    if (p != comm->rank && weft_comm_same_process(comm, p)) *in_process = 1;
  }
  return n;
}

/* A collective needs the kernels of all its ranks running at once. Ranks sharing a device split
 * what it holds at once (SMs x resident blocks of the kernel), or blocks that cannot start wait
 * for blocks that wait for them. */
static ncclResult_t cap_to_residency(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  int sms = 0, per_sm = 0;
  WEFT_CUDACHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, s->dev));
  WEFT_CUDACHECK((cudaError_t)weft_cuda_kernel_occupancy(s->nthreads, &per_sm));
  int sharing = ranks_on_device(comm, &s->device_shared_in_process);
  s->max_blocks = sms * per_sm / sharing;
  if (s->max_blocks < 1) {
    WEFT_WARN(
        "comm %p rank %d: %d ranks share device %d, which runs only %d blocks of %d threads at once "
        "(%d SMs x %d); their kernels could never all run together. Use fewer ranks per GPU or a smaller "
        "NCCL_NTHREADS",
        (void*)comm, comm->rank, sharing, s->dev, sms * per_sm, s->nthreads, sms, per_sm);
    return ncclInvalidUsage;
  }
  if (s->nchannels > s->max_blocks) {
    WEFT_INFO(WEFT_INIT,
              "comm %p rank %d: %d channel(s): %d ranks share device %d, which holds %d blocks at once",
              (void*)comm, comm->rank, s->max_blocks, sharing, s->dev, sms * per_sm);
    s->nchannels = s->max_blocks;
  }
  return ncclSuccess;
}

/* Ranks agree on what shapes a ring step (buffer sizes, channels, NCCL_PROTO and channel bounds),
 * as on the host backend (collectives/agree.c): each rank's chunk comes from its connectors, and
 * ranks cutting different steps wait for each other forever. */
static ncclResult_t agree_shape(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  s->env.comm = comm; /* the planner's tuning model, agreed across ranks at its init */
  s->env.nranks = comm->nranks;
  s->env.rank = comm->rank;
  s->env.nnodes = comm->nnodes;
  s->env.nchannels = s->nchannels;
  WEFT_CHECK(weft_plan_agree(comm, &s->env, s->simple_bytes, s->ll_bytes)); /* and the tuner plugin */
  s->nchannels = s->env.nchannels;
  s->simple_bytes = s->env.simple_slot * WEFT_NSTEPS;
  s->ll_bytes = s->env.ll_slot * WEFT_NSTEPS;
  return ncclSuccess;
}

static ncclResult_t init_on_device(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = calloc(1, sizeof(*s));
  if (s == NULL) return ncclSystemError;
  comm->cuda = s;
  s->dev = comm->cuda_dev;
  s->p2p_send_mem = calloc(comm->nranks, sizeof(*s->p2p_send_mem));
  s->p2p_recv_mem = calloc(comm->nranks, sizeof(*s->p2p_recv_mem));
  if (s->p2p_send_mem == NULL || s->p2p_recv_mem == NULL) return ncclSystemError;
  read_sizes(s);
  s->env.tune_log = weft_tune_log_create(comm); /* kernels timed by events: tune_time.c */
  WEFT_CUDACHECK(cudaSetDevice(s->dev));
  WEFT_CHECK(cap_to_residency(comm, s));
  WEFT_CHECK(agree_shape(comm, s));
  s->env.tree_channels = s->nchannels < WEFT_CUDA_TREE_CHANNELS ? s->nchannels : WEFT_CUDA_TREE_CHANNELS;
  WEFT_CUDACHECK(cudaStreamCreateWithFlags(&s->setup_stream, cudaStreamNonBlocking));
  WEFT_CUDACHECK(cudaEventCreateWithFlags(&s->last_event, cudaEventDisableTiming));
  WEFT_CHECK(alloc_devcomm(comm, s));
  if (comm->nranks > 1) WEFT_CHECK(connect_ring(comm, s));
  WEFT_INFO(WEFT_INIT,
            "comm %p rank %d device %d: CUDA backend, %d ring channel(s), Simple %zu and LL %zu bytes "
            "per connector, %d threads per block",
            (void*)comm, comm->rank, s->dev, s->nchannels, s->simple_bytes, s->ll_bytes, s->nthreads);
  return ncclSuccess;
}

/* Setup selects the comm's device; the caller gets its own back, as from NCCL (a thread that
 * initializes comms for several GPUs keeps the device it selected). */
ncclResult_t weft_cuda_comm_init(struct weft_comm_ctx* comm) {
  int caller = -1;
  if (cudaGetDevice(&caller) != cudaSuccess) caller = -1;
  ncclResult_t res = init_on_device(comm);
  if (caller >= 0 && caller != comm->cuda_dev) cudaSetDevice(caller);
  return res;
}

/* Close a peer's memory, then tell that peer (in another process) it may free it (bs: NULL when
 * the comm was aborted and peers are not waited for). */
static void close_peer_mem(struct weft_bootstrap* bs, struct weft_link_mem** m, int peer, int tag) {
  int imported = *m != NULL && (*m)->p2p != NULL && (*m)->p2p->ipc;
  weft_transport_release(*m);
  *m = NULL;
  int one = 1;
  if (imported && bs) weft_bootstrap_send(bs, peer, tag, &one, sizeof(one));
}

/* Free own memory, after the peer that imported it says it closed it (or a bounded wait: the
 * memory is then freed once the importer marks it, see transport/p2p.c). */
static void free_own_mem(struct weft_bootstrap* bs, struct weft_link_mem** m, int peer, int tag) {
  const struct weft_p2p_mem* p2p = *m != NULL ? (*m)->p2p : NULL;
  int exported = p2p != NULL && p2p->owner && !p2p->shared;
  int closed = 0;
  if (exported && bs) weft_bootstrap_recv_within(bs, peer, tag, &closed, sizeof(closed), CLOSE_WAIT_S);
  weft_transport_release(*m);
  *m = NULL;
}

/* Tree connectors go the same way: the send sides closed first, then own memory freed. The
 * channel's tag tells the two directions of a pair apart from the ring's and p2p's notes. */
static void release_tree(struct weft_bootstrap* bs, struct weft_cuda_state* s, int own) {
  for (int c = 0; c < WEFT_CUDA_TREE_CHANNELS; c++)
    for (int k = own; k < WEFT_TREE_CONNS; k += 2) {
      int peer = tree_peer(&s->mirror, c, k);
      if (own)
        free_own_mem(bs, &s->tree_mem[c][k], peer, TAG_TREE_CLOSED + c);
      else
        close_peer_mem(bs, &s->tree_mem[c][k], peer, TAG_TREE_CLOSED + c);
    }
  s->tree_connected = 0;
}

/* Peers' memory (the send sides) is closed before own memory is freed: CUDA IPC memory must not be
 * freed while another process still has it open. */
static void release_connectors(struct weft_bootstrap* bs, int rank, int k, struct weft_cuda_state* s) {
  int next = (rank + 1) % k, prev = (rank + k - 1) % k;
  if (k < 2) bs = NULL;
  for (int c = 0; c < WEFT_CUDA_MAX_CHANNELS; c++)
    close_peer_mem(bs, &s->ring_send_mem[c], next, TAG_RING_CLOSED + c);
  for (int p = 0; s->p2p_send_mem && p < k; p++) close_peer_mem(bs, &s->p2p_send_mem[p], p, TAG_P2P_CLOSED);
  release_tree(bs, s, 0);
  for (int c = 0; c < WEFT_CUDA_MAX_CHANNELS; c++)
    free_own_mem(bs, &s->ring_recv_mem[c], prev, TAG_RING_CLOSED + c);
  for (int p = 0; s->p2p_recv_mem && p < k; p++) free_own_mem(bs, &s->p2p_recv_mem[p], p, TAG_P2P_CLOSED);
  release_tree(bs, s, 1);
}

/* Everything the state holds on the device. cudaFree waits for the whole device. */
static void free_state(struct weft_bootstrap* bs, int rank, int nranks, struct weft_cuda_state* s) {
  release_connectors(bs, rank, nranks, s);
  free(s->p2p_send_mem);
  free(s->p2p_recv_mem);
  free(s->restore_p2p);
  weft_cuda_devcomm_free(s);
  if (s->host) cudaFreeHost(s->host);
  if (s->last_event) cudaEventDestroy(s->last_event);
  if (s->setup_stream) cudaStreamDestroy(s->setup_stream);
  weft_cuda_timers_free(s);
  cudaGetLastError(); /* teardown errors are not the next call's business */
  weft_tune_log_destroy(s->env.tune_log);
  free(s);
}

struct reap_job {
  struct weft_cuda_state* s;
  int rank, nranks;
};

static void* reap_main(void* arg) {
  struct reap_job* j = arg;
  cudaSetDevice(j->s->dev);
  free_state(NULL, j->rank, j->nranks, j->s);
  free(j);
  return NULL;
}

/* An aborted comm's device memory is freed by a thread of its own: cudaFree waits for every kernel
 * on the device, and another rank of this process may have one waiting for this rank until its
 * own timeout. Abort returns at once. */
static void reap_later(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  struct reap_job* j = malloc(sizeof(*j));
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (j != NULL) *j = (struct reap_job){s, comm->rank, comm->nranks};
  if (j == NULL || pthread_create(&th, &attr, reap_main, j) != 0) {
    free(j);
    free_state(NULL, comm->rank, comm->nranks, s); /* no thread: free here, waiting if need be */
  }
  pthread_attr_destroy(&attr);
}

/* The comm's device for a call that reports no setting error, and the caller's back after: a
 * thread driving comms on several GPUs keeps the device it selected, as with NCCL. */
static int enter_device(int dev) {
  int caller = -1;
  if (cudaGetDevice(&caller) != cudaSuccess) caller = -1;
  cudaSetDevice(dev);
  return caller;
}

static void leave_device(int caller, int dev) {
  if (caller >= 0 && caller != dev) cudaSetDevice(caller);
}

void weft_cuda_stop(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm ? comm->cuda : NULL;
  if (s == NULL || s->host == NULL) return;
  __atomic_store_n(&s->host->abort, 1, __ATOMIC_SEQ_CST);
  int caller = enter_device(s->dev);
  weft_cuda_flush(comm);
  leave_device(caller, s->dev);
}

void weft_cuda_comm_fini(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm ? comm->cuda : NULL;
  if (s == NULL) return;
  int dev = s->dev;
  int caller = enter_device(dev); /* the caller's device is given back at the end */
  /* An aborted comm stops its kernels (every wait polls this flag); a destroyed one lets them end. */
  int aborted = weft_comm_aborted(comm);
  if (s->host != NULL && aborted) {
    __atomic_store_n(&s->host->abort, 1, __ATOMIC_SEQ_CST);
  }
  /* Replays of graphs that captured this comm's launches run on streams the comm never sees; they
   * must end before its connectors are closed and freed. (cudaFree would wait for them too, but
   * closing a peer's CUDA IPC memory comes first.) */
  if (s->captured && !aborted) cudaDeviceSynchronize();
  weft_cuda_flush(comm); /* own launches end; a kernel that gave up is logged even if nobody asked */
  if (!aborted) weft_cuda_timers_collect(s); /* the last timed kernels, for the tuning log */
  comm->cuda = NULL;
  if (aborted)
    reap_later(comm, s);
  else
    free_state(comm->bootstrap, comm->rank, comm->nranks, s);
  leave_device(caller, dev);
}

ncclResult_t weft_cuda_comm_drain(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm->cuda;
  int caller = enter_device(s->dev);
  ncclResult_t res = ncclSuccess;
  /* Replays of graphs that captured this comm's launches run on streams it never sees. */
  if (s->captured) WEFT_CUDACHECK_GOTO(cudaDeviceSynchronize(), res, out);
  res = weft_cuda_flush(comm);
out:
  leave_device(caller, s->dev);
  return res;
}

/* Work lists no kernel reads any more (drained); a captured one is its graph's for good. */
static void free_idle_wlists(struct weft_cuda_state* s) {
  for (struct weft_cuda_wlist** at = &s->wlists; *at;) {
    struct weft_cuda_wlist* l = *at;
    if (l->captured) {
      at = &l->next;
      continue;
    }
    *at = l->next;
    wlist_free(l);
  }
}

/* The connectors go the way teardown sends them (peers' memory closed, then own memory freed once
 * its importer says it closed it); the device state stays where it is, since kernel arguments
 * (captured graphs' too) point at it, and gets the new connectors at resume. */
ncclResult_t weft_cuda_comm_suspend(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm->cuda;
  int k = comm->nranks;
  uint8_t* flags = calloc(2 * (size_t)k, 1);
  if (flags == NULL) {
    WEFT_WARN("comm %p rank %d: out of memory suspending the communicator", (void*)comm, comm->rank);
    return ncclSystemError;
  }
  for (int p = 0; p < k; p++) {
    flags[p] = s->p2p_send_mem[p] != NULL;
    flags[k + p] = s->p2p_recv_mem[p] != NULL;
  }
  int caller = enter_device(s->dev);
  release_connectors(comm->bootstrap, comm->rank, k, s);
  free_idle_wlists(s);
  cudaGetLastError(); /* like teardown's: not the application's next error */
  leave_device(caller, s->dev);
  free(s->restore_p2p);
  s->restore_p2p = flags;
  return ncclSuccess;
}

/* Send/recv entries start unconnected (zeros), as after init, until restored or first used. */
static ncclResult_t resume_on_device(struct weft_comm_ctx* comm, struct weft_cuda_state* s) {
  size_t conns = (size_t)comm->nranks * sizeof(struct weft_cuda_conn);
  WEFT_CUDACHECK(cudaMemsetAsync(s->mirror.p2p_send, 0, 2 * conns, s->setup_stream));
  WEFT_CUDACHECK(cudaStreamSynchronize(s->setup_stream));
  if (comm->nranks > 1) WEFT_CHECK(connect_ring(comm, s));
  if (s->restore_p2p == NULL) return ncclSuccess;
  return weft_cuda_p2p_connect(comm, s->restore_p2p, s->restore_p2p + comm->nranks);
}

ncclResult_t weft_cuda_comm_resume(struct weft_comm_ctx* comm) {
  struct weft_cuda_state* s = comm->cuda;
  int caller = enter_device(s->dev);
  ncclResult_t res = resume_on_device(comm, s);
  free(s->restore_p2p);
  s->restore_p2p = NULL;
  leave_device(caller, s->dev);
  return res;
}

/* Own connectors (the receiving side's; a peer's are counted by that peer), work lists and the
 * device state. The host-mapped flags are pinned host memory the GPU maps: state. */
/* Own connectors only (the receiving side's; a peer's are counted by that peer): GPU memory, or
 * host memory the GPU maps (shared memory, network FIFOs). */
void weft_cuda_mem_usage(const struct weft_comm_ctx* comm, struct weft_mem_usage* u) {
  const struct weft_cuda_state* s = comm->cuda;
  if (s == NULL) return;
  /* Both sides of every connector: a network connector's FIFO is each side's own. */
  for (int c = 0; c < WEFT_CUDA_MAX_CHANNELS; c++) {
    weft_mem_usage_add_link(u, s->ring_send_mem[c]);
    weft_mem_usage_add_link(u, s->ring_recv_mem[c]);
  }
  for (int p = 0; s->p2p_recv_mem && p < comm->nranks; p++) {
    weft_mem_usage_add_link(u, s->p2p_send_mem[p]);
    weft_mem_usage_add_link(u, s->p2p_recv_mem[p]);
  }
  for (int c = 0; c < WEFT_CUDA_TREE_CHANNELS; c++)
    for (int k = 0; k < WEFT_TREE_CONNS; k++) weft_mem_usage_add_link(u, s->tree_mem[c][k]);
  for (const struct weft_cuda_wlist* l = s->wlists; l; l = l->next) {
    uint64_t bytes = (uint64_t)l->cap * sizeof(struct weft_cuda_work);
    if (l->captured)
      u->persist[WEFT_MEM_DEVICE] += bytes;
    else
      u->suspendable[WEFT_MEM_STAGING] += bytes;
  }
  if (s->devcomm != NULL)
    u->persist[WEFT_MEM_DEVICE] +=
        sizeof(struct weft_cuda_devcomm) + 2 * (uint64_t)comm->nranks * sizeof(struct weft_cuda_conn);
  if (s->host != NULL) u->persist[WEFT_MEM_STATE] += sizeof(*s->host);
}

#else /* no CUDA backend in this build */

ncclResult_t weft_cuda_comm_drain(struct weft_comm_ctx* comm) { return weft_cuda_comm_init(comm); }
ncclResult_t weft_cuda_comm_suspend(struct weft_comm_ctx* comm) { return weft_cuda_comm_init(comm); }
ncclResult_t weft_cuda_comm_resume(struct weft_comm_ctx* comm) { return weft_cuda_comm_init(comm); }
void weft_cuda_mem_usage(const struct weft_comm_ctx* comm, struct weft_mem_usage* u) { (void)comm, (void)u; }

ncclResult_t weft_cuda_comm_init(struct weft_comm_ctx* comm) {
  WEFT_WARN("comm %p rank %d: the CUDA backend is not built in (CUDA=0)", (void*)comm, comm->rank);
  return ncclInvalidUsage;
}
void weft_cuda_comm_fini(struct weft_comm_ctx* comm) { (void)comm; }
void weft_cuda_stop(struct weft_comm_ctx* comm) { (void)comm; }
void weft_cuda_link_peer(struct weft_comm_ctx* comm, int peer, struct weft_link_peer* lp) {
  (void)comm, (void)peer, (void)lp;
}

#endif
