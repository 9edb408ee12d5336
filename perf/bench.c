/* The measurement loop (nccl-tests' TimeTest/BenchTime): warm-up, timed iterations, checks, and the
 * combination of times and error counts over all ranks through the communicator itself. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

_Atomic uint64_t perf_progress_marks;

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Progress is noted on every call, so it reads no clock (even a coarse one cost 2 % of a small
 * host-backend all-reduce): a mark changes, and the watchdog times how long it stays the same.
 * Threads may lose each other's increments; any change is progress. */
void perf_progress(void) {
  uint64_t m = atomic_load_explicit(&perf_progress_marks, memory_order_relaxed);
  atomic_store_explicit(&perf_progress_marks, m + 1, memory_order_relaxed);
}

static void sync_ranks(struct perf_thread* t) {
  for (int i = 0; i < t->job->args.ngpus; i++) perf_stream_sync(t->ranks[i].stream);
  perf_progress();
}

/* nccl-tests skips the wait in blocking modes with one op per iteration: each op already waited. */
static void complete(struct perf_thread* t) {
  if (t->job->args.blocking && t->job->args.agg_iters <= 1) return;
  sync_ranks(t);
}

void perf_combine(struct perf_thread* t, const double* vals, int nvals, ncclRedOp_t op, double* out) {
  struct perf_job* job = t->job;
  int g = job->args.ngpus;
  size_t bytes = (size_t)nvals * sizeof(double);
  for (int i = 0; i < g; i++) {
    perf_device_use(t->ranks[i].dev);
    perf_mem_copy(t->ranks[i].stream, t->ranks[i].scratch, vals + (size_t)i * nvals, bytes);
  }
  if (g > 1) PERF_NCCL(job, ncclGroupStart());
  for (int i = 0; i < g; i++) {
    struct perf_rank* r = &t->ranks[i];
    PERF_NCCL(job, ncclAllReduce(r->scratch, r->scratch, (size_t)nvals, ncclFloat64, op, r->comm, r->stream));
  }
  if (g > 1) PERF_NCCL(job, ncclGroupEnd());
  sync_ranks(t);
  perf_device_use(t->ranks[0].dev);
  perf_mem_copy(t->ranks[0].stream, out, t->ranks[0].scratch, bytes);
}

/* An all-reduce cannot finish on any rank before every rank has entered it. */
void perf_barrier(struct perf_thread* t) {
  double vals[t->job->args.ngpus], out;
  for (int i = 0; i < t->job->args.ngpus; i++) vals[i] = 1;
  perf_combine(t, vals, 1, ncclSum, &out);
}

static int data_op(const struct perf_thread* t) { return t->job->coll->ops == PERF_OPS_REDUCE ? t->op : -1; }

/* Send and receive pointers of local rank i, as nccl-tests lays out in-place runs. */
static void rank_ptrs(const struct perf_thread* t, int i, int in_place, size_t shift, char** send,
                      char** recv) {
  const struct perf_rank* r = &t->ranks[i];
  size_t es = (size_t)t->t->size, off = (size_t)t->job->args.unalign * es + shift;
  char* rbase = r->recv + off;
  *send = in_place ? rbase + t->c.send_inplace_off * (size_t)r->rank * es : r->send + off;
  *recv = rbase + (in_place ? t->c.recv_inplace_off * (size_t)r->rank * es : 0);
}

static ncclRedOp_t make_op(struct perf_thread* t, const struct perf_rank* r) {
  if (t->op == PERF_OP_PREMULSUM && t->job->coll->ops == PERF_OPS_REDUCE) {
    uint64_t scalar = 0;
    ncclRedOp_t op;
    perf_type_store(t->t, &scalar, 0, perf_premul_scalar(r->rank));
    PERF_NCCL(t->job, ncclRedOpCreatePreMulSum(&op, &scalar, t->t->type, ncclScalarHostImmediate, r->comm));
    return op;
  }
  return t->job->coll->ops == PERF_OPS_REDUCE ? (ncclRedOp_t)t->op : ncclSum;
}

