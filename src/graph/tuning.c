/* Tuning model: latency + size / bandwidth per (collective, algorithm, protocol) from the searched
 * graphs, NCCL's per-generation constants for GPUs and our own for the host backend; the choice
 * honours NCCL_ALGO / NCCL_PROTO. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "graph/graph.h"
#include "util/check.h"
#include "util/param.h"

static const char* const func_names[WEFT_FUNC_COUNT] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                                        "AllReduce"};
static const char* const algo_names[WEFT_ALGO_COUNT] = {
    "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
static const char* const proto_names[WEFT_PROTO_COUNT] = {"LL", "LL128", "Simple"};

const char* weft_func_name(int f) { return f >= 0 && f < WEFT_FUNC_COUNT ? func_names[f] : "?"; }
const char* weft_algo_name(int a) { return a >= 0 && a < WEFT_ALGO_COUNT ? algo_names[a] : "?"; }
const char* weft_proto_name(int p) { return p >= 0 && p < WEFT_PROTO_COUNT ? proto_names[p] : "?"; }

int weft_arch_from_sm(int sm) {
  if (sm <= 0) return WEFT_ARCH_HOST;
  if (sm < 80) return WEFT_ARCH_VOLTA;
  if (sm < 90) return WEFT_ARCH_AMPERE;
  if (sm < 100) return WEFT_ARCH_HOPPER;
  return WEFT_ARCH_BLACKWELL;
}

/* GPU constants [arch-1][1 node, 2 nodes, more] (GB/s per channel caps, NCCL's tables). */
static const float ll_max_bw[4][3] = {{39, 39, 20.4f}, {87.7f, 22.5f, 19}, {141, 45, 35}, {282, 90, 70}};
static const float ring_ll128_bw[4][3] = {
    {20, 20, 20}, {20, 20, 20}, {36.7f, 36.7f, 36.7f}, {73.4f, 34.6f, 73.4f}};
static const float tree_ll128_bw[4][3] = {
    {20, 20, 20}, {20, 20, 20}, {36.7f, 36.7f, 29}, {55.6f, 31.67f, 20}};
static const float tree_bw[4][3] = {
    {26.5f, 18.5f, 10}, {24, 23.6f, 17.8f}, {38.7f, 41.4f, 36}, {70, 42.8f, 24}};

/* Latencies in µs [LL, LL128, Simple]: base per algorithm, then per hop by link kind. */
static const float base_lat[2][3] = {{6.8f, 14.0f, 8.4f}, {6.6f, 14.0f, 8.4f}}; /* tree, ring */
static const float hop_nvl[2][3] = {{0.6f, 1.25f, 4.0f}, {0.6f, 1.9f, 3.4f}};
static const float hop_pci[2][3] = {{1.0f, 1.9f, 4.0f}, {1.0f, 2.5f, 5.7f}};
static const float hop_net[2][3] = {{5.0f, 8.5f, 14.0f}, {2.7f, 4.0f, 14.0f}};
/* Host backend (our estimates): a launch is a function call, a hop is a shared-memory flag wait. */
static const float host_base_lat[3] = {1.0f, 1.0f, 2.0f};
static const float host_hop[3] = {0.3f, 0.3f, 1.0f};

void weft_tuning_plugin_constants(double base[WEFT_ALGO_COUNT][WEFT_PROTO_COUNT],
                                  double hw[3][WEFT_ALGO_COUNT][WEFT_PROTO_COUNT], double caps[5][4][3]) {
  memset(base, 0, sizeof(double) * WEFT_ALGO_COUNT * WEFT_PROTO_COUNT);
  memset(hw, 0, sizeof(double) * 3 * WEFT_ALGO_COUNT * WEFT_PROTO_COUNT);
  memset(caps, 0, sizeof(double) * 5 * 4 * 3);
  const float(*hops[3])[3] = {hop_nvl, hop_pci, hop_net};
  for (int i = 0; i < 2; i++) { /* rows: tree, ring; the algorithms' own numbers are 0 and 1 */
    int a = i == 0 ? WEFT_ALGO_TREE : WEFT_ALGO_RING;
    for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
      base[a][p] = base_lat[i][p];
      for (int h = 0; h < 3; h++) hw[h][a][p] = hops[h][i][p];
    }
  }
  const float(*tables[4])[3] = {ll_max_bw, ring_ll128_bw, tree_ll128_bw, tree_bw};
  for (int k = 0; k < 4; k++)
    for (int a = 0; a < 4; a++)
      for (int s = 0; s < 3; s++) caps[k][a][s] = tables[k][a][s];
}

