/* Tuning that explains itself: with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING the first call of each
 * (collective, size class) logs its candidates, exclusions, choice and reason exactly once, and the
 * fifth call the measured time beside the prediction; a model made wrong on purpose
 * (WEFT_HOST_COPY_BW) draws the 2x WARN in the direction it is wrong. Each case runs 2 thread
 * ranks in a child whose log goes to NCCL_DEBUG_FILE. */
#include <errno.h>

#include "check.h"
#include "coll_util.h"

#define SAMPLES 5 /* collectives/tune_log.h's WEFT_TUNE_LOG_SAMPLES */

/* ---- the child: the calls ---- */

static int all_reduce(ncclComm_t comm, size_t count, int times, const ncclCollConfig_t* cfg) {
  float* buf = calloc(count, sizeof(float));
  int bad = buf == NULL;
  for (int i = 0; i < times && !bad; i++) {
    ncclResult_t r = cfg ? ncclAllReduceConfig(buf, buf, count, ncclFloat32, ncclSum, comm, NULL, cfg)
                         : ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
    if (r != ncclSuccess) {
      fprintf(stderr, "FAILED all-reduce of %zu floats: %s\n", count, ncclGetErrorString(r));
      bad = 1;
    }
  }
  free(buf);
  return bad;
}

static int broadcast(ncclComm_t comm, size_t count, int times) {
  float* buf = calloc(count, sizeof(float));
  int bad = buf == NULL;
  for (int i = 0; i < times && !bad; i++)
    bad = ncclBroadcast(buf, buf, count, ncclFloat32, 0, comm, NULL) != ncclSuccess;
  free(buf);
  return bad;
}

/* 256 KiB class: 7 all-reduces of 256 KiB and 2 of 300 KB (the same class), 6 broadcasts; 4 KiB
 * class: 2 all-reduces with a per-call selection of LL; 4 MiB class: one all-reduce the call keeps
 * to one channel. */
static int calls_body(ncclComm_t comm, int me, int n, void* arg) {
  (void)me, (void)n, (void)arg;
  ncclCollConfig_t ll = NCCL_COLLCONFIG_INITIALIZER;
  ll.algSelection = "Ring,LL";
  ncclCollConfig_t one = NCCL_COLLCONFIG_INITIALIZER;
  one.maxCTAs = 1;
  return all_reduce(comm, 65536, 7, NULL) + all_reduce(comm, 75000, 2, NULL) + broadcast(comm, 65536, 6) +
         all_reduce(comm, 1024, 2, &ll) + all_reduce(comm, 1 << 20, 1, &one);
}

/* ---- the parent: the log ---- */

static char* read_log(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "FAILED cannot read %s: %s\n", path, strerror(errno));
    return NULL;
  }
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = 0;
  fclose(f);
  return text;
}

/* Lines containing every one of the (up to 3) strings. */
static int count_lines(const char* log, const char* a, const char* b, const char* c) {
  int n = 0;
  for (const char* line = log; line && *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[2048];
    snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
    if (strstr(buf, a) && (!b || strstr(buf, b)) && (!c || strstr(buf, c))) n++;
    line = end ? end + 1 : NULL;
  }
  return n;
}

/* Checks that want lines contain a, b and c (NULL: no condition). */
static void want_lines(const char* log, int want, const char* a, const char* b, const char* c, int line) {
  int got = count_lines(log, a, b, c);
  EXPECT_MSG(got == want, "line %d: %d line(s) with \"%s\" \"%s\" \"%s\", want %d", line, got, a, b ? b : "",
             c ? c : "", want);
}
#define WANT_LINES(log, want, a, b, c) want_lines(log, want, a, b, c, __LINE__)

static const char* verdict(int failures_before) { return test_failures == failures_before ? "ok" : "FAILED"; }

