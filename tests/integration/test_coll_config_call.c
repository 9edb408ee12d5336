/* The nccl*Config collectives (ncclCollConfig_t, NCCL 2.30+): every variant's results under a
 * spread of configs (NULL, the initializer, algorithm/protocol selections, channel bounds, fields
 * Weft accepts without acting on, an old struct size), on 2 and 3 ranks as threads; that the
 * planner really ran what a config forced (its TUNING log lines, in a child with NCCL_DEBUG=INFO
 * and 4 channels); configs refused with ncclInvalidArgument and a WARN naming the field; and ranks
 * whose configs differ: an error on every rank, not a hang (also when one rank passes none, in a
 * child with short timeouts). COLL_SEED=<seed> repeats a run. */
#include <errno.h>

#include "check.h"
#include "coll_util.h"

/* ---- calls ---- */

static ncclResult_t config_call(const struct coll_case* c, ncclComm_t comm, const void* send, void* recv,
                                ncclRedOp_t op, const ncclCollConfig_t* cfg) {
  ncclDataType_t dt = (ncclDataType_t)c->dt;
  size_t n = c->count;
  switch (c->coll) {
    case C_ALLREDUCE:
      return ncclAllReduceConfig(send, recv, n, dt, op, comm, NULL, cfg);
    case C_BROADCAST:
      return ncclBroadcastConfig(send, recv, n, dt, c->root, comm, NULL, cfg);
    case C_REDUCE:
      return ncclReduceConfig(send, recv, n, dt, op, c->root, comm, NULL, cfg);
    case C_ALLGATHER:
      return ncclAllGatherConfig(send, recv, n, dt, comm, NULL, cfg);
    case C_REDUCESCATTER:
      return ncclReduceScatterConfig(send, recv, n, dt, op, comm, NULL, cfg);
    case C_ALLTOALL:
      return ncclAlltoAllConfig(send, recv, n, dt, comm, NULL, cfg);
    case C_GATHER:
      return ncclGatherConfig(send, recv, n, dt, c->root, comm, NULL, cfg);
    case C_SCATTER:
      return ncclScatterConfig(send, recv, n, dt, c->root, comm, NULL, cfg);
  }
  return ncclInternalError;
}

/* run_case (coll_util.h) through the Config variant; returns the problems found. */
static int run_config_case(const struct coll_case* c, ncclComm_t comm, int me, int n,
                           const ncclCollConfig_t* cfg, const char* what) {
  struct case_bufs b;
  if (case_setup(c, me, n, &b) != 0) return 1;
  uint64_t scalar = 0;
  ncclResult_t res;
  ncclRedOp_t op = case_op(c, comm, &scalar, &res);
  if (res == ncclSuccess) res = config_call(c, comm, b.send, b.recv, op, cfg);
  int bad = 0;
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED " CASE_FMT " config %s: %s: %s\n", CASE_ARGS(c, n, me), what,
            ncclGetErrorString(res), ncclGetLastError(comm));
    bad = 1;
  } else if (case_check(c, me, n, &b)) {
    fprintf(stderr, "  (config %s)\n", what);
    bad = 1;
  }
  if (c->op == O_PMS_HOST || c->op == O_PMS_DEV) ncclRedOpDestroy(op, comm);
  free(b.alloc_send);
  free(b.alloc_recv);
  return bad;
}

/* ---- configs ---- */

struct named_cfg {
  const char* name;
  ncclCollConfig_t cfg;
  int selects; /* names algorithms or protocols: not for AlltoAll/Gather/Scatter */
  int allreduce_only;
  int null; /* pass NULL */
};

static ncclConfigExt_t ext_tail = {NULL, {0x5a5a5a, 2}, {.i = 7}};
static ncclConfigExt_t ext_head = {&ext_tail, {0x5a5a5a, 1}, {.s = "vendor value"}};

static ncclCollConfig_t base_cfg(const char* sel, int min_ctas, int max_ctas) {
  ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
  c.algSelection = sel;
  if (min_ctas) c.minCTAs = min_ctas;
  if (max_ctas) c.maxCTAs = max_ctas;
  return c;
}

