/* Topology for a communicator: detect (or load NCCL_TOPO_FILE), place the host ranks, search
 * rings and trees, connect channels across hosts, and set up the tuning model. */
#include "core/topology.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/bootstrap.h"
#include "collectives/tuned.h"
#include "core/peers.h"
#include "core/topo_share.h"
#include "transport/transport.h"
#include "util/check.h"
#include "util/param.h"

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float copy_bw_gbs;

static void measure_once(void) {
  const size_t size = 4u << 20;
  char* src = malloc(size);
  char* dst = malloc(size);
  if (src == NULL || dst == NULL) {
    free(src);
    free(dst);
    copy_bw_gbs = 10.0f;
    return;
  }
  memset(src, 1, size);
  memset(dst, 0, size); /* first touch outside the timing: page faults are not bandwidth */
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now_sec();
    memcpy(dst, src, size);
    __asm__ volatile("" ::"r"(dst) : "memory");
    double t = now_sec() - t0;
    if (t < best) best = t;
  }
  copy_bw_gbs = best > 0 ? (float)(size / best / 1e9) : 10.0f;
  free(src);
  free(dst);
}

float weft_measure_copy_bw(void) {
  const char* given = weft_param_str("WEFT_HOST_COPY_BW");
  if (given != NULL && atof(given) > 0) return (float)atof(given);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, measure_once);
  return copy_bw_gbs;
}

int weft_current_numa_node(void) {
  int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  for (int node = 0; node < 64; node++) {
    char path[128];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/node%d", cpu, node);
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      fclose(f);
      return node;
    }
  }
  return -1;
}

/* The model assumes identical hosts (NCCL's rule too): same number of ranks on each. */
static int hosts_alike(const struct ncclComm* comm) {
  int* count = calloc((size_t)comm->ctx.nnodes, sizeof(int));
  if (count == NULL) return 0;
  for (int r = 0; r < comm->ctx.nranks; r++) count[comm->ctx.rank_to_node[r]]++;
  int alike = 1;
  for (int n = 1; n < comm->ctx.nnodes; n++) alike &= count[n] == count[0];
  free(count);
  return alike;
}

static float slowest_copy_bw(const struct ncclComm* comm) {
  float bw = comm->ctx.peers[0].copy_bw;
  for (int r = 1; r < comm->ctx.nranks; r++)
    if (comm->ctx.peers[r].copy_bw < bw) bw = comm->ctx.peers[r].copy_bw;
  return bw > 0 ? bw : 1.0f;
}

static ncclResult_t place_host_ranks(struct ncclComm* comm, struct weft_comm_topo* t, float bw) {
  int* numa = malloc(sizeof(int) * (size_t)comm->ctx.local_nranks);
  if (numa == NULL) return ncclSystemError;
  for (int i = 0; i < comm->ctx.local_nranks; i++)
    numa[i] = comm->ctx.peers[comm->ctx.local_ranks[i]].numa_node;
  ncclResult_t res = weft_topo_add_host_ranks(t->sys, 0, comm->ctx.local_nranks, numa, bw);
  free(numa);
  return res;
}

/* What every rank must agree on before tuning: NCCL's rule, the minimum of channel counts and
 * bandwidths and the worst path types over all ranks, so choices match without communication.
 * Every rank receives every rank's, so it is kept small (the environment's text as a hash):
 * at 1,024 thread ranks each all-gathered byte is a megabyte of the process. */
struct topo_summary {
  int ok;
  int nchannels[2];
  float bw_intra[2], bw_inter[2];
  int type_intra[2], type_inter[2];
  int comm_channels;
  /* The planner's environment: every rank tunes with rank 0's, so all choose alike. */
  int min_channels, max_channels;
  uint64_t env_hash; /* of NCCL_ALGO and NCCL_PROTO */
};

struct topo_env {
  char algo[256], proto[256];
};

#define TOPO_ENV_TAG 0x57460100 /* rank 0's NCCL_ALGO / NCCL_PROTO to a rank whose differ */