static int node_class(int nnodes) { return nnodes <= 1 ? 0 : nnodes == 2 ? 1 : 2; }

static int valid(int func, int algo, int proto) {
  if (algo == WEFT_ALGO_RING) return 1;
  if (algo == WEFT_ALGO_TREE) return func == WEFT_FUNC_ALLREDUCE;
  (void)proto;
  return 0; /* CollNet, NVLS and PAT need hardware or plugins this model does not describe */
}

static int ring_steps(int func, int n) {
  if (func == WEFT_FUNC_ALLREDUCE) return 2 * (n - 1);
  if (func == WEFT_FUNC_ALLGATHER || func == WEFT_FUNC_REDUCESCATTER) return n - 1;
  return n;
}

/* Algorithm bandwidth (GB/s) of one call. */
static float model_bw(const struct weft_tuning* t, int func, int algo, int proto, int nranks, int nnodes,
                      int nch) {
  const struct weft_topo_graph* g = algo == WEFT_ALGO_TREE ? &t->tree : &t->ring;
  int host = t->in.arch == WEFT_ARCH_HOST, a = host ? 0 : t->in.arch - 1, k = node_class(nnodes);
  float per = nnodes <= 2 ? g->bw_intra : g->bw_inter;
  if (host && t->in.host_copy_bw > 0 && per > t->in.host_copy_bw) per = t->in.host_copy_bw;
  int comm = t->in.nchannels > 0 ? t->in.nchannels : 2 * g->nchannels;
  float bus = g->nchannels * per * (nch < comm ? (float)nch / comm : 1.0f);
  if (nranks <= 1) return bus > 0 ? bus : 1;
  if (algo == WEFT_ALGO_RING) {
    if (proto == WEFT_PROTO_LL) bus = host ? bus * 0.5f : fminf(bus * 0.5f, ll_max_bw[a][k]);
    if (proto == WEFT_PROTO_LL128) bus = fminf(bus * 0.92f, nch * ring_ll128_bw[a][k]);
    return bus * nranks / ring_steps(func, nranks);
  }
  if (proto == WEFT_PROTO_SIMPLE) bus = host ? bus * 0.92f : fminf(bus * 0.92f, nch * tree_bw[a][k]);
  if (proto == WEFT_PROTO_LL) bus = host ? bus / 3.8f : fminf(bus / 3.8f, ll_max_bw[a][k]);
  if (proto == WEFT_PROTO_LL128)
    bus = fminf(bus * (nnodes == 1 ? 7.0f / 9.0f : 120.0f / 128.0f), nch * tree_ll128_bw[a][k]);
  if (g->pattern == WEFT_PATTERN_TREE && nnodes > 1) bus *= 0.85f;
  return bus * 0.5f;
}

