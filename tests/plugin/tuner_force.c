/* A tuner plugin for tests, built as its own .so: it forces the (algorithm, protocol) named by
 * TEST_TUNER_FORCE ("tree,simple", "ring,ll") by making it free, optionally sets the channel count
 * (TEST_TUNER_NCHANNELS), forces a pair offered as IGNORE too (TEST_TUNER_RAISE=1) or fails every
 * call (TEST_TUNER_FAIL=1), and at finalize appends what it
 * saw to TEST_TUNER_COUNT_FILE. TUNER_VERSION (2..6) picks the ABI it exports. The layouts are
 * written here from NCCL's documented ABI, apart from the library's own, so each checks the other. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl.h"

#ifndef TUNER_VERSION
#define TUNER_VERSION 6
#endif

#define NALGOS 7
#define NPROTOS 3
#define IGNORE_COST (-1.0f)

typedef void (*logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct ctx {
  unsigned long calls, table_ok;
  int last_coll;
  size_t last_bytes;
  size_t nranks, nnodes;
  int force_algo, force_proto, nchannels, fail, raise;
  logger_t log;
};

static int parse_force(const char* s, int* algo, int* proto) {
  *algo = *proto = -1;
  if (s == NULL || s[0] == 0) return 0;
  char buf[64];
  snprintf(buf, sizeof(buf), "%s", s);
  char* comma = strchr(buf, ',');
  if (comma == NULL) return -1;
  *comma = 0;
  const char* p = comma + 1;
  *algo = strcasecmp(buf, "tree") == 0 ? 0 : strcasecmp(buf, "ring") == 0 ? 1 : -1;
  *proto = strcasecmp(p, "ll") == 0       ? 0
           : strcasecmp(p, "ll128") == 0  ? 1
           : strcasecmp(p, "simple") == 0 ? 2
                                          : -1;
  return 0;
}

static ncclResult_t make_ctx(size_t nranks, size_t nnodes, logger_t log, void** out) {
  struct ctx* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->nranks = nranks;
  c->nnodes = nnodes;
  c->log = log;
  parse_force(getenv("TEST_TUNER_FORCE"), &c->force_algo, &c->force_proto);
  const char* n = getenv("TEST_TUNER_NCHANNELS");
  c->nchannels = n ? atoi(n) : 0;
  const char* f = getenv("TEST_TUNER_FAIL");
  c->fail = f && atoi(f);
  const char* r = getenv("TEST_TUNER_RAISE"); /* force even a pair offered as IGNORE */
  c->raise = r && atoi(r);
  if (log)
    log(3, 0x40, __FILE__, __LINE__, "tuner_force: init for %zu rank(s) on %zu node(s)", nranks, nnodes);
  *out = c;
  return ncclSuccess;
}

/* What we check of the table the library hands us: the pairs Weft does not run (CollNet, NVLS, PAT,
 * LL128) are offered as IGNORE, and at least one pair it runs carries a time. */
static int table_sane(float (*t)[NPROTOS]) {
  int offered = 0;
  for (int a = 0; a < NALGOS; a++)
    for (int p = 0; p < NPROTOS; p++) {
      int runs = (a == 0 || a == 1) && p != 1;
      if (!runs && t[a][p] != IGNORE_COST) return 0;
      if (runs && t[a][p] >= 0) offered++;
    }
  return offered > 0;
}

__attribute__((unused)) static ncclResult_t table_call(void* vctx, int coll, size_t bytes, int pipe_ops,
                                                       float** table, int nalgos, int nprotos,
                                                       int* nchannels) {
  struct ctx* c = vctx;
  float(*t)[NPROTOS] = (float(*)[NPROTOS])table;
  c->calls++;
  c->last_coll = coll;
  c->last_bytes = bytes;
  if (nalgos == NALGOS && nprotos == NPROTOS && pipe_ops >= 1 && table_sane(t)) c->table_ok++;
  if (c->fail) return ncclInternalError;
  if (c->force_algo >= 0 && c->force_proto >= 0 &&
      (c->raise || t[c->force_algo][c->force_proto] != IGNORE_COST))
    t[c->force_algo][c->force_proto] = 0.0f;
  if (c->nchannels > 0) *nchannels = c->nchannels;
  return ncclSuccess;
}