/* This rank's environment: the text into t (replaced by rank 0's where it differs), the rest into
 * its summary. */
static void summarize_env(struct weft_comm_topo* t, struct topo_summary* s) {
  s->min_channels = weft_param_is_set("NCCL_MIN_NCHANNELS") ? (int)weft_param_int("NCCL_MIN_NCHANNELS") : 0;
  s->max_channels = weft_param_is_set("NCCL_MAX_NCHANNELS") ? (int)weft_param_int("NCCL_MAX_NCHANNELS") : 0;
  const char* algo = weft_param_str("NCCL_ALGO");
  const char* proto = weft_param_str("NCCL_PROTO");
  struct topo_env e;
  memset(&e, 0, sizeof(e));
  snprintf(e.algo, sizeof(e.algo), "%s", algo ? algo : "");
  snprintf(e.proto, sizeof(e.proto), "%s", proto ? proto : "");
  snprintf(t->algo_env, sizeof(t->algo_env), "%s", e.algo);
  snprintf(t->proto_env, sizeof(t->proto_env), "%s", e.proto);
  s->env_hash = weft_hash_bytes(&e, sizeof(e), 0x746f706f);
}

/* Rank 0's environment for the model: rank 0 sends its text to each rank whose hash differs
 * (every rank sees every hash, so both sides know). This rank's own, when it differs, is noted
 * (the WARN is the engine's, weft_plan_agree). */
static ncclResult_t adopt_env(struct ncclComm* comm, struct weft_comm_topo* t,
                              const struct topo_summary* all) {
  const struct topo_summary *me = &all[comm->ctx.rank], *r0 = &all[0];
  struct topo_env e;
  memset(&e, 0, sizeof(e));
  t->min_channels = r0->min_channels;
  t->max_channels = r0->max_channels;
  if (comm->ctx.rank == 0) {
    snprintf(e.algo, sizeof(e.algo), "%s", t->algo_env);
    snprintf(e.proto, sizeof(e.proto), "%s", t->proto_env);
    for (int r = 1; r < comm->ctx.nranks; r++)
      if (all[r].env_hash != r0->env_hash)
        WEFT_CHECK(weft_bootstrap_send(comm->ctx.bootstrap, r, TOPO_ENV_TAG, &e, sizeof(e)));
  } else if (me->env_hash != r0->env_hash) {
    WEFT_CHECK(weft_bootstrap_recv(comm->ctx.bootstrap, 0, TOPO_ENV_TAG, &e, sizeof(e)));
    e.algo[sizeof(e.algo) - 1] = e.proto[sizeof(e.proto) - 1] = 0;
    snprintf(t->algo_env, sizeof(t->algo_env), "%s", e.algo);
    snprintf(t->proto_env, sizeof(t->proto_env), "%s", e.proto);
  }
  if (me->min_channels != r0->min_channels || me->max_channels != r0->max_channels ||
      me->env_hash != r0->env_hash)
    WEFT_INFO(WEFT_INIT | WEFT_TUNING, "comm %p rank %d: tuning with rank 0's NCCL_ALGO=%s NCCL_PROTO=%s",
              (void*)comm, comm->ctx.rank, t->algo_env, t->proto_env);
  return ncclSuccess;
}

static void summarize(struct weft_comm_topo* t, int ok, struct topo_summary* s) {
  memset(s, 0, sizeof(*s));
  s->ok = ok;
  summarize_env(t, s);
  if (!ok) return;
  const struct weft_topo_graph* g[2] = {&t->ring, &t->tree};
  for (int i = 0; i < 2; i++) {
    s->nchannels[i] = g[i]->nchannels;
    s->bw_intra[i] = g[i]->bw_intra;
    s->bw_inter[i] = g[i]->bw_inter;
    s->type_intra[i] = g[i]->type_intra;
    s->type_inter[i] = g[i]->type_inter;
  }
  s->comm_channels = t->comm_channels;
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }
static float fmin_(float a, float b) { return a < b ? a : b; }

