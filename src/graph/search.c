/* Ring and tree search inside one node: per channel an ordering of the node's ranks (entering and
 * leaving through NETs for multi-node jobs) with bandwidth reserved on every link it uses; the
 * speed, path types and NIC crossing are relaxed until channels x bandwidth is what links allow. */
#include <stdlib.h>
#include <string.h>

#include "graph/search.h"
#include "util/check.h"
#include "util/param.h"

#define STEPS_PER_CHANNEL (1 << 12)
#define STEPS_TOTAL (1 << 20)

static const float speeds_sm80_intra[] = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
static const float speeds_sm90_intra[] = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
static const float speeds_sm100_intra[] = {90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18};
static const float speeds_sm80_inter[] = {48, 30, 28, 24, 20, 18,   15,   12,    10,   9,
                                          7,  6,  5,  4,  3,  2.4f, 1.2f, 0.24f, 0.12f};
static const float speeds_sm90_inter[] = {48, 45, 42, 40, 30,   24,   22,    20,   17.5f,
                                          15, 12, 6,  3,  2.4f, 1.2f, 0.24f, 0.12f};
static const float speeds_sm100_inter[] = {96,    48, 45.1f, 42, 40, 30,   24,   22,    20,
                                           17.5f, 15, 12,    6,  3,  2.4f, 1.2f, 0.24f, 0.12f};

/* What hop i of p costs for bw of traffic. Peer traffic through an Intel CPU's root complex moves
 * less than the link rate, so PCIe links past such a CPU on a PHB path cost 20% more (NCCL's
 * factor; staged paths through the CPU's memory are PHB or SYS). */
float weft_search_hop_cost(const struct weft_topo_path* p, int i, float bw) {
  if (p->type != WEFT_PATH_PHB || p->hops[i]->type != WEFT_LINK_PCI) return bw;
  for (int k = 0; k < i; k++) {
    const struct weft_topo_node* n = p->hops[k]->remote;
    if (n->type == WEFT_NODE_CPU && n->u.cpu.arch == WEFT_CPU_ARCH_X86 &&
        n->u.cpu.vendor == WEFT_CPU_VENDOR_INTEL)
      return bw * 1.2f;
  }
  return bw;
}

static int follow(struct weft_topo_path* p, float bw) {
  for (int i = 0; i < p->nhops; i++)
    if (p->hops[i]->bw < weft_search_hop_cost(p, i, bw) - 1e-3f) return 0;
  for (int i = 0; i < p->nhops; i++) p->hops[i]->bw -= weft_search_hop_cost(p, i, bw);
  return 1;
}

static void unfollow(struct weft_topo_path* p, float bw) {
  for (int i = 0; i < p->nhops; i++) p->hops[i]->bw += weft_search_hop_cost(p, i, bw);
}

static struct weft_topo_path* rpath(struct search* s, int a, int b) {
  return &s->rank[a]->paths[WEFT_NODE_GPU][s->rank[b]->index];
}

static struct weft_topo_path* to_net(struct search* s, int r, int net) {
  return &s->rank[r]->paths[WEFT_NODE_NET][s->net[net]->index];
}

static struct weft_topo_path* from_net(struct search* s, int net, int r) {
  return &s->net[net]->paths[WEFT_NODE_GPU][s->rank[r]->index];
}

/* Residual bottleneck of a path (how much more it could carry now). */
static float residual(struct weft_topo_path* p) {
  float m = p->nhops ? 1e30f : WEFT_TOPO_LOC_BW;
  for (int i = 0; i < p->nhops; i++)
    if (p->hops[i]->bw < m) m = p->hops[i]->bw;
  return m;
}

