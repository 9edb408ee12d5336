/* Job setup of the perf binaries: ranks from -t x -g and the launcher's environment, communicators,
 * buffers, threads, the -T watchdog, teardown and the exit status (nccl-tests' run()). */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static struct perf_job job_state;
extern _Atomic uint64_t perf_progress_marks;

void perf_die(struct perf_job* job, int code, const char* file, int line) {
  perf_launch_joined(); /* a rendezvous file of a failed job would only mislead a later one */
  printf(" .. %s pid %d: Test failure %s:%d\n", job->hostname, (int)getpid(), file, line);
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

void perf_nccl_fail(struct perf_job* job, ncclResult_t res, const char* file, int line) {
  printf("%s: Test NCCL failure %s:%d '%s / %s'\n", job->hostname, file, line, ncclGetErrorString(res),
         ncclGetLastError(NULL));
  perf_die(job, PERF_NCCL_ERROR, file, line);
}

static void host_names(struct perf_job* job) {
  gethostname(job->hostname, sizeof(job->hostname) - 1);
  char* dot = strchr(job->hostname, '.');
  if (dot) *dot = '\0';
  snprintf(job->devname, sizeof(job->devname), "host CPU");
  FILE* f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof(line), f)) {
    char* colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !colon) continue;
    colon[strcspn(colon, "\n")] = '\0';
    snprintf(job->devname, sizeof(job->devname), "%s", colon + 2);
    break;
  }
  if (f) fclose(f);
}

/* nccl-tests' cap: keep 1 GiB per 16 GiB (at most 4) plus 1 GiB free, shared by this process's ranks. */
static void cap_max_bytes(struct perf_job* job) {
  const size_t gb = 1ull << 30;
  size_t mem = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
  size_t reserve = (mem + 16 * gb - 1) / (16 * gb) * gb;
  if (reserve > 4 * gb) reserve = 4 * gb;
  size_t per = (size_t)(job->args.check ? 3 : 2) * (size_t)job->args.nthreads * (size_t)job->args.ngpus;
  size_t cap = mem > reserve + gb ? (mem - reserve - gb) / per : 0;
  job->max_bytes = job->args.max_bytes;
  if (cap && job->max_bytes > cap) {
    job->max_bytes = job->args.max_bytes = cap;
    if (job->args.min_bytes > cap) job->args.min_bytes = cap;
    if (job->world.proc == 0) printf("#\n# Reducing maxBytes to %ld due to memory limitation\n", (long)cap);
  }
}

/* The communicator takes the current device, so each rank's device is set before its init. */
static void init_comms(struct perf_job* job, struct perf_rank* ranks, int n) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.nvlinkCentricSched = 1;
  if (job->args.cta_policy >= 0) config.CTAPolicy = job->args.cta_policy;
  PERF_NCCL(job, ncclGroupStart());
  for (int i = 0; i < n; i++) {
    perf_device_use(ranks[i].dev);
    ranks[i].stream = perf_stream_create(job->args.stream_null);
    PERF_NCCL(job, ncclCommInitRankConfig(&ranks[i].comm, job->nranks, job->id, ranks[i].rank, &config));
  }
  PERF_NCCL(job, ncclGroupEnd());
}

