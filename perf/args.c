/* Command line of the perf binaries: nccl-tests' flags, defaults, size parser and size sweep. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void set_defaults(struct perf_args* a) {
  memset(a, 0, sizeof(*a));
  a->nthreads = 1;
  a->ngpus = 1;
  a->min_bytes = 32 << 20;
  a->max_bytes = 32 << 20;
  a->step_bytes = 1 << 20;
  a->step_factor = 1;
  a->iters = 20;
  a->agg_iters = 1;
  a->warmup_iters = 1;
  a->run_cycles = 1;
  a->check = 1;
  a->op = ncclSum;
  a->type = ncclFloat;
  a->root = 0;
  a->average = 1;
  a->cta_policy = -1;
  a->device_cta_count = 16;
}

/* "%lf" with an optional K/M/G suffix in 1024 units; -1 when it is not a size. */
long long perf_parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  double unit = 1;
  switch (*end) {
    case 'G':
    case 'g':
      unit = 1024.0 * 1024 * 1024;
      end++;
      break;
    case 'M':
    case 'm':
      unit = 1024.0 * 1024;
      end++;
      break;
    case 'K':
    case 'k':
      unit = 1024.0;
      end++;
      break;
    default:
      break;
  }
  if (*end != '\0') return -1;
  return (long long)(v * unit);
}

static void usage(const char* prog) {
  printf(
      "USAGE: %s \n\t"
      "[-t,--nthreads <num threads>] \n\t"
      "[-g,--ngpus <gpus (ranks) per thread>] \n\t"
      "[-b,--minbytes <min size in bytes>] \n\t"
      "[-e,--maxbytes <max size in bytes>] \n\t"
      "[-i,--stepbytes <increment size>] \n\t"
      "[-f,--stepfactor <increment factor>] \n\t"
      "[-n,--iters <iteration count>] \n\t"
      "[-m,--agg_iters <aggregated iteration count>] \n\t"
      "[-w,--warmup_iters <warmup iteration count>] \n\t"
      "[-N,--run_cycles <cycle count> repeat the sweep (default: 1; 0=forever)] \n\t"
      "[-p,--parallel_init <0/1>] \n\t"
      "[-c,--check <check iteration count>] \n\t"
      "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
      "[-d,--datatype <nccltype/all>] \n\t"
      "[-r,--root <root>] \n\t"
      "[-z,--blocking <0/1/2/3> 1=barrier after each inner iter (-m), 2=no barrier, 3=wait and barrier "
      "after each outer iter (-n)] \n\t"
      "[-y,--stream_null <0/1>] \n\t"
      "[-T,--timeout <time in seconds>] \n\t"
      "[-G,--cudagraph <num graph launches>] \n\t"
      "[-C,--report_cputime <0/1>] \n\t"
      "[-S,--report_timestamps <0/1> report timestamps (default 0)] \n\t"
      "[-J,--output_file <file> write results as JSON (the .json suffix selects the format)] \n\t"
      "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
      "[-R,--local_register <0/1/2> register send/recv buffers locally (1) or as symmetric windows (2) "
      "(default: 0)] \n\t"
      "[-x,--cta_policy <0/1/2> set ncclConfig_t.CTAPolicy (default: not set)] \n\t"
      "[-D,--device_implementation <number> device-API kernels (default: 0; needs -R 2)] \n\t"
      "[-V,--device_cta_count <number> CTAs for -D kernels (default: 16)] \n\t"
      "[-M,--memory <0/1> report memory usage (default: 0)] \n\t"
      "[-u,--unalign <index of first element> misalign send and receive buffers (default: 0)] \n\t"
      "[-I,--per_iter_timing <0/1> per-iteration timing (default: 0)] \n\t"
      "[-K,--per_iter_skip <count> leading samples left out of the -I statistics (default: 0)] \n\t"
      "[-h,--help]\n",
      prog);
}