#define NCFGS 11
static void make_cfgs(struct named_cfg* v) {
  int k = 0;
  v[k++] = (struct named_cfg){"NULL", base_cfg(NULL, 0, 0), 0, 0, 1};
  v[k++] = (struct named_cfg){"initializer", base_cfg(NULL, 0, 0), 0, 0, 0};
  v[k++] = (struct named_cfg){"\"Ring\"", base_cfg("Ring", 0, 0), 1, 0, 0};
  v[k++] = (struct named_cfg){"\"ring, simple\" maxCTAs 1", base_cfg("ring, simple", 0, 1), 1, 0, 0};
  v[k++] = (struct named_cfg){"\"LL\" minCTAs 2", base_cfg("LL", 2, 0), 1, 0, 0};
  v[k++] = (struct named_cfg){"\"^Tree\"", base_cfg("^Tree", 0, 0), 1, 0, 0};
  v[k++] = (struct named_cfg){"\"Tree\" minCTAs 1 maxCTAs 2", base_cfg("Tree", 1, 2), 1, 1, 0};
  v[k] = (struct named_cfg){"odd fields", base_cfg("", 0, 0), 0, 0, 0};
  v[k].cfg.nvlsCTAs = -4;
  v[k].cfg.cgaClusterSize = 100;
  v[k].cfg.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  v[k].cfg.userProfilerTag = 0x8000000000000001ull;
  v[k].cfg.version = 99999;
  v[k++].cfg.ext = &ext_head;
  /* A 2.30/2.31 caller's struct ends before launchCompletionEvent: that field must not be read. */
  v[k] = (struct named_cfg){"old size, garbage after it", base_cfg("Simple", 0, 0), 1, 0, 0};
  v[k].cfg.size = offsetof(ncclCollConfig_t, launchCompletionEvent);
  v[k++].cfg.launchCompletionEvent = (cudaEvent_t)(uintptr_t)0xdead;
  /* The host backend completes the call before returning: the event is never touched. */
  v[k] = (struct named_cfg){"launchCompletionEvent (host: untouched)", base_cfg(NULL, 0, 0), 0, 0, 0};
  v[k++].cfg.launchCompletionEvent = (cudaEvent_t)(uintptr_t)0xbad;
  v[k] = (struct named_cfg){"\"nvls\" forceAlgSelection 0", base_cfg("nvls", 0, 0), 0, 0, 0};
  v[k++].cfg.forceAlgSelection = 0;
}

/* Every collective x config at a small, a middle and a large count (many chunks, several
 * channels), in place and out of place alternating. */
static int results_body(ncclComm_t comm, int me, int n, void* arg) {
  (void)arg;
  static const int dts[] = {ncclFloat32, ncclInt32, ncclBfloat16};
  static const size_t counts[] = {37, 5000, 200003};
  struct named_cfg cfgs[NCFGS];
  make_cfgs(cfgs);
  int bad = 0, k = 0;
  for (int coll = C_ALLREDUCE; coll <= C_SCATTER; coll++) {
    int p2p = coll == C_ALLTOALL || coll == C_GATHER || coll == C_SCATTER;
    for (int i = 0; i < NCFGS; i++) {
      const struct named_cfg* nc = &cfgs[i];
      if ((p2p && nc->selects) || (nc->allreduce_only && coll != C_ALLREDUCE)) continue;
      for (int j = 0; j < 3; j++, k++) {
        uint64_t s = mix64(coll_base_seed + (uint64_t)k);
        struct coll_case c = {coll,  dts[(k / 3) % 3],       coll_has_op(coll) ? O_SUM : O_NONE,
                              k & 1, (int)(s % (uint64_t)n), counts[j],
                              s};
        bad += run_config_case(&c, comm, me, n, nc->null ? NULL : &nc->cfg, nc->name);
      }
    }
  }
  return bad;
}

/* ---- what the planner ran: TUNING lines in the log of a child ---- */

/* Lines "<coll> seq N: <bytes> bytes, algo A proto P, C channel(s)" of every rank for one call (each
 * call of the child has a size of its own); proto NULL: any protocol; channels 0: no line (the
 * direct path ran it). */