static float model_lat(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes, int nranks,
                       int nnodes, int nch) {
  const struct weft_topo_graph* g = algo == WEFT_ALGO_TREE ? &t->tree : &t->ring;
  int host = t->in.arch == WEFT_ARCH_HOST, ai = algo == WEFT_ALGO_TREE ? 0 : 1;
  float base = host ? host_base_lat[proto] : base_lat[ai][proto];
  float intra = host ? host_hop[proto] : (g->type_intra <= WEFT_PATH_NVB ? hop_nvl : hop_pci)[ai][proto];
  float inter = hop_net[ai][proto] + g->latency_inter * (proto == WEFT_PROTO_SIMPLE ? 2 : 1);
  if (nranks <= 1) return base;
  if (nnodes < 1) nnodes = 1;
  if (algo == WEFT_ALGO_TREE) {
    float levels = nnodes > 1 ? log2f((float)nnodes) : 0;
    return base + 2 * ((nranks / nnodes - 1) * intra + levels * inter);
  }
  int steps = ring_steps(func, nranks);
  if (func == WEFT_FUNC_BROADCAST || func == WEFT_FUNC_REDUCE) steps = nranks - 1;
  int ninter = (func == WEFT_FUNC_ALLREDUCE ? 2 : 1) * (nnodes - 1);
  float overhead =
      nnodes > 1 ? (t->in.cpu_vendor == 1 ? 2.0f : 1.0f) * (proto == WEFT_PROTO_SIMPLE ? 3 : 1) : 0;
  float lat = base + (steps - ninter) * fmaxf(intra, overhead) + ninter * inter;
  /* Multi-node Simple ring all-reduce pays more once chunks are not tiny (NCCL's correction). */
  if (func == WEFT_FUNC_ALLREDUCE && proto == WEFT_PROTO_SIMPLE && nnodes > 1 &&
      nbytes / ((size_t)(nch > 0 ? nch : 1) * nranks) >= 64)
    lat *= t->in.arch >= WEFT_ARCH_AMPERE || host ? 1.4f : 1.9f;
  return lat;
}

/* Trees reach their bandwidth only with enough data in flight: our smooth ramp from 0.4 at 64 B
 * to 1.0 at 4 MiB stands in for NCCL's per-size correction table. */
static float tree_ramp(size_t nbytes) {
  double b = nbytes < 64 ? 64 : (double)nbytes;
  double f = 0.4 + 0.6 * log2(b / 64) / 16;
  return (float)(f > 1 ? 1 : f);
}

/* The model's time for any pair it describes, enabled or not. */
static float predict_any(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes,
                         int nranks, int nnodes, int nchannels) {
  float bw = model_bw(t, func, algo, proto, nranks, nnodes, nchannels);
  if (algo == WEFT_ALGO_TREE) bw *= tree_ramp(nbytes);
  if (!(bw > 0)) return -1;
  return model_lat(t, func, algo, proto, nbytes, nranks, nnodes, nchannels) + (float)(nbytes / (1000.0 * bw));
}

static int in_range(int func, int algo, int proto) {
  return func >= 0 && func < WEFT_FUNC_COUNT && algo >= 0 && algo < WEFT_ALGO_COUNT && proto >= 0 &&
         proto < WEFT_PROTO_COUNT;
}

float weft_tuning_predict(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes,
                          int nranks, int nnodes, int nchannels) {
  if (!in_range(func, algo, proto) || !t->enabled[func][algo][proto] || nchannels < 1 || nranks < 1)
    return -1;
  return predict_any(t, func, algo, proto, nbytes, nranks, nnodes, nchannels);
}

float weft_tuning_model_time(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes,
                             int nchannels) {
  if (!in_range(func, algo, proto) || nchannels < 1 || !valid(func, algo, proto) ||
      (algo == WEFT_ALGO_TREE && !t->has_tree))
    return -1;
  return predict_any(t, func, algo, proto, nbytes, t->in.nranks, t->in.nnodes, nchannels);
}

float weft_tuning_busbw(const struct weft_tuning* t, int func, int algo, int proto, size_t nbytes, int nranks,
                        int nnodes, int nchannels) {
  float us = weft_tuning_predict(t, func, algo, proto, nbytes, nranks, nnodes, nchannels);
  if (us <= 0 || nranks < 1) return 0;
  double algbw = nbytes / (us * 1000.0), n = nranks;
  if (func == WEFT_FUNC_ALLREDUCE) return (float)(algbw * 2 * (n - 1) / n);
  if (func == WEFT_FUNC_ALLGATHER || func == WEFT_FUNC_REDUCESCATTER) return (float)(algbw * (n - 1) / n);
  return (float)algbw;
}

static int name_index(const char* s, size_t len, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == len && strncasecmp(s, names[i], len) == 0) return i;
  return -1;
}