/* Exit of a tree or ring channel to the network. */
static int try_exit(struct search* s, const int* order) {
  int n = s->n, in = s->cur_net_in;
  float sp = s->speed;
  if (s->pattern == WEFT_PATTERN_RING) {
    for (int k = 0; k < s->nnet; k++) {
      int out = (in + k) % s->nnet;
      if (k > 0 && !s->cross_nic) break;
      struct weft_topo_path* p = to_net(s, order[n - 1], out);
      if (p->type > s->type_inter || !follow(p, sp)) continue;
      s->cur_net_out = out;
      return 1;
    }
    return 0;
  }
  int a = order[0], b = n > 1 ? order[1] : order[0];
  s->cur_net_out = in;
  if (s->pattern == WEFT_PATTERN_TREE || n == 1) {
    struct weft_topo_path* p = to_net(s, a, in);
    return p->type <= s->type_inter && follow(p, sp);
  }
  if (s->pattern == WEFT_PATTERN_SPLIT_TREE) {
    struct weft_topo_path* p = to_net(s, b, in);
    return p->type <= s->type_inter && follow(p, sp);
  }
  /* Balanced: half of the traffic leaves from each of the first two ranks (the second also
   * receives half, charged here since the entry charged the first rank only half). */
  struct weft_topo_path *pa = to_net(s, a, in), *pb = to_net(s, b, in), *pi = from_net(s, in, b);
  if (pa->type > s->type_inter || pb->type > s->type_inter || pi->type > s->type_inter) return 0;
  if (!follow(pa, sp / 2)) return 0;
  if (!follow(pb, sp / 2)) return unfollow(pa, sp / 2), 0;
  if (!follow(pi, sp / 2)) return unfollow(pa, sp / 2), unfollow(pb, sp / 2), 0;
  return 1;
}

static int finish(struct search* s, int* order) {
  if (s->inter) return try_exit(s, order);
  if (s->pattern != WEFT_PATTERN_RING || s->n == 1) return 1;
  struct weft_topo_path* p = rpath(s, order[s->n - 1], order[0]);
  return p->type <= s->type_intra && follow(p, s->speed);
}

struct cand {
  int r;
  float bw;
  int dist;
};

static int cand_cmp(const void* a, const void* b) {
  const struct cand *x = a, *y = b;
  if (x->bw != y->bw) return x->bw > y->bw ? -1 : 1;
  return x->dist - y->dist;
}

static int place(struct search* s, int* order, char* used, int k) {
  if (++s->steps > s->step_limit) return 0;
  if (k == s->n) return finish(s, order);
  int cur = order[k - 1], nc = 0;
  struct cand c[WEFT_GRAPH_SEARCH_LOCAL];
  for (int r = 0; r < s->n; r++) {
    if (used[r]) continue;
    c[nc].r = r;
    c[nc].bw = (s->replay && s->replay[k] == r) ? 1e30f : residual(rpath(s, cur, r));
    c[nc++].dist = (r - cur + s->n) % s->n; /* prefer the next rank in PCI order on ties */
  }
  qsort(c, nc, sizeof(c[0]), cand_cmp);
  for (int i = 0; i < nc; i++) {
    struct weft_topo_path* p = rpath(s, cur, c[i].r);
    if (p->type > s->type_intra || !follow(p, s->speed)) continue;
    order[k] = c[i].r;
    used[c[i].r] = 1;
    if (place(s, order, used, k + 1)) return 1;
    used[c[i].r] = 0;
    unfollow(p, s->speed);
    if (s->steps > s->step_limit) return 0;
  }
  return 0;
}

static int net_order(struct search* s, int* nets) {
  struct cand c[WEFT_TOPO_CAP_NET];
  for (int i = 0; i < s->nnet; i++) {
    c[i].r = i;
    c[i].bw = s->net[i]->nlinks ? s->net[i]->links[0].bw : 0;
    c[i].dist = (i - s->channel % s->nnet + s->nnet) % s->nnet; /* rotate NICs over channels */
  }
  qsort(c, s->nnet, sizeof(c[0]), cand_cmp);
  for (int i = 0; i < s->nnet; i++) nets[i] = c[i].r;
  return s->nnet;
}

static int enter_from_net(struct search* s, int* order, char* used) {
  int nets[WEFT_TOPO_CAP_NET];
  int nn = net_order(s, nets);
  float in_bw = s->pattern == WEFT_PATTERN_BALANCED_TREE && s->n > 1 ? s->speed / 2 : s->speed;
  for (int i = 0; i < nn; i++) {
    struct cand c[WEFT_GRAPH_SEARCH_LOCAL];
    for (int r = 0; r < s->n; r++) {
      c[r].r = r;
      c[r].bw = (s->replay && s->replay[0] == r) ? 1e30f : residual(from_net(s, nets[i], r));
      c[r].dist = r;
    }
    qsort(c, s->n, sizeof(c[0]), cand_cmp);
    for (int k = 0; k < s->n; k++) {
      struct weft_topo_path* p = from_net(s, nets[i], c[k].r);
      if (p->type > s->type_inter || !follow(p, in_bw)) continue;
      s->cur_net_in = nets[i];
      order[0] = c[k].r;
      used[c[k].r] = 1;
      if (place(s, order, used, 1)) return 1;
      used[c[k].r] = 0;
      unfollow(p, in_bw);
      if (s->steps > s->step_limit) return 0;
    }
  }
  return 0;
}