static int expect_plan(const char* log, const char* coll, size_t bytes, int nranks, const char* algo,
                       const char* proto, int channels) {
  FILE* f = fopen(log, "r");
  if (f == NULL) {
    fprintf(stderr, "FAILED cannot read %s: %s\n", log, strerror(errno));
    return 1;
  }
  char line[1024], key[64], want_algo[64], want_proto[64], want_ch[64];
  snprintf(key, sizeof(key), ": %zu bytes, algo ", bytes);
  snprintf(want_algo, sizeof(want_algo), "algo %s proto ", algo);
  snprintf(want_proto, sizeof(want_proto), "proto %s,", proto ? proto : "");
  snprintf(want_ch, sizeof(want_ch), ", %d channel(s)", channels);
  int found = 0, bad = 0;
  while (fgets(line, sizeof(line), f)) {
    if (!strstr(line, coll) || !strstr(line, key)) continue;
    found++;
    if (strstr(line, want_algo) && (!proto || strstr(line, want_proto)) && strstr(line, want_ch)) continue;
    fprintf(stderr,
            "FAILED %s of %zu bytes: planned \"%.48s\"; the config forced %s, protocol %s, %d channel(s)\n",
            coll, bytes, strstr(line, "algo "), algo, proto ? proto : "any", channels);
    bad++;
  }
  fclose(f);
  if (found != (channels ? nranks : 0)) {
    fprintf(stderr, "FAILED %s of %zu bytes: %d plan line(s) in the log, want %d\n", coll, bytes, found,
            channels ? nranks : 0);
    bad++;
  }
  return bad;
}

struct plan_check {
  struct coll_case c;
  ncclCollConfig_t cfg;
  int plain;
  const char *algo, *proto;
  int channels; /* 0: no plan line at all (the direct path) */
};

static struct plan_check plan_checks[16];
static int nplan_checks;

static void add_plan(int coll, size_t count, ncclCollConfig_t cfg, int plain, const char* algo,
                     const char* proto, int channels) {
  struct coll_case c = {coll,
                        ncclFloat32,
                        coll_has_op(coll) ? O_SUM : O_NONE,
                        0,
                        1,
                        count,
                        mix64(coll_base_seed ^ (uint64_t)nplan_checks)};
  plan_checks[nplan_checks++] = (struct plan_check){c, cfg, plain, algo, proto, channels};
}

/* Counts are distinct, so each call's lines are found by their size. */
static void make_plan_checks(void) {
  nplan_checks = 0;
  ncclCollConfig_t none = NCCL_COLLCONFIG_INITIALIZER;
  /* A plain call of thread ranks takes the direct path: no plan at all. */
  add_plan(C_BROADCAST, 2050, none, 1, NULL, NULL, 0);
  add_plan(C_BROADCAST, 2051, base_cfg("Simple", 3, 3), 0, "Ring", "Simple", 3);
  add_plan(C_ALLREDUCE, 2052, base_cfg("Ring,Simple", 3, 0), 0, "Ring", "Simple", 3);
  add_plan(C_ALLREDUCE, 1 << 20, base_cfg("Tree", 0, 1), 0, "Tree", NULL, 1);
  add_plan(C_ALLREDUCE, (1 << 18) + 1, base_cfg("ring,LL", 2, 2), 0, "Ring", "LL", 2);
  add_plan(C_ALLGATHER, 1 << 19, base_cfg(NULL, 0, 1), 0, "Ring", NULL, 1);
  add_plan(C_REDUCESCATTER, 30001, base_cfg("^Simple", 0, 2), 0, "Ring", "LL", 2);
  add_plan(C_REDUCE, 40003, base_cfg("^tree,LL", 1, 1), 0, "Ring", "Simple", 1);
  ncclCollConfig_t fallback = base_cfg("NVLS", 2, 2);
  fallback.forceAlgSelection = 0; /* cannot be met: automatic, the bounds still apply */
  add_plan(C_BROADCAST, 2053, fallback, 0, "Ring", "LL", 2);
}