/* One "a,b" or "^a,b" list into a mask. */
static ncclResult_t parse_names(const char* s, size_t len, const char* const* names, int n, const char* whole,
                                unsigned* mask) {
  int exclude = len > 0 && s[0] == '^';
  if (exclude) s++, len--;
  unsigned m = 0;
  while (len > 0) {
    size_t k = 0;
    while (k < len && s[k] != ',') k++;
    size_t a = 0, b = k;
    while (a < b && s[a] == ' ') a++;
    while (b > a && s[b - 1] == ' ') b--;
    if (b > a) {
      int i = name_index(s + a, b - a, names, n);
      if (i < 0) {
        WEFT_WARN("Invalid name '%.*s' in '%s' (expected e.g. %s, %s; '^' excludes)", (int)(b - a), s + a,
                  whole, names[0], names[n - 1]);
        return ncclInvalidUsage;
      }
      m |= 1u << i;
    }
    s += k < len ? k + 1 : k;
    len -= k < len ? k + 1 : k;
  }
  *mask = exclude ? ((1u << n) - 1) & ~m : m;
  return ncclSuccess;
}

ncclResult_t weft_tuning_parse_list(const char* text, const char* const* names, int nnames, int func,
                                    unsigned* mask) {
  unsigned all = (1u << nnames) - 1, dflt = all, mine = 0;
  int have_mine = 0;
  *mask = all;
  if (text == NULL || text[0] == 0) return ncclSuccess;
  for (const char* e = text; *e;) {
    const char* end = strchr(e, ';');
    size_t len = end ? (size_t)(end - e) : strlen(e);
    const char* colon = memchr(e, ':', len);
    unsigned m;
    if (colon) {
      size_t fl = colon - e;
      while (fl > 0 && e[fl - 1] == ' ') fl--;
      const char* f = e;
      while (*f == ' ' && fl > 0) f++, fl--;
      int fi = name_index(f, fl, func_names, WEFT_FUNC_COUNT);
      if (fi < 0) {
        WEFT_WARN("Invalid collective '%.*s' in '%s'", (int)fl, f, text);
        return ncclInvalidUsage;
      }
      WEFT_CHECK(parse_names(colon + 1, len - (colon + 1 - e), names, nnames, text, &m));
      if (fi == func) mine = m, have_mine = 1;
    } else {
      if (e != text) {
        WEFT_WARN("Invalid list '%s': only the first entry may omit the 'collective:' prefix", text);
        return ncclInvalidUsage;
      }
      WEFT_CHECK(parse_names(e, len, names, nnames, text, &m));
      dflt = m;
    }
    e += end ? len + 1 : len;
  }
  *mask = have_mine ? mine : dflt;
  return ncclSuccess;
}

/* LL128 asked for by name (not through an exclusion list) overrides the automatic rule. */
static int named_ll128(const char* text) {
  if (text == NULL || text[0] == '^') return 0;
  for (const char* p = text; *p; p++)
    if (strncasecmp(p, "ll128", 5) == 0) return 1;
  return 0;
}

static void log_table(const struct weft_tuning* t) {
  static const size_t sizes[] = {8, 1 << 20, (size_t)1 << 30};
  WEFT_INFO(WEFT_TUNING,
            "Tuning for %d ranks, %d nodes, %d channels (ring %d x %.1f GB/s, tree %d x %.1f GB/s)",
            t->in.nranks, t->in.nnodes, t->in.nchannels, t->ring.nchannels, t->ring.bw_intra,
            t->has_tree ? t->tree.nchannels : 0, t->has_tree ? t->tree.bw_intra : 0);
  for (int f = 0; f < WEFT_FUNC_COUNT; f++)
    for (int a = 0; a < WEFT_ALGO_COUNT; a++)
      for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
        if (!t->enabled[f][a][p]) continue;
        float us[3];
        for (int s = 0; s < 3; s++)
          us[s] = weft_tuning_predict(t, f, a, p, sizes[s], t->in.nranks, t->in.nnodes, t->in.nchannels);
        WEFT_INFO(WEFT_TUNING, "%13s %5s %6s: 8 B %8.1f us, 1 MiB %9.1f us, 1 GiB %11.1f us", func_names[f],
                  algo_names[a], proto_names[p], us[0], us[1], us[2]);
      }
}