/* Issues one op on every local rank; iteration `iter` moves the buffers to defeat caches. */
static void start_coll(struct perf_thread* t, int in_place, int iter) {
  struct perf_job* job = t->job;
  const struct perf_coll* coll = job->coll;
  int g = job->args.ngpus;
  size_t es = (size_t)t->t->size;
  size_t total = (t->c.send > t->c.recv ? t->c.send : t->c.recv) * es;
  size_t steps = total ? job->max_bytes / total : 1;
  size_t shift = total * ((size_t)iter % (steps ? steps : 1));
  struct perf_call calls[g];
  for (int i = 0; i < g; i++) {
    struct perf_rank* r = &t->ranks[i];
    char *s, *d;
    rank_ptrs(t, i, in_place, shift, &s, &d);
    calls[i] = (struct perf_call){s,       d,       t->c.param,  t->t->type, ncclSum,
                                  t->root, r->rank, job->nranks, r->comm,    r->stream};
  }
  if (coll->start_all) {
    PERF_NCCL(job, coll->start_all(calls, g, es));
  } else {
    if (g > 1) PERF_NCCL(job, ncclGroupStart());
    for (int i = 0; i < g; i++) {
      calls[i].op = make_op(t, &t->ranks[i]);
      PERF_NCCL(job, coll->start(&calls[i]));
      /* As nccl-tests: a PreMulSum op is destroyed right after its call, inside the group. */
      if (calls[i].op >= ncclNumOps) PERF_NCCL(job, ncclRedOpDestroy(calls[i].op, calls[i].comm));
    }
    if (g > 1) PERF_NCCL(job, ncclGroupEnd());
  }
  if (job->args.blocking) sync_ranks(t);
  if (job->args.blocking == 1) perf_barrier(t);
  perf_progress();
}

/* Zeroes the receive side, writes each rank's input, and derives the expected output from a copy
 * of the initial receive buffer (ranks that must not write it, e.g. non-roots of reduce, keep it). */
static void init_data(struct perf_thread* t, struct perf_data* d, uint64_t seed, int in_place) {
  struct perf_job* job = t->job;
  size_t es = (size_t)t->t->size;
  perf_data_init(d, t->t, data_op(t), job->nranks, t->root, seed, t->c.param);
  for (int i = 0; i < job->args.ngpus; i++) {
    struct perf_rank* r = &t->ranks[i];
    char *s, *recv;
    rank_ptrs(t, i, in_place, 0, &s, &recv);
    size_t span = t->c.send > t->c.recv ? t->c.send : t->c.recv;
    perf_device_use(r->dev);
    perf_mem_zero(r->stream, r->recv + (size_t)job->args.unalign * es, span * es);
    if (perf_cuda()) { /* generated on the host, then copied to the device */
      job->coll->fill(d, &t->c, r->rank, r->expected);
      perf_mem_copy(r->stream, s, r->expected, t->c.send * es);
    } else {
      job->coll->fill(d, &t->c, r->rank, s);
    }
    perf_mem_copy(r->stream, r->expected, recv, t->c.recv * es);
    job->coll->expect(d, &t->c, r->rank, r->expected);
    perf_progress(); /* -T times the library, not the host-side data generation */
  }
}

static int corrupt_requested(void) {
  static int v = -1;
  if (v < 0) {
    const char* e = getenv("PERF_TEST_CORRUPT");
    v = e && atoi(e) != 0;
  }
  return v;
}

/* Wrong elements of each local rank into wrong[]; returns their sum. */
static double check_data(struct perf_thread* t, const struct perf_data* d, int in_place, double* wrong) {
  size_t es = (size_t)t->t->size, n = t->c.recv;
  double sum = 0;
  for (int i = 0; i < t->job->args.ngpus; i++) {
    struct perf_rank* r = &t->ranks[i];
    char *s, *recv;
    rank_ptrs(t, i, in_place, 0, &s, &recv);
    perf_device_use(r->dev);
    /* Test hook: proves that a wrong result is reported (tests/perf/test_perf_smoke.sh). */
    if (r->rank == 0 && n > 0 && corrupt_requested()) {
      unsigned char b;
      perf_mem_copy(r->stream, &b, recv + (n / 2) * es, 1);
      b ^= 1;
      perf_mem_copy(r->stream, recv + (n / 2) * es, &b, 1);
    }
    if (perf_cuda()) { /* compared on the host */
      void* host = malloc(n * es + 1);
      if (!host) perf_die(t->job, PERF_INTERNAL, __FILE__, __LINE__);
      perf_mem_copy(r->stream, host, recv, n * es);
      wrong[i] = (double)perf_compare(d, host, r->expected, n);
      free(host);
    } else {
      wrong[i] = (double)perf_compare(d, recv, r->expected, n);
    }
    if (wrong[i] > 0)
      fprintf(stderr, "%s: rank %d: %.0f wrong elements of %zu (%s %s, %s)\n", t->job->hostname, r->rank,
              wrong[i], n, t->t->name, d->op >= 0 ? perf_op_name(d->op) : "none",
              in_place ? "in-place" : "out-of-place");
    sum += wrong[i];
    perf_progress();
  }
  return sum;
}