static int plan_body(ncclComm_t comm, int me, int n, void* arg) {
  (void)arg;
  int bad = 0;
  for (int i = 0; i < nplan_checks; i++) {
    const struct plan_check* p = &plan_checks[i];
    struct coll_case c = p->c; /* each rank's own copy: the ranks are threads sharing plan_checks */
    c.root = n - 1;
    bad += run_config_case(&c, comm, me, n, p->plain ? NULL : &p->cfg, p->algo);
  }
  /* NCCL_MAX_CTAS=3 bounds the communicator: a call may not ask for more. */
  if (me == 0) { /* count 0: were it accepted, rank 0 would still not wait for the others */
    float x[4] = {0};
    ncclCollConfig_t over = base_cfg(NULL, 0, 4);
    ncclResult_t r = ncclAllReduceConfig(x, x, 0, ncclFloat32, ncclSum, comm, NULL, &over);
    const char* why = ncclGetLastError(comm);
    EXPECT_MSG(r == ncclInvalidArgument && strstr(why, "maxCTAs 4") && strstr(why, "1..3"), "%s: %s",
               ncclGetErrorString(r), why);
  }
  return bad;
}

static int run_plan_child(const char* log) {
  make_plan_checks();
  int bad = run_threads(2, plan_body, NULL);
  for (int i = 0; i < nplan_checks; i++) {
    const struct plan_check* p = &plan_checks[i];
    size_t bytes = p->c.count * sizeof(float);
    if (p->c.coll == C_ALLGATHER || p->c.coll == C_REDUCESCATTER) bytes *= 2;
    bad += expect_plan(log, coll_names[p->c.coll], bytes, 2, p->algo, p->proto, p->channels);
  }
  return bad + test_failures;
}

/* ---- refused configs ---- */

struct bad_cfg {
  const char* what;
  ncclCollConfig_t cfg;
  int coll;
  const char* text; /* in the WARN */
};

static ncclConfigExt_t ext_loop = {&ext_loop, {1, 1}, {.i = 0}};

static int check_refused(ncclComm_t comm) {
  static struct bad_cfg v[32];
  int k = 0;
  ncclCollConfig_t c;
#define BAD(what_, coll_, text_, ...)                  \
  do {                                                 \
    c = base_cfg(NULL, 0, 0);                          \
    __VA_ARGS__;                                       \
    v[k++] = (struct bad_cfg){what_, c, coll_, text_}; \
  } while (0)
  BAD("wrong magic", C_ALLREDUCE, "magic 0x1234", c.magic = 0x1234);
  BAD("size 8", C_ALLREDUCE, "size 8", c.size = 8);
  BAD("size 56", C_BROADCAST, "size 56", c.size = 56);
  BAD("forceAlgSelection 2", C_ALLREDUCE, "forceAlgSelection 2", c.forceAlgSelection = 2);
  BAD("forceAlgSelection -1", C_ALLTOALL, "forceAlgSelection -1", c.forceAlgSelection = -1);
  BAD("CTAPolicy 4", C_ALLREDUCE, "CTAPolicy 4", c.CTAPolicy = 4);
  BAD("CTAPolicy -5", C_GATHER, "CTAPolicy -5", c.CTAPolicy = -5);
  BAD("unknown name", C_ALLREDUCE, "'bogus'", c.algSelection = "bogus");
  BAD("ring plus an unknown name", C_ALLREDUCE, "'bogus'", c.algSelection = "ring,bogus");
  BAD("a bare ^", C_ALLREDUCE, "excludes nothing", c.algSelection = " ^ ");
  BAD("ring;tree", C_ALLREDUCE, "NCCL_ALGO", c.algSelection = "ring;tree");
  BAD("per-collective list", C_ALLREDUCE, "NCCL_ALGO", c.algSelection = "allreduce:ring");
  BAD("NVLS (none here)", C_ALLREDUCE, "cannot be met", c.algSelection = "NVLS");
  BAD("LL128 (not on the host)", C_ALLGATHER, "cannot be met", c.algSelection = "LL128");
  BAD("Broadcast with Tree", C_BROADCAST, "cannot be met", c.algSelection = "Tree");
  BAD("Broadcast, all but Ring", C_BROADCAST, "cannot be met", c.algSelection = "^Ring");
  BAD("AlltoAll, even Ring", C_ALLTOALL, "sends and receives", c.algSelection = "Ring");
  BAD("Scatter with LL", C_SCATTER, "sends and receives", c.algSelection = "LL");
  BAD("minCTAs 0", C_ALLREDUCE, "minCTAs 0", c.minCTAs = 0);
  BAD("maxCTAs 65", C_REDUCE, "maxCTAs 65", c.maxCTAs = 65);
  BAD("minCTAs 3 > maxCTAs 2", C_ALLREDUCE, "greater than maxCTAs", c.minCTAs = 3; c.maxCTAs = 2);
  BAD("circular ext list", C_ALLREDUCE, "circular", c.ext = &ext_loop);
#undef BAD
  int bad = 0;
  float buf[64] = {0};
  for (int i = 0; i < k; i++) { /* count 0: a config accepted by mistake runs nothing alone */
    struct coll_case cc = {v[i].coll, ncclFloat32, coll_has_op(v[i].coll) ? O_SUM : O_NONE, 0, 0, 0, 0};
    ncclResult_t r = config_call(&cc, comm, buf, buf + 16, ncclSum, &v[i].cfg);
    const char* why = ncclGetLastError(comm);
    if (r != ncclInvalidArgument || !strstr(why, v[i].text)) {
      fprintf(stderr, "FAILED refused config \"%s\" (%s): got %s, last error \"%s\" (want \"%s\" in it)\n",
              v[i].what, coll_names[v[i].coll], ncclGetErrorString(r), why, v[i].text);
      bad++;
    }
  }
  ncclCollConfig_t m = base_cfg(NULL, 0, 0);
  m.magic = 7;
  EXPECT(ncclAllReduceConfig(buf, buf, 4, ncclFloat32, ncclSum, NULL, NULL, &m) == ncclInvalidArgument);
  EXPECT(ncclAllReduceConfig(buf, buf, 4, ncclFloat32, ncclSum, NULL, NULL, NULL) == ncclInvalidArgument);
  return bad;
}

