/* The graph of a host with more host ranks than the search orders one by one: a NUMA-ordered
 * ring (ranks grouped by NUMA node, nodes in turn), identical on every channel, its channel count
 * and speed priced on the model's links the way the search prices its channels. */
#include <stdlib.h>
#include <string.h>

#include "graph/search.h"
#include "util/check.h"

/* The path between two ranks of the search, or from/to a NET (rank < 0 names the NET `net`). */
static void hop_path(struct search* s, int from, int to, int net, struct weft_topo_path* p) {
  struct weft_topo_system* sys = s->sys;
  if (from < 0) { /* NET -> rank: NETs keep their paths */
    *p = s->net[net]->paths[WEFT_NODE_GPU][s->rank[to]->index];
    return;
  }
  struct weft_topo_node* a = s->rank[from];
  int type = to < 0 ? WEFT_NODE_NET : WEFT_NODE_GPU;
  int index = to < 0 ? s->net[net]->index : s->rank[to]->index;
  if (a->paths[type] != NULL)
    *p = a->paths[type][index];
  else if (!weft_topo_host_rank_path(sys, a, type, index, p))
    *p = (struct weft_topo_path){.type = WEFT_PATH_DIS};
}

/* The paths one channel takes: consecutive ranks of order (closing the ring when single-node),
 * entering from and leaving to NET `net` when inter-node. Calls fn on each (is_net: a NET path). */
static void for_each_path(struct search* s, const int* order, int net, int exit_at,
                          void (*fn)(void* arg, struct weft_topo_path* p, int is_net), void* arg) {
  struct weft_topo_path p;
  int n = s->n, ring = s->pattern == WEFT_PATTERN_RING;
  for (int i = 0; i + 1 < n; i++) {
    hop_path(s, order[i], order[i + 1], net, &p);
    fn(arg, &p, 0);
  }
  if (!s->inter) {
    if (ring) {
      hop_path(s, order[n - 1], order[0], net, &p);
      fn(arg, &p, 0);
    }
    return;
  }
  hop_path(s, -1, order[0], net, &p);
  fn(arg, &p, 1);
  hop_path(s, order[exit_at], -1, net, &p);
  fn(arg, &p, 1);
}

struct tally {
  float speed;  /* per channel */
  float room;   /* channels the links allow (min over hops) */
  int worst;    /* worst path type */
  int worst_in; /* worst type of the NET paths */
  float max_bw; /* best single path */
};

static void charge(void* arg, struct weft_topo_path* p, int is_net) {
  (void)arg;
  (void)is_net;
  for (int i = 0; i < p->nhops; i++) p->hops[i]->bw -= weft_search_hop_cost(p, i, 1.0f);
}

static void measure(void* arg, struct weft_topo_path* p, int is_net) {
  struct tally* t = arg;
  if (p->type == WEFT_PATH_DIS) {
    t->room = 0;
    return;
  }
  for (int i = 0; i < p->nhops; i++) {
    float load = p->hops[i]->bw_full - p->hops[i]->bw; /* what one channel costs this link */
    if (load > 1e-6f && p->hops[i]->bw_full / load < t->room) t->room = p->hops[i]->bw_full / load;
  }
  if (is_net && p->type > t->worst_in) t->worst_in = p->type;
  if (!is_net && p->type > t->worst) t->worst = p->type;
  float bw = p->nhops ? p->bw : WEFT_TOPO_LOC_BW;
  if (bw > t->max_bw) t->max_bw = bw;
}

/* Ranks grouped by NUMA node, nodes in index order starting with `first`; within a node, rank
 * order; ranks without a CPU last. */
static void numa_order(struct search* s, int first, int* order) {
  int ncpu = s->sys->count[WEFT_NODE_CPU], k = 0;
  for (int j = 0; j <= ncpu; j++) {
    int c = j == ncpu ? -1 : (first + j) % ncpu;
    for (int r = 0; r < s->n; r++)
      if (s->rank[r]->cpu == c || (c < 0 && (s->rank[r]->cpu < 0 || s->rank[r]->cpu >= ncpu))) order[k++] = r;
  }
}

/* For a multi-node job, the NUMA node nearest the NET (lowest path type, then most bandwidth)
 * holds the ring's first ranks, so the ring enters there. */
static int entry_cpu(struct search* s, int net) {
  int best = -1, best_type = WEFT_PATH_DIS + 1;
  float best_bw = -1;
  for (int r = 0; r < s->n; r++) {
    int c = s->rank[r]->cpu;
    if (c < 0 || (r > 0 && c == s->rank[r - 1]->cpu)) continue;
    struct weft_topo_path p;
    hop_path(s, -1, r, net, &p);
    if (p.type < best_type || (p.type == best_type && p.bw > best_bw)) {
      best = c;
      best_type = p.type;
      best_bw = p.bw;
    }
  }
  return best < 0 ? 0 : best;
}

void weft_search_numa(struct search* s, struct weft_topo_graph* g) {
  int* order = weft_topo_graph_row(g, 0);
  int net = 0;
  if (s->pattern != WEFT_PATTERN_RING) g->pattern = s->pattern = WEFT_PATTERN_TREE;
  numa_order(s, s->inter ? entry_cpu(s, net) : 0, order);
  int exit_at = s->pattern == WEFT_PATTERN_RING ? s->n - 1 : 0;
  /* One channel's load on every link, then how many such channels each link fits. */
  weft_topo_reset_bw(s->sys);
  for_each_path(s, order, net, exit_at, charge, NULL);
  struct tally t = {.room = 1e30f, .worst = WEFT_PATH_LOC, .worst_in = WEFT_PATH_LOC, .max_bw = 0};
  for_each_path(s, order, net, exit_at, measure, &t);
  weft_topo_reset_bw(s->sys);
  if (!(t.room > 0) || t.max_bw <= 0) return; /* a DIS path: the caller's rank-order fallback */
  /* The search's speeds for host ranks (fractions of the best path) and its stopping rules: the
   * fastest speed at which a channel fits, more channels only while they add bandwidth. */
  float best_bw = 0;
  int best_n = 0;
  for (int i = 0; i < 16; i++) {
    float sp = t.max_bw / (i + 1);
    if (best_n && best_n * best_bw >= sp * g->max_channels - 1e-3f) break;
    if (best_n && sp < 0.49f * best_bw) break;
    int n = (int)(t.room / sp + 1e-3f);
    if (n > g->max_channels) n = g->max_channels;
    if (n < 1) continue;
    if (best_n == 0 || n * sp > best_n * best_bw + 1e-3f) {
      best_n = n;
      best_bw = sp;
    }
    if (best_n * best_bw >= s->rank[0]->links[0].bw_full - 1e-3f) break; /* the rank's link is full */
  }
  if (best_n == 0) return;
  g->nchannels = best_n;
  for (int c = 1; c < best_n; c++) memcpy(weft_topo_graph_row(g, c), order, (size_t)s->n * sizeof(int));
  for (int c = 0; c < best_n; c++)
    g->inter_net[c][0] = g->inter_net[c][1] = s->inter ? s->net[net]->u.net.dev : -1;
  g->bw_intra = g->bw_inter = best_bw;
  g->type_intra = t.worst;
  g->type_inter = s->inter ? t.worst_in : WEFT_PATH_LOC;
  g->same_channels = 1;
  g->cross_nic = 0;
  WEFT_INFO(WEFT_GRAPH,
            "Search: %d host ranks on host %d, more than the search orders (%d): NUMA-ordered ring", s->n,
            s->host, WEFT_GRAPH_SEARCH_LOCAL);
}
