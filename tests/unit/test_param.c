/* Parameter table and config files: environment over file over default, NCCL_CONF_FILE and
 * ~/.nccl.conf, comments/spaces/blank lines/CRLF, invalid integers, source reporting; and the
 * public ncclParam* API over the same table (handles, typed and range-checked getters, raw bytes,
 * keys, the dump). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "util/log.h"
#include "util/param.h"

static char tmpdir[] = "/tmp/weft-test-param-XXXXXX";

static int str_is(const char* got, const char* want) { return got != NULL && strcmp(got, want) == 0; }

static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
}

/* The variables this test gives values; none may leak in from the caller's environment. */
static void clear_env(void) {
  static const char* names[] = {"NCCL_CONF_FILE",
                                "NCCL_SOCKET_IFNAME",
                                "NCCL_BUFFSIZE",
                                "NCCL_ALGO",
                                "NCCL_PROTO",
                                "WEFT_TIMEOUT",
                                "NCCL_NTHREADS",
                                "NCCL_TOPO_FILE",
                                "WEFT_SPIN_USEC",
                                "NCCL_DEBUG",
                                "WEFT_BACKEND",
                                "NCCL_MIN_NCHANNELS",
                                "NCCL_DEBUG_TIMESTAMP_FORMAT"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) unsetenv(names[i]);
}

static void test_table(void) {
  int n = weft_param_count();
  EXPECT(n > 10);
  EXPECT(weft_param_at(-1) == NULL);
  EXPECT(weft_param_at(n) == NULL);
  for (int i = 0; i < n; i++) {
    const struct weft_param_def* d = weft_param_at(i);
    EXPECT(d != NULL && d->name != NULL && d->help != NULL && d->help[0] != 0);
    if (d == NULL || d->name == NULL) continue;
    EXPECT_MSG(strncmp(d->name, "NCCL_", 5) == 0 || strncmp(d->name, "WEFT_", 5) == 0, "%s", d->name);
    for (int j = 0; j < i; j++) EXPECT_MSG(strcmp(weft_param_at(j)->name, d->name) != 0, "%s twice", d->name);
    if (d->type == WEFT_PARAM_INT && d->default_value != NULL) {
      char* end = NULL;
      strtoll(d->default_value, &end, 0);
      EXPECT_MSG(end != d->default_value && *end == 0, "%s default %s", d->name, d->default_value);
    }
  }
  EXPECT(str_is(weft_param_source_name(WEFT_SRC_DEFAULT), "default"));
  EXPECT(str_is(weft_param_source_name(WEFT_SRC_FILE), "file"));
  EXPECT(str_is(weft_param_source_name(WEFT_SRC_ENV), "env"));
}

static void test_defaults(void) {
  weft_param_reload();
  weft_param_load_text(""); /* no files: only defaults */
  EXPECT_EQ_INT(weft_param_int("NCCL_NTHREADS"), 512);
  EXPECT(weft_param_source("NCCL_NTHREADS") == WEFT_SRC_DEFAULT);
  EXPECT(!weft_param_is_set("NCCL_NTHREADS"));
  EXPECT(weft_param_str("NCCL_TOPO_FILE") == NULL);
  EXPECT(!weft_param_is_set("NCCL_TOPO_FILE"));
  EXPECT(str_is(weft_param_str("WEFT_BACKEND"), "auto"));
  /* A name missing from the table is a programming error: NULL and a WARN that names it. */
  EXPECT(weft_param_str("WEFT_NOT_A_PARAMETER") == NULL);
  EXPECT(strstr(weft_log_last_error(), "WEFT_NOT_A_PARAMETER") != NULL);
}

