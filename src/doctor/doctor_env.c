/* NCCL_* and WEFT_* variables nothing reads: a misspelt name (NCCL_SOCKET_IFNAM) is silently
 * ignored by NCCL, so the job runs with the default and the user blames the network. A name close
 * to a known one (edit distance) is reported with the known name; other unknown names are only
 * listed, since NVIDIA's NCCL and plugins read names Weft never will. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/names.h"
#include "util/log.h"
#include "util/param.h"

extern char** environ;

#define MAX_NAME 128

/* Optimal string alignment distance (a swap of two neighbours costs 1), stopping past limit. */
static int edit_distance(const char* a, const char* b, int limit) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la >= MAX_NAME || lb >= MAX_NAME || abs(la - lb) > limit) return limit + 1;
  int prev2[MAX_NAME + 1], prev[MAX_NAME + 1], cur[MAX_NAME + 1];
  for (int j = 0; j <= lb; j++) prev[j] = j;
  for (int i = 1; i <= la; i++) {
    cur[0] = i;
    int row_min = cur[0];
    for (int j = 1; j <= lb; j++) {
      int cost = a[i - 1] != b[j - 1];
      int best = prev[j - 1] + cost;
      if (prev[j] + 1 < best) best = prev[j] + 1;
      if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
        best = prev2[j - 2] + 1;
      cur[j] = best;
      if (best < row_min) row_min = best;
    }
    if (row_min > limit) return limit + 1;
    memcpy(prev2, prev, sizeof(prev));
    memcpy(prev, cur, sizeof(cur));
  }
  return prev[lb];
}

/* Short names are close only at distance 1: NCCL_ALGO and NCCL_ALGX are, NCCL_NET and NCCL_NIC
 * would be noise at 2. */
static int limit_for(const char* name) { return strlen(name) < 12 ? 1 : 2; }

/* The table's or the foreign list's own copy of name, NULL when neither has it. */
static const char* known_name(const char* name) {
  const struct weft_param_def* def = weft_param_find(name);
  if (def != NULL) return def->name;
  for (int i = 0; weft_doctor_foreign_names[i]; i++)
    if (strcmp(weft_doctor_foreign_names[i], name) == 0) return weft_doctor_foreign_names[i];
  return NULL;
}

static void consider(const char* name, const char* cand, const char** best, int* best_d) {
  int d = edit_distance(name, cand, *best_d - 1);
  if (d < *best_d) *best_d = d, *best = cand;
}

/* NCCL_X where WEFT_X is known (or the reverse) counts as close whatever the distance. */
static const char* other_prefix(const char* name) {
  char buf[MAX_NAME + 8];
  int nccl = strncmp(name, "NCCL_", 5) == 0;
  snprintf(buf, sizeof(buf), "%s%s", nccl ? "WEFT_" : "NCCL_", name + 5);
  return known_name(buf);
}

const char* weft_doctor_env_suggest(const char* name, int* known) {
  *known = known_name(name) != NULL;
  if (*known) return NULL;
  const char* other = other_prefix(name);
  if (other) return other;
  const char* best = NULL;
  int best_d = limit_for(name) + 1;
  for (int i = 0; i < weft_param_count(); i++) consider(name, weft_param_at(i)->name, &best, &best_d);
  for (int i = 0; weft_doctor_foreign_names[i]; i++)
    consider(name, weft_doctor_foreign_names[i], &best, &best_d);
  return best;
}

static int is_ours(const char* entry) {
  return strncmp(entry, "NCCL_", 5) == 0 || strncmp(entry, "WEFT_", 5) == 0;
}

/* The name part of NAME=value; 0 when it is not a prefix we check or too long. */
static int entry_name(const char* entry, char* name, size_t size) {
  const char* eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  if (!is_ours(entry) || n >= size || n >= MAX_NAME) return 0;
  memcpy(name, entry, n);
  name[n] = 0;
  return 1;
}

void weft_doctor_check_env(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  const char* const* env = o->env ? o->env : (const char* const*)environ;
  int checked = 0, flagged = 0;
  for (int i = 0; env && env[i]; i++) {
    char name[MAX_NAME];
    if (!entry_name(env[i], name, sizeof(name))) continue;
    checked++;
    int known;
    const char* near = weft_doctor_env_suggest(name, &known);
    if (known) continue;
    flagged++;
    if (near != NULL) {
      struct weft_doctor_finding* f =
          weft_doctor_add(r, "env.spelling", WEFT_DOCTOR_WARN, NULL,
                          "%s is set but nothing reads it; did you mean %s?", name, near);
      if (f) snprintf(f->fix, sizeof(f->fix), "Rename %s to %s (unset %s)", name, near, name);
    } else {
      weft_doctor_add(r, "env.unknown", WEFT_DOCTOR_INFO,
                      "Nothing to do if another NCCL build or a plugin reads it; otherwise unset it",
                      "%s is set; Weft does not read it and it is not close to any known name", name);
    }
  }
  if (flagged == 0)
    weft_doctor_add(r, "env.spelling", WEFT_DOCTOR_OK, NULL,
                    "%d NCCL_*/WEFT_* variable(s) set, all known names", checked);
}

static void warn_env(void) {
  if (weft_param_int("WEFT_ENV_CHECK") == 0) return;
  for (int i = 0; environ && environ[i]; i++) {
    char name[MAX_NAME];
    int known;
    if (!entry_name(environ[i], name, sizeof(name))) continue;
    const char* near = weft_doctor_env_suggest(name, &known);
    if (near != NULL)
      WEFT_WARN(
          "%s is set but nothing reads it; did you mean %s? (weft-doctor check env.spelling; "
          "WEFT_ENV_CHECK=0 silences this)",
          name, near);
  }
}

void weft_doctor_warn_env_once(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, warn_env);
}
