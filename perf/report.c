/* Output of the perf binaries: nccl-tests' header, device lines, table and footer on stdout (process 0,
 * thread 0 only), and the same results as JSON with -J. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

struct perf_json {
  FILE* f;
  int records;
};

static void now_str(char* buf, size_t len) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static void json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void json_num(FILE* f, double v) {
  if (v != v || v > 1e300 || v < -1e300)
    fprintf(f, "null"); /* NaN and infinities (a zero time) are not JSON numbers */
  else
    fprintf(f, "%.6g", v);
}

void perf_print_header(const struct perf_job* job) {
  const struct perf_args* a = &job->args;
  printf("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", PERF_VERSION, NCCL_VERSION_CODE,
         job->version);
  printf("# Collective test starting: %s\n", job->prog);
  printf(
      "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: %d agg iters: "
      "%d validation: %d graph: %d unalign: %d\n",
      a->nthreads, a->ngpus, (long)a->min_bytes, (long)a->max_bytes,
      a->step_factor > 1 ? a->step_factor : (long)a->step_bytes, a->step_factor > 1 ? "factor" : "bytes",
      a->warmup_iters, a->iters, a->agg_iters, a->check, a->graph, a->unalign);
  if (a->blocking == 1) printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
  if (a->blocking == 2) printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
  if (a->blocking == 3)
    printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
  if (a->per_iter_timing) {
    printf("# Per-Iteration Report: host wall-clock timing; i_* uses max over ranks");
    if (a->per_iter_skip) printf("; summary skips first %d iterations", a->per_iter_skip);
    printf(" \n");
  }
  if (a->parallel_init) printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  printf("#\n");
}

/* GPU name and PCI location on GPUs; the CPU model and zeros on the host backend. */
void perf_device_line(const struct perf_job* job, const struct perf_rank* r, char* line, size_t len) {
  char name[sizeof(job->devname)];
  unsigned pci[3] = {0, 0, 0};
  if (!perf_device_describe(r->dev, name, sizeof(name), pci))
    snprintf(name, sizeof(name), "%s", job->devname);
  snprintf(line, len, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", r->rank, 0,
           (int)getpid(), job->hostname, r->dev, pci[0], pci[1], pci[2], name);
}

static void json_device(FILE* f, const char* line, int first) {
  int rank = 0, group = 0, pid = 0, dev = 0;
  char host[64] = "", info[PERF_LINE] = "";
  sscanf(line, "#  Rank %d Group %d Pid %d on %63s device %d [%*x:%*x:%*x] %255[^\n]", &rank, &group, &pid,
         host, &dev, info);
  fprintf(f, "%s{\"rank\":%d,\"group\":%d,\"pid\":%d,\"hostname\":", first ? "" : ",", rank, group, pid);
  json_str(f, host);
  fprintf(f, ",\"device\":%d,\"device_info\":", dev);
  json_str(f, info);
  fprintf(f, "}");
}

/* Prints nranks device lines of PERF_LINE bytes each (and their JSON form). */
void perf_print_device_lines(const struct perf_job* job, char* all) {
  printf("# Using devices\n");
  for (int r = 0; r < job->nranks; r++) {
    all[(size_t)r * PERF_LINE + PERF_LINE - 1] = '\0';
    printf("%s", all + (size_t)r * PERF_LINE);
  }
  fflush(stdout);
  if (job->json) {
    fprintf(job->json->f, ",\"devices\":[");
    for (int r = 0; r < job->nranks; r++) json_device(job->json->f, all + (size_t)r * PERF_LINE, r == 0);
    fprintf(job->json->f, "]");
  }
}

/* Across processes the device lines travel by ncclAllGather, so they come after comm creation. */
void perf_gather_devices(struct perf_thread* t) {
  struct perf_job* job = t->job;
  int g = job->args.ngpus;
  size_t bytes = (size_t)job->nranks * PERF_LINE;
  char* all = calloc(1, bytes);
  char* bufs[g];
  if (!all) abort();
  for (int i = 0; i < g; i++) {
    perf_device_use(t->ranks[i].dev);
    PERF_NCCL(job, ncclMemAlloc((void**)&bufs[i], bytes));
    char line[PERF_LINE] = {0};
    perf_device_line(job, &t->ranks[i], line, sizeof(line));
    perf_mem_copy(t->ranks[i].stream, bufs[i] + (size_t)t->ranks[i].rank * PERF_LINE, line, PERF_LINE);
  }
  if (g > 1) PERF_NCCL(job, ncclGroupStart());
  for (int i = 0; i < g; i++) {
    struct perf_rank* r = &t->ranks[i];
    PERF_NCCL(job, ncclAllGather(bufs[i] + (size_t)r->rank * PERF_LINE, bufs[i], PERF_LINE, ncclInt8, r->comm,
                                 r->stream));
  }
  if (g > 1) PERF_NCCL(job, ncclGroupEnd());
  perf_barrier(t);
  perf_device_use(t->ranks[0].dev);
  perf_mem_copy(t->ranks[0].stream, all, bufs[0], bytes);
  for (int i = 0; i < g; i++) PERF_NCCL(job, ncclMemFree(bufs[i]));
  if (perf_is_printer(t)) perf_print_device_lines(job, all);
  free(all);
}