struct two_ranks {
  pthread_barrier_t bar;
};

/* Rank 0 tries every refused config alone (nothing is queued), then a refused config inside a
 * group leaves the group's other call to run. */
static int refused_body(ncclComm_t comm, int me, int n, void* arg) {
  struct two_ranks* t = arg;
  int bad = 0;
  if (me == 0) bad += check_refused(comm);
  pthread_barrier_wait(&t->bar);
  struct coll_case c = {C_ALLREDUCE, ncclInt32, O_SUM, 0, 0, 300, mix64(coll_base_seed ^ 0x9e)};
  struct case_bufs b;
  if (case_setup(&c, me, n, &b) != 0) return 1;
  ncclCollConfig_t spoiled = base_cfg(NULL, 0, 0);
  spoiled.magic = 7;
  EXPECT(ncclGroupStart() == ncclSuccess);
  if (me == 0)
    EXPECT(ncclAllReduceConfig(b.send, b.recv, c.count, ncclInt32, ncclSum, comm, NULL, &spoiled) ==
           ncclInvalidArgument);
  EXPECT(ncclAllReduce(b.send, b.recv, c.count, ncclInt32, ncclSum, comm, NULL) == ncclSuccess);
  ncclResult_t r = ncclGroupEnd();
  EXPECT_MSG(r == ncclSuccess, "a refused config spoiled its group: %s", ncclGetErrorString(r));
  bad += case_check(&c, me, n, &b);
  free(b.alloc_send);
  free(b.alloc_recv);
  return bad;
}

/* ---- ranks whose configs differ ---- */

static int expect_all(ncclResult_t got, ncclResult_t want, const char* what, int me) {
  if (got == want) return 0;
  fprintf(stderr, "FAILED rank %d: %s: got %s, want %s (%s)\n", me, what, ncclGetErrorString(got),
          ncclGetErrorString(want), ncclGetLastError(NULL));
  return 1;
}

static int run_allreduce(ncclComm_t comm, int me, int n, const ncclCollConfig_t* cfg, const char* what) {
  struct coll_case c = {C_ALLREDUCE, ncclFloat32, O_SUM, 0, 0, 20000, mix64(coll_base_seed ^ 0x5eed)};
  return run_config_case(&c, comm, me, n, cfg, what);
}

/* The last-error text is one per process, as in NCCL, and every thread rank WARNs: rank 0 reads
 * it only once all ranks have returned from the failed call (so no WARN is half written), and
 * before any of them goes on. */
