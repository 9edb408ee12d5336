/* Shared harness of the nccl-tests-compatible perf binaries: options, data types, verification,
 * ranks and the benchmark loop. Each <coll>_perf.c only describes its collective (struct perf_coll). */
#ifndef WEFT_PERF_COMMON_H
#define WEFT_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"

/* nccl-tests' result codes, which are also the process exit statuses. */
enum perf_result {
  PERF_OK = 0,
  PERF_INTERNAL = 1,
  PERF_CUDA_ERROR = 2,
  PERF_NCCL_ERROR = 3,
  PERF_TIMEOUT = 4,
  PERF_NOT_IMPLEMENTED = 5,
  PERF_INVALID_USAGE = 6,
  PERF_NUM_RESULTS = 7 /* wrong results or bandwidth below NCCL_TESTS_MIN_BW */
};

#define PERF_VERSION "2.19.6"
#define PERF_OP_PREMULSUM ncclNumOps /* stand-in for the op made by ncclRedOpCreatePreMulSum */
#define PERF_NUM_OPS 6
#define PERF_ALL (-1)

/* Command-line options, with nccl-tests' defaults. */
struct perf_args {
  int nthreads, ngpus;
  size_t min_bytes, max_bytes, step_bytes;
  long step_factor;
  int iters, agg_iters, warmup_iters, run_cycles;
  int parallel_init, check;
  int op;   /* ncclRedOp_t, PERF_OP_PREMULSUM or PERF_ALL */
  int type; /* ncclDataType_t or PERF_ALL */
  int root; /* -1 sweeps every root */
  int blocking, stream_null, timeout, graph, report_cputime, report_timestamps;
  int average, local_register, cta_policy, device_impl, device_cta_count, memory_report, unalign;
  int per_iter_timing, per_iter_skip;
  char* output_file;
  int self_test; /* hidden --self-test: checks the harness's own arithmetic, then exits */
};

/* Returns 0 to run, 1 to exit 0 (help, unknown option: as nccl-tests) or -1 for a bad value (exit 255). */
int perf_args_parse(struct perf_args* a, int argc, char** argv, const char* prog);
long long perf_parse_size(const char* s);
/* Next size of the sweep; returns 0 when the sweep is over. */
int perf_next_size(const struct perf_args* a, size_t* size, int warmup);

/* Data types: size, name and how many integers each represents exactly. */
enum { PERF_KIND_INT, PERF_KIND_UINT, PERF_KIND_FLOAT };
struct perf_type {
  ncclDataType_t type;
  const char* name;
  int size, kind;
  double budget;    /* largest integer magnitude that is exact (and does not overflow) */
  int max_active;   /* ranks that may contribute to one element of a sum; 0 = all */
  int ebits, mbits; /* for half, bfloat16 and fp8 encodings; 0 for native types */
  double eps;       /* 2^-mbits, for the avg tolerance */
};
const struct perf_type* perf_type_get(int type);
int perf_type_from_name(const char* name); /* ncclDataType_t, PERF_ALL, or -2 if unknown */
const char* perf_op_name(int op);
int perf_op_from_name(const char* name); /* op, PERF_ALL, or -2 if unknown */
void perf_type_store(const struct perf_type* t, void* buf, size_t i, double v);
double perf_type_load(const struct perf_type* t, const void* buf, size_t i);
uint32_t perf_minifloat_encode(double v, int ebits, int mbits, int ieee);
double perf_minifloat_decode(uint32_t bits, int ebits, int mbits, int ieee);

/* Deterministic per-rank inputs chosen so every reduction is exact in any order. */
enum { PERF_GEN_COPY, PERF_GEN_SUM, PERF_GEN_PROD, PERF_GEN_MINMAX };
struct perf_data {
  const struct perf_type* t;
  int op; /* reduction op, or -1 for data-movement collectives */
  int nranks, root;
  uint64_t seed;
  int kind, active; /* generator kind; ranks contributing to each element of a sum */
  double range;     /* values lie in [-range, range] ([0, range] for unsigned types) */
  size_t count;     /* per-call element count (the table's count column) */
};
void perf_data_init(struct perf_data* d, const struct perf_type* t, int op, int nranks, int root,
                    uint64_t seed, size_t count);
double perf_gen(const struct perf_data* d, int rank, size_t idx);
/* buf[i] = input of src_rank at element first+i. */
void perf_fill(const struct perf_data* d, void* buf, size_t n, int src_rank, size_t first);
/* buf[i] = reduction over all ranks of their inputs at element first+i. */
void perf_fill_reduced(const struct perf_data* d, void* buf, size_t n, size_t first);
double perf_premul_scalar(int rank);
/* Number of elements of got that differ from expected (bitwise, or within tolerance for avg). */
size_t perf_compare(const struct perf_data* d, const void* got, const void* expected, size_t n);

