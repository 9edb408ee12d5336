/* weftrun: command line and top-level flow of the job launcher.
 * Parses options, plans rank placement, starts the ranks and hands over to the supervisor. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* for the Linux extras: CPU affinity, parent-death signal */
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weftrun.h"

static const char usage_text[] =
    "Usage: weftrun -n N [-H host1:slots,host2:slots] [--timeout SECONDS]\n"
    "               [--tag-output] [--bind none|numa|core] [--] prog [args...]\n"
    "\n"
    "Start N ranks of prog and supervise them until all have exited.\n"
    "\n"
    "  -n, -np N            number of ranks (default with -H: total slots)\n"
    "  -H, --host LIST      hosts as name[:slots],... (slots default 1); ranks fill\n"
    "                       hosts in order; non-local hosts are reached through ssh\n"
    "                       (command from WEFTRUN_SSH, default \"ssh\")\n"
    "  --timeout SECONDS    stop the job after SECONDS and exit with status 124\n"
    "  --tag-output         prefix each output line with [rank]\n"
    "  --bind none|numa|core  pin local ranks to a NUMA node or a core (default none)\n"
    "  -h, --help           show this help\n"
    "\n"
    "Each rank gets NCCL_COMM_ID, WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK,\n"
    "WEFT_LOCAL_NRANKS, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
    "MASTER_PORT, and CUDA_VISIBLE_DEVICES (one GPU per local rank) when GPUs exist.\n"
    "All ranks share a fresh random WEFT_JOB_SECRET (unless one is set), which\n"
    "authenticates the bootstrap.\n"
    "If a rank fails, the others get SIGTERM, then SIGKILL after a grace period\n"
    "(WEFTRUN_GRACE_SECONDS, default 2), and weftrun exits with the rank's status\n"
    "(128+signal for a rank killed by a signal).\n";

void weftrun_die_usage(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("weftrun: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\nTry 'weftrun --help' for more information.\n", stderr);
  exit(WEFTRUN_USAGE_EXIT);
}

/* For failures of the launcher itself once the command line was accepted. */
void weftrun_die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("weftrun: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static int parse_count(const char* opt, const char* text) {
  char* end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < 1 || v > 1000000)
    weftrun_die_usage("%s needs a rank count from 1 to 1000000, got '%s'", opt, text);
  return (int)v;
}

static double parse_seconds(const char* opt, const char* text, int allow_zero) {
  char* end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end || !(v >= 0) || (v == 0 && !allow_zero) || v > 1e9)
    weftrun_die_usage("%s needs a positive number of seconds, got '%s'", opt, text);
  return v;
}

static enum weftrun_bind parse_bind(const char* text) {
  if (!strcmp(text, "none")) return WEFTRUN_BIND_NONE;
  if (!strcmp(text, "numa")) return WEFTRUN_BIND_NUMA;
  if (!strcmp(text, "core")) return WEFTRUN_BIND_CORE;
  weftrun_die_usage("--bind takes none, numa or core, got '%s'", text);
}

/* Matches "-x V", "-xV" (short) or "--long V", "--long=V"; returns the value or NULL. */
static const char* option_value(char** argv, int* i, const char* shrt, const char* lng) {
  const char* arg = argv[*i];
  size_t slen = shrt ? strlen(shrt) : 0, llen = lng ? strlen(lng) : 0;
  int exact = (shrt && !strcmp(arg, shrt)) || (lng && !strcmp(arg, lng));
  if (exact) {
    if (!argv[*i + 1]) weftrun_die_usage("option '%s' needs a value", arg);
    return argv[++*i];
  }
  if (lng && !strncmp(arg, lng, llen) && arg[llen] == '=') return arg + llen + 1;
  /* Attached short values only for single-letter options, so "-np" is not "-n p". */
  if (shrt && slen == 2 && !strncmp(arg, shrt, 2) && arg[2] && arg[1] != '-') return arg + 2;
  return NULL;
}

/* Returns 1 if argv[*i] was one of the valued options (consuming its value). */
static int parse_valued(struct weftrun_opts* o, char** argv, int* i) {
  const char* v;
  if ((v = option_value(argv, i, "-np", NULL)) || (v = option_value(argv, i, "-n", "--np")))
    o->n_ranks = parse_count("-n", v);
  else if ((v = option_value(argv, i, "-H", "--host")) || (v = option_value(argv, i, NULL, "--hosts")))
    o->hosts = v;
  else if ((v = option_value(argv, i, NULL, "--timeout")))
    o->timeout_sec = parse_seconds("--timeout", v, 0);
  else if ((v = option_value(argv, i, NULL, "--bind")))
    o->bind = parse_bind(v);
  else
    return 0;
  return 1;
}

static void parse_args(struct weftrun_opts* o, int argc, char** argv) {
  int i = 1;
  for (; i < argc; i++) {
    const char* arg = argv[i];
    if (!strcmp(arg, "--")) {
      i++;
      break;
    }
    if (arg[0] != '-' || !arg[1]) break; /* first operand: the program; the rest belongs to it */
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      fputs(usage_text, stdout);
      exit(0);
    }
    if (!strcmp(arg, "--tag-output"))
      o->tag_output = 1;
    else if (!parse_valued(o, argv, &i))
      weftrun_die_usage("unknown option '%s'", arg);
  }
  if (i >= argc) weftrun_die_usage("no program to run");
  o->argv = argv + i;
  if (!o->n_ranks && !o->hosts) weftrun_die_usage("the number of ranks (-n N) is required");
}

static double grace_seconds(void) {
  /* The launcher is a separate tool from the library, so it reads its own
   * variables directly rather than through the library's parameter table. */
  const char* text = getenv("WEFTRUN_GRACE_SECONDS");
  if (!text || !*text) return 2.0;
  char* end;
  double v = strtod(text, &end);
  if (end == text || *end || !(v >= 0) || v > 1e6)
    weftrun_die_usage("WEFTRUN_GRACE_SECONDS must be a number of seconds, got '%s'", text);
  return v;
}

/* Binding happens in the forked child, which for a remote rank is the local ssh client. */
static void warn_remote_bind(const struct weftrun_job* job) {
  if (job->opts.bind == WEFTRUN_BIND_NONE) return;
  for (int r = 0; r < job->opts.n_ranks; r++)
    if (!job->ranks[r].host->local) {
      fputs("weftrun: --bind applies to ranks on this host only\n", stderr);
      return;
    }
}

int main(int argc, char** argv) {
  struct weftrun_job job;
  memset(&job, 0, sizeof(job));
  parse_args(&job.opts, argc, argv);
  job.grace_sec = grace_seconds();
  weftrun_plan_create(&job);
  warn_remote_bind(&job);
  job.n_gpus = weftrun_spawn_count_gpus();
  if (weftrun_secret_export() != 0) return 1;

  /* Handlers go in before the first fork so no child exit or Ctrl-C is missed. */
  weftrun_supervise_init();
  int n_started = 0;
  while (n_started < job.opts.n_ranks && weftrun_spawn_rank(&job, &job.ranks[n_started]) == 0) n_started++;
  int status = weftrun_supervise_run(&job, n_started);
  weftrun_plan_destroy(&job);
  return status;
}