static ncclResult_t finish(void* vctx) {
  struct ctx* c = vctx;
  const char* path = getenv("TEST_TUNER_COUNT_FILE");
  if (path != NULL) {
    FILE* f = fopen(path, "a");
    if (f != NULL) {
      fprintf(f, "v%d calls %lu table_ok %lu nranks %zu nnodes %zu last_coll %d last_bytes %zu\n",
              TUNER_VERSION, c->calls, c->table_ok, c->nranks, c->nnodes, c->last_coll, c->last_bytes);
      fclose(f);
    }
  }
  free(c);
  return ncclSuccess;
}

#if TUNER_VERSION >= 5
struct nvl_domains {
  int n, min_ranks, max_ranks;
};
struct constants {
  double base[NALGOS][NPROTOS];
  double hw[3][NALGOS][NPROTOS];
  double caps[5][4][3];
};
static ncclResult_t init_v5(void** ctx, uint64_t comm_id, size_t nranks, size_t nnodes, logger_t log,
                            struct nvl_domains* nvl, struct constants* k) {
  (void)comm_id;
  /* NCCL's Ring/Simple base latency, as the GPU model uses it: checks the constants' layout. */
  if (nvl == NULL || k == NULL || nvl->n != (int)nnodes || k->base[1][2] < 8.39 || k->base[1][2] > 8.41)
    return ncclInvalidArgument;
  return make_ctx(nranks, nnodes, log, ctx);
}
static ncclResult_t coll_v5(void* ctx, int coll, size_t bytes, int pipe_ops, float** table, int nalgos,
                            int nprotos, int reg_buff, int* nchannels) {
  (void)reg_buff;
  return table_call(ctx, coll, bytes, pipe_ops, table, nalgos, nprotos, nchannels);
}
#endif

#if TUNER_VERSION <= 4
static ncclResult_t init_old(size_t nranks, size_t nnodes, logger_t log, void** ctx) {
  return make_ctx(nranks, nnodes, log, ctx);
}
#endif

#if TUNER_VERSION == 6
struct {
  const char* name;
  void* init;
  void* coll;
  void* finalize;
  void* chunk;
} ncclTunerPlugin_v6 = {"force", (void*)init_v5, (void*)coll_v5, (void*)finish, NULL};
#elif TUNER_VERSION == 5
struct {
  const char* name;
  void* init;
  void* coll;
  void* finalize;
} ncclTunerPlugin_v5 = {"force", (void*)init_v5, (void*)coll_v5, (void*)finish};
#elif TUNER_VERSION == 4
static ncclResult_t coll_v4(void* ctx, int coll, size_t bytes, int pipe_ops, float** table, int nalgos,
                            int nprotos, int reg_buff, int* nchannels) {
  (void)reg_buff;
  return table_call(ctx, coll, bytes, pipe_ops, table, nalgos, nprotos, nchannels);
}
struct {
  const char* name;
  void* init;
  void* coll;
  void* destroy;
} ncclTunerPlugin_v4 = {"force", (void*)init_old, (void*)coll_v4, (void*)finish};
#elif TUNER_VERSION == 3
struct {
  const char* name;
  void* init;
  void* coll;
  void* destroy;
} ncclTunerPlugin_v3 = {"force", (void*)init_old, (void*)table_call, (void*)finish};
#elif TUNER_VERSION == 2
/* v2 answers a pair; it has no table to check, so table_ok counts calls that reached it. */
static ncclResult_t coll_v2(void* vctx, int coll, size_t bytes, int collnet_ok, int nvls_ok, int pipe_ops,
                            int* algo, int* proto, int* nchannels) {
  struct ctx* c = vctx;
  c->calls++;
  c->last_coll = coll;
  c->last_bytes = bytes;
  if (collnet_ok == 0 && nvls_ok == 0 && pipe_ops >= 1) c->table_ok++;
  if (c->fail) return ncclInternalError;
  if (c->force_algo >= 0 && c->force_proto >= 0) *algo = c->force_algo, *proto = c->force_proto;
  if (c->nchannels > 0) *nchannels = c->nchannels;
  return ncclSuccess;
}
struct {
  const char* name;
  void* init;
  void* coll;
  void* destroy;
} ncclTunerPlugin_v2 = {"force", (void*)init_old, (void*)coll_v2, (void*)finish};
#endif