static void test_text(void) {
  const char* text =
      "# Weft test configuration\n"
      "\n"
      "   \t\n"
      "  NCCL_SOCKET_IFNAME = eth0  \r\n"
      "NCCL_BUFFSIZE=1024\r\n"
      "   # indented comment = not a value\n"
      "NCCL_ALGO=Ring\n"
      "NCCL_ALGO=Tree\n" /* the first value read wins, as with NCCL */
      "NCCL_PROTO=^LL128,LL\n"
      "WEFT_TIMEOUT=abc\n"
      "WEFT_SPIN_USEC=0x10\n"
      "=novalue\n"
      "no equals sign here\n";
  weft_param_reload();
  EXPECT_EQ_INT(weft_param_load_text(text), 6);
  EXPECT(str_is(weft_param_str("NCCL_SOCKET_IFNAME"), "eth0"));
  EXPECT(weft_param_source("NCCL_SOCKET_IFNAME") == WEFT_SRC_FILE);
  EXPECT(weft_param_is_set("NCCL_SOCKET_IFNAME"));
  EXPECT_EQ_INT(weft_param_int("NCCL_BUFFSIZE"), 1024);
  EXPECT(str_is(weft_param_str("NCCL_ALGO"), "Ring"));
  EXPECT(str_is(weft_param_str("NCCL_PROTO"), "^LL128,LL"));
  EXPECT_EQ_INT(weft_param_int("WEFT_SPIN_USEC"), 16);

  /* An invalid integer WARNs (naming variable, value and source) and falls back to the default. */
  EXPECT_EQ_INT(weft_param_int("WEFT_TIMEOUT"), 1800);
  const char* warn = weft_log_last_error();
  EXPECT_MSG(strstr(warn, "WEFT_TIMEOUT") && strstr(warn, "abc") && strstr(warn, "file"), "%s", warn);
  EXPECT(weft_param_source("WEFT_TIMEOUT") == WEFT_SRC_FILE);

  /* The environment wins over the file, and the file comes back when the variable goes. */
  setenv("NCCL_BUFFSIZE", "2048", 1);
  EXPECT_EQ_INT(weft_param_int("NCCL_BUFFSIZE"), 2048);
  EXPECT(weft_param_source("NCCL_BUFFSIZE") == WEFT_SRC_ENV);
  setenv("NCCL_BUFFSIZE", "-5", 1);
  EXPECT_EQ_INT(weft_param_int("NCCL_BUFFSIZE"), -5);
  setenv("NCCL_BUFFSIZE", "12x", 1);
  EXPECT_EQ_INT(weft_param_int("NCCL_BUFFSIZE"), 4194304);
  warn = weft_log_last_error();
  EXPECT_MSG(strstr(warn, "NCCL_BUFFSIZE") && strstr(warn, "12x") && strstr(warn, "env"), "%s", warn);
  unsetenv("NCCL_BUFFSIZE");
  EXPECT_EQ_INT(weft_param_int("NCCL_BUFFSIZE"), 1024);
  EXPECT(weft_param_source("NCCL_BUFFSIZE") == WEFT_SRC_FILE);
  setenv("NCCL_ALGO", "Tree", 1);
  EXPECT(str_is(weft_param_str("NCCL_ALGO"), "Tree"));
  unsetenv("NCCL_ALGO");

  /* After a reload the entries are gone. */
  weft_param_reload();
  weft_param_load_text("");
  EXPECT(weft_param_str("NCCL_SOCKET_IFNAME") == NULL);
  EXPECT(weft_param_source("NCCL_BUFFSIZE") == WEFT_SRC_DEFAULT);
}

