/* The tuning model's answer for one collective, in terms the planner uses (no graph/ types, so
 * collectives/ can include it next to its own enums). Declared here, for the planner; core/topology.c
 * answers from the communicator's model (ctx->topo). */
#ifndef WEFT_COLLECTIVES_TUNED_H
#define WEFT_COLLECTIVES_TUNED_H

#include <stddef.h>

struct weft_comm_ctx;

struct weft_tuned {
  int tree;      /* 1: tree, 0: ring */
  int ll;        /* 1: LL, 0: Simple */
  int nchannels; /* as the model sizes it, within NCCL_MIN/MAX_NCHANNELS */
  float time_us; /* predicted */
};

/* Algorithms and protocols as bit masks in NCCL's order (the tuning model's enums), so that a
 * per-call selection (nccl*Config) names the same things as NCCL_ALGO / NCCL_PROTO. */
#define WEFT_TUNED_ALGO_TREE (1u << 0)
#define WEFT_TUNED_ALGO_RING (1u << 1)
#define WEFT_TUNED_ALGO_ALL 0x7fu /* Tree Ring CollNetDirect CollNetChain NVLS NVLSTree PAT */
#define WEFT_TUNED_PROTO_LL (1u << 0)
#define WEFT_TUNED_PROTO_LL128 (1u << 1)
#define WEFT_TUNED_PROTO_SIMPLE (1u << 2)
#define WEFT_TUNED_PROTO_ALL 0x7u

/* 1 with *out filled when the communicator has a tuning model and it offers a choice for coll
 * (enum weft_coll) moving nbytes (NCCL's per-rank size) among the algorithms and protocols of
 * the masks, 0 when the caller must decide itself. */
int weft_comm_tuned_choice(const struct weft_comm_ctx* comm, int coll, size_t nbytes, unsigned algos,
                           unsigned protos, struct weft_tuned* out);
/* Whether the model enables some algorithm and protocol of the masks for coll; -1 when the
 * communicator has no tuning model. */
int weft_comm_tuned_allows(const struct weft_comm_ctx* comm, int coll, unsigned algos, unsigned protos);

/* The model's predicted µs for coll moving nbytes with this algorithm, protocol and channel count
 * (what really runs, after bounds the model did not set); negative without a model. */
float weft_comm_tuned_time(const struct weft_comm_ctx* comm, int coll, size_t nbytes, int tree, int ll,
                           int nchannels);

/* A choice to explain (collectives/tune_log.c): what runs, and how the call and the backend
 * narrowed the model's candidates. */
struct weft_tuned_explain {
  int coll;
  size_t nbytes;
  unsigned call_algos, call_protos; /* the call's selection (the _ALL masks: none) */
  unsigned impl_algos;              /* algorithms the backend runs */
  struct weft_tuned pick;           /* what runs; time_us < 0: not predicted */
  const char* rule;                 /* NULL: the model chose; else the rule that did */
  const char* channels_note;        /* NULL, or why the channel count is not the model's */
};
/* Passes the explanation's lines (candidates, exclusions, choice and reason; the same lines
 * weft-topo --explain prints) to emit. 0 when the communicator has no tuning model. */
/* P2P between this rank's GPU and peer's (a rank of this host), enum weft_topo_p2p
 * (transport/transport.h): the model's verdict by the path between them and NCCL_P2P_LEVEL
 * (kept in comm->topo_p2p when the model is released); without one, denied under
 * NCCL_P2P_DISABLE or NCCL_P2P_LEVEL=LOC (the other levels need the path), else unknown. */
int weft_comm_p2p_verdict(const struct weft_comm_ctx* comm, int peer);

int weft_comm_tuned_explain(const struct weft_comm_ctx* comm, const struct weft_tuned_explain* e,
                            void (*emit)(void* arg, const char* line), void* arg);

#endif