static int one_channel(struct search* s, int* order) {
  char used[WEFT_GRAPH_SEARCH_LOCAL] = {0};
  s->step_limit = s->steps + STEPS_PER_CHANNEL;
  if (s->step_limit > s->total_limit) s->step_limit = s->total_limit;
  if (s->inter) return s->nnet > 0 && enter_from_net(s, order, used);
  order[0] = s->replay ? s->replay[0] : 0;
  used[order[0]] = 1;
  return place(s, order, used, 1);
}

static int net_index(struct search* s, int64_t dev) {
  for (int i = 0; i < s->nnet; i++)
    if (s->net[i]->u.net.dev == dev) return i;
  return 0;
}

/* Worst path type the graph's channels use, inside the node and to the network. */
static void measure_types(struct search* s, struct weft_topo_graph* g) {
  int ti = WEFT_PATH_LOC, tn = WEFT_PATH_LOC;
  for (int c = 0; c < g->nchannels; c++) {
    for (int i = 0; i + 1 < s->n; i++) {
      int t = rpath(s, weft_topo_graph_row(g, c)[i], weft_topo_graph_row(g, c)[i + 1])->type;
      if (t > ti) ti = t;
    }
    if (g->pattern == WEFT_PATTERN_RING && !s->inter && s->n > 1) {
      int t = rpath(s, weft_topo_graph_row(g, c)[s->n - 1], weft_topo_graph_row(g, c)[0])->type;
      if (t > ti) ti = t;
    }
  }
  g->type_intra = ti;
  if (s->inter) {
    for (int c = 0; c < g->nchannels; c++) {
      int in = net_index(s, g->inter_net[c][0]), out = net_index(s, g->inter_net[c][1]);
      int last = g->pattern == WEFT_PATTERN_RING ? s->n - 1 : (g->pattern == WEFT_PATTERN_TREE ? 0 : 1);
      if (last >= s->n) last = s->n - 1;
      const int* row = weft_topo_graph_row(g, c);
      int t1 = from_net(s, in, row[0])->type, t2 = to_net(s, row[last], out)->type;
      if (t1 > tn) tn = t1;
      if (t2 > tn) tn = t2;
    }
  }
  g->type_inter = tn;
}

/* Builds as many channels as fit at the current speed and types. */
static int try_graph(struct search* s, struct weft_topo_graph* g) {
  weft_topo_reset_bw(s->sys);
  g->nchannels = 0;
  s->replay = NULL;
  while (g->nchannels < g->max_channels && s->steps < s->total_limit) {
    int order[WEFT_GRAPH_SEARCH_LOCAL];
    s->channel = g->nchannels;
    if (!one_channel(s, order)) break;
    int c = g->nchannels++;
    memcpy(weft_topo_graph_row(g, c), order, s->n * sizeof(int));
    g->inter_net[c][0] = s->inter ? s->net[s->cur_net_in]->u.net.dev : -1;
    g->inter_net[c][1] = s->inter ? s->net[s->cur_net_out]->u.net.dev : -1;
    s->replay = weft_topo_graph_row(g, c);
  }
  g->bw_intra = g->bw_inter = s->speed;
  g->cross_nic = s->cross_nic;
  g->same_channels = 1;
  for (int c = 1; c < g->nchannels; c++)
    if (memcmp(weft_topo_graph_row(g, c), g->intra, s->n * sizeof(int)) != 0) g->same_channels = 0;
  if (g->nchannels) measure_types(s, g);
  weft_topo_reset_bw(s->sys);
  return g->nchannels;
}