/* Files as NCCL reads them: NCCL_CONF_FILE, else ~/.nccl.conf (then /etc/nccl.conf). */
static void test_files(void) {
  char conf[256], home_conf[256];
  snprintf(conf, sizeof(conf), "%s/custom.conf", tmpdir);
  snprintf(home_conf, sizeof(home_conf), "%s/.nccl.conf", tmpdir);
  write_file(conf, "# from NCCL_CONF_FILE\r\n\r\nNCCL_SOCKET_IFNAME=ib\r\n  NCCL_BUFFSIZE = 65536 \r\n");
  write_file(home_conf, "NCCL_ALGO = Ring\nNCCL_SOCKET_IFNAME=home\n");
  setenv("HOME", tmpdir, 1);

  setenv("NCCL_CONF_FILE", conf, 1);
  weft_param_reload();
  EXPECT(str_is(weft_param_str("NCCL_SOCKET_IFNAME"), "ib"));
  EXPECT(weft_param_source("NCCL_SOCKET_IFNAME") == WEFT_SRC_FILE);
  EXPECT_EQ_INT(weft_param_int("NCCL_BUFFSIZE"), 65536);
  EXPECT_MSG(!str_is(weft_param_str("NCCL_ALGO"), "Ring"),
             "~/.nccl.conf read although NCCL_CONF_FILE is set");
  setenv("NCCL_SOCKET_IFNAME", "eth1", 1);
  EXPECT(str_is(weft_param_str("NCCL_SOCKET_IFNAME"), "eth1"));
  EXPECT(weft_param_source("NCCL_SOCKET_IFNAME") == WEFT_SRC_ENV);
  unsetenv("NCCL_SOCKET_IFNAME");

  unsetenv("NCCL_CONF_FILE");
  weft_param_reload();
  EXPECT(str_is(weft_param_str("NCCL_ALGO"), "Ring"));
  EXPECT(str_is(weft_param_str("NCCL_SOCKET_IFNAME"), "home"));
  EXPECT(weft_param_source("NCCL_ALGO") == WEFT_SRC_FILE);

  /* A missing NCCL_CONF_FILE is not an error; values fall back to their defaults. */
  char missing[300];
  snprintf(missing, sizeof(missing), "%s/does-not-exist.conf", tmpdir);
  setenv("NCCL_CONF_FILE", missing, 1);
  weft_param_reload();
  EXPECT_EQ_INT(weft_param_int("NCCL_NTHREADS"), 512);
  EXPECT_MSG(!str_is(weft_param_str("NCCL_ALGO"), "Ring"),
             "~/.nccl.conf read although NCCL_CONF_FILE is set");
  unsetenv("NCCL_CONF_FILE");
  unlink(conf);
  unlink(home_conf);
}

static int last_error_has(const char* a, const char* b) {
  const char* e = weft_log_last_error();
  return strstr(e, a) != NULL && (b == NULL || strstr(e, b) != NULL);
}

static void test_api_bind(void) {
  ncclParamHandle_t h = NULL, again = NULL, untouched = (ncclParamHandle_t)(uintptr_t)0x1;
  EXPECT(ncclParamBind(&h, "NCCL_NTHREADS") == ncclSuccess && h != NULL);
  EXPECT(ncclParamBind(&again, "NCCL_NTHREADS") == ncclSuccess && again == h);
  EXPECT(ncclParamBind(&untouched, "NCCL_NO_SUCH_PARAMETER") == ncclInvalidArgument);
  EXPECT(untouched == (ncclParamHandle_t)(uintptr_t)0x1);
  EXPECT(last_error_has("NCCL_NO_SUCH_PARAMETER", NULL));
  EXPECT(ncclParamBind(&untouched, "nccl_nthreads") == ncclInvalidArgument); /* keys are case-sensitive */
  EXPECT(ncclParamBind(&untouched, NULL) == ncclInvalidArgument);
  EXPECT(ncclParamBind(NULL, "NCCL_NTHREADS") == ncclInvalidArgument);
  int32_t i32 = 0;
  int not_a_handle = 0;
  EXPECT(ncclParamGetI32((ncclParamHandle_t)(void*)&not_a_handle, &i32) == ncclInvalidArgument);
  EXPECT(ncclParamGetI32(NULL, &i32) == ncclInvalidArgument);
  EXPECT(ncclParamGetI32(h, NULL) == ncclInvalidArgument);
}

static ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = NULL;
  EXPECT_MSG(ncclParamBind(&h, key) == ncclSuccess, "%s", key);
  return h;
}

