/* weft-topo --explain COLL SIZE: the tuning log's explanation (candidates, exclusions, choice and
 * reason) of one collective on the loaded topology, offline; the lines come from the library's own
 * weft_tuning_explain, as NCCL_DEBUG_SUBSYS=TUNING prints them. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "report.h"

/* "AllReduce", "allreduce" or "all_reduce". */
static int func_of(const char* s) {
  char a[32], b[32];
  size_t n = 0;
  for (const char* p = s; *p && n < sizeof(a) - 1; p++)
    if (*p != '_' && *p != '-') a[n++] = (char)tolower((unsigned char)*p);
  a[n] = 0;
  for (int f = 0; f < WEFT_FUNC_COUNT; f++) {
    const char* name = weft_func_name(f);
    size_t k = 0;
    for (; name[k] && k < sizeof(b) - 1; k++) b[k] = (char)tolower((unsigned char)name[k]);
    b[k] = 0;
    if (strcmp(a, b) == 0) return f;
  }
  return -1;
}

/* "4096", "64K", "1M", "2G" (powers of 1024); 0 on a malformed size. */
static size_t size_of(const char* s) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  int shift = 0;
  if (*end) {
    const char* units = "KMGT";
    const char* u = strchr(units, toupper((unsigned char)*end));
    if (u == NULL || (end[1] && strcasecmp(end + 1, "iB") != 0 && strcasecmp(end + 1, "B") != 0)) return 0;
    shift = 10 * (int)(u - units + 1);
  }
  return (size_t)(v << shift);
}

int explain_take_args(int* argc, char** argv, struct explain_req* req) {
  memset(req, 0, sizeof(*req));
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--explain") != 0) continue;
    if (i + 2 >= *argc) {
      fprintf(stderr, "weft-topo: --explain needs a collective and a size (e.g. --explain AllReduce 1M)\n");
      return 2;
    }
    req->func = func_of(argv[i + 1]);
    req->bytes = size_of(argv[i + 2]);
    if (req->func < 0 || req->bytes == 0) {
      fprintf(stderr,
              "weft-topo: --explain %s %s: want one of Broadcast, Reduce, AllGather, ReduceScatter, "
              "AllReduce and a size in bytes (K, M, G suffixes)\n",
              argv[i + 1], argv[i + 2]);
      return 2;
    }
    req->wanted = 1;
    for (int j = i; j + 3 <= *argc; j++) argv[j] = argv[j + 3]; /* getopt never sees them */
    *argc -= 3;
    return 0;
  }
  return 0;
}

static void print_line(void* arg, const char* line) { fprintf(arg, "  %s\n", line); }

void explain_print(const struct report* r, const struct explain_req* req, FILE* f) {
  const struct weft_tuning* t = &r->tuning;
  fprintf(f, "weft-topo: %s, %d node%s; tuning model %s, %d ranks, %d channels\n", r->source, r->nnodes,
          r->nnodes > 1 ? "s" : "", t->in.arch == WEFT_ARCH_HOST ? "host" : "GPU", t->in.nranks,
          t->in.nchannels);
  struct weft_tuning_query q = {req->func, req->bytes, ~0u, ~0u, ~0u, ~0u};
  struct weft_tuning_pick model = {.algo = -1};
  weft_tuning_explain(t, &q, &model, print_line, f);
}