static const struct option long_opts[] = {{"nthreads", required_argument, 0, 't'},
                                          {"ngpus", required_argument, 0, 'g'},
                                          {"minbytes", required_argument, 0, 'b'},
                                          {"maxbytes", required_argument, 0, 'e'},
                                          {"stepbytes", required_argument, 0, 'i'},
                                          {"stepfactor", required_argument, 0, 'f'},
                                          {"iters", required_argument, 0, 'n'},
                                          {"agg_iters", required_argument, 0, 'm'},
                                          {"warmup_iters", required_argument, 0, 'w'},
                                          {"run_cycles", required_argument, 0, 'N'},
                                          {"parallel_init", required_argument, 0, 'p'},
                                          {"check", required_argument, 0, 'c'},
                                          {"op", required_argument, 0, 'o'},
                                          {"datatype", required_argument, 0, 'd'},
                                          {"root", required_argument, 0, 'r'},
                                          {"blocking", required_argument, 0, 'z'},
                                          {"stream_null", required_argument, 0, 'y'},
                                          {"timeout", required_argument, 0, 'T'},
                                          {"cudagraph", required_argument, 0, 'G'},
                                          {"report_cputime", required_argument, 0, 'C'},
                                          {"report_timestamps", required_argument, 0, 'S'},
                                          {"output_file", required_argument, 0, 'J'},
                                          {"average", required_argument, 0, 'a'},
                                          {"local_register", required_argument, 0, 'R'},
                                          {"cta_policy", required_argument, 0, 'x'},
                                          {"device_implementation", required_argument, 0, 'D'},
                                          {"device_cta_count", required_argument, 0, 'V'},
                                          {"memory", required_argument, 0, 'M'},
                                          {"unalign", required_argument, 0, 'u'},
                                          {"per_iter_timing", required_argument, 0, 'I'},
                                          {"per_iter_skip", required_argument, 0, 'K'},
                                          {"help", no_argument, 0, 'h'},
                                          {"self-test", no_argument, 0, 1},
                                          {0, 0, 0, 0}};