/* Buffers are allocated inside a group, as nccl-tests does (ncclMemAlloc must work there). */
static void alloc_buffers(struct perf_job* job, struct perf_rank* ranks, int n) {
  size_t scratch = sizeof(double) * (size_t)(job->args.iters * job->args.ngpus + 64);
  PERF_NCCL(job, ncclGroupStart());
  for (int i = 0; i < n; i++) {
    perf_device_use(ranks[i].dev); /* ncclMemAlloc allocates on the current device */
    PERF_NCCL(job, ncclMemAlloc((void**)&ranks[i].send, job->alloc_bytes));
    PERF_NCCL(job, ncclMemAlloc((void**)&ranks[i].recv, job->alloc_bytes));
    PERF_NCCL(job, ncclMemAlloc((void**)&ranks[i].scratch, scratch));
    ranks[i].expected = malloc(job->alloc_bytes);
    if (!ranks[i].expected) perf_die(job, PERF_INTERNAL, __FILE__, __LINE__);
  }
  PERF_NCCL(job, ncclGroupEnd());
  for (int i = 0; i < n; i++)
    if (!perf_buffer_matches(ranks[i].send)) {
      printf(
          "%s: ncclMemAlloc returned host memory although GPUs are in use: set WEFT_BACKEND to the same "
          "value for the library and the test\n",
          job->hostname);
      perf_die(job, PERF_CUDA_ERROR, __FILE__, __LINE__);
    }
  if (!job->args.local_register) return;
  PERF_NCCL(job, ncclGroupStart());
  for (int i = 0; i < n; i++) {
    struct perf_rank* r = &ranks[i];
    if (job->args.local_register == 2) {
      PERF_NCCL(job, ncclCommWindowRegister(r->comm, r->send, job->max_bytes, (ncclWindow_t*)&r->send_reg,
                                            NCCL_WIN_COLL_SYMMETRIC));
      PERF_NCCL(job, ncclCommWindowRegister(r->comm, r->recv, job->max_bytes, (ncclWindow_t*)&r->recv_reg,
                                            NCCL_WIN_COLL_SYMMETRIC));
    } else {
      PERF_NCCL(job, ncclCommRegister(r->comm, r->send, job->max_bytes, &r->send_reg));
      PERF_NCCL(job, ncclCommRegister(r->comm, r->recv, job->max_bytes, &r->recv_reg));
    }
  }
  PERF_NCCL(job, ncclGroupEnd());
}

static void free_ranks(struct perf_job* job, struct perf_rank* ranks, int n) {
  for (int i = 0; i < n; i++) {
    struct perf_rank* r = &ranks[i];
    if (job->args.local_register == 2) {
      PERF_NCCL(job, ncclCommWindowDeregister(r->comm, (ncclWindow_t)r->send_reg));
      PERF_NCCL(job, ncclCommWindowDeregister(r->comm, (ncclWindow_t)r->recv_reg));
    } else if (job->args.local_register) {
      PERF_NCCL(job, ncclCommDeregister(r->comm, r->send_reg));
      PERF_NCCL(job, ncclCommDeregister(r->comm, r->recv_reg));
    }
  }
  for (int i = 0; i < n; i++) PERF_NCCL(job, ncclCommDestroy(ranks[i].comm));
  for (int i = 0; i < n; i++) {
    perf_device_use(ranks[i].dev);
    perf_stream_destroy(ranks[i].stream);
    PERF_NCCL(job, ncclMemFree(ranks[i].send));
    PERF_NCCL(job, ncclMemFree(ranks[i].recv));
    PERF_NCCL(job, ncclMemFree(ranks[i].scratch));
    free(ranks[i].expected);
  }
}

/* Sums each thread's failing-row count over every thread of every process. */
static int global_errors(struct perf_thread* t) {
  int g = t->job->args.ngpus;
  double vals[g], out;
  for (int i = 0; i < g; i++) vals[i] = i == 0 ? t->errors : 0;
  perf_combine(t, vals, 1, ncclSum, &out);
  return (int)out;
}

static void* thread_main(void* arg) {
  struct perf_thread* t = arg;
  struct perf_job* job = t->job;
  int g = job->args.ngpus;
  perf_progress();
  perf_device_use(t->ranks[0].dev); /* this thread's copies and launches; -g > 1 switches per rank */
  if (job->args.parallel_init) {
    init_comms(job, t->ranks, g);
    alloc_buffers(job, t->ranks, g);
  }
  pthread_barrier_wait(&job->barrier);
  if (t->index == 0) perf_launch_joined(); /* every rank of the job has joined its communicator */
  if (job->world.nprocs > 1) perf_gather_devices(t);
  if (perf_is_printer(t)) {
    if (job->args.parallel_init) job->rss_init = job->rss_buffers = perf_resident_bytes();
    perf_print_table_header(job);
  }
  perf_thread_run_tests(t);
  t->global_errors = global_errors(t);
  return NULL;
}