void perf_print_table_header(const struct perf_job* job) {
  const struct perf_args* a = &job->args;
  const char* ts_lbl = a->report_timestamps ? "timestamp" : "";
  const char* ts_fmt = a->report_timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  int ts_pad = a->report_timestamps ? 19 : 0;
  const char* tm = a->report_cputime ? "cputime" : "time";
  printf("#\n");
  if (a->per_iter_timing) {
    printf(
        "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                          "
        "      in-place (+ per-iteration)\n",
        "", "", "", "", "");
    printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
        "%7s  %7s %*s\n",
        "size", "count", "type", "redop", "root", tm, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
        "i_cv%", tm, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", ts_pad, ts_lbl);
    printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
        "%7s  %7s %*s\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
        "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", ts_pad, ts_fmt);
  } else {
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
           "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count",
           "type", "redop", "root", tm, "algbw", "busbw", "#wrong", tm, "algbw", "busbw", "#wrong", ts_pad,
           ts_lbl);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)",
           "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts_pad, ts_fmt);
  }
  fflush(stdout);
  if (job->json) fprintf(job->json->f, ",\"results\":[");
}

static const char* op_label(const struct perf_thread* t) {
  switch (t->job->coll->ops) {
    case PERF_OPS_NONE:
      return "none";
    case PERF_OPS_EMPTY:
      return "";
    default:
      return perf_op_name(t->op);
  }
}

void perf_print_row_start(struct perf_thread* t) {
  if (!perf_is_printer(t)) return;
  size_t es = (size_t)t->t->size;
  size_t bytes = (t->c.send > t->c.recv ? t->c.send : t->c.recv) * es;
  printf("%12li  %12li  %8s  %6s  %6i", (long)bytes, (long)t->c.param, t->t->name, op_label(t), t->root);
  struct perf_json* j = t->job->json;
  if (j) {
    fprintf(j->f, "%s{\"collective\":", j->records++ ? "," : "");
    json_str(j->f, t->job->coll->name);
    fprintf(j->f, ",\"size\":%zu,\"count\":%zu,\"type\":", bytes, t->c.param);
    json_str(j->f, t->t->name);
    fprintf(j->f, ",\"redop\":");
    json_str(j->f, op_label(t));
    fprintf(j->f, ",\"root\":%d", t->root);
  }
}

void perf_print_row_half(struct perf_thread* t, int in_place, double usec, double algbw, double busbw,
                         int report_errors, double wrong, const double* iter_stats) {
  if (!perf_is_printer(t)) return;
  char ts[8], as[7], bs[7];
  perf_float_str(usec, 7, ts);
  perf_float_str(algbw, 6, as);
  perf_float_str(busbw, 6, bs);
  if (report_errors)
    printf("  %7s  %6s  %6s  %6g", ts, as, bs, wrong);
  else
    printf("  %7s  %6s  %6s    N/A", ts, as, bs);
  if (iter_stats) {
    char s[4][8];
    for (int k = 0; k < 4; k++) perf_float_str(iter_stats[k], 7, s[k]);
    printf("  %7s  %7s  %7s  %7s", s[0], s[1], s[2], s[3]);
  }
  if (in_place && t->job->args.report_timestamps) {
    char now[32];
    now_str(now, sizeof(now));
    printf("%21s", now);
  }
  struct perf_json* j = t->job->json;
  if (j) {
    fprintf(j->f, ",\"%s\":{\"%s\":", in_place ? "in_place" : "out_of_place",
            t->job->args.report_cputime ? "cpu_time" : "time");
    json_num(j->f, usec);
    fprintf(j->f, ",\"alg_bw\":");
    json_num(j->f, algbw);
    fprintf(j->f, ",\"bus_bw\":");
    json_num(j->f, busbw);
    fprintf(j->f, ",\"nwrong\":");
    if (report_errors)
      json_num(j->f, wrong);
    else
      fprintf(j->f, "null");
    fprintf(j->f, "}");
  }
}

void perf_print_row_end(struct perf_thread* t) {
  if (!perf_is_printer(t)) return;
  printf("\n");
  fflush(stdout);
  if (t->job->json) fprintf(t->job->json->f, "}");
}

