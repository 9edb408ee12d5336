/* Parameter table and config files: environment over file over default, NCCL_CONF_FILE and
 * ~/.nccl.conf, comments/spaces/blank lines/CRLF, invalid integers, source reporting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
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
  static const char* names[] = {"NCCL_CONF_FILE", "NCCL_SOCKET_IFNAME", "NCCL_BUFFSIZE", "NCCL_ALGO",
                                "NCCL_PROTO",     "WEFT_TIMEOUT",       "NCCL_NTHREADS", "NCCL_TOPO_FILE",
                                "WEFT_SPIN_USEC", "NCCL_DEBUG",         "WEFT_BACKEND"};
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
  rmdir(tmpdir);
  weft_param_reload();
  return test_finish("test_param");
}