/* Each getter takes the values its type holds and refuses the others (no truncation). */
static void test_api_ints(void) {
  ncclParamHandle_t h = bind("NCCL_NTHREADS"); /* default 512 */
  int8_t i8 = 0;
  int16_t i16 = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  uint8_t u8 = 0;
  uint16_t u16 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  EXPECT(ncclParamGetI16(h, &i16) == ncclSuccess && i16 == 512);
  EXPECT(ncclParamGetI32(h, &i32) == ncclSuccess && i32 == 512);
  EXPECT(ncclParamGetI64(h, &i64) == ncclSuccess && i64 == 512);
  EXPECT(ncclParamGetU16(h, &u16) == ncclSuccess && u16 == 512);
  EXPECT(ncclParamGetU32(h, &u32) == ncclSuccess && u32 == 512);
  EXPECT(ncclParamGetU64(h, &u64) == ncclSuccess && u64 == 512);
  i8 = 9;
  EXPECT(ncclParamGetI8(h, &i8) == ncclInvalidArgument && i8 == 9);
  EXPECT(last_error_has("NCCL_NTHREADS", "512"));
  EXPECT(ncclParamGetU8(h, &u8) == ncclInvalidArgument);
  setenv("NCCL_NTHREADS", "-128", 1);
  EXPECT(ncclParamGetI8(h, &i8) == ncclSuccess && i8 == -128);
  EXPECT(ncclParamGetU64(h, &u64) == ncclInvalidArgument);
  EXPECT(ncclParamGetU8(h, &u8) == ncclInvalidArgument);
  setenv("NCCL_NTHREADS", "0x100000000", 1); /* 2^32, as the library reads it (base prefixes too) */
  EXPECT(ncclParamGetU32(h, &u32) == ncclInvalidArgument);
  EXPECT(ncclParamGetI32(h, &i32) == ncclInvalidArgument);
  EXPECT(ncclParamGetI64(h, &i64) == ncclSuccess && i64 == 4294967296ll);
  EXPECT(ncclParamGetU64(h, &u64) == ncclSuccess && u64 == 4294967296ull);
  setenv("NCCL_NTHREADS", "255", 1);
  EXPECT(ncclParamGetU8(h, &u8) == ncclSuccess && u8 == 255);
  EXPECT(ncclParamGetI8(h, &i8) == ncclInvalidArgument);
  unsetenv("NCCL_NTHREADS");
  /* No value at all: unset and without default. */
  EXPECT(ncclParamGetI32(bind("NCCL_MIN_NCHANNELS"), &i32) == ncclInvalidUsage);
  EXPECT(last_error_has("NCCL_MIN_NCHANNELS", "unset"));
  /* A string parameter has no integer getter. */
  EXPECT(ncclParamGetI64(bind("WEFT_BACKEND"), &i64) == ncclInvalidArgument);
  EXPECT(last_error_has("WEFT_BACKEND", "string"));
}

static void test_api_strings(void) {
  const char* str = NULL;
  EXPECT(ncclParamGetStr(bind("WEFT_BACKEND"), &str) == ncclSuccess && str_is(str, "auto"));
  setenv("WEFT_BACKEND", "host", 1);
  const char* again = NULL;
  EXPECT(ncclParamGetStr(bind("WEFT_BACKEND"), &again) == ncclSuccess && str_is(again, "host"));
  unsetenv("WEFT_BACKEND");
  str = (const char*)"x";
  EXPECT(ncclParamGetStr(bind("NCCL_TOPO_FILE"), &str) == ncclSuccess && str == NULL); /* unset */
  EXPECT(ncclParamGetStr(bind("NCCL_NTHREADS"), &str) == ncclInvalidArgument);
  EXPECT(ncclParamGetStr(bind("NCCL_NTHREADS"), NULL) == ncclInvalidArgument);

  /* By key, as text: integers as the library reads them. */
  const char* v = NULL;
  int len = -1;
  EXPECT(ncclParamGetParameter("NCCL_NTHREADS", &v, &len) == ncclSuccess && str_is(v, "512") && len == 3);
  setenv("NCCL_NTHREADS", "0x100", 1);
  EXPECT(ncclParamGetParameter("NCCL_NTHREADS", &v, &len) == ncclSuccess && str_is(v, "256") && len == 3);
  unsetenv("NCCL_NTHREADS");
  EXPECT(ncclParamGetParameter("NCCL_DEBUG_TIMESTAMP_FORMAT", &v, &len) == ncclSuccess &&
         str_is(v, "[%F %T] ") && len == 8);
  EXPECT(ncclParamGetParameter("NCCL_TOPO_FILE", &v, &len) == ncclSuccess && v == NULL && len == 0);
  v = (const char*)"x";
  len = 5;
  EXPECT(ncclParamGetParameter("NCCL_NO_SUCH", &v, &len) == ncclInvalidArgument && v == NULL && len == 0);
  EXPECT(last_error_has("NCCL_NO_SUCH", NULL));
  EXPECT(ncclParamGetParameter(NULL, &v, &len) == ncclInvalidArgument);
  EXPECT(ncclParamGetParameter("NCCL_NTHREADS", NULL, &len) == ncclInvalidArgument);
}