/* Element counts of one call for a swept size, in elements of the type (nccl-tests' layout). */
struct perf_counts {
  size_t send, recv, param;
  size_t send_inplace_off, recv_inplace_off; /* times the rank, for in-place runs */
};

/* One rank's call, as the harness passes it to the collective. */
struct perf_call {
  void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root, rank, nranks;
  ncclComm_t comm;
  cudaStream_t stream;
};

enum perf_ops { PERF_OPS_REDUCE, PERF_OPS_NONE, PERF_OPS_LABEL, PERF_OPS_EMPTY };

/* What a <coll>_perf.c file provides. */
struct perf_coll {
  const char* name;
  enum perf_ops ops; /* REDUCE: uses -o; NONE: prints "none"; LABEL: prints -o (sendrecv); EMPTY: "" */
  int rooted;
  int check_inplace;  /* 0: the in-place row shows N/A (alltoall, sendrecv) */
  int no_outer_group; /* 1: -m iterations are not fused in one group (ops depend on each other) */
  void (*counts)(size_t count, size_t elsize, int nranks, struct perf_counts* c);
  void (*bw)(size_t count, size_t elsize, int nranks, double sec, double* algbw, double* busbw);
  /* Writes the send buffer of rank (host view, counts.send elements). */
  void (*fill)(const struct perf_data* d, const struct perf_counts* c, int rank, void* send);
  /* Overwrites the elements of expected (a copy of the initial receive buffer) that change. */
  void (*expect)(const struct perf_data* d, const struct perf_counts* c, int rank, void* expected);
  ncclResult_t (*start)(const struct perf_call* call);
  /* Optional: issues the calls of all local ranks at once (hypercube's dependent rounds). */
  ncclResult_t (*start_all)(const struct perf_call* calls, int n, size_t elsize);
  /* Optional: says why nranks does not suit this collective, or NULL. */
  const char* (*check_nranks)(int nranks);
};

/* The collective of this binary, defined by its <coll>_perf.c. */
extern const struct perf_coll perf_this_coll;

/* Bandwidth helpers shared by the collectives: algbw in GB/s of `bytes`, busbw = algbw x factor. */
void perf_bw(double bytes, double factor, double sec, double* algbw, double* busbw);
size_t perf_base_count(size_t count, size_t elsize, int nranks);

/* device.c: host buffers on the host backend; GPUs through the CUDA runtime when the binaries are
 * built with WEFT_PERF_CUDA and a device answers (decided once by perf_device_setup). */
void perf_device_setup(void);
int perf_cuda(void); /* 1 when ranks run on GPUs */
int perf_device_index(int want);
void perf_device_use(int dev);
cudaStream_t perf_stream_create(int null_stream);
void perf_stream_destroy(cudaStream_t s);
void perf_stream_sync(cudaStream_t s);
void perf_mem_copy(cudaStream_t s, void* dst, const void* src, size_t bytes); /* done on return */
void perf_mem_copy_async(cudaStream_t s, void* dst, const void* src, size_t bytes);
void perf_mem_zero(cudaStream_t s, void* dst, size_t bytes);
int perf_buffer_matches(const void* p);
int perf_device_describe(int dev, char* name, size_t len, unsigned pci[3]);
void perf_graph_begin(cudaStream_t s);
void* perf_graph_end(cudaStream_t s);
void perf_graph_launch(void* exec, cudaStream_t s);
void perf_graph_destroy(void* exec);

/* Formatting of the table (nccl-tests' getFloatStr). */
void perf_float_str(double v, int width, char* out);

/* Rank and size of this process from the launcher's environment. */
struct perf_world {
  int nprocs, proc, local_rank;
  const char* source; /* which launcher's variables were used, or "none" */
};
int perf_world_detect(struct perf_world* w, char* err, size_t errlen);

/* launch.c: MPI (make MPI=1) or the launcher's variables give the world; the unique id reaches
 * every process by MPI_Bcast, NCCL_COMM_ID (set, or derived from MASTER_ADDR/MASTER_PORT or
 * Slurm's variables) or a file rank 0 writes. The functions that can fail write err. */
int perf_launch_init(int* argc, char*** argv);
void perf_launch_fini(void);
int perf_launch_world(struct perf_world* w, char* err, size_t errlen);
int perf_launch_plan(const struct perf_world* w, char* err, size_t errlen); /* 0 or -1 */
/* Returns an enum perf_result. */
int perf_launch_unique_id(const struct perf_world* w, ncclUniqueId* id, char* err, size_t errlen);
void perf_launch_joined(void); /* every process has the id (its communicators exist) */

int perf_self_test(void);
int perf_main(int argc, char** argv);

#endif