/* Folds every rank's summary into ours; returns 0 when any rank has no model. */
static int agree(struct ncclComm* comm, struct weft_comm_topo* t, const struct topo_summary* all) {
  struct weft_topo_graph* g[2] = {&t->ring, &t->tree};
  for (int r = 0; r < comm->ctx.nranks; r++) {
    if (!all[r].ok) return 0;
    for (int i = 0; i < 2; i++) {
      g[i]->nchannels = imin(g[i]->nchannels, all[r].nchannels[i]);
      g[i]->bw_intra = fmin_(g[i]->bw_intra, all[r].bw_intra[i]);
      g[i]->bw_inter = fmin_(g[i]->bw_inter, all[r].bw_inter[i]);
      g[i]->type_intra = imax(g[i]->type_intra, all[r].type_intra[i]);
      g[i]->type_inter = imax(g[i]->type_inter, all[r].type_inter[i]);
    }
    t->comm_channels = imin(t->comm_channels, all[r].comm_channels);
  }
  return 1;
}

/* P2P between the GPUs of this host's ranks by the model (CUDA backend): a verdict (enum
 * weft_topo_p2p) for each pair of their distinct bus ids, so that every rank of a process sharing
 * one build (build_shared) finds its own peers in it; the ranks keep theirs in ctx.topo_p2p. */
struct p2p_table {
  int n;
  int64_t* ids;           /* [n] */
  unsigned char* verdict; /* [n * n] */
};

static void p2p_table_free(struct p2p_table* pt) {
  free(pt->ids);
  free(pt->verdict);
  memset(pt, 0, sizeof(*pt));
}

static int p2p_table_index(const struct p2p_table* pt, int64_t id) {
  for (int i = 0; i < pt->n; i++)
    if (pt->ids[i] == id) return i;
  return -1;
}

static ncclResult_t p2p_table_build(const struct ncclComm* comm, struct weft_topo_system* sys,
                                    struct p2p_table* pt) {
  int k = comm->ctx.local_nranks;
  pt->ids = malloc(sizeof(int64_t) * (size_t)(k > 0 ? k : 1));
  if (pt->ids == NULL) return ncclSystemError;
  for (int i = 0; i < k; i++) {
    int64_t id = comm->ctx.peers[comm->ctx.local_ranks[i]].bus_id;
    if (id >= 0 && p2p_table_index(pt, id) < 0) pt->ids[pt->n++] = id;
  }
  pt->verdict = calloc((size_t)pt->n * (size_t)pt->n + 1, 1);
  if (pt->verdict == NULL) return ncclSystemError;
  for (int a = 0; a < pt->n; a++)
    for (int b = 0; b < pt->n; b++) {
      int v = weft_topo_p2p_between(sys, 0, pt->ids[a], pt->ids[b]);
      pt->verdict[a * pt->n + b] = v < 0 ? WEFT_TOPO_P2P_UNKNOWN
                                   : v   ? WEFT_TOPO_P2P_ALLOWED
                                         : WEFT_TOPO_P2P_DENIED;
    }
  return ncclSuccess;
}

/* This rank's verdict for each peer of its host; left NULL (every peer unknown) when the model
 * places none of them, or on no memory (the verdicts are advice, as the whole model is). */
static void p2p_keep(struct ncclComm* comm, const struct p2p_table* pt) {
  int me = pt->verdict != NULL ? p2p_table_index(pt, comm->ctx.peers[comm->ctx.rank].bus_id) : -1;
  if (me < 0) return;
  unsigned char* v = calloc((size_t)comm->ctx.nranks, 1);
  if (v == NULL) return;
  int known = 0;
  for (int i = 0; i < comm->ctx.local_nranks; i++) {
    int r = comm->ctx.local_ranks[i];
    int j = p2p_table_index(pt, comm->ctx.peers[r].bus_id);
    if (j < 0 || j == me) continue;
    v[r] = pt->verdict[me * pt->n + j];
    if (v[r] == WEFT_TOPO_P2P_UNKNOWN) continue;
    known = 1;
    WEFT_INFO(WEFT_INIT | WEFT_P2P, "comm %p rank %d: P2P with rank %d %s by the topology (P2P level %s)",
              (void*)comm, comm->ctx.rank, r, v[r] == WEFT_TOPO_P2P_ALLOWED ? "allowed" : "not allowed",
              weft_topo_path_name(weft_topo_p2p_level()));
  }
  free(comm->ctx.topo_p2p);
  comm->ctx.topo_p2p = known ? v : NULL;
  if (!known) free(v);
}

