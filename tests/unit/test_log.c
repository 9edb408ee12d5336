/* Logging: NCCL's line shapes (INFO, WARN with timestamp and file:line, TRACE), NCCL_DEBUG levels,
 * NCCL_DEBUG_SUBSYS masks with ^ and ALL, NCCL_DEBUG_FILE with %h/%p, and the last-error text. */
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "util/log.h"
#include "util/param.h"

static char tmpdir[] = "/tmp/weft-test-log-XXXXXX";
static char host[64];

static int matches(const char* text, const char* pattern) {
  regex_t re;
  if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
    fprintf(stderr, "bad regex %s\n", pattern);
    exit(1);
  }
  int ok = regexec(&re, text, 0, NULL, 0) == 0;
  regfree(&re);
  return ok;
}

/* Sets (or with NULL unsets) a variable and makes the logger read the environment again. */
static void set(const char* name, const char* value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  weft_log_reset();
}

static void test_parse(void) {
  EXPECT_EQ_INT(weft_log_parse_level("VERSION"), WEFT_LOG_VERSION);
  EXPECT_EQ_INT(weft_log_parse_level("WARN"), WEFT_LOG_WARN);
  EXPECT_EQ_INT(weft_log_parse_level("warn"), WEFT_LOG_WARN);
  EXPECT_EQ_INT(weft_log_parse_level("INFO"), WEFT_LOG_INFO);
  EXPECT_EQ_INT(weft_log_parse_level("ABORT"), WEFT_LOG_ABORT);
  EXPECT_EQ_INT(weft_log_parse_level("TRACE"), WEFT_LOG_TRACE);
  EXPECT_EQ_INT(weft_log_parse_level("LOUD"), WEFT_LOG_NONE);
  EXPECT_EQ_INT(weft_log_parse_level(NULL), WEFT_LOG_NONE);

  EXPECT_EQ_INT(weft_log_parse_subsys("INIT"), WEFT_INIT);
  EXPECT_EQ_INT(weft_log_parse_subsys("INIT,NET"), WEFT_INIT | WEFT_NET);
  EXPECT_EQ_INT(weft_log_parse_subsys("coll,p2p,BOOTSTRAP"), WEFT_COLL | WEFT_P2P | WEFT_BOOTSTRAP);
  EXPECT_EQ_INT(weft_log_parse_subsys("ALL"), WEFT_ALL);
  EXPECT_EQ_INT(weft_log_parse_subsys("^COLL"), (uint32_t)~WEFT_COLL);
  EXPECT_EQ_INT(weft_log_parse_subsys("^COLL,NET"), (uint32_t) ~(WEFT_COLL | WEFT_NET));
  EXPECT_EQ_INT(weft_log_parse_subsys("^ALL"), 0);
  EXPECT_EQ_INT(weft_log_parse_subsys("NOSUCH"), 0);
  EXPECT_EQ_INT(weft_log_parse_subsys(NULL), WEFT_INIT | WEFT_BOOTSTRAP | WEFT_ENV);
  const char* names[] = {"INIT",  "COLL", "P2P",   "SHM",  "NET", "GRAPH",   "TUNING", "ENV",
                         "ALLOC", "CALL", "PROXY", "NVLS", "REG", "PROFILE", "RAS"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    EXPECT_MSG(weft_log_parse_subsys(names[i]) != 0, "%s is not a subsystem", names[i]);
}

/* Line shapes, from weft_log_format. */
static void test_format(void) {
  char line[1400], want[512];
  int pid = (int)getpid(), tid = (int)syscall(SYS_gettid);
  set("NCCL_DEBUG_TIMESTAMP_LEVELS", NULL);
  set("NCCL_DEBUG", "INFO");
  weft_log_set_device(3);

  int n = weft_log_format(line, sizeof(line), WEFT_LOG_INFO, "src/core/init.c", 42, "hello world");
  snprintf(want, sizeof(want), "%s:%d:%d [3] NCCL INFO hello world", host, pid, tid);
  EXPECT_MSG(strcmp(line, want) == 0, "got [%s] want [%s]", line, want);
  EXPECT_EQ_INT(n, (int)strlen(line));

  /* WARN: blank line first, a timestamp (default levels: WARN), then file:line. */
  weft_log_format(line, sizeof(line), WEFT_LOG_WARN, "src/core/init.c", 42, "bad thing");
  snprintf(want, sizeof(want),
           "^\n\\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\] %s:%d:%d \\[3\\] "
           "init\\.c:42 NCCL WARN bad thing$",
           host, pid, tid);
  EXPECT_MSG(matches(line, want), "got [%s]", line);

  weft_log_format(line, sizeof(line), WEFT_LOG_TRACE, "src/core/init.c", 7, "step");
  snprintf(want, sizeof(want), "^%s:%d:%d \\[3\\] [0-9]+\\.[0-9]{6} init\\.c:7 NCCL TRACE step$", host, pid,
           tid);
  EXPECT_MSG(matches(line, want), "got [%s]", line);

  /* Timestamps on the levels NCCL_DEBUG_TIMESTAMP_LEVELS names, in NCCL_DEBUG_TIMESTAMP_FORMAT. */
  setenv("NCCL_DEBUG_TIMESTAMP_FORMAT", "<%Y> ", 1);
  set("NCCL_DEBUG_TIMESTAMP_LEVELS", "INFO");
  weft_log_format(line, sizeof(line), WEFT_LOG_INFO, "x.c", 1, "stamped");
  snprintf(want, sizeof(want), "^<[0-9]{4}> %s:%d:%d \\[3\\] NCCL INFO stamped$", host, pid, tid);
  EXPECT_MSG(matches(line, want), "got [%s]", line);
  weft_log_format(line, sizeof(line), WEFT_LOG_WARN, "x.c", 1, "plain");
  snprintf(want, sizeof(want), "\n%s:%d:%d [3] x.c:1 NCCL WARN plain", host, pid, tid);
  EXPECT_MSG(strcmp(line, want) == 0, "got [%s]", line);
  unsetenv("NCCL_DEBUG_TIMESTAMP_FORMAT");
  set("NCCL_DEBUG_TIMESTAMP_LEVELS", NULL);

  /* A small buffer truncates without overflowing. */
  char small[16];
  memset(small, 'z', sizeof(small));
  n = weft_log_format(small, 12, WEFT_LOG_INFO, "x.c", 1, "a long message that does not fit");
  EXPECT(n <= 11 && small[11] == 0 && small[12] == 'z');
}

static void* device_thread(void* arg) {
  char* line = arg;
  weft_log_set_device(5);
  weft_log_format(line, 256, WEFT_LOG_INFO, "x.c", 1, "from thread");
  return NULL;
}

/* The device in brackets belongs to the thread that set it. */
static void test_thread_device(void) {
  char line[256], mine[256];
  pthread_t t;
  weft_log_set_device(2);
  pthread_create(&t, NULL, device_thread, line);
  pthread_join(t, NULL);
  weft_log_format(mine, sizeof(mine), WEFT_LOG_INFO, "x.c", 1, "from main");
  EXPECT_MSG(strstr(line, " [5] NCCL INFO from thread") != NULL, "%s", line);
  EXPECT_MSG(strstr(mine, " [2] NCCL INFO from main") != NULL, "%s", mine);
}

/* Reads the file the logger wrote for step `step` (NCCL_DEBUG_FILE with %h and %p expanded). */
static char* read_log(int step) {
  static char buf[16384];
  char path[512];
  snprintf(path, sizeof(path), "%s/weft.%d.%s.%d.log", tmpdir, step, host, (int)getpid());
  buf[0] = 0;
  FILE* f = fopen(path, "r");
  EXPECT_MSG(f != NULL, "no log file %s", path);
  if (f == NULL) return buf;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = 0;
  fclose(f);
  unlink(path);
  return buf;
}

/* One of each kind of line, logged to a fresh file; returns the file's text. */
static char* log_step(int step, const char* level, const char* subsys) {
  char pattern[512];
  snprintf(pattern, sizeof(pattern), "%s/weft.%d.%%h.%%p.log", tmpdir, step);
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  if (subsys)
    setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  else
    unsetenv("NCCL_DEBUG_SUBSYS");
  set("NCCL_DEBUG", level);
  WEFT_INFO(WEFT_INIT, "init-info %d", step);
  WEFT_INFO(WEFT_COLL, "coll-info %d", step);
  WEFT_INFO(WEFT_NET | WEFT_COLL, "net-or-coll-info %d", step);
  WEFT_TRACE(WEFT_INIT, "init-trace %d", step);
  WEFT_WARN("warning %d", step);
  weft_log_reset(); /* closes the file */
  return read_log(step);
}

static void test_levels_and_masks(void) {
  char* text = log_step(1, "INFO", "INIT,NET");
  EXPECT_MSG(strstr(text, "NCCL INFO init-info 1\n") != NULL, "%s", text);
  EXPECT_MSG(strstr(text, "NCCL INFO coll-info 1") == NULL, "%s", text);
  EXPECT_MSG(strstr(text, "NCCL INFO net-or-coll-info 1\n") != NULL, "%s", text);
  EXPECT_MSG(strstr(text, "init-trace") == NULL, "%s", text);
  EXPECT_MSG(matches(text, "\n\\[[^]]*\\] [^ ]+ \\[[0-9]+\\] test_log\\.c:[0-9]+ NCCL WARN warning 1\n"),
             "%s", text);

  text = log_step(2, "TRACE", "^COLL");
  EXPECT_MSG(strstr(text, "init-info 2") && strstr(text, "NCCL TRACE init-trace 2"), "%s", text);
  EXPECT_MSG(strstr(text, "NCCL INFO coll-info 2") == NULL, "%s", text);
  EXPECT_MSG(strstr(text, "net-or-coll-info 2"), "%s", text);
  EXPECT_MSG(strstr(text, "NCCL WARN warning 2"), "%s", text);

  text = log_step(3, "info", "ALL");
  EXPECT_MSG(
      strstr(text, "init-info 3") && strstr(text, "NCCL INFO coll-info 3") && !strstr(text, "init-trace"),
      "%s", text);

  text = log_step(4, "WARN", NULL);
  EXPECT_MSG(strstr(text, "NCCL INFO") == NULL && strstr(text, "NCCL WARN warning 4"), "%s", text);

  text = log_step(5, "VERSION", NULL);
  EXPECT_MSG(strstr(text, "NCCL WARN") == NULL && strstr(text, "NCCL INFO") == NULL, "%s", text);

  /* Default subsystems (INIT,BOOTSTRAP,ENV): COLL is off. */
  text = log_step(6, "INFO", NULL);
  EXPECT_MSG(strstr(text, "init-info 6") && !strstr(text, "NCCL INFO coll-info 6"), "%s", text);
  EXPECT_MSG(strstr(text, "net-or-coll-info 6") == NULL, "%s", text);
  unsetenv("NCCL_DEBUG_FILE");
  unsetenv("NCCL_DEBUG_SUBSYS");
}

/* ncclGetLastError is the last WARN's message, whatever NCCL_DEBUG says; INFO never changes it. */
static void test_last_error(void) {
  set("NCCL_DEBUG", NULL);
  WEFT_WARN("first failure: rank %d", 7);
  EXPECT(strcmp(weft_log_last_error(), "first failure: rank 7") == 0);
  WEFT_WARN("second failure: %s", "timeout");
  EXPECT_MSG(strcmp(ncclGetLastError(NULL), "second failure: timeout") == 0, "%s", ncclGetLastError(NULL));
  set("NCCL_DEBUG", "INFO");
  setenv("NCCL_DEBUG_FILE", "/dev/null", 1);
  weft_log_reset();
  WEFT_INFO(WEFT_ALL, "only information");
  EXPECT(strcmp(ncclGetLastError(NULL), "second failure: timeout") == 0);
  /* A failure's aftermath (a peer that left because of it) keeps the failure as the last error. */
  int was = weft_log_set_aftermath(1);
  WEFT_WARN("connection to a peer that left: %s", "broken pipe");
  EXPECT_EQ_INT(weft_log_set_aftermath(was), 1);
  EXPECT_MSG(strcmp(ncclGetLastError(NULL), "second failure: timeout") == 0, "%s", ncclGetLastError(NULL));
  WEFT_WARN("third failure");
  EXPECT(strcmp(ncclGetLastError(NULL), "third failure") == 0);
  unsetenv("NCCL_DEBUG_FILE");
  set("NCCL_DEBUG", NULL);
}

int main(void) {
  static const char* vars[] = {"NCCL_DEBUG",
                               "NCCL_DEBUG_SUBSYS",
                               "NCCL_DEBUG_FILE",
                               "NCCL_DEBUG_TIMESTAMP_LEVELS",
                               "NCCL_DEBUG_TIMESTAMP_FORMAT",
                               "NCCL_CONF_FILE"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  setenv("HOME", tmpdir, 1); /* keep the caller's ~/.nccl.conf out */
  gethostname(host, sizeof(host) - 1);
  host[strcspn(host, ".")] = 0;
  test_parse();
  test_format();
  test_thread_device();
  test_levels_and_masks();
  test_last_error();
  rmdir(tmpdir);
  return test_finish("test_log");
}