ncclResult_t weft_tuning_init(struct weft_tuning* t, const struct weft_tuning_input* in) {
  if (in == NULL || in->ring == NULL || in->nranks < 1 || in->nnodes < 1 || in->arch < WEFT_ARCH_HOST ||
      in->arch > WEFT_ARCH_BLACKWELL) {
    WEFT_WARN("tuning: invalid input (ring %p, %d ranks, %d nodes)", in ? (const void*)in->ring : NULL,
              in ? in->nranks : 0, in ? in->nnodes : 0);
    return ncclInvalidUsage;
  }
  memset(t, 0, sizeof(*t));
  t->in = *in;
  t->ring = *in->ring;
  t->ring.intra = NULL; /* the model needs the figures, not the orders (the caller owns those) */
  t->has_tree = in->tree != NULL;
  if (t->has_tree) t->tree = *in->tree;
  t->tree.intra = NULL;
  if (t->in.nchannels < 1) t->in.nchannels = 2 * t->ring.nchannels;
  int host = in->arch == WEFT_ARCH_HOST;
  unsigned aimpl = in->algo_impl ? in->algo_impl : (1u << WEFT_ALGO_RING) | (1u << WEFT_ALGO_TREE);
  unsigned pimpl = in->proto_impl ? in->proto_impl
                                  : (1u << WEFT_PROTO_LL) | (1u << WEFT_PROTO_SIMPLE) |
                                        (host ? 0 : 1u << WEFT_PROTO_LL128);
  /* LL128 needs GPU-side 128-byte stores to arrive in order: NVLink inside, PCI-switch-near NICs. */
  int ll128 = !host &&
              (in->nnodes == 1 ||
               t->ring.type_inter <= (in->arch >= WEFT_ARCH_HOPPER ? WEFT_PATH_PXN : WEFT_PATH_PXB)) &&
              t->ring.type_intra <= WEFT_PATH_NVB;
  const char* algo_env = in->env_given ? in->algo_env : weft_param_str("NCCL_ALGO");
  const char* proto_env = in->env_given ? in->proto_env : weft_param_str("NCCL_PROTO");
  for (int f = 0; f < WEFT_FUNC_COUNT; f++) {
    unsigned am, pm;
    WEFT_CHECK(weft_tuning_parse_list(algo_env, algo_names, WEFT_ALGO_COUNT, f, &am));
    WEFT_CHECK(weft_tuning_parse_list(proto_env, proto_names, WEFT_PROTO_COUNT, f, &pm));
    unsigned rule = !ll128 && !named_ll128(proto_env) ? 1u << WEFT_PROTO_LL128 : 0; /* auto rule */
    for (int a = 0; a < WEFT_ALGO_COUNT; a++)
      for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
        int why = !valid(f, a, p)                          ? WEFT_WHY_UNMODELLED
                  : !(aimpl >> a & 1) || !(pimpl >> p & 1) ? WEFT_WHY_NOT_IMPL
                  : a == WEFT_ALGO_TREE && !t->has_tree    ? WEFT_WHY_NO_TREE
                  : !(am >> a & 1)                         ? WEFT_WHY_NCCL_ALGO
                  : !(pm >> p & 1)                         ? WEFT_WHY_NCCL_PROTO
                  : rule >> p & 1                          ? WEFT_WHY_LL128_RULE
                                                           : WEFT_WHY_CANDIDATE;
        t->why[f][a][p] = (unsigned char)why;
        t->enabled[f][a][p] = why == WEFT_WHY_CANDIDATE;
      }
  }
  if (WEFT_LOG_ON(WEFT_LOG_INFO, WEFT_TUNING)) log_table(t);
  return ncclSuccess;
}

