/* Per-communicator state of the CUDA backend (host side). CUDA builds only. */
#ifndef WEFT_COLLECTIVES_CUDA_STATE_H
#define WEFT_COLLECTIVES_CUDA_STATE_H

#include <cuda_runtime_api.h>

#include "collectives/cuda/kernel.h"
#include "collectives/plan.h"
#include "transport/p2p.h"

struct ncclComm;

struct weft_cuda_state {
  int dev;
  int nchannels; /* ring channels connected */
  int nthreads;  /* threads per block */
  size_t simple_bytes, ll_bytes;
  int64_t p2p_ll_threshold;    /* NCCL_P2P_LL_THRESHOLD */
  struct weft_plan_params env; /* NCCL_PROTO and channel bounds, read once (weft_plan_read_env) */
  cudaStream_t setup_stream;   /* private, non-blocking: setup never waits for user work */
  cudaEvent_t last_event;      /* end of the last launch outside graph capture */
  cudaStream_t last_stream;
  int have_last;
  struct weft_cuda_devcomm* host;             /* host address of the mapped device state */
  struct weft_cuda_devcomm* devcomm;          /* its device address */
  struct weft_cuda_conn *p2p_send, *p2p_recv; /* host addresses of devcomm's p2p arrays */
  struct weft_p2p_mem *ring_send_mem[WEFT_CUDA_MAX_CHANNELS], *ring_recv_mem[WEFT_CUDA_MAX_CHANNELS];
  struct weft_p2p_mem **p2p_send_mem, **p2p_recv_mem; /* [nranks] */
};

/* Connect the p2p connectors this launch needs (both sides of each pair call it). */
ncclResult_t weft_cuda_p2p_connect(struct ncclComm* comm, const uint8_t* send_to, const uint8_t* recv_from);

#endif