/* Time per op over all ranks as -a asks: 0 rank 0's, 1 average over threads, 2 min, 3 max. */
static double combine_time(struct perf_thread* t, double sec) {
  struct perf_job* job = t->job;
  int g = job->args.ngpus, mode = job->args.average;
  double vals[g], out;
  for (int i = 0; i < g; i++) {
    if (mode == 2 || mode == 3)
      vals[i] = sec;
    else if (mode == 0)
      vals[i] = t->ranks[i].rank == 0 ? sec : 0;
    else
      vals[i] = i == 0 ? sec : 0;
  }
  perf_combine(t, vals, 1, mode == 2 ? ncclMin : mode == 3 ? ncclMax : ncclSum, &out);
  if (mode != 0 && mode != 2 && mode != 3) out /= (double)job->world.nprocs * job->args.nthreads;
  return out;
}

/* -I: per-iteration times, max over all ranks, then min/max/p99/cv% after the -K skipped ones. */
static void iter_stats(struct perf_thread* t, double* stats) {
  struct perf_job* job = t->job;
  int n = job->args.iters, g = job->args.ngpus;
  double* vals = malloc(sizeof(double) * (size_t)n * (size_t)g);
  double* all = malloc(sizeof(double) * (size_t)n);
  if (!vals || !all) abort();
  for (int i = 0; i < g; i++) memcpy(vals + (size_t)i * n, t->iter_times, sizeof(double) * (size_t)n);
  perf_combine(t, vals, n, ncclMax, all);
  int skip = job->args.per_iter_skip, m = n - skip;
  double* s = all + skip;
  for (int i = 1; i < m; i++) /* insertion sort: iteration counts are small */
    for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
      double x = s[j];
      s[j] = s[j - 1];
      s[j - 1] = x;
    }
  double sum = 0, var = 0;
  for (int i = 0; i < m; i++) sum += s[i];
  double avg = sum / m;
  for (int i = 0; i < m; i++) var += (s[i] - avg) * (s[i] - avg);
  int p99 = (m * 99 + 99) / 100 - 1;
  stats[0] = s[0] * 1e6;
  stats[1] = s[m - 1] * 1e6;
  stats[2] = s[p99 < m - 1 ? p99 : m - 1] * 1e6;
  stats[3] = avg > 0 ? __builtin_sqrt(var / m) / avg * 100.0 : 0;
  free(vals);
  free(all);
}

/* -G: ends each rank's capture and starts the clock on the graph launches, as nccl-tests does
 * (the iterations were only recorded, not run). */
static double launch_graphs(struct perf_thread* t, void** execs) {
  int g = t->job->args.ngpus;
  for (int i = 0; i < g; i++) execs[i] = perf_graph_end(t->ranks[i].stream);
  perf_barrier(t);
  double start = now_sec();
  for (int l = 0; l < t->job->args.graph; l++)
    for (int i = 0; i < g; i++) perf_graph_launch(execs[i], t->ranks[i].stream);
  return start;
}

/* The timed iterations of one row half; returns seconds per op (or per op enqueue with -C). */
static double timed_loop(struct perf_thread* t, int in_place, double* cpu_sec) {
  const struct perf_args* a = &t->job->args;
  int outer = a->agg_iters > 1 && !t->job->coll->no_outer_group;
  void* execs[a->ngpus];
  if (a->graph > 0) /* preflight leaves -G only on GPUs and without -z */
    for (int i = 0; i < a->ngpus; i++) perf_graph_begin(t->ranks[i].stream);
  double coll_only = 0, start = now_sec();
  int timed_iters = a->blocking == 3 || a->per_iter_timing;
  for (int iter = 0; iter < a->iters; iter++) {
    double t0 = timed_iters ? now_sec() : 0; /* no clock read per call where only the loop is timed */
    if (outer) PERF_NCCL(t->job, ncclGroupStart());
    for (int k = 0; k < a->agg_iters; k++) start_coll(t, in_place, iter * a->agg_iters + k);
    if (outer) PERF_NCCL(t->job, ncclGroupEnd());
    if (timed_iters) {
      sync_ranks(t);
      double dt = now_sec() - t0;
      if (a->blocking == 3) coll_only += dt;
      if (a->per_iter_timing) t->iter_times[iter] = dt;
    }
    if (a->blocking == 3) perf_barrier(t);
  }
  if (a->graph > 0) start = launch_graphs(t, execs);
  double ops = (double)a->iters * a->agg_iters;
  *cpu_sec = (a->blocking == 3 ? coll_only : now_sec() - start) / ops;
  complete(t);
  double sec = (a->blocking == 3 ? coll_only : now_sec() - start) / ops;
  if (a->graph > 0) {
    sec /= a->graph;
    for (int i = 0; i < a->ngpus; i++) perf_graph_destroy(execs[i]);
  }
  return sec;
}