/* What each rank keeps of the model once it is released: its P2P verdicts and nearest NICs. */
struct kept {
  struct p2p_table p2p;
  struct weft_topo_nets nets;
};

static void kept_keep(struct ncclComm* comm, const struct kept* k) {
  p2p_keep(comm, &k->p2p);
  weft_topo_nets_keep(comm, &k->nets);
}

static void kept_free(struct kept* k) {
  p2p_table_free(&k->p2p);
  weft_topo_nets_free(&k->nets);
}

static ncclResult_t build(struct ncclComm* comm, struct weft_comm_topo* t, float bw, struct kept* k) {
  WEFT_CHECK(weft_topo_get_system(&t->sys));
  if (comm->ctx.backend == WEFT_BACKEND_HOST) WEFT_CHECK(place_host_ranks(comm, t, bw));
  if (comm->ctx.backend == WEFT_BACKEND_CUDA) WEFT_CHECK(p2p_table_build(comm, t->sys, &k->p2p));
  /* Advice like the rest: without it every rank takes its turn over all the network's devices. */
  if (weft_topo_nets_build(comm, t->sys, &k->nets) != ncclSuccess)
    WEFT_INFO(WEFT_INIT | WEFT_NET, "comm %p rank %d: no nearest network devices from the topology",
              (void*)comm, comm->ctx.rank);
  /* GPUs the detection did not see (no NVML, an emulated GPU) leave nothing to search: that is
   * no error of the job's, so no WARN either. */
  if (weft_topo_nlocal(t->sys, 0) < 1) {
    WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "comm %p rank %d: the detected topology holds none of this job's ranks",
              (void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  WEFT_CHECK(weft_topo_search_all(t->sys, 0, comm->ctx.nnodes, &t->ring, &t->tree));
  WEFT_CHECK(weft_topo_connect_channels(&t->ring, &t->tree, comm->ctx.nnodes, &t->channels));
  t->min_sm = weft_topo_min_sm(t->sys, 0);
  t->cpu_amd = weft_topo_cpu_is_amd(t->sys, 0);
  t->comm_channels = t->channels->nchannels;
  return ncclSuccess;
}

/* The tuning keeps what it needs (the figures above and the graphs' scalars); the system's paths,
 * the channels and the graphs' orders grow with the ranks of the host. */
static void release_model(struct weft_comm_topo* t) {
  weft_topo_system_destroy(t->sys);
  weft_topo_channels_destroy(t->channels);
  weft_topo_graph_fini(&t->ring);
  weft_topo_graph_fini(&t->tree);
  t->sys = NULL;
  t->channels = NULL;
}

static ncclResult_t setup_tuning(struct ncclComm* comm, struct weft_comm_topo* t, float bw) {
  int host = comm->ctx.backend == WEFT_BACKEND_HOST;
  struct weft_tuning_input in = {.arch = host ? WEFT_ARCH_HOST : weft_arch_from_sm(t->min_sm),
                                 .cpu_vendor = t->cpu_amd,
                                 .nranks = comm->ctx.nranks,
                                 .nnodes = comm->ctx.nnodes,
                                 .nchannels = t->comm_channels,
                                 .ring = &t->ring,
                                 .tree = &t->tree,
                                 .host_copy_bw = host ? bw : 0,
                                 .algo_impl = (1u << WEFT_ALGO_RING) | (1u << WEFT_ALGO_TREE),
                                 .proto_impl = (1u << WEFT_PROTO_LL) | (1u << WEFT_PROTO_SIMPLE),
                                 .env_given = 1,
                                 .algo_env = t->algo_env[0] ? t->algo_env : NULL,
                                 .proto_env = t->proto_env[0] ? t->proto_env : NULL};
  WEFT_CHECK(weft_tuning_init(&t->tuning, &in));
  WEFT_INFO(
      WEFT_INIT | WEFT_GRAPH,
      "comm %p rank %d: %d host(s) x %d rank(s), ring %d channel(s) at %.1f GB/s, copy bandwidth %.1f GB/s "
      "(slowest rank)",
      (void*)comm, comm->ctx.rank, comm->ctx.nnodes, comm->ctx.local_nranks, t->ring.nchannels,
      t->ring.bw_intra, bw);
  return ncclSuccess;
}

/* The ranks of one communicator that share a process build the same model from the same inputs:
 * the first to arrive builds it, the others wait and take its figures. 1,024 thread ranks each
 * building their own did the work 1,024 times and, on 2 CPUs, held most of those models at once
 * (1.6 GB). An entry lives until every rank of its process has taken it. */
struct shared_model {
  uint64_t key;
  int remaining; /* ranks of this process still to take it */
  int ready;
  ncclResult_t built;
  struct weft_topo_graph ring, tree; /* figures only: intra is NULL */
  int min_sm, cpu_amd, comm_channels;
  struct kept kept;
  struct shared_model* next;
};
static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t models_ready = PTHREAD_COND_INITIALIZER;
static struct shared_model* models;

/* Everything build() reads that could differ between two communicators with one hash. */
static uint64_t model_key(const struct ncclComm* comm, float bw) {
  int shape[4] = {comm->ctx.nranks, comm->ctx.local_nranks, comm->ctx.nnodes, (int)comm->ctx.backend};
  uint64_t k = weft_hash_bytes(shape, sizeof(shape), comm->ctx.comm_hash);
  k = weft_hash_bytes(&bw, sizeof(bw), k);
  for (int i = 0; i < comm->ctx.local_nranks; i++)
    k = weft_hash_bytes(&comm->ctx.peers[comm->ctx.local_ranks[i]].numa_node, sizeof(int), k);
  return k;
}

static int ranks_in_process(const struct ncclComm* comm) {
  int n = 0;
  for (int r = 0; r < comm->ctx.nranks; r++)
    n += comm->ctx.peers[r].pid_hash == comm->ctx.peers[comm->ctx.rank].pid_hash;
  return n;
}

static void take(struct weft_comm_topo* t, const struct shared_model* m) {
  t->ring = m->ring;
  t->tree = m->tree;
  t->min_sm = m->min_sm;
  t->cpu_amd = m->cpu_amd;
  t->comm_channels = m->comm_channels;
}

/* Called with models_lock held: this rank is done with m. */
static void leave(struct shared_model* m) {
  if (--m->remaining > 0) return;
  for (struct shared_model** p = &models; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      break;
    }
  kept_free(&m->kept);
  free(m);
}

/* build() once per communicator and process; t keeps the figures (release_model has run). */
static ncclResult_t build_shared(struct ncclComm* comm, struct weft_comm_topo* t, float bw) {
  int mine = ranks_in_process(comm);
  struct kept k = {0};
  if (mine <= 1) {
    ncclResult_t built = build(comm, t, bw, &k);
    release_model(t);
    kept_keep(comm, &k);
    kept_free(&k);
    return built;
  }
  uint64_t key = model_key(comm, bw);
  pthread_mutex_lock(&models_lock);
  struct shared_model* m = models;
  while (m && m->key != key) m = m->next;
  if (m != NULL) {
    while (!m->ready) pthread_cond_wait(&models_ready, &models_lock);
    ncclResult_t built = m->built;
    take(t, m);
    kept_keep(comm, &m->kept);
    leave(m);
    pthread_mutex_unlock(&models_lock);
    return built;
  }
  m = calloc(1, sizeof(*m));
  if (m != NULL) {
    m->key = key;
    m->remaining = mine;
    m->next = models;
    models = m;
  }
  pthread_mutex_unlock(&models_lock);
  ncclResult_t built = build(comm, t, bw, &k);
  release_model(t);
  kept_keep(comm, &k);
  if (m == NULL) {
    kept_free(&k);
    return built;
  }
  pthread_mutex_lock(&models_lock);
  m->kept = k;
  m->built = built;
  m->ring = t->ring;
  m->tree = t->tree;
  m->min_sm = t->min_sm;
  m->cpu_amd = t->cpu_amd;
  m->comm_channels = t->comm_channels;
  m->ready = 1;
  pthread_cond_broadcast(&models_ready);
  leave(m);
  pthread_mutex_unlock(&models_lock);
  return built;
}

/* Builds the model, then agrees with every rank; a rank that could not model the machine makes
 * everyone fall back to the planner's defaults (topology is advice, never a reason to fail). */
static ncclResult_t build_agreed(struct ncclComm* comm, struct weft_comm_topo* t, int* usable) {
  float bw = slowest_copy_bw(comm);
  WEFT_CHECK(weft_topo_share_detection(comm));
  ncclResult_t built = build_shared(comm, t, bw);
  if (built != ncclSuccess)
    WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "comm %p rank %d: topology model unavailable (%s)", (void*)comm,
              comm->ctx.rank, ncclGetErrorString(built));
  struct topo_summary* all = calloc((size_t)comm->ctx.nranks, sizeof(*all));
  if (all == NULL) return ncclSystemError;
  summarize(t, built == ncclSuccess, &all[comm->ctx.rank]);
  ncclResult_t res = weft_bootstrap_allgather(comm->ctx.bootstrap, all, sizeof(*all));
  *usable = res == ncclSuccess && agree(comm, t, all);
  if (res == ncclSuccess) res = adopt_env(comm, t, all);
  free(all);
  if (res != ncclSuccess) return res;
  if (*usable) {
    ncclResult_t tuned = setup_tuning(comm, t, bw);
    if (tuned != ncclSuccess) return tuned; /* a bad NCCL_ALGO/NCCL_PROTO is the user's error */
  }
  return ncclSuccess;
}

ncclResult_t weft_comm_topo_init(struct ncclComm* comm) {
  if (!hosts_alike(comm)) {
    WEFT_INFO(WEFT_INIT | WEFT_GRAPH,
              "comm %p: hosts hold different numbers of ranks; no topology model, rings in rank order",
              (void*)comm);
    return ncclSuccess;
  }
  struct weft_comm_topo* t = calloc(1, sizeof(*t));
  if (t == NULL) return ncclSystemError;
  comm->ctx.topo = t;
  int usable = 0;
  ncclResult_t res = build_agreed(comm, t, &usable);
  if (res != ncclSuccess || !usable) {
    weft_comm_topo_fini(comm);
    return res;
  }
  return res;
}

_Static_assert(WEFT_TUNED_ALGO_TREE == 1u << WEFT_ALGO_TREE && WEFT_TUNED_ALGO_RING == 1u << WEFT_ALGO_RING &&
                   WEFT_TUNED_ALGO_ALL == (1u << WEFT_ALGO_COUNT) - 1 &&
                   WEFT_TUNED_PROTO_LL == 1u << WEFT_PROTO_LL &&
                   WEFT_TUNED_PROTO_SIMPLE == 1u << WEFT_PROTO_SIMPLE &&
                   WEFT_TUNED_PROTO_ALL == (1u << WEFT_PROTO_COUNT) - 1,
               "tuned.h's masks are the tuning model's enums");

int weft_comm_tuned_allows(const struct weft_comm_ctx* comm, int coll, unsigned algos, unsigned protos) {
  const struct weft_comm_topo* t = comm->topo;
  if (t == NULL) return -1;
  return weft_tuning_allows(&t->tuning, coll, algos, protos);
}

int weft_comm_tuned_choice(const struct weft_comm_ctx* comm, int coll, size_t nbytes, unsigned algos,
                           unsigned protos, struct weft_tuned* out) {
  const struct weft_comm_topo* t = comm->topo;
  if (t == NULL || coll < 0 || coll >= WEFT_FUNC_COUNT) return 0;
  struct weft_tuning_choice c;
  if (weft_tuning_choose_in(&t->tuning, coll, nbytes, algos, protos, &c) != ncclSuccess) return 0;
  if (c.algo != WEFT_ALGO_RING && c.algo != WEFT_ALGO_TREE) return 0;
  if (c.proto != WEFT_PROTO_LL && c.proto != WEFT_PROTO_SIMPLE) return 0;
  int n = c.nchannels;
  if (t->min_channels > 0) n = imax(n, t->min_channels);
  if (t->max_channels > 0) n = imin(n, t->max_channels);
  *out = (struct weft_tuned){.tree = c.algo == WEFT_ALGO_TREE,
                             .ll = c.proto == WEFT_PROTO_LL,
                             .nchannels = imax(n, 1),
                             .time_us = c.time_us};
  return 1;
}

float weft_comm_tuned_time(const struct weft_comm_ctx* comm, int coll, size_t nbytes, int tree, int ll,
                           int nchannels) {
  const struct weft_comm_topo* t = comm->topo;
  if (t == NULL || coll < 0 || coll >= WEFT_FUNC_COUNT) return -1;
  return weft_tuning_predict(&t->tuning, coll, tree ? WEFT_ALGO_TREE : WEFT_ALGO_RING,
                             ll ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE, nbytes, t->tuning.in.nranks,
                             t->tuning.in.nnodes, nchannels);
}

int weft_comm_p2p_verdict(const struct weft_comm_ctx* comm, int peer) {
  int v = comm->topo_p2p != NULL && peer >= 0 && peer < comm->nranks ? comm->topo_p2p[peer]
                                                                     : WEFT_TOPO_P2P_UNKNOWN;
  if (v == WEFT_TOPO_P2P_UNKNOWN && weft_topo_p2p_level() == WEFT_PATH_LOC) v = WEFT_TOPO_P2P_DENIED;
  return v;
}

int weft_comm_tuned_explain(const struct weft_comm_ctx* comm, const struct weft_tuned_explain* e,
                            void (*emit)(void* arg, const char* line), void* arg) {
  const struct weft_comm_topo* t = comm->topo;
  if (t == NULL || e->coll < 0 || e->coll >= WEFT_FUNC_COUNT) return 0;
  struct weft_tuning_query q = {.func = e->coll,
                                .nbytes = e->nbytes,
                                .call_algos = e->call_algos,
                                .call_protos = e->call_protos,
                                .impl_algos = e->impl_algos,
                                .impl_protos = WEFT_TUNED_PROTO_ALL};
  struct weft_tuning_pick pick = {.algo = e->pick.tree ? WEFT_ALGO_TREE : WEFT_ALGO_RING,
                                  .proto = e->pick.ll ? WEFT_PROTO_LL : WEFT_PROTO_SIMPLE,
                                  .nchannels = e->pick.nchannels,
                                  .time_us = e->pick.time_us,
                                  .rule = e->rule,
                                  .channels_note = e->channels_note};
  weft_tuning_explain(&t->tuning, &q, &pick, emit, arg);
  return 1;
}

void weft_comm_topo_fini(struct ncclComm* comm) {
  struct weft_comm_topo* t = comm->ctx.topo;
  if (t == NULL) return;
  weft_topo_channels_destroy(t->channels);
  weft_topo_system_destroy(t->sys);
  weft_topo_graph_fini(&t->ring);
  weft_topo_graph_fini(&t->tree);
  free(t);
  comm->ctx.topo = NULL;
}
