/* weft-trace DIR [--json]: reads every rank's flight recorder dump (weft-trace-*.json) in DIR and
 * says, per communicator, which rank stopped the job and why (one "culprit:" line), then the
 * evidence. Exit 0 once analyzed, 2 on bad usage or a file that is not a valid dump. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "util/json.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: weft-trace DIR [--json]\n"
          "  Reads the flight recorder dumps (weft-trace-*.json, one per rank, written to WEFT_TRACE_DIR)\n"
          "  in DIR and names the rank(s) that did not enter an operation, entered a different one, died,\n"
          "  or stopped progressing. --json prints the same as one JSON object.\n");
}

static int is_dump(const char* name) {
  size_t n = strlen(name);
  return strncmp(name, "weft-trace-", 11) == 0 && n > 16 && strcmp(name + n - 5, ".json") == 0;
}

static int by_hash_rank(const void* a, const void* b) {
  const struct trace_rank *x = a, *y = b;
  int c = strcmp(x->comm_hash, y->comm_hash);
  return c ? c : x->rank - y->rank;
}

/* All dumps of dir, sorted by communicator then rank; -1 after printing why. */
static int load_dir(const char* dir, struct trace_rank** out, int* n) {
  DIR* d = opendir(dir);
  if (d == NULL) {
    perror(dir);
    return -1;
  }
  int cap = 16;
  struct trace_rank* ranks = malloc((size_t)cap * sizeof(*ranks));
  *n = 0;
  struct dirent* e;
  int res = 0;
  while (ranks && (e = readdir(d)) != NULL) {
    if (!is_dump(e->d_name)) continue;
    if (*n == cap) {
      struct trace_rank* more = realloc(ranks, (size_t)(cap *= 2) * sizeof(*ranks));
      if (more == NULL) break;
      ranks = more;
    }
    char path[4096], err[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    if (trace_load(path, &ranks[*n], err, sizeof(err)) != 0) {
      fprintf(stderr, "weft-trace: %s\n", err);
      res = -1;
      break;
    }
    ++*n;
  }
  closedir(d);
  if (ranks == NULL) return fprintf(stderr, "weft-trace: out of memory\n"), -1;
  if (res != 0) {
    for (int i = 0; i < *n; i++) trace_rank_free(&ranks[i]);
    free(ranks);
    return -1;
  }
  qsort(ranks, (size_t)*n, sizeof(*ranks), by_hash_rank);
  *out = ranks;
  return res;
}

/* Ranks of one communicator must agree on its size and appear once. */
static int check_group(const struct trace_rank* g, int n) {
  for (int i = 1; i < n; i++) {
    if (g[i].nranks != g[0].nranks) {
      fprintf(stderr, "weft-trace: %s says %d ranks, %s says %d, for the same communicator %s\n", g[i].path,
              g[i].nranks, g[0].path, g[0].nranks, g[0].comm_hash);
      return -1;
    }
    if (g[i].rank == g[i - 1].rank) {
      fprintf(stderr,
              "weft-trace: %s and %s are both rank %d of communicator %s (two jobs in one directory?)\n",
              g[i - 1].path, g[i].path, g[i].rank, g[i].comm_hash);
      return -1;
    }
  }
  return 0;
}

static void print_text(const struct trace_rank* g, int n, const struct verdict* v, int several) {
  if (several) printf("communicator %s (%d ranks, %d dumps)\n", g[0].comm_hash, g[0].nranks, n);
  printf("culprit: %s\n", v->summary);
  printf("evidence:\n");
  for (int i = 0; i < v->nevidence; i++) printf("  %s\n", v->evidence[i]);
}

static void print_json(const struct trace_rank* g, int n, const struct verdict* v, int first) {
  printf(
      "%s{\"comm_hash\": \"%s\", \"nranks\": %d, \"dumps\": %d, \"culprit\": {\"kind\": \"%s\", \"ranks\": [",
      first ? "" : ",\n  ", g[0].comm_hash, g[0].nranks, n, v->kind);
  for (int i = 0; i < v->nculprits; i++) printf("%s%d", i ? ", " : "", v->culprits[i]);
  printf("], \"operation\": %llu, \"summary\": ", (unsigned long long)v->op);
  weft_json_string(stdout, v->summary);
  printf("}, \"evidence\": [");
  for (int i = 0; i < v->nevidence; i++) {
    printf("%s", i ? ", " : "");
    weft_json_string(stdout, v->evidence[i]);
  }
  printf("]}");
}

int main(int argc, char** argv) {
  const char* dir = NULL;
  int as_json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0)
      as_json = 1;
    else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
      return usage(stdout), 0;
    else if (argv[i][0] == '-' || dir != NULL)
      return fprintf(stderr, "weft-trace: unexpected argument '%s'\n", argv[i]), usage(stderr), 2;
    else
      dir = argv[i];
  }
  if (dir == NULL) return usage(stderr), 2;
  struct trace_rank* ranks = NULL;
  int n = 0;
  if (load_dir(dir, &ranks, &n) != 0) return 2;
  if (n == 0) {
    fprintf(stderr, "weft-trace: no weft-trace-*.json dumps in %s (was WEFT_TRACE_DIR set?)\n", dir);
    free(ranks);
    return 2;
  }
  int ngroups = 0, rc = 0;
  for (int i = 0; i < n; i++) ngroups += i == 0 || strcmp(ranks[i].comm_hash, ranks[i - 1].comm_hash) != 0;
  if (as_json) printf("{\"communicators\": [");
  for (int start = 0, k = 0; start < n && rc == 0; k++) {
    int end = start + 1;
    while (end < n && strcmp(ranks[end].comm_hash, ranks[start].comm_hash) == 0) end++;
    if (check_group(ranks + start, end - start) != 0) {
      rc = 2;
      break;
    }
    struct verdict v;
    trace_analyze(ranks + start, end - start, &v);
    if (as_json)
      print_json(ranks + start, end - start, &v, k == 0);
    else
      print_text(ranks + start, end - start, &v, ngroups > 1);
    verdict_free(&v);
    start = end;
  }
  if (as_json && rc == 0) printf("]}\n");
  for (int i = 0; i < n; i++) trace_rank_free(&ranks[i]);
  free(ranks);
  return rc;
}