static pthread_barrier_t warned_barrier;

/* A launch whose ranks disagree fails on every rank before anything runs; like any failed launch
 * it leaves the comm failed (ncclCommGetAsyncError), so each case has a comm of its own. */
static int mismatch_body(ncclComm_t comm, int me, int n, void* arg) {
  int which = *(const int*)arg, bad = 0;
  float* x = calloc(4096, sizeof(float));
  ncclCollConfig_t a = base_cfg(me == 0 ? "Ring" : "Tree", 0, 0), b = base_cfg(NULL, 0, me == 0 ? 1 : 2);
  ncclCollConfig_t same = base_cfg("Simple", 0, 0), second = base_cfg(me == n - 1 ? "LL" : "Simple", 0, 0);
  ncclResult_t r = ncclInternalError;
  if (which == 0) r = ncclAllReduceConfig(x, x, 4096, ncclFloat32, ncclSum, comm, NULL, &a);
  if (which == 1) r = ncclAllReduceConfig(x, x, 4096, ncclFloat32, ncclSum, comm, NULL, &b);
  if (which == 2) {
    EXPECT(ncclGroupStart() == ncclSuccess);
    EXPECT(ncclAllReduceConfig(x, x, 1024, ncclFloat32, ncclSum, comm, NULL, &same) == ncclSuccess);
    EXPECT(ncclBroadcastConfig(x, x, 1024, ncclFloat32, 0, comm, NULL, &second) == ncclSuccess);
    r = ncclGroupEnd();
  }
  bad += expect_all(r, ncclInvalidUsage, "a launch whose ranks' configs differ", me);
  pthread_barrier_wait(&warned_barrier);
  EXPECT_MSG(me != 0 || strstr(ncclGetLastError(comm), "differ between ranks") != NULL, "%s",
             ncclGetLastError(comm));
  pthread_barrier_wait(&warned_barrier);
  ncclResult_t async = ncclSuccess;
  EXPECT(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclInvalidUsage);
  free(x);
  return bad;
}

/* Selections that change from call to call, back to plain calls and again, agreed by all ranks;
 * the same selection spelled differently, with forceAlgSelection differing where it can be met,
 * is the same selection. */
static int agreed_body(ncclComm_t comm, int me, int n, void* arg) {
  (void)arg;
  ncclCollConfig_t s1 = base_cfg("Ring", 0, 1), s2 = base_cfg("LL", 2, 2);
  ncclCollConfig_t s3 = base_cfg(me == 0 ? "Ring,simple" : " SIMPLE, ring ", 0, 0);
  s3.forceAlgSelection = me & 1;
  const ncclCollConfig_t* seq[] = {&s1, &s1, &s2, NULL, NULL, &s1, &s2, &s3};
  int bad = 0;
  for (int i = 0; i < 8; i++) bad += run_allreduce(comm, me, n, seq[i], "agreed sequence");
  return bad;
}

/* One rank with a selection, the other with none: the first waits for an agreement the other
 * never joins, the other for data the first never sends. Both must fail (within the short
 * timeouts of this child) rather than hang; the comms are aborted after. */
struct asym_rank {
  pthread_t th;
  ncclUniqueId id;
  int rank;
  ncclResult_t res;
};

static void* asym_main(void* p) {
  struct asym_rank* r = p;
  ncclComm_t comm;
  r->res = ncclCommInitRank(&comm, 2, r->id, r->rank);
  if (r->res != ncclSuccess) return NULL;
  float x[1000] = {0};
  ncclCollConfig_t cfg = base_cfg("Ring,Simple", 0, 0);
  r->res = ncclAllReduceConfig(x, x, 1000, ncclFloat32, ncclSum, comm, NULL, r->rank == 0 ? &cfg : NULL);
  ncclCommAbort(comm);
  return NULL;
}