static void mem_str(long bytes, char* out, size_t len) {
  double v = (double)bytes;
  const char* unit = " B";
  double av = v < 0 ? -v : v;
  if (av >= 1024.0 * 1024 * 1024) {
    unit = " GB";
    v /= 1024.0 * 1024 * 1024;
  } else if (av >= 1024.0 * 1024) {
    unit = " MB";
    v /= 1024.0 * 1024;
  } else if (av >= 1024.0) {
    unit = " KB";
    v /= 1024.0;
  }
  av = v < 0 ? -v : v;
  snprintf(out, len, "%.*f%s", av < 10 ? 2 : av < 100 ? 1 : 0, v, unit);
}

/* Returns non-zero when NCCL_TESTS_MIN_BW is set and not reached. */
int perf_print_footer(struct perf_job* job, int errors, double avg_bw) {
  const char* env = getenv("NCCL_TESTS_MIN_BW");
  double min_bw = env ? atof(env) : -1;
  int bw_failed = min_bw != -1 && avg_bw < min_bw * 0.9;
  printf("# %-20s : %d %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg_bw, min_bw == -1 ? "" : bw_failed ? "FAILED" : "OK");
  printf("#\n");
  printf("# Collective test concluded: %s\n", job->prog);
  if (job->args.memory_report) {
    char a[32], b[32], c[32], d[32];
    /* Host backend: growth of this process's resident memory in each phase. */
    mem_str(job->rss_init - job->rss_start, a, sizeof(a));
    mem_str(job->rss_buffers - job->rss_init, b, sizeof(b));
    mem_str(job->rss_end - job->rss_buffers, c, sizeof(c));
    mem_str(job->rss_end - job->rss_start, d, sizeof(d));
    printf("# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n",
           "GPU memory usage", a, b, c, d);
  }
  printf("#\n");
  const char* err = ncclGetLastError(NULL);
  if (err && *err)
    printf("# error: %s\n", err);
  else
    printf("\n");
  fflush(stdout);
  if (job->json) {
    FILE* f = job->json->f;
    fprintf(f, "],\"out_of_bounds\":{\"count\":%d,\"okay\":%s},\"average_bus_bandwidth\":{\"bandwidth\":",
            errors, errors ? "false" : "true");
    json_num(f, avg_bw);
    fprintf(f, ",\"okay\":%s}", min_bw == -1 ? "\"unchecked\"" : bw_failed ? "false" : "true");
  }
  return bw_failed;
}

int perf_json_open(struct perf_job* job, int argc, char** argv) {
  const char* path = job->args.output_file;
  if (!path || job->world.proc != 0) return 0;
  FILE* f = fopen(path, "w");
  if (!f) {
    printf("# skipping json output; %s not accessible\n", path);
    return 0;
  }
  printf("# Writing JSON output to %s\n", path);
  job->json = calloc(1, sizeof(*job->json));
  if (!job->json) abort();
  job->json->f = f;
  char now[32];
  now_str(now, sizeof(now));
  fprintf(f, "{\"version\":1,\"program\":");
  json_str(f, job->prog);
  fprintf(f, ",\"collective\":");
  json_str(f, job->coll->name);
  fprintf(f, ",\"nccl_tests_version\":\"%s\",\"nccl_version\":%d,\"start_time\":", PERF_VERSION,
          job->version);
  json_str(f, now);
  fprintf(f, ",\"args\":[");
  for (int i = 0; i < argc; i++) {
    if (i) fputc(',', f);
    json_str(f, argv[i]);
  }
  const struct perf_args* a = &job->args;
  fprintf(f,
          "],\"config\":{\"nthreads\":%d,\"ngpus\":%d,\"nprocs\":%d,\"nranks\":%d,\"launcher\":\"%s\","
          "\"minimum_bytes\":%zu,\"maximum_bytes\":%zu,\"%s\":%ld,\"warmup_iters\":%d,\"iterations\":%d,"
          "\"aggregated_iterations\":%d,\"validation\":%d,\"graph\":%d,\"blocking_collectives\":%d,"
          "\"per_iter_timing\":%d,\"parallel_init\":%d,\"average\":%d}",
          a->nthreads, a->ngpus, job->world.nprocs, job->nranks, job->world.source, a->min_bytes,
          a->max_bytes, a->step_factor > 1 ? "step_factor" : "step_bytes",
          a->step_factor > 1 ? a->step_factor : (long)a->step_bytes, a->warmup_iters, a->iters, a->agg_iters,
          a->check, a->graph, a->blocking, a->per_iter_timing, a->parallel_init, a->average);
  return 0;
}

void perf_json_close(struct perf_job* job) {
  if (!job->json) return;
  char now[32];
  now_str(now, sizeof(now));
  fprintf(job->json->f, ",\"end_time\":");
  json_str(job->json->f, now);
  fprintf(job->json->f, "}\n");
  fclose(job->json->f);
  free(job->json);
  job->json = NULL;
}

long perf_resident_bytes(void) {
  long pages = 0, rss = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
  fclose(f);
  return rss * sysconf(_SC_PAGESIZE);
}