/* Raw bytes: an integer is its int64_t, a string its bytes and NUL, unset nothing; len is what the
 * value needs, also when the buffer is too small. */
static void test_api_raw(void) {
  unsigned char raw[64];
  int len = -1;
  int64_t x = 0;
  ncclParamHandle_t h = bind("NCCL_NTHREADS");
  EXPECT(ncclParamGet(h, raw, sizeof(raw), &len) == ncclSuccess && len == 8);
  memcpy(&x, raw, sizeof(x));
  EXPECT_EQ_INT(x, 512);
  len = -1;
  EXPECT(ncclParamGet(h, raw, 4, &len) == ncclInvalidArgument && len == 8);
  EXPECT(last_error_has("maxLen 4", "NCCL_NTHREADS"));
  len = -1;
  EXPECT(ncclParamGet(h, NULL, 0, &len) == ncclInvalidArgument && len == 8); /* a size query, refused */
  len = -1;
  EXPECT(ncclParamGet(h, NULL, 8, &len) == ncclInvalidArgument && len == -1);
  EXPECT(ncclParamGet(h, raw, -1, &len) == ncclInvalidArgument && len == -1);
  EXPECT(ncclParamGet(h, raw, 8, NULL) == ncclInvalidArgument);
  EXPECT(ncclParamGet(bind("WEFT_BACKEND"), raw, sizeof(raw), &len) == ncclSuccess && len == 5 &&
         memcmp(raw, "auto", 5) == 0);
  EXPECT(ncclParamGet(bind("NCCL_TOPO_FILE"), raw, sizeof(raw), &len) == ncclSuccess && len == 0);
  EXPECT(ncclParamGet(bind("NCCL_TOPO_FILE"), NULL, 0, &len) == ncclSuccess && len == 0);
}

static void test_api_keys_dump(void) {
  const char** keys = NULL;
  const char** again = NULL;
  int n = -1, m = -1;
  EXPECT(ncclParamGetAllParameterKeys(&keys, &n) == ncclSuccess && n == weft_param_count());
  EXPECT(ncclParamGetAllParameterKeys(&again, &m) == ncclSuccess && again == keys && m == n);
  for (int i = 0; keys && i < n; i++) EXPECT(str_is(keys[i], weft_param_at(i)->name));
  EXPECT(ncclParamGetAllParameterKeys(NULL, &n) == ncclInvalidArgument);
  EXPECT(ncclParamGetAllParameterKeys(&keys, NULL) == ncclInvalidArgument);

  /* The dump goes to stdout: catch it in a file. */
  char path[300];
  snprintf(path, sizeof(path), "%s/dump.txt", tmpdir);
  fflush(stdout);
  int saved = dup(1);
  FILE* f = fopen(path, "w+");
  EXPECT(f != NULL && saved >= 0);
  if (f == NULL || saved < 0) return;
  setenv("WEFT_TIMEOUT", "77", 1);
  dup2(fileno(f), 1);
  ncclParamDumpAll();
  dup2(saved, 1);
  close(saved);
  unsetenv("WEFT_TIMEOUT");
  char text[65536];
  rewind(f);
  size_t got = fread(text, 1, sizeof(text) - 1, f);
  text[got] = 0;
  fclose(f);
  unlink(path);
  char head[64];
  snprintf(head, sizeof(head), "Parameters (%d):", weft_param_count());
  EXPECT_MSG(strncmp(text, head, strlen(head)) == 0, "%.80s", text);
  EXPECT(strstr(text, "NCCL_NTHREADS") && strstr(text, "[default]") && strstr(text, "Threads per block"));
  const char* t = strstr(text, "WEFT_TIMEOUT");
  EXPECT(t != NULL && strstr(t, "77") && strstr(t, "[env]"));
}

int main(void) {
  clear_env();
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  setenv("HOME", tmpdir, 1); /* keep the caller's ~/.nccl.conf out */
  test_table();
  test_defaults();
  test_text();
  test_files();
  weft_param_reload();
  weft_param_load_text("");
  test_api_bind();
  test_api_ints();
  test_api_strings();
  test_api_raw();
  test_api_keys_dump();
  rmdir(tmpdir);
  weft_param_reload();
  return test_finish("test_param");
}