static int run_asym_child(void) {
  struct asym_rank r[2];
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int i = 0; i < 2; i++) {
    r[i] = (struct asym_rank){.id = id, .rank = i};
    pthread_create(&r[i].th, NULL, asym_main, &r[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(r[i].th, NULL);
  for (int i = 0; i < 2; i++)
    EXPECT_MSG(r[i].res != ncclSuccess, "rank %d: a collective whose ranks disagree succeeded", i);
  return test_failures;
}

/* ---- main ---- */

/* This program again, with extra environment (name, value pairs) and arguments. */
static int run_child(const char* mode, const char* arg, const char* const* env) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(300);
    for (int i = 0; env[i]; i += 2) setenv(env[i], env[i + 1], 1);
    execl("/proc/self/exe", "test_coll_config_call", mode, arg, (char*)NULL);
    fprintf(stderr, "exec failed: %s\n", strerror(errno));
    _exit(3);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return 1;
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char** argv) {
  coll_base_seed = pick_seed();
  if (argc > 2 && strcmp(argv[1], "--plan") == 0) return run_plan_child(argv[2]) ? 1 : 0;
  if (argc > 1 && strcmp(argv[1], "--asym") == 0) return run_asym_child() ? 1 : 0;
  printf("base seed 0x%llx (COLL_SEED=0x%llx repeats this run)\n", (unsigned long long)coll_base_seed,
         (unsigned long long)coll_base_seed);
  char seed_text[32];
  snprintf(seed_text, sizeof(seed_text), "0x%llx", (unsigned long long)coll_base_seed);
  setenv("COLL_SEED", seed_text, 1);
  alarm(500);

  for (int n = 2; n <= 3; n++) {
    int failed = run_threads(n, results_body, NULL);
    printf("every nccl*Config variant x %d configs, %d ranks: %s\n", NCFGS, n, failed ? "FAILED" : "ok");
    EXPECT_MSG(failed == 0, "results with %d ranks (base seed 0x%llx)", n,
               (unsigned long long)coll_base_seed);
  }

  char log[128];
  snprintf(log, sizeof(log), "/tmp/weft-test-coll-config-%d.log", (int)getpid());
  const char* plan_env[] = {"NCCL_DEBUG", "INFO", "NCCL_DEBUG_SUBSYS", "TUNING", "NCCL_DEBUG_FILE", log,
                            "NCCL_MAX_NCHANNELS", "4", "NCCL_MAX_CTAS", "3",
                            /* The automatic choice (the fallback case's LL) must not follow this
                             * machine's measured copy bandwidth: under ASan on a loaded machine it
                             * measured 2.3 GB/s, where Simple wins at 8 KiB. */
                            "WEFT_HOST_COPY_BW", "10", NULL};
  unlink(log);
  int failed = run_child("--plan", log, plan_env);
  printf("forced algorithms, protocols and channel bounds are what the planner ran: %s\n",
         failed ? "FAILED" : "ok");
  EXPECT_MSG(failed == 0, "planner checks (log %s kept)", log);
  if (failed == 0) unlink(log);

  struct two_ranks t;
  pthread_barrier_init(&t.bar, NULL, 2);
  failed = run_threads(2, refused_body, &t);
  pthread_barrier_destroy(&t.bar);
  printf("refused configs: %s\n", failed ? "FAILED" : "ok");
  EXPECT(failed == 0);

  static const char* cases[] = {"Ring on rank 0, Tree on the others", "maxCTAs 1 on rank 0, 2 on the others",
                                "a group whose second call differs on the last rank"};
  for (int n = 2; n <= 3; n++) {
    for (int which = 0; which < 3; which++) {
      pthread_barrier_init(&warned_barrier, NULL, (unsigned)n);
      failed = run_threads(n, mismatch_body, &which);
      pthread_barrier_destroy(&warned_barrier);
      printf("%s, %d ranks: %s\n", cases[which], n, failed ? "FAILED" : "an error on every rank");
      EXPECT(failed == 0);
    }
    failed = run_threads(n, agreed_body, NULL);
    printf("selections agreed from call to call, %d ranks: %s\n", n, failed ? "FAILED" : "ok");
    EXPECT(failed == 0);
  }
  const char* asym_env[] = {"WEFT_BOOTSTRAP_TIMEOUT", "2", "WEFT_TIMEOUT", "3", "WEFT_WARN_AFTER", "1", NULL};
  failed = run_child("--asym", NULL, asym_env);
  printf("one rank with a config, one without: %s\n", failed ? "FAILED" : "both fail, no hang");
  EXPECT(failed == 0);
  return test_finish("test_coll_config_call");
}