static double watchdog_clock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void* watchdog(void* arg) {
  struct perf_job* job = arg;
  uint64_t seen = atomic_load(&perf_progress_marks);
  double since = watchdog_clock();
  for (;;) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    uint64_t now_marks = atomic_load(&perf_progress_marks);
    if (now_marks != seen) {
      seen = now_marks;
      since = watchdog_clock();
      continue;
    }
    double idle = watchdog_clock() - since;
    if (idle > job->args.timeout) {
      printf("%s: Test timeout (%ds) %s:%d\n", job->hostname, job->args.timeout, __FILE__, __LINE__);
      perf_die(job, PERF_TIMEOUT, __FILE__, __LINE__);
    }
  }
  return NULL;
}

/* Checks that do not need a communicator; returns an exit status, or -1 to go on. */
static int preflight(struct perf_job* job) {
  char err[256];
  if (job->args.graph > 0 && !perf_cuda()) {
    printf("Option -G (CUDA graph) needs GPUs (a CUDA build of the perf binaries and a device). Ignoring\n");
    job->args.graph = 0;
  }
  if (job->args.graph > 0 && job->args.blocking) { /* a stream cannot be waited on while captured */
    fprintf(stderr, "blocking mode (-z %d) is incompatible with CUDA graph mode (-G). Disabling.\n",
            job->args.blocking);
    job->args.blocking = 0;
  }
  if (job->args.device_impl > 0) {
    fprintf(stderr, "Device implementation %d is not supported by this test\n", job->args.device_impl);
    return PERF_NOT_IMPLEMENTED;
  }
  if (perf_launch_world(&job->world, err, sizeof(err))) {
    fprintf(stderr, "%s: %s\n", job->prog, err);
    return PERF_INVALID_USAGE;
  }
  job->nranks = job->world.nprocs * job->args.nthreads * job->args.ngpus;
  const char* why = job->coll->check_nranks ? job->coll->check_nranks(job->nranks) : NULL;
  if (why) {
    fprintf(stderr, "%s: %d ranks: %s\n", job->prog, job->nranks, why);
    return PERF_INVALID_USAGE;
  }
  if (perf_launch_plan(&job->world, err, sizeof(err))) {
    fprintf(stderr, "%s: %s\n", job->prog, err);
    return PERF_INVALID_USAGE;
  }
  return -1;
}

static void layout_ranks(struct perf_job* job) {
  int nt = job->args.nthreads, g = job->args.ngpus;
  const char* dev0 = getenv("NCCL_TESTS_DEVICE");
  int base = dev0 ? atoi(dev0) : job->world.local_rank * nt * g;
  job->ranks = calloc((size_t)nt * g, sizeof(*job->ranks));
  job->threads = calloc((size_t)nt, sizeof(*job->threads));
  if (!job->ranks || !job->threads) perf_die(job, PERF_INTERNAL, __FILE__, __LINE__);
  for (int t = 0; t < nt; t++) {
    struct perf_thread* th = &job->threads[t];
    th->job = job;
    th->index = t;
    th->ranks = job->ranks + (size_t)t * g;
    th->iter_times = calloc((size_t)job->args.iters, sizeof(double));
    for (int i = 0; i < g; i++) {
      th->ranks[i].rank = (job->world.proc * nt + t) * g + i;
      th->ranks[i].dev = perf_device_index(base + t * g + i);
    }
  }
}

