/* The CUDA backend's one kernel: each block is a channel of the launch's collectives (running
 * the ring and tree bodies of collectives/algo/ with the CUDA prims) or the owner of one peer and
 * direction of its sends and receives. Datatype and op are switched at run time inside the
 * data loops, so one kernel serves every collective, type and op. */
#include "collectives/cuda/kernel.h"
#include "collectives/cuda/prims_dev.cuh"
#include "collectives/cuda/tree_dev.cuh"
#include "collectives/task.h"
/* The algorithm bodies, compiled over the prims above. */
#include "collectives/algo/ring.h"
#include "collectives/algo/sendrecv.h"
#include "collectives/algo/tree.h"

/* A connector's device view, from the device state (once per work): its step is what thread 0
 * of this block wrote back after the connector's last work, before a __syncthreads or in an
 * earlier launch (each connector belongs to one block per launch). */
__device__ __forceinline__ void weft_conn_load(struct weft_cuda_conn* dst, const struct weft_cuda_conn* src) {
  *dst = *src;
}

__device__ void weft_prims_init(struct weft_prims* p, struct weft_cuda_devcomm* comm,
                                const struct weft_cuda_work* w, int channel) {
  p->comm = comm;
  p->proto = w->proto;
  p->dtype = w->dtype;
  p->esize = (int)weft_dt_size(w->dtype);
  p->op.kind = w->op_kind;
  p->op.scalar = w->scalar;
  p->op.divisor = w->divisor;
  if (w->scalar_ptr != NULL) { /* ncclScalarDevice: the value at the time the op runs */
    uint64_t v = 0;
    memcpy(&v, w->scalar_ptr, p->esize);
    p->op.scalar = v;
  }
  p->reducing =
      w->coll == WEFT_COLL_REDUCE || w->coll == WEFT_COLL_REDUCESCATTER || w->coll == WEFT_COLL_ALLREDUCE;
  p->in = (const char*)w->sendbuff;
  p->out = (char*)w->recvbuff;
  p->channel = channel;
  p->coll = w->coll;
  p->send_peer = p->recv_peer = -1;
  /* A point-to-point block holds one side only: the other must read as absent, not as whatever
   * the stack held, for the wait checks that look at both sides' control lines (prims_dev.cuh). */
  p->send.ctrl = p->recv.ctrl = NULL;
  p->failed = 0;
  p->wait_said = 0;
  p->step_tag = w->step_tag;
  p->tag_send = p->tag_recv = w->step_tag != 0;
  p->prog = weft_progress_slot(comm, blockIdx.x);
  p->nsteps = 0;
}

/* Thread 0, as the block takes up a work: the recorder's slot says which, no steps yet. */
__device__ __forceinline__ void weft_progress_begin(struct weft_cuda_devcomm* comm,
                                                    const struct weft_cuda_work* w) {
  struct weft_progress_chan* pc = weft_progress_slot(comm, blockIdx.x);
  weft_st_note(&pc->op, (uint64_t)w->seq + 1);
  weft_st_note(&pc->steps, 0);
  weft_st_note(&pc->wait, 0);
}

/* Thread 0, as the block leaves the launch (failed or not): the last block to leave says the
 * launch is done, unless the communicator was aborted (a block gave up, or the host stopped it). */
__device__ __noinline__ void weft_launch_end(struct weft_cuda_devcomm* comm, uint32_t launch) {
  __threadfence(); /* a block that gave up raised abort before it counts itself */
  if (weft_atomic_inc(&comm->blocks_ended) + 1 < gridDim.x) return;
  comm->blocks_ended = 0; /* every block of this launch has counted: the next one starts from 0 */
  struct weft_cuda_hostcomm* c = comm->flags;
  if (!weft_flag_ld(&c->abort)) weft_st_note(&c->progress.launch_done, launch);
}

/* Tree all-reduce on channel ch (tree ch % 2): its connectors in, their steps written back. */
__device__ __noinline__ int weft_run_tree(struct weft_cuda_devcomm* comm, const struct weft_cuda_work* w,
                                          int ch, const struct weft_dev_work* dw) {
  struct weft_tree_prims t;
  weft_prims_init(&t.p, comm, w, ch);
  t.in = t.p.in;
  t.op = t.p.op;
  t.up = comm->tree_up[ch];
  t.ndown = 0;
  for (int i = 0; i < WEFT_CUDA_TREE_DOWN; i++) t.ndown += comm->tree_down[ch][i] >= 0;
  for (int k = 0; k < WEFT_TREE_CONNS; k++) {
    weft_conn_load(&t.c[k], &comm->tree[ch][k]);
    t.tag[k] = w->step_tag != 0;
    t.peer[k] = k < WEFT_TREE_DOWN ? t.up : comm->tree_down[ch][(k - WEFT_TREE_DOWN) / 2];
  }
  weft_tree_allreduce(&t, dw);
  __syncthreads();
  if (threadIdx.x == 0)
    for (int k = 0; k < WEFT_TREE_CONNS; k++) comm->tree[ch][k].step = t.c[k].step;
  return t.p.failed;
}