/* Bytes per channel below which one more channel costs more than it brings. */
static size_t channel_min_bytes(const struct weft_tuning* t, int algo, int proto) {
  if (t->in.arch == WEFT_ARCH_HOST) return proto == WEFT_PROTO_SIMPLE ? 128 << 10 : 16 << 10;
  size_t per_thread = proto == WEFT_PROTO_SIMPLE ? 64 : 8;
  if (algo == WEFT_ALGO_RING && proto == WEFT_PROTO_LL) per_thread *= t->in.nranks;
  return per_thread * (proto == WEFT_PROTO_LL128 ? 640 : 512);
}

int weft_tuning_allows(const struct weft_tuning* t, int func, unsigned algos, unsigned protos) {
  if (func < 0 || func >= WEFT_FUNC_COUNT) return 0;
  for (int a = 0; a < WEFT_ALGO_COUNT; a++)
    for (int p = 0; p < WEFT_PROTO_COUNT; p++)
      if (t->enabled[func][a][p] && (algos >> a & 1) && (protos >> p & 1)) return 1;
  return 0;
}

ncclResult_t weft_tuning_choose(const struct weft_tuning* t, int func, size_t nbytes,
                                struct weft_tuning_choice* out) {
  return weft_tuning_choose_in(t, func, nbytes, ~0u, ~0u, out);
}

ncclResult_t weft_tuning_choose_in(const struct weft_tuning* t, int func, size_t nbytes, unsigned algos,
                                   unsigned protos, struct weft_tuning_choice* out) {
  int ba = -1, bp = -1;
  float best = 0;
  if (func < 0 || func >= WEFT_FUNC_COUNT) {
    WEFT_WARN("tuning: invalid collective %d", func);
    return ncclInvalidArgument;
  }
  for (int a = 0; a < WEFT_ALGO_COUNT; a++)
    for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
      if (!(algos >> a & 1) || !(protos >> p & 1)) continue;
      float us = weft_tuning_predict(t, func, a, p, nbytes, t->in.nranks, t->in.nnodes, t->in.nchannels);
      if (us > 0 && (ba < 0 || us < best)) ba = a, bp = p, best = us;
    }
  if (ba < 0) {
    WEFT_WARN("tuning: no algorithm/protocol enabled for %s (NCCL_ALGO=%s, NCCL_PROTO=%s)", func_names[func],
              weft_param_str("NCCL_ALGO") ? weft_param_str("NCCL_ALGO") : "",
              weft_param_str("NCCL_PROTO") ? weft_param_str("NCCL_PROTO") : "");
    return ncclInvalidUsage;
  }
  int nc = t->in.nchannels;
  size_t min = channel_min_bytes(t, ba, bp);
  while (nc > 1 && nbytes < (size_t)nc * min) nc--;
  out->algo = ba;
  out->proto = bp;
  out->nchannels = nc;
  out->time_us = weft_tuning_predict(t, func, ba, bp, nbytes, t->in.nranks, t->in.nnodes, nc);
  out->busbw_gbs = weft_tuning_busbw(t, func, ba, bp, nbytes, t->in.nranks, t->in.nnodes, nc);
  WEFT_TRACE(WEFT_TUNING, "%s %zu bytes: %s/%s on %d channels, %.1f us predicted", func_names[func], nbytes,
             algo_names[ba], proto_names[bp], nc, out->time_us);
  return ncclSuccess;
}

void weft_tuning_print_table(const struct weft_tuning* t, FILE* f) {
  static const size_t sizes[] = {8, 1 << 20, (size_t)1 << 30};
  fprintf(f, "%-14s %-6s %-7s %14s %14s %14s\n", "collective", "algo", "proto", "8 B (us)", "1 MiB (us)",
          "1 GiB (us)");
  for (int fn = 0; fn < WEFT_FUNC_COUNT; fn++)
    for (int a = 0; a < WEFT_ALGO_COUNT; a++)
      for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
        if (!t->enabled[fn][a][p]) continue;
        fprintf(f, "%-14s %-6s %-7s", func_names[fn], algo_names[a], proto_names[p]);
        for (int s = 0; s < 3; s++)
          fprintf(f, " %14.1f",
                  weft_tuning_predict(t, fn, a, p, sizes[s], t->in.nranks, t->in.nnodes, t->in.nchannels));
        fprintf(f, "\n");
      }
}