static void run_threads(struct perf_job* job) {
  int nt = job->args.nthreads;
  pthread_barrier_init(&job->barrier, NULL, (unsigned)nt);
  for (int t = 1; t < nt; t++)
    if (pthread_create(&job->threads[t].tid, NULL, thread_main, &job->threads[t]))
      perf_die(job, PERF_INTERNAL, __FILE__, __LINE__);
  thread_main(&job->threads[0]);
  for (int t = 1; t < nt; t++) pthread_join(job->threads[t].tid, NULL);
  pthread_barrier_destroy(&job->barrier);
}

static int finish(struct perf_job* job) {
  int nt = job->args.nthreads, errors = job->threads[0].global_errors, local = 0;
  double bw = 0;
  int bw_count = 0;
  for (int t = 0; t < nt; t++) {
    bw += job->threads[t].bw_sum;
    bw_count += job->threads[t].bw_count;
    local += job->threads[t].errors;
  }
  bw = bw_count ? bw / bw_count : 0;
  job->rss_end = perf_resident_bytes();
  free_ranks(job, job->ranks, nt * job->args.ngpus);
  int bw_failed = 0;
  if (job->world.proc == 0) bw_failed = perf_print_footer(job, errors, bw);
  perf_json_close(job);
  /* The local count also fails the run if combining the counts over ranks went wrong. */
  if (errors || local || bw_failed) {
    printf(" .. %s pid %d: Test failure %s:%d\n", job->hostname, (int)getpid(), __FILE__, __LINE__);
    return PERF_NUM_RESULTS;
  }
  return PERF_OK;
}

static int run(int argc, char** argv) {
  struct perf_job* job = &job_state;
  setvbuf(stdout, NULL, _IOLBF, 0);
  job->coll = &perf_this_coll;
  job->prog = basename(argv[0]);
  host_names(job);
  ncclGetVersion(&job->version);
  int rc = perf_args_parse(&job->args, argc, argv, job->prog);
  if (rc) return rc > 0 ? 0 : 255;
  if (job->args.self_test) return perf_self_test();
  perf_device_setup();
  if ((rc = preflight(job)) >= 0) return rc;
  perf_json_open(job, argc, argv);
  if (job->world.proc == 0) perf_print_header(job);
  layout_ranks(job);
  char err[512];
  if ((rc = perf_launch_unique_id(&job->world, &job->id, err, sizeof(err))) != PERF_OK) {
    fprintf(stderr, "%s: %s\n", job->prog, err);
    return rc;
  }
  if (job->world.nprocs == 1) {
    char* all = calloc((size_t)job->nranks, PERF_LINE);
    if (!all) perf_die(job, PERF_INTERNAL, __FILE__, __LINE__);
    for (int r = 0; r < job->nranks; r++)
      perf_device_line(job, &job->ranks[r], all + (size_t)r * PERF_LINE, PERF_LINE);
    perf_print_device_lines(job, all);
    free(all);
  }
  cap_max_bytes(job);
  job->alloc_bytes = job->max_bytes + 8 * (size_t)job->args.unalign + 64;
  perf_progress();
  pthread_t wd;
  if (job->args.timeout > 0 && pthread_create(&wd, NULL, watchdog, job))
    perf_die(job, PERF_INTERNAL, __FILE__, __LINE__);
  job->rss_start = perf_resident_bytes();
  if (!job->args.parallel_init) {
    int n = job->args.nthreads * job->args.ngpus;
    init_comms(job, job->ranks, n);
    job->rss_init = perf_resident_bytes();
    alloc_buffers(job, job->ranks, n);
    job->rss_buffers = perf_resident_bytes();
  }
  run_threads(job);
  return finish(job);
}

int perf_main(int argc, char** argv) {
  if (perf_launch_init(&argc, &argv)) {
    fprintf(stderr, "%s: MPI_Init failed\n", argv[0]);
    return PERF_INTERNAL;
  }
  int rc = run(argc, argv);
  perf_launch_fini();
  return rc;
}
