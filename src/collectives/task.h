/* A collective or point-to-point call as queued on its communicator until the group ends.
 * The entry points (core/api*.c) validate arguments and append tasks; the engine
 * (plan.c and an executor) consumes them in weft_enqueue_launch. */
#ifndef WEFT_COLLECTIVES_TASK_H
#define WEFT_COLLECTIVES_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

enum weft_coll {
  WEFT_COLL_BROADCAST,
  WEFT_COLL_REDUCE,
  WEFT_COLL_ALLGATHER,
  WEFT_COLL_REDUCESCATTER,
  WEFT_COLL_ALLREDUCE,
  WEFT_COLL_SEND,
  WEFT_COLL_RECV,
  WEFT_COLL_COUNT
};

/* NCCL's name of a collective, for logs ("AllReduce", "Send", ...). */
static inline const char* weft_coll_name(int coll) {
  static const char* const names[WEFT_COLL_COUNT] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                                     "AllReduce", "Send",   "Recv"};
  return coll >= 0 && coll < WEFT_COLL_COUNT ? names[coll] : "?";
}

/* Reduction as executed: Avg becomes PreMulSum(1/nranks) for floating types and SumPostDiv
 * (sum, then divide by nranks) for integers; user PreMulSum ops carry their scalar. */
enum weft_op_kind {
  WEFT_OP_SUM,
  WEFT_OP_PROD,
  WEFT_OP_MAX,
  WEFT_OP_MIN,
  WEFT_OP_PREMULSUM,  /* each rank's own input is multiplied by scalar before summing */
  WEFT_OP_SUMPOSTDIV, /* sum, then the final result is divided by divisor */
  WEFT_OP_KIND_COUNT
};

struct weft_redop {
  enum weft_op_kind kind;
  uint64_t scalar;        /* PREMULSUM: scalar's bytes in the element type (little end used) */
  const void* scalar_ptr; /* PREMULSUM with ncclScalarDevice: read when the op runs, else NULL */
  uint64_t divisor;       /* SUMPOSTDIV: nranks */
  ncclDataType_t dtype;   /* user ops: the datatype the op was created for */
  ncclRedOp_t user_op;    /* as given by the caller, for logs */
};

/* What a nccl*Config call adds to its tasks (collectives/coll_config.c); all zero for a plain call,
 * which the planner reads as automatic. */
struct weft_call_opts {
  /* Algorithms and protocols the planner may use (collectives/tuned.h's WEFT_TUNED_* bits); 0: any. */
  unsigned algos, protos;
  int min_channels, max_channels; /* channel bounds of this call; 0: unset */
  /* The call's selection as every rank must have given it (0: automatic): collectives/agree.c
   * compares it across ranks before a launch that changes it. */
  uint64_t sig;
  uint64_t profiler_tag;        /* userProfilerTag: recorded with the task and logged */
  int cta_policy;               /* CTAPolicy, the comm's when the call left it undefined */
  cudaEvent_t completion_event; /* CUDA backend: recorded on the stream after the launch */
};

struct weft_task {
  enum weft_coll coll;
  const void* sendbuff;
  void* recvbuff;
  /* NCCL's count argument: AllGather sendcount, ReduceScatter recvcount, Send/Recv count. */
  size_t count;
  ncclDataType_t dtype;
  struct weft_redop op;
  int root;            /* Broadcast/Reduce root; Send/Recv peer */
  int alone;           /* the first task of a call outside any group: it starts as soon as queued */
  uint64_t seq;        /* position in the communicator's call order, for logs and timeouts */
  cudaStream_t stream; /* the caller's stream (CUDA backend) */
  struct weft_call_opts opts;
  void* prof_ev;   /* its profiler event while one is open (collectives/profiler.h) */
  void* prof_api;  /* the CollApi or P2pApi event of the call that queued it (parent of prof_ev) */
  void* prof_gapi; /* the GroupApi event of that call's group */
  struct weft_task* next;
};

struct weft_task_queue {
  struct weft_task* head;
  struct weft_task* tail;
  int count;
};

#endif
