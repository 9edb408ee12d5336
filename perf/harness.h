/* Private state of the perf harness: the job (this process), its threads and their ranks. */
#ifndef WEFT_PERF_HARNESS_H
#define WEFT_PERF_HARNESS_H

#include <pthread.h>

#include "common.h"

#define PERF_LINE 256 /* bytes of one "#  Rank ..." device line, gathered across processes */

/* One rank ("GPU" in nccl-tests' words) driven by a thread of this process. */
struct perf_rank {
  int rank, dev;
  ncclComm_t comm;
  cudaStream_t stream;
  char* send; /* ncclMemAlloc: host memory on the host backend */
  char* recv;
  void* expected;  /* host memory */
  double* scratch; /* ncclMemAlloc: combines times and error counts over all ranks */
  void* send_reg;
  void* recv_reg;
};

struct perf_job;

struct perf_thread {
  struct perf_job* job;
  int index;
  struct perf_rank* ranks; /* job->args.ngpus of them */
  pthread_t tid;
  int rep;           /* check seeds: the same sequence on every thread */
  int errors;        /* rows in which this thread's ranks had wrong elements */
  int global_errors; /* errors summed over every thread of every process */
  double bw_sum;     /* busbw summed over rows, for "# Avg bus bandwidth" */
  int bw_count;
  double* iter_times;
  /* The row being measured. */
  const struct perf_type* t;
  int op, root;
  size_t size;
  struct perf_counts c;
};

struct perf_job {
  struct perf_args args;
  const struct perf_coll* coll;
  const char* prog;
  struct perf_world world;
  int nranks;
  ncclUniqueId id;
  int version; /* ncclGetVersion */
  char hostname[64];
  char devname[64];
  size_t max_bytes; /* after the memory cap */
  size_t alloc_bytes;
  struct perf_thread* threads;
  struct perf_rank* ranks; /* nthreads x ngpus, thread-major */
  pthread_barrier_t barrier;
  long rss_start, rss_init, rss_buffers, rss_end; /* resident bytes after each phase, for -M */
  struct perf_json* json;
};

/* The process-wide failure path: print nccl-tests' trace line and end the process with code (other
 * threads may be blocked inside collectives, so unwinding them is not attempted). */
void perf_die(struct perf_job* job, int code, const char* file, int line);
void perf_nccl_fail(struct perf_job* job, ncclResult_t res, const char* file, int line);

#define PERF_NCCL(job, call)                                                          \
  do {                                                                                \
    ncclResult_t perf_res_ = (call);                                                  \
    if (perf_res_ != ncclSuccess) perf_nccl_fail(job, perf_res_, __FILE__, __LINE__); \
  } while (0)

static inline int perf_is_printer(const struct perf_thread* t) {
  return t->index == 0 && t->job->world.proc == 0;
}

/* bench.c */
void perf_thread_run_tests(struct perf_thread* t);
void perf_barrier(struct perf_thread* t);
void perf_combine(struct perf_thread* t, const double* vals, int nvals, ncclRedOp_t op, double* out);
void perf_progress(void);

/* report.c */
void perf_print_header(const struct perf_job* job);
void perf_print_device_lines(const struct perf_job* job, char* all);
void perf_gather_devices(struct perf_thread* t);
void perf_print_table_header(const struct perf_job* job);
void perf_print_row_start(struct perf_thread* t);
void perf_print_row_half(struct perf_thread* t, int in_place, double usec, double algbw, double busbw,
                         int report_errors, double wrong, const double* iter_stats);
void perf_print_row_end(struct perf_thread* t);
int perf_print_footer(struct perf_job* job, int errors, double avg_bw);
int perf_json_open(struct perf_job* job, int argc, char** argv);
void perf_json_close(struct perf_job* job);
void perf_device_line(const struct perf_job* job, const struct perf_rank* r, char* line, size_t len);
long perf_resident_bytes(void);

#endif