static int tune_child(const char* log, const char* const* env) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
    setenv("NCCL_DEBUG_FILE", log, 1);
    setenv("WEFT_DIRECT", "0", 1); /* every call through the planner */
    for (int i = 0; env[i]; i += 2) setenv(env[i], env[i + 1], 1);
    alarm(60);
    _exit(run_threads(2, calls_body, NULL) ? 1 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static char logs[8][128]; /* kept when a check fails */
static int nlogs;

static const char* tune_case(const char* name, const char* const* env) {
  char* log = logs[nlogs++ % 8];
  snprintf(log, sizeof(logs[0]), "/tmp/weft-test-tune-log-%d-%s.log", (int)getpid(), name);
  unlink(log);
  if (tune_child(log, env) != 0) return NULL;
  return read_log(log);
}

/* Explained once per (collective, class), the model's reason, candidates and exclusions; the
 * measurement after SAMPLES calls, once per pair. */
static void check_model(void) {
  int before = test_failures;
  const char* env[] = {NULL};
  const char* log = tune_case("model", env);
  if (log == NULL) return;
  const char* ar = "size class 256 KiB: AllReduce 262144 B: ";
  WANT_LINES(log, 1, ar, "candidates on", "Ring/Simple");
  WANT_LINES(log, 1, ar, "candidates on", "Tree/LL");
  WANT_LINES(log, 1, ar, "excluded", "not implemented on this backend");
  WANT_LINES(log, 1, ar, "excluded", "not in the model");
  WANT_LINES(log, 1, ar, "chose", "reason: model, fastest of 4 candidates");
  WANT_LINES(log, 0, "AllReduce 300000 B", NULL, NULL); /* the same class: no second explanation */
  WANT_LINES(log, 3, "size class 256 KiB: Broadcast 262144 B: ", NULL, NULL);
  WANT_LINES(log, 1, "size class 256 KiB: Broadcast 262144 B: chose Ring/", "reason: model, fastest of 2",
             NULL);
  WANT_LINES(log, 1, "size class 256 KiB: AllReduce ", "measured", "(median of 5 calls");
  WANT_LINES(log, 1, "size class 256 KiB: Broadcast ", "measured", "predicted");
  /* The call's own selection, and too few calls for a measurement. */
  const char* sel = "size class 4 KiB: AllReduce 4096 B: ";
  WANT_LINES(log, 1, sel, "excluded", "(the call's selection)");
  WANT_LINES(log, 1, sel, "chose Ring/LL", "reason: ");
  WANT_LINES(log, 0, "size class 4 KiB: AllReduce ", "measured", NULL);
  WANT_LINES(log, 1, "size class 4 MiB: AllReduce 4194304 B: chose ", "on 1 channel(s)",
             "; channels: the model's 2, then the call's minCTAs/maxCTAs");
  printf("explained once per (collective, size class), measured after %d calls: %s\n", SAMPLES,
         verdict(before));
}

/* NCCL_ALGO=Ring NCCL_PROTO=LL leave one candidate: forced, with the faster pair it excludes. */
static void check_forced(void) {
  int before = test_failures;
  const char* env[] = {"NCCL_ALGO", "Ring", "NCCL_PROTO", "LL", NULL};
  const char* log = tune_case("forced", env);
  if (log == NULL) return;
  const char* ar = "size class 256 KiB: AllReduce 262144 B: ";
  WANT_LINES(log, 1, ar, "candidates on", "Ring/LL");
  WANT_LINES(log, 0, ar, "candidates on", "Ring/Simple");
  WANT_LINES(log, 1, ar, "excluded", "(NCCL_PROTO=LL)");
  WANT_LINES(log, 1, ar, "excluded", "(NCCL_ALGO=Ring)");
  WANT_LINES(log, 1, ar, "chose Ring/LL", "reason: forced by NCCL_");
  printf("NCCL_ALGO/NCCL_PROTO forcing named as the reason: %s\n", verdict(before));
}

/* A model far too fast, then far too slow: the WARN says which way, with both times. */
static void check_wrong(const char* bw, const char* way) {
  int before = test_failures;
  const char* env[] = {"WEFT_HOST_COPY_BW", bw, NULL};
  const char* log = tune_case(way, env);
  if (log == NULL) return;
  WANT_LINES(log, 1, "NCCL WARN", "AllReduce of size class 256 KiB (Ring/", way);
  WANT_LINES(log, 1, "NCCL WARN", "the topology (NCCL_TOPO_FILE, detection) or the model may be wrong",
             "AllReduce");
  printf("WEFT_HOST_COPY_BW=%s: the 2x WARN (%s than predicted): %s\n", bw, way, verdict(before));
}

int main(void) {
  alarm(240);
  check_model();
  check_forced();
  check_wrong("1000000", "slower");
  check_wrong("0.0001", "faster");
  for (int i = 0; i < nlogs && test_failures == 0; i++) unlink(logs[i]);
  return test_finish("test_tune_log");
}