static void bench_time(struct perf_thread* t, int in_place) {
  struct perf_job* job = t->job;
  const struct perf_args* a = &job->args;
  struct perf_data d;
  if (a->check) init_data(t, &d, 99, in_place);
  start_coll(t, in_place, 0);
  complete(t);
  perf_barrier(t);

  double cpu_sec, sec = timed_loop(t, in_place, &cpu_sec);
  sec = combine_time(t, sec);
  double algbw, busbw;
  job->coll->bw(t->c.param, (size_t)t->t->size, job->nranks, sec, &algbw, &busbw);
  perf_barrier(t);

  int report = a->check && (!in_place || job->coll->check_inplace);
  double wrong = 0, local[a->ngpus];
  int local_failed = 0;
  t->rep++;
  for (int c = 0; report && c < a->check; c++) {
    init_data(t, &d, (uint64_t)t->rep, in_place);
    start_coll(t, in_place, 0);
    complete(t);
    local_failed = check_data(t, &d, in_place, local) > 0;
    perf_combine(t, local, 1, ncclSum, &wrong);
    if (wrong > 0) break;
  }
  if (local_failed) t->errors++;
  double stats[4] = {0, 0, 0, 0};
  if (a->per_iter_timing) iter_stats(t, stats);
  double usec = (a->report_cputime ? cpu_sec : sec) * 1e6;
  perf_print_row_half(t, in_place, usec, algbw, busbw, report, wrong, a->per_iter_timing ? stats : NULL);
  t->bw_sum += busbw;
  t->bw_count++;
}

static void setup_size(struct perf_thread* t, size_t size) {
  t->size = size;
  size_t es = (size_t)t->t->size;
  t->job->coll->counts(size / es, es, t->job->nranks, &t->c);
}

static void time_test(struct perf_thread* t, int type, int op, int root) {
  const struct perf_args* a = &t->job->args;
  t->t = perf_type_get(type);
  t->op = op;
  t->root = root;
  perf_barrier(t);
  size_t size = a->min_bytes;
  do { /* warm-up: sizes doubling, out-of-place only */
    setup_size(t, size);
    for (int iter = 0; iter < a->warmup_iters; iter++) start_coll(t, 0, iter);
    complete(t);
  } while (perf_next_size(a, &size, 1));
  long repeat = a->run_cycles;
  do {
    size = a->min_bytes;
    do {
      setup_size(t, size);
      perf_print_row_start(t);
      bench_time(t, 0);
      bench_time(t, 1);
      perf_print_row_end(t);
    } while (perf_next_size(a, &size, 0));
  } while (--repeat != 0);
}

void perf_thread_run_tests(struct perf_thread* t) {
  struct perf_job* job = t->job;
  const struct perf_args* a = &job->args;
  const struct perf_coll* coll = job->coll;
  int t0 = a->type == PERF_ALL ? 0 : a->type, t1 = a->type == PERF_ALL ? ncclNumTypes - 1 : a->type;
  int uses_op = coll->ops == PERF_OPS_REDUCE || coll->ops == PERF_OPS_LABEL;
  int o0 = !uses_op ? -1 : a->op == PERF_ALL ? 0 : a->op;
  int o1 = !uses_op ? -1 : a->op == PERF_ALL ? PERF_NUM_OPS - 1 : a->op;
  int r0 = !coll->rooted ? -1 : a->root == -1 ? 0 : a->root;
  int r1 = !coll->rooted ? -1 : a->root == -1 ? job->nranks - 1 : a->root;
  for (int type = t0; type <= t1; type++)
    for (int op = o0; op <= o1; op++)
      for (int root = r0; root <= r1; root++) time_test(t, type, op, root);
}
