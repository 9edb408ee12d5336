/* Settings that differ across ranks, from other ranks' environments given as files (`env` output,
 * or a running rank's /proc/<pid>/environ). The library itself compares what it must at init:
 * the backend (peers.c) and what shapes a ring step (collectives/agree.c); this check says which
 * differences that reconciles, which break a job, and which nothing compares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"

extern char** environ;

/* Differences a job cannot survive: ranks fail init or never meet. */
static const char* const must_match[] = {"WEFT_BACKEND", "WEFT_JOB_SECRET", "NCCL_COMM_ID", "WEFT_PSK_FILE",
                                         NULL};
/* Agreed at init: smallest step and channel count, rank 0's algorithm and protocol choices. */
static const char* const agreed[] = {
    "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
    "NCCL_PROTO",    "NCCL_ALGO",        "WEFT_NET_CHUNKSIZE", NULL};
/* Per-host or per-rank by nature. */
static const char* const local[] = {"NCCL_SOCKET_IFNAME", "NCCL_HOSTID",          "WEFT_HOSTID",
                                    "NCCL_DEBUG_FILE",    "NCCL_TOPO_FILE",       "NCCL_TOPO_DUMP_FILE",
                                    "WEFT_RANK",          "WEFT_LOCAL_RANK",      "WEFT_TOPO_SYSFS",
                                    "WEFT_DOCTOR_ROOT",   "NCCL_GRAPH_DUMP_FILE", NULL};

static int in_list(const char* const* list, const char* name) {
  for (int i = 0; list[i]; i++)
    if (strcmp(list[i], name) == 0) return 1;
  return 0;
}

/* NAME=value entries of a file, NUL- or newline-separated; NULL-terminated array in one block. */
static char** read_env_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 1 << 16, len = 0;
  char* text = malloc(cap + 1);
  for (size_t n; text && (n = fread(text + len, 1, cap - len, f)) > 0;) {
    len += n;
    if (len == cap) {
      char* bigger = realloc(text, 2 * cap + 1);
      if (bigger == NULL) break;
      text = bigger, cap *= 2;
    }
  }
  fclose(f);
  if (text == NULL) return NULL;
  text[len] = 0;
  size_t count = 1;
  for (size_t i = 0; i < len; i++)
    if (text[i] == 0 || text[i] == '\n') text[i] = 0, count++;
  char** env = malloc((count + 1) * sizeof(char*) + len + 1);
  if (env == NULL) {
    free(text);
    return NULL;
  }
  char* copy = (char*)(env + count + 1);
  memcpy(copy, text, len + 1);
  free(text);
  size_t k = 0;
  for (size_t i = 0; i < len; i += strlen(copy + i) + 1)
    if (copy[i] && strchr(copy + i, '=')) env[k++] = copy + i;
  env[k] = NULL;
  return env;
}

static const char* value_in(const char* const* env, const char* name, size_t n) {
  for (int i = 0; env[i]; i++)
    if (strncmp(env[i], name, n) == 0 && env[i][n] == '=') return env[i] + n + 1;
  return NULL;
}

static int ours(const char* e) { return strncmp(e, "NCCL_", 5) == 0 || strncmp(e, "WEFT_", 5) == 0; }

/* Returns whether the difference was reported (per-rank names are not). */
static int report_diff(const char* name, const char* mine, const char* theirs, const char* file,
                       struct weft_doctor_report* r) {
  if (in_list(local, name)) return 0;
  const char* a = mine ? mine : "(unset)";
  const char* b = theirs ? theirs : "(unset)";
  if (in_list(must_match, name)) {
    weft_doctor_add(r, "ranks.settings", WEFT_DOCTOR_BLOCK, "Give every rank the same value",
                    "%s differs: %s here, %s in %s; ranks fail init or never meet", name,
                    strcmp(name, "WEFT_JOB_SECRET") == 0 ? "(set)" : a,
                    strcmp(name, "WEFT_JOB_SECRET") == 0 ? "(another)" : b, file);
  } else if (in_list(agreed, name)) {
    weft_doctor_add(
        r, "ranks.settings", WEFT_DOCTOR_INFO,
        "Set it the same everywhere to get what you asked for on every rank",
        "%s differs: %s here, %s in %s; the communicator agrees at init (smallest buffer and channel "
        "count, rank 0's algorithm and protocol)",
        name, a, b, file);
  } else {
    weft_doctor_add(
        r, "ranks.settings", WEFT_DOCTOR_WARN, "Give every rank the same value unless it is per rank",
        "%s differs: %s here, %s in %s; nothing compares it at init, so ranks may behave differently", name,
        a, b, file);
  }
  return 1;
}

static void compare(const char* const* mine, const char* const* theirs, const char* file,
                    struct weft_doctor_report* r, int* diffs) {
  for (int pass = 0; pass < 2; pass++) {
    const char* const* from = pass == 0 ? mine : theirs;
    const char* const* other = pass == 0 ? theirs : mine;
    for (int i = 0; from[i]; i++) {
      if (!ours(from[i]) || !strchr(from[i], '=')) continue;
      size_t n = (size_t)(strchr(from[i], '=') - from[i]);
      const char* v = from[i] + n + 1;
      const char* w = value_in(other, from[i], n);
      if (w != NULL && (pass == 1 || strcmp(v, w) == 0)) continue; /* same, or seen in pass 0 */
      char name[128];
      snprintf(name, sizeof(name), "%.*s", (int)n, from[i]);
      *diffs += report_diff(name, pass == 0 ? v : w, pass == 0 ? w : v, file, r);
    }
  }
}

void weft_doctor_check_ranks(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  if (o->npeers == 0) return;
  const char* const* mine = o->env ? o->env : (const char* const*)environ;
  int diffs = 0;
  for (int p = 0; p < o->npeers; p++) {
    char** theirs = read_env_file(o->peers[p]);
    if (theirs == NULL) {
      weft_doctor_add(r, "ranks.settings", WEFT_DOCTOR_WARN, "Pass a file of NAME=value lines (env > FILE)",
                      "%s cannot be read as an environment", o->peers[p]);
      continue;
    }
    compare(mine, (const char* const*)theirs, o->peers[p], r, &diffs);
    free(theirs);
  }
  if (diffs == 0)
    weft_doctor_add(r, "ranks.settings", WEFT_DOCTOR_OK, NULL,
                    "NCCL_*/WEFT_* settings match %d other rank(s)", o->npeers);
}