static int parse_size_opt(const char* arg, size_t* out, const char* what) {
  long long v = perf_parse_size(arg);
  if (v < 0) {
    fprintf(stderr, "invalid size specified for '%s'\n", what);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

static int int_arg(const char* s) { return (int)strtol(s, NULL, 0); }

static void parse_type_op(struct perf_args* a, int c, const char* arg) {
  if (c == 'd') {
    a->type = perf_type_from_name(arg);
    if (a->type == -2) {
      printf("invalid type %s, defaulting to %s .. \n", arg, perf_type_get(ncclFloat)->name);
      a->type = ncclFloat;
    }
  } else {
    a->op = perf_op_from_name(arg);
    if (a->op == -2) {
      printf("invalid op %s, defaulting to %s .. \n", arg, perf_op_name(ncclSum));
      a->op = ncclSum;
    }
  }
}

/* Options that only need an integer; returns 0 when c is not one of them. */
static int parse_int_opt(struct perf_args* a, int c, const char* arg) {
  if (!arg || !strchr("tgnmwNcprzyTGCSaRxDMuIKV", c)) return 0;
  int v = int_arg(arg);
  switch (c) {
    case 't':
      a->nthreads = v;
      break;
    case 'g':
      a->ngpus = v;
      break;
    case 'n':
      a->iters = v;
      break;
    case 'm':
      a->agg_iters = v;
      break;
    case 'w':
      a->warmup_iters = v;
      break;
    case 'N':
      a->run_cycles = v;
      break;
    case 'c':
      a->check = v;
      break;
    case 'p':
      a->parallel_init = v;
      break;
    case 'r':
      a->root = v;
      break;
    case 'z':
      a->blocking = v;
      break;
    case 'y':
      a->stream_null = v;
      break;
    case 'T':
      a->timeout = v;
      break;
    case 'G':
      a->graph = v;
      break;
    case 'C':
      a->report_cputime = v;
      break;
    case 'S':
      a->report_timestamps = v;
      break;
    case 'a':
      a->average = v;
      break;
    case 'R':
      a->local_register = v;
      break;
    case 'x':
      a->cta_policy = v;
      break;
    case 'D':
      a->device_impl = v;
      break;
    case 'M':
      a->memory_report = v;
      break;
    case 'u':
      a->unalign = v;
      break;
    case 'I':
      a->per_iter_timing = v;
      break;
    case 'K':
      a->per_iter_skip = v;
      break;
    case 'V':
      a->device_cta_count = v;
      if (v <= 0 || v > 128) {
        fprintf(stderr,
                "device_cta_count (-V) must be positive and less than 128, got %d. Using default value 16.\n",
                v);
        a->device_cta_count = 16;
      }
      break;
    default:
      return 0;
  }
  return 1;
}

/* Cross-option rules, in nccl-tests' order and wording. */
static int check_combination(struct perf_args* a) {
  if (a->min_bytes > a->max_bytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %llu > %llu\n",
            (unsigned long long)a->min_bytes, (unsigned long long)a->max_bytes);
    return -1;
  }
  if (a->device_impl > 0 && a->local_register != 2) {
    fprintf(stderr,
            "device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)\n");
    return -1;
  }
  if (a->per_iter_timing != 0 && a->per_iter_timing != 1) {
    fprintf(stderr, "per-iteration timing (-I) only supports 0=off or 1=on. Disabling.\n");
    a->per_iter_timing = 0;
  }
  if (a->per_iter_timing && a->graph >= 1) {
    fprintf(stderr, "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling.\n");
    a->per_iter_timing = 0;
  }
  if (a->blocking == 3 && a->graph >= 1) {
    fprintf(stderr, "blocking mode (-z 3) is incompatible with CUDA graph mode (-G). Disabling.\n");
    a->blocking = 0;
  }
  if (a->per_iter_skip < 0 || a->per_iter_skip >= a->iters) {
    fprintf(stderr, "per-iteration skip (-K) must be between 0 and %d. Disabling.\n", a->iters - 1);
    a->per_iter_skip = 0;
  }
  if (a->per_iter_skip && !a->per_iter_timing) {
    fprintf(stderr, "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.\n");
    a->per_iter_skip = 0;
  }
  return 0;
}

/* Values nccl-tests would accept but that cannot run (zero threads, no iterations). */
static int check_ranges(const struct perf_args* a) {
  if (a->nthreads < 1 || a->ngpus < 1 || a->iters < 1 || a->agg_iters < 1 || a->warmup_iters < 0 ||
      a->run_cycles < 0 || a->check < 0 || a->unalign < 0) {
    fprintf(stderr,
            "invalid value: -t %d -g %d -n %d -m %d -w %d -N %d -c %d -u %d (need -t/-g/-n/-m >= 1, "
            "others >= 0)\n",
            a->nthreads, a->ngpus, a->iters, a->agg_iters, a->warmup_iters, a->run_cycles, a->check,
            a->unalign);
    return -1;
  }
  return 0;
}

int perf_args_parse(struct perf_args* a, int argc, char** argv, const char* prog) {
  set_defaults(a);
  optind = 1;
  for (;;) {
    int idx = 0;
    int c = getopt_long(argc, argv,
                        "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:", long_opts, &idx);
    if (c == -1) break;
    if (parse_int_opt(a, c, optarg)) continue;
    switch (c) {
      case 'b':
        if (parse_size_opt(optarg, &a->min_bytes, "minbytes")) return -1;
        break;
      case 'e':
        if (parse_size_opt(optarg, &a->max_bytes, "maxbytes")) return -1;
        break;
      case 'i':
        if (parse_size_opt(optarg, &a->step_bytes, "stepBytes")) return -1;
        break;
      case 'f':
        a->step_factor = strtol(optarg, NULL, 0);
        break;
      case 'o':
      case 'd':
        parse_type_op(a, c, optarg);
        break;
      case 'J':
        free(a->output_file);
        a->output_file = strdup(optarg);
        break;
      case 1:
        a->self_test = 1;
        break;
      case 'h':
      default:
        /* nccl-tests prints the usage and exits 0, for -h and for unknown options alike. */
        if (c != 'h') printf("invalid option '%c'\n", c == '?' ? optopt : c);
        usage(prog);
        return 1;
    }
  }
  if (check_combination(a)) return -1;
  if (check_ranges(a)) return -1;
  return 0;
}

/* The timed sweep multiplies by -f when it is > 1, else adds -i; warm-up always doubles. A zero size
 * (or step) would never advance, so it steps to 1 byte (or ends) instead of looping forever. */
int perf_next_size(const struct perf_args* a, size_t* size, int warmup) {
  size_t s = *size;
  size_t next;
  if (warmup || a->step_factor > 1) {
    long f = warmup ? 2 : a->step_factor;
    next = s == 0 ? 1 : s * (size_t)f;
    if (next / (size_t)f != s && s != 0) return 0; /* overflow */
  } else {
    if (a->step_bytes == 0) return 0;
    next = s + a->step_bytes;
    if (next < s) return 0;
  }
  if (next > a->max_bytes) return 0;
  *size = next;
  return 1;
}
