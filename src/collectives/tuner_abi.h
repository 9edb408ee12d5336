/* NCCL's tuner plugin ABI, versions 2 to 6, as external tuners (libnccl-tuner-*.so) export it:
 * our own declarations of the layouts and values NCCL defines, so existing plugins load unchanged. */
#ifndef WEFT_COLLECTIVES_TUNER_ABI_H
#define WEFT_COLLECTIVES_TUNER_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* The cost table's dimensions and numbering (NCCL_ALGO_* / NCCL_PROTO_*), in every version. */
#define WEFT_TUNER_NALGOS 7  /* Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT */
#define WEFT_TUNER_NPROTOS 3 /* LL, LL128, Simple */
#define WEFT_TUNER_ALGO_TREE 0
#define WEFT_TUNER_ALGO_RING 1
#define WEFT_TUNER_PROTO_LL 0
#define WEFT_TUNER_PROTO_SIMPLE 2
#define WEFT_TUNER_IGNORE (-1.0f) /* NCCL_ALGO_PROTO_IGNORE: the pair is not on offer */
#define WEFT_TUNER_NHW 3          /* NVLink, PCI, network */
#define WEFT_TUNER_NCOMPCAPS 4    /* Volta, Ampere, Hopper, Blackwell */
#define WEFT_TUNER_NSCALES 3      /* 1 node, 2 nodes, 4 or more */

/* ncclDebugLogger_t: what a plugin logs through (level and subsystem bits are NCCL's). */
typedef void (*weft_tuner_logger_t)(int level, unsigned long flags, const char* file, int line,
                                    const char* fmt, ...);

/* v5/v6 init inputs. */
struct weft_tuner_nvl_domains {
  int n_domains, min_ranks, max_ranks;
};
struct weft_tuner_constants {
  double base_lat[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS];
  double hw_lat[WEFT_TUNER_NHW][WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS];
  double ll_max_bw[WEFT_TUNER_NCOMPCAPS][WEFT_TUNER_NSCALES];
  double ring_ll128_bw[WEFT_TUNER_NCOMPCAPS][WEFT_TUNER_NSCALES];
  double tree_ll128_bw[WEFT_TUNER_NCOMPCAPS][WEFT_TUNER_NSCALES];
  double tree_bw[WEFT_TUNER_NCOMPCAPS][WEFT_TUNER_NSCALES];
  double nvls_tree_bw[WEFT_TUNER_NCOMPCAPS][WEFT_TUNER_NSCALES];
};

/* The cost table travels as float** but points at float[NALGOS][NPROTOS]. */
typedef ncclResult_t (*weft_tuner_table_fn_v3)(void* ctx, int coll, size_t bytes, int pipe_ops, float** table,
                                               int nalgos, int nprotos, int* nchannels);
typedef ncclResult_t (*weft_tuner_table_fn_v4)(void* ctx, int coll, size_t bytes, int pipe_ops, float** table,
                                               int nalgos, int nprotos, int reg_buff, int* nchannels);

/* ncclTunerPlugin_v2: answers an algorithm and protocol instead of editing a table. */
struct weft_tuner_v2 {
  const char* name;
  ncclResult_t (*init)(size_t nranks, size_t nnodes, weft_tuner_logger_t log, void** ctx);
  ncclResult_t (*get_coll_info)(void* ctx, int coll, size_t bytes, int collnet_ok, int nvls_ok, int pipe_ops,
                                int* algo, int* proto, int* nchannels);
  ncclResult_t (*destroy)(void* ctx);
};

/* ncclTunerPlugin_v3 and _v4: the same init; v4 adds reg_buff to the table call. */
struct weft_tuner_v3 {
  const char* name;
  ncclResult_t (*init)(size_t nranks, size_t nnodes, weft_tuner_logger_t log, void** ctx);
  weft_tuner_table_fn_v3 get_coll_info;
  ncclResult_t (*destroy)(void* ctx);
};
struct weft_tuner_v4 {
  const char* name;
  ncclResult_t (*init)(size_t nranks, size_t nnodes, weft_tuner_logger_t log, void** ctx);
  weft_tuner_table_fn_v4 get_coll_info;
  ncclResult_t (*destroy)(void* ctx);
};

/* ncclTunerPlugin_v5, and v6 which appends an optional chunk-size hook. */
struct weft_tuner_v5 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t comm_id, size_t nranks, size_t nnodes, weft_tuner_logger_t log,
                       struct weft_tuner_nvl_domains* nvl, struct weft_tuner_constants* constants);
  weft_tuner_table_fn_v4 get_coll_info;
  ncclResult_t (*finalize)(void* ctx);
};
struct weft_tuner_v6 {
  struct weft_tuner_v5 v5;
  ncclResult_t (*get_chunk_size)(void* ctx, int coll, size_t bytes, int algo, int proto, int nchannels,
                                 size_t* chunk);
};

#endif