/* Returns 1 (in every thread) when a wait gave up. */
__device__ int weft_run_coll(struct weft_cuda_devcomm* comm, const struct weft_cuda_work* w, int ch) {
  size_t off, cnt = weft_channel_range(w->count, w->nchannels, ch, &off); /* as plan.c splits */
  if (cnt == 0) return 0;
  struct weft_dev_work dw;
  dw.coll = w->coll;
  dw.dtype = w->dtype;
  dw.proto = w->proto;
  dw.rank = comm->rank;
  dw.nranks = comm->nranks;
  dw.root = w->root;
  dw.op.kind = w->op_kind;
  dw.op.scalar = w->scalar;
  dw.op.divisor = w->divisor;
  dw.count = w->count;
  dw.ch_offset = off;
  dw.ch_count = cnt;
  dw.chunk = w->chunk;
  if (w->algo == WEFT_CUDA_ALGO_TREE && dw.nranks > 1) return weft_run_tree(comm, w, ch, &dw);
  struct weft_prims p;
  weft_prims_init(&p, comm, w, ch);
  if (dw.nranks > 1) {
    weft_conn_load(&p.send, &comm->ring_send[ch]);
    weft_conn_load(&p.recv, &comm->ring_recv[ch]);
    p.send_peer = (dw.rank + 1) % dw.nranks;
    p.recv_peer = (dw.rank + dw.nranks - 1) % dw.nranks;
  }
  switch (w->coll) {
    case WEFT_COLL_BROADCAST:
      weft_ring_broadcast(&p, &dw);
      break;
    case WEFT_COLL_REDUCE:
      weft_ring_reduce(&p, &dw);
      break;
    case WEFT_COLL_ALLGATHER:
      weft_ring_allgather(&p, &dw);
      break;
    case WEFT_COLL_REDUCESCATTER:
      weft_ring_reducescatter(&p, &dw);
      break;
    default:
      weft_ring_allreduce(&p, &dw);
      break;
  }
  __syncthreads();
  if (threadIdx.x == 0 && dw.nranks > 1) {
    comm->ring_send[ch].step = p.send.step;
    comm->ring_recv[ch].step = p.recv.step;
  }
  return p.failed;
}

__device__ int weft_run_p2p(struct weft_cuda_devcomm* comm, const struct weft_cuda_work* w) {
  struct weft_prims p;
  weft_prims_init(&p, comm, w, blockIdx.x);
  int peer = w->root;
  struct weft_cuda_conn* conn;
  if (w->coll == WEFT_COLL_SEND) {
    conn = &comm->p2p_send[peer];
    weft_conn_load(&p.send, conn);
    p.send_peer = peer;
    weft_p2p_send(&p, w->count, w->chunk);
  } else {
    conn = &comm->p2p_recv[peer];
    weft_conn_load(&p.recv, conn);
    p.recv_peer = peer;
    weft_p2p_recv(&p, w->count, w->chunk);
  }
  __syncthreads();
  if (threadIdx.x == 0) conn->step = w->coll == WEFT_COLL_SEND ? p.send.step : p.recv.step;
  return p.failed;
}

__global__ void __launch_bounds__(WEFT_CUDA_MAX_THREADS, 1) weft_cuda_kernel(struct weft_cuda_kargs args) {
  __shared__ struct weft_cuda_work s_work; /* the current work, read once */
  struct weft_cuda_devcomm* comm = args.comm;
  for (int i = 0; i < args.nworks; i++) {
    /* A group too large for the arguments has its whole list in device memory: still one launch.
     * (No pointer into the arguments: that would copy them to every thread's local memory.)
     * A kernel queued behind one that gave up does nothing, so the recorder keeps where that one
     * stopped: one host-mapped read per block and launch, beside the first work's. */
    int stop = 0;
    if (threadIdx.x == 0) {
      s_work = args.list != NULL ? args.list[i] : args.works[i];
      if (i == 0) stop = weft_flag_ld(&comm->flags->abort);
    }
    if (__syncthreads_or(stop)) break;
    const struct weft_cuda_work* w = &s_work;
    int is_p2p = w->coll == WEFT_COLL_SEND || w->coll == WEFT_COLL_RECV;
    int mine = is_p2p ? w->block == (int)blockIdx.x : (int)blockIdx.x < w->nchannels;
    __syncthreads(); /* everyone has read s_work before it can change */
    if (!mine) continue;
    if (threadIdx.x == 0) weft_progress_begin(comm, w);
    int failed = is_p2p ? weft_run_p2p(comm, w) : weft_run_coll(comm, w, blockIdx.x);
    /* s_work is read by all before thread 0 overwrites it. failed is the same in every thread:
     * aborted or timed out, which the host reports. */
    __syncthreads();
    if (failed) break;
  }
  if (threadIdx.x == 0) weft_launch_end(comm, args.launch);
}

extern "C" int weft_cuda_kernel_launch(const struct weft_cuda_kargs* args, int nblocks, int nthreads,
                                       void* stream) {
  /* cudaLaunchKernel returns this launch's own error; cudaGetLastError after <<<>>> would also
   * return an error some earlier call of the application left behind. */
  void* params[] = {(void*)args};
  return (int)cudaLaunchKernel((const void*)weft_cuda_kernel, dim3(nblocks), dim3(nthreads), params, 0,
                               (cudaStream_t)stream);
}

extern "C" int weft_cuda_kernel_occupancy(int nthreads, int* blocks_per_sm) {
  return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, weft_cuda_kernel, nthreads, 0);
}