static ncclResult_t search_ranks(struct search* s, struct weft_topo_system* sys, int host) {
  s->rank = calloc((size_t)s->n, sizeof(*s->rank));
  if (s->rank == NULL) {
    WEFT_WARN("topology search: out of memory");
    return ncclSystemError;
  }
  /* One pass over the nodes (a lookup per rank would be quadratic at a thousand host ranks). */
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    int r = g->u.gpu.rank;
    if (g->host == host && r >= 0 && r < s->n && s->rank[r] == NULL) s->rank[r] = g;
  }
  s->min_sm = 1 << 30;
  for (int r = 0; r < s->n; r++) {
    if (s->rank[r] == NULL) {
      WEFT_WARN("topology search: host %d has no rank %d", host, r);
      return ncclInvalidUsage;
    }
    if (s->rank[r]->u.gpu.host_rank) s->host_ranks = 1;
    if (s->rank[r]->u.gpu.sm < s->min_sm) s->min_sm = s->rank[r]->u.gpu.sm;
  }
  if (s->n > WEFT_GRAPH_SEARCH_LOCAL && !s->host_ranks) {
    WEFT_WARN("topology search: host %d has %d GPU ranks (at most %d)", host, s->n, WEFT_GRAPH_SEARCH_LOCAL);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

void weft_search_fini(struct search* s) {
  free(s->rank);
  s->rank = NULL;
}

ncclResult_t weft_search_init(struct search* s, struct weft_topo_system* sys, int host, int inter) {
  memset(s, 0, sizeof(*s));
  s->sys = sys;
  s->host = host;
  s->inter = inter;
  s->n = weft_topo_nlocal(sys, host);
  if (s->n <= 0) {
    WEFT_WARN("topology search: host %d has no ranks", host);
    return ncclInvalidUsage;
  }
  ncclResult_t res = search_ranks(s, sys, host);
  if (res == ncclSuccess && !sys->paths_ready) res = weft_topo_compute_paths(sys);
  if (res != ncclSuccess) {
    weft_search_fini(s);
    return res;
  }
  for (int i = 0; i < sys->count[WEFT_NODE_NET]; i++) {
    struct weft_topo_node* n = &sys->nodes[WEFT_NODE_NET][i];
    if (n->host == host && n->paths[WEFT_NODE_GPU][s->rank[0]->index].type != WEFT_PATH_DIS &&
        s->nnet < WEFT_TOPO_CAP_NET)
      s->net[s->nnet++] = n;
  }
  return ncclSuccess;
}

/* Speeds to try, highest first: NCCL's per-generation lists for GPUs; for host ranks fractions
 * of the best path (channels share one copy bandwidth). */
static int speed_list(struct search* s, float max_bw, float* out) {
  const float* l;
  int n;
  if (s->host_ranks) {
    for (n = 0; n < 16; n++) out[n] = max_bw / (n + 1);
    return n;
  }
#define PICK(a) (l = (a), n = (int)(sizeof(a) / sizeof((a)[0])))
  if (s->inter)
    s->min_sm >= 100  ? PICK(speeds_sm100_inter)
    : s->min_sm >= 90 ? PICK(speeds_sm90_inter)
                      : PICK(speeds_sm80_inter);
  else
    s->min_sm >= 100  ? PICK(speeds_sm100_intra)
    : s->min_sm >= 90 ? PICK(speeds_sm90_intra)
                      : PICK(speeds_sm80_intra);
#undef PICK
  int k = 0;
  for (int i = 0; i < n; i++)
    if (l[i] <= max_bw + 1e-3f) out[k++] = l[i];
  if (k == 0) out[k++] = max_bw > 0 ? max_bw : 0.1f;
  return k;
}

/* Best achievable single-path bandwidth, and the most one rank's links can carry. */
static void bounds(struct search* s, float* max_bw, float* total_bw) {
  *max_bw = 0;
  *total_bw = 0;
  for (int a = 0; a < s->n; a++) {
    if (s->inter) {
      for (int i = 0; i < s->nnet; i++) {
        float b1 = from_net(s, i, a)->bw, b2 = to_net(s, a, i)->bw, b = b1 < b2 ? b1 : b2;
        if (b > *max_bw) *max_bw = b;
      }
    } else {
      for (int b = 0; b < s->n; b++)
        if (a != b && rpath(s, a, b)->bw > *max_bw) *max_bw = rpath(s, a, b)->bw;
    }
    float nvl = 0, other = 0;
    for (int l = 0; l < s->rank[a]->nlinks; l++) {
      struct weft_topo_link* k = &s->rank[a]->links[l];
      if (k->type == WEFT_LINK_NVL)
        nvl += k->bw_full;
      else if (k->bw_full > other)
        other = k->bw_full;
    }
    float t = nvl > other ? nvl : other;
    if (t > *total_bw) *total_bw = t;
  }
  if (s->n == 1 && !s->inter) *max_bw = WEFT_TOPO_LOC_BW;
}

/* Distinct path types present, ascending: the relaxation steps. */
static int type_list(struct search* s, int inter, int* out) {
  char seen[WEFT_PATH_TYPES] = {0};
  for (int a = 0; a < s->n; a++) {
    if (inter) {
      for (int i = 0; i < s->nnet; i++) {
        int t1 = from_net(s, i, a)->type, t2 = to_net(s, a, i)->type;
        seen[t1 > t2 ? t1 : t2] = 1;
      }
    } else {
      for (int b = 0; b < s->n; b++)
        if (a != b) seen[rpath(s, a, b)->type] = 1;
    }
  }
  int k = 0;
  for (int t = 0; t < WEFT_PATH_NET; t++)
    if (seen[t]) out[k++] = t;
  if (k == 0) out[k++] = WEFT_PATH_LOC;
  return k;
}

static int better(const struct weft_topo_graph* a, const struct weft_topo_graph* b) {
  float sa = a->nchannels * a->bw_intra, sb = b->nchannels * b->bw_intra;
  if (sa > sb + 1e-3f) return 1;
  if (sa < sb - 1e-3f) return 0;
  if (a->type_intra + a->type_inter != b->type_intra + b->type_inter)
    return a->type_intra + a->type_inter < b->type_intra + b->type_inter;
  return a->nchannels < b->nchannels;
}

static void fallback(struct search* s, struct weft_topo_graph* g) {
  g->nchannels = 1;
  for (int r = 0; r < s->n; r++) g->intra[r] = r;
  g->inter_net[0][0] = g->inter_net[0][1] = s->inter && s->nnet ? s->net[0]->u.net.dev : -1;
  g->bw_intra = g->bw_inter = 0.1f;
  g->type_intra = g->type_inter = WEFT_PATH_SYS;
  g->same_channels = 1;
  WEFT_INFO(WEFT_GRAPH, "Search found no solution for pattern %d, using one channel in rank order",
            g->pattern);
}

/* NCCL's second pass: fast channels are split in two to give the engine more parallelism. */
static void dup_channels(struct search* s, struct weft_topo_graph* g) {
  if (s->host_ranks || g->bw_intra < 25 || g->nchannels * 2 > g->max_channels) return;
  if (s->min_sm > 80 && g->bw_intra < 50 && g->nchannels > 4) return;
  int n = g->nchannels;
  memcpy(weft_topo_graph_row(g, n), g->intra, (size_t)n * s->n * sizeof(int));
  memcpy(g->inter_net[n], g->inter_net[0], n * sizeof(g->inter_net[0]));
  g->nchannels = 2 * n;
  g->bw_intra /= 2;
  g->bw_inter /= 2;
}

/* *dst = *src, dst keeping its own intra (both sized for the same node). */
static void graph_assign(struct weft_topo_graph* dst, const struct weft_topo_graph* src) {
  int* keep = dst->intra;
  *dst = *src;
  dst->intra = keep;
  memcpy(keep, src->intra, (size_t)src->nchannels * src->nlocal * sizeof(int));
}

static void search_loop(struct search* s, struct weft_topo_graph* g, struct weft_topo_graph* tmp,
                        int cross_min, int cross_max) {
  float max_bw, total_bw, speeds[32];
  int ti[WEFT_PATH_TYPES], tn[WEFT_PATH_TYPES];
  bounds(s, &max_bw, &total_bw);
  int ns = speed_list(s, max_bw, speeds), nti = type_list(s, 0, ti), ntn = s->inter ? type_list(s, 1, tn) : 1;
  if (!s->inter) tn[0] = WEFT_PATH_LOC;
  for (int i = 0; i < ns && s->steps < s->total_limit; i++) {
    if (g->nchannels && g->nchannels * g->bw_intra >= speeds[i] * g->max_channels - 1e-3f) break;
    /* NCCL's rule: a found solution is not traded for many channels at under half its speed
     * (on PCIe machines, dozens of 0.24 GB/s channels would add up to a little more). */
    if (g->nchannels && speeds[i] < 0.49f * g->bw_intra) break;
    s->speed = speeds[i];
    int found = 0;
    for (int a = 0; a < nti && !found; a++)
      for (int b = 0; b < ntn && !found; b++)
        for (int x = cross_min; x <= cross_max && !found; x++) {
          graph_assign(tmp, g);
          s->type_intra = ti[a];
          s->type_inter = s->inter ? tn[b] : WEFT_PATH_LOC;
          s->cross_nic = x;
          int got = try_graph(s, tmp);
          if (got == 0) continue;
          found = 1;
          if (g->nchannels == 0 || better(tmp, g)) graph_assign(g, tmp);
        }
    if (g->nchannels && g->nchannels * g->bw_intra >= total_bw - 1e-3f) break; /* links are full */
  }
}

ncclResult_t weft_topo_graph_alloc(struct weft_topo_graph* g, int nlocal) {
  g->nlocal = nlocal;
  /* Not zeroed: only rows below nchannels are read, and untouched rows cost no memory. */
  g->intra = malloc((size_t)WEFT_MAX_CHANNELS * (nlocal > 0 ? nlocal : 1) * sizeof(int));
  if (g->intra != NULL) return ncclSuccess;
  WEFT_WARN("topology search: out of memory for a graph of %d ranks", nlocal);
  return ncclSystemError;
}

ncclResult_t weft_topo_graph_copy(struct weft_topo_graph* dst, const struct weft_topo_graph* src) {
  *dst = *src;
  dst->intra = NULL;
  if (src->intra == NULL) return ncclSuccess;
  WEFT_CHECK(weft_topo_graph_alloc(dst, src->nlocal));
  memcpy(dst->intra, src->intra, (size_t)src->nchannels * src->nlocal * sizeof(int));
  return ncclSuccess;
}

void weft_topo_graph_fini(struct weft_topo_graph* g) {
  if (g == NULL) return;
  free(g->intra);
  g->intra = NULL;
}

static void search_graph(struct search* s, struct weft_topo_graph* out, struct weft_topo_graph* tmp, int xnic,
                         int cross_max) {
  if (s->n == 1 && !s->inter) {
    out->nchannels = 1;
    out->intra[0] = 0;
    out->inter_net[0][0] = out->inter_net[0][1] = -1;
    out->bw_intra = out->bw_inter = s->host_ranks ? s->rank[0]->links[0].bw_full : speeds_sm90_intra[0];
    out->same_channels = 1;
  } else if (s->n > WEFT_GRAPH_SEARCH_LOCAL) {
    weft_search_numa(s, out);
  } else {
    search_loop(s, out, tmp, xnic == 1 && cross_max ? 1 : 0, cross_max);
    if (out->nchannels) dup_channels(s, out);
  }
}

ncclResult_t weft_topo_search(struct weft_topo_system* sys, int host, int nnodes, int pattern,
                              struct weft_topo_graph* out) {
  struct search s;
  struct weft_topo_graph tmp = {0};
  memset(out, 0, sizeof(*out));
  WEFT_CHECK(weft_search_init(&s, sys, host, nnodes > 1));
  s.pattern = pattern;
  ncclResult_t res = weft_topo_graph_alloc(out, s.n);
  if (res == ncclSuccess && s.n <= WEFT_GRAPH_SEARCH_LOCAL) res = weft_topo_graph_alloc(&tmp, s.n);
  if (res != ncclSuccess) {
    weft_topo_graph_fini(out);
    weft_search_fini(&s);
    return res;
  }
  out->id = pattern == WEFT_PATTERN_RING ? 0 : 1;
  out->pattern = pattern;
  out->inter = s.inter;
  out->min_channels = 1;
  out->max_channels = WEFT_MAX_CHANNELS / 2;
  int64_t maxc = weft_param_int("NCCL_MAX_NCHANNELS");
  if (weft_param_is_set("NCCL_MAX_NCHANNELS") && maxc >= 1 && maxc < out->max_channels)
    out->max_channels = (int)maxc;
  int64_t xnic = weft_param_int("NCCL_CROSS_NIC");
  int cross_max = (s.nnet > 1 && (pattern == WEFT_PATTERN_RING) && xnic != 0) ? 1 : 0;
  s.total_limit = STEPS_TOTAL;
  if (s.inter && s.nnet == 0)
    WEFT_INFO(WEFT_GRAPH, "Search: host %d has no NET for a %d-node job", host, nnodes);
  else
    search_graph(&s, out, &tmp, (int)xnic, cross_max);
  if (out->nchannels == 0) fallback(&s, out);
  out->latency_inter = 0;
  for (int i = 0; i < s.nnet; i++)
    if (s.net[i]->u.net.latency > out->latency_inter) out->latency_inter = s.net[i]->u.net.latency;
  weft_topo_graph_fini(&tmp);
  weft_search_fini(&s);
  return ncclSuccess;
}
