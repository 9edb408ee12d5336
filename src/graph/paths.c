/* Paths: breadth-first from every GPU, CPU, NET and NVSwitch (fewest hops, then highest
 * bottleneck bandwidth), path types from the links crossed, then the rules that reroute some
 * traffic: P2P level (through the CPU), C2C to NICs (P2C), PXN (through an NVLink peer GPU next
 * to the NIC) and GPUDirect RDMA (through CPU memory when not possible). */
#include <stdlib.h>
#include <string.h>

#include "graph/topo.h"
#include "util/check.h"
#include "util/param.h"

static int has_paths(int type) {
  return type == WEFT_NODE_GPU || type == WEFT_NODE_CPU || type == WEFT_NODE_NET || type == WEFT_NODE_NVS;
}

void weft_topo_free_paths(struct weft_topo_system* sys) {
  for (int t = 0; t < WEFT_NODE_TYPES; t++)
    for (int i = 0; i < sys->count[t]; i++)
      for (int d = 0; d < WEFT_NODE_TYPES; d++) {
        free(sys->nodes[t][i].paths[d]);
        sys->nodes[t][i].paths[d] = NULL;
      }
  sys->paths_ready = 0;
}

struct weft_topo_path* weft_topo_path(struct weft_topo_system* sys, const struct weft_topo_node* from,
                                      int type, int index) {
  if (!sys->paths_ready || from->paths[type] == NULL || index < 0 || index >= sys->count[type]) return NULL;
  return &from->paths[type][index];
}

static int hop_type(const struct weft_topo_node* src, const struct weft_topo_node* u,
                    const struct weft_topo_link* l) {
  const struct weft_topo_node* v = l->remote;
  switch (l->type) {
    case WEFT_LINK_NVL:
      return (u->type == WEFT_NODE_GPU && u != src) ? WEFT_PATH_NVB : WEFT_PATH_NVL;
    case WEFT_LINK_C2C:
      return WEFT_PATH_C2C;
    case WEFT_LINK_PCI:
      if (u->type == WEFT_NODE_CPU || v->type == WEFT_NODE_CPU) return WEFT_PATH_PHB;
      if (u->type == WEFT_NODE_PCI && v->type == WEFT_NODE_PCI) return WEFT_PATH_PXB;
      return WEFT_PATH_PIX;
    case WEFT_LINK_SYS:
      return WEFT_PATH_SYS;
    default:
      return WEFT_PATH_LOC; /* LOC, and NIC->NET ports: distance is the PCI part */
  }
}

/* Whether a path may continue through node u (which it reached with path pu) over link l. */
static int may_traverse(const struct weft_topo_node* src, const struct weft_topo_node* u,
                        const struct weft_topo_path* pu, const struct weft_topo_link* l, int nvb) {
  if (u == src) return 1;
  if (u->type == WEFT_NODE_NET) return 0;
  if (u->type == WEFT_NODE_GPU)
    return nvb && !u->u.gpu.host_rank && pu->nhops == 1 && pu->hops[0]->type == WEFT_LINK_NVL &&
           l->type == WEFT_LINK_NVL && l->remote->type == WEFT_NODE_GPU;
  return 1;
}

struct bfs {
  struct weft_topo_path* tmp[WEFT_NODE_TYPES];
  struct weft_topo_node** front;
  struct weft_topo_node** next;
  char* queued;
  int total;
};

static struct weft_topo_path* tmp_of(struct bfs* b, const struct weft_topo_node* n) {
  return &b->tmp[n->type][n->index];
}

static int flat_index(struct weft_topo_system* sys, const struct weft_topo_node* n) {
  int k = 0;
  for (int t = 0; t < n->type; t++) k += sys->count[t];
  return k + n->index;
}

static void bfs_run(struct weft_topo_system* sys, struct bfs* b, struct weft_topo_node* src, int nvb) {
  for (int t = 0; t < WEFT_NODE_TYPES; t++)
    for (int i = 0; i < sys->count[t]; i++) {
      b->tmp[t][i].type = WEFT_PATH_DIS;
      b->tmp[t][i].bw = 0;
      b->tmp[t][i].nhops = -1;
    }
  struct weft_topo_path* ps = tmp_of(b, src);
  ps->type = WEFT_PATH_LOC;
  ps->bw = WEFT_TOPO_LOC_BW;
  ps->nhops = 0;
  int nf = 1;
  b->front[0] = src;
  while (nf > 0) {
    int nn = 0;
    memset(b->queued, 0, b->total);
    for (int f = 0; f < nf; f++) {
      struct weft_topo_node* u = b->front[f];
      struct weft_topo_path* pu = tmp_of(b, u);
      if (pu->nhops >= WEFT_TOPO_MAX_HOPS) continue;
      for (int li = 0; li < u->nlinks; li++) {
        struct weft_topo_link* l = &u->links[li];
        struct weft_topo_node* v = l->remote;
        if (v == src || !may_traverse(src, u, pu, l, nvb)) continue;
        float bw = pu->bw < l->bw_full ? pu->bw : l->bw_full;
        struct weft_topo_path* pv = tmp_of(b, v);
        int nh = pu->nhops + 1;
        if (!(pv->nhops < 0 || (pv->nhops >= nh && pv->bw < bw))) continue;
        int ht = hop_type(src, u, l);
        memcpy(pv->hops, pu->hops, pu->nhops * sizeof(pu->hops[0]));
        pv->hops[pu->nhops] = l;
        pv->nhops = nh;
        pv->bw = bw;
        pv->type = pu->type > ht ? pu->type : ht;
        int k = flat_index(sys, v);
        if (!b->queued[k]) {
          b->queued[k] = 1;
          b->next[nn++] = v;
        }
      }
    }
    struct weft_topo_node** sw = b->front;
    b->front = b->next;
    b->next = sw;
    nf = nn;
  }
}

/* Replaces path a->b by a->via->b, with at least type PHB. When staged, the bytes land in via's
 * memory (a CPU) and are read back from it: the path also takes the memory's bandwidth, which
 * every channel and every staged pair of that NUMA node shares. */
static void route_via(struct weft_topo_system* sys, struct weft_topo_path* p, struct weft_topo_node* a,
                      struct weft_topo_node* via, struct weft_topo_node* b, int staged) {
  struct weft_topo_path* p1 = &a->paths[via->type][via->index];
  struct weft_topo_path* p2 = &via->paths[b->type][b->index];
  (void)sys;
  staged = staged && via->type == WEFT_NODE_CPU && via->mem.remote != NULL;
  if (p1->type == WEFT_PATH_DIS || p2->type == WEFT_PATH_DIS ||
      p1->nhops + p2->nhops + staged > WEFT_TOPO_MAX_HOPS)
    return;
  struct weft_topo_path r;
  r.p2p = 0;
  memcpy(r.hops, p1->hops, p1->nhops * sizeof(r.hops[0]));
  memcpy(r.hops + p1->nhops, p2->hops, p2->nhops * sizeof(r.hops[0]));
  r.nhops = p1->nhops + p2->nhops;
  r.bw = p1->bw < p2->bw ? p1->bw : p2->bw;
  if (staged) {
    r.hops[r.nhops++] = &via->mem;
    if (via->mem.bw_full < r.bw) r.bw = via->mem.bw_full;
  }
  r.type = p1->type > p2->type ? p1->type : p2->type;
  if (r.type < WEFT_PATH_PHB) r.type = WEFT_PATH_PHB;
  *p = r;
}

static int level_param(const char* name, int def, int warn) {
  const char* v = weft_param_str(name);
  if (v == NULL || v[0] == 0) return def;
  int t = weft_topo_path_type_parse(v);
  if (t < 0) {
    if (warn)
      WEFT_WARN("%s=%s is not a path type (LOC, NVL, NVB, PIX, PXB, PHB, SYS), using %s", name, v,
                weft_topo_path_name(def));
    return def;
  }
  return t;
}

static int p2p_level(int warn) {
  if (weft_param_int("NCCL_P2P_DISABLE")) return WEFT_PATH_LOC;
  return level_param("NCCL_P2P_LEVEL", WEFT_PATH_PXB, warn);
}

int weft_topo_p2p_level(void) { return p2p_level(0); }

/* Whether GPUs a and b may go peer to peer over path p: within NCCL_P2P_LEVEL, or, with a GPU
 * that has no PCIe P2P, only over NVLink. */
static int p2p_direct(const struct weft_topo_node* a, const struct weft_topo_node* b,
                      const struct weft_topo_path* p, int level) {
  if (!a->u.gpu.p2p || !b->u.gpu.p2p) return p->type < WEFT_PATH_PIX;
  return p->type <= level;
}

/* GPU pairs beyond NCCL_P2P_LEVEL, or with a GPU that has no PCIe P2P, talk through the sender's
 * CPU memory (shared memory), not peer to peer; NVLink stays direct. Each pair's verdict stays on
 * its path (weft_topo_p2p_between). */
static void apply_p2p_level(struct weft_topo_system* sys) {
  int level = p2p_level(1);
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* a = &sys->nodes[WEFT_NODE_GPU][i];
    if (a->u.gpu.host_rank) continue;
    for (int j = 0; j < sys->count[WEFT_NODE_GPU]; j++) {
      struct weft_topo_node* b = &sys->nodes[WEFT_NODE_GPU][j];
      struct weft_topo_path* p = &a->paths[WEFT_NODE_GPU][j];
      if (i == j || p->type == WEFT_PATH_DIS || b->u.gpu.host_rank) continue;
      int direct = p2p_direct(a, b, p, level);
      if (!direct && a->cpu >= 0) route_via(sys, p, a, &sys->nodes[WEFT_NODE_CPU][a->cpu], b, 1);
      p->p2p = direct;
    }
  }
}

int weft_topo_gdr_level(void) { return level_param("NCCL_NET_GDR_LEVEL", WEFT_PATH_PXB, 0); }

static int gdr_allowed(const struct weft_topo_node* g, const struct weft_topo_node* n, int type, int level) {
  return !g->u.gpu.host_rank && g->u.gpu.gdr && n->u.net.gdr && type <= level;
}

/* Once paths are computed a path beyond the level has gone through the CPU (apply_gdr), and a
 * path through the CPU is never within a level below PHB: the rule reads the same either way. */
int weft_topo_net_gdr(const struct weft_topo_node* rank, const struct weft_topo_node* net,
                      const struct weft_topo_path* p) {
  if (rank->type != WEFT_NODE_GPU || p->type == WEFT_PATH_DIS || p->type == WEFT_PATH_PXN) return 0;
  return gdr_allowed(rank, net, p->type, weft_topo_gdr_level());
}

/* GPU<->NIC traffic without GPUDirect RDMA is staged in the GPU's local CPU memory. */
static void apply_gdr(struct weft_topo_system* sys) {
  int level = level_param("NCCL_NET_GDR_LEVEL", WEFT_PATH_PXB, 1);
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->cpu < 0) continue;
    struct weft_topo_node* cpu = &sys->nodes[WEFT_NODE_CPU][g->cpu];
    for (int j = 0; j < sys->count[WEFT_NODE_NET]; j++) {
      struct weft_topo_node* n = &sys->nodes[WEFT_NODE_NET][j];
      /* Host ranks of a crowded host keep no paths of their own (host_rank_path derives them). */
      struct weft_topo_path* p =
          g->paths[WEFT_NODE_NET] ? &g->paths[WEFT_NODE_NET][j] : &n->paths[WEFT_NODE_GPU][i];
      if (p->type == WEFT_PATH_DIS || p->type == WEFT_PATH_PXN) continue; /* the peer does GDR */
      if (gdr_allowed(g, n, p->type, level)) continue;
      if (g->paths[WEFT_NODE_NET]) route_via(sys, p, g, cpu, n, 1);
      route_via(sys, &n->paths[WEFT_NODE_GPU][i], n, cpu, g, 1);
    }
  }
}

/* GPU with a C2C link to its CPU reaches NICs behind that CPU over C2C (type P2C). */
static void apply_c2c(struct weft_topo_system* sys) {
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->cpu < 0 || g->paths[WEFT_NODE_CPU] == NULL ||
        g->paths[WEFT_NODE_CPU][g->cpu].type != WEFT_PATH_C2C)
      continue;
    struct weft_topo_node* cpu = &sys->nodes[WEFT_NODE_CPU][g->cpu];
    for (int j = 0; j < sys->count[WEFT_NODE_NET]; j++) {
      struct weft_topo_path* p = &g->paths[WEFT_NODE_NET][j];
      if (p->type != WEFT_PATH_PHB || cpu->paths[WEFT_NODE_NET][j].type > WEFT_PATH_PHB) continue;
      route_via(sys, p, g, cpu, &sys->nodes[WEFT_NODE_NET][j], 0);
      p->type = WEFT_PATH_P2C;
    }
  }
}

/* PXN: a GPU far from a NIC sends through an NVLink peer that sits next to it. */
static void apply_pxn(struct weft_topo_system* sys) {
  if (weft_param_int("NCCL_PXN_DISABLE")) return;
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->u.gpu.host_rank) continue;
    for (int j = 0; j < sys->count[WEFT_NODE_NET]; j++) {
      struct weft_topo_path* p = &g->paths[WEFT_NODE_NET][j];
      struct weft_topo_node *net = &sys->nodes[WEFT_NODE_NET][j], *best = NULL;
      if (p->type <= WEFT_PATH_PXB || net->host != g->host || !net->u.net.gdr) continue;
      for (int k = 0; k < sys->count[WEFT_NODE_GPU]; k++) {
        struct weft_topo_node* peer = &sys->nodes[WEFT_NODE_GPU][k];
        if (k == i || peer->host != g->host || !peer->u.gpu.gdr || peer->paths[WEFT_NODE_NET] == NULL ||
            g->paths[WEFT_NODE_GPU][k].type != WEFT_PATH_NVL)
          continue;
        struct weft_topo_path* q = &peer->paths[WEFT_NODE_NET][j];
        if (q->type > WEFT_PATH_PXB || (q->bw <= p->bw && p->type <= WEFT_PATH_PXN)) continue;
        if (best == NULL || q->bw > best->paths[WEFT_NODE_NET][j].bw) best = peer;
      }
      if (best == NULL) continue;
      route_via(sys, p, g, best, net, 0);
      p->type = WEFT_PATH_PXN;
    }
  }
}

static ncclResult_t bfs_alloc(struct weft_topo_system* sys, struct bfs* b) {
  memset(b, 0, sizeof(*b));
  for (int t = 0; t < WEFT_NODE_TYPES; t++) {
    b->total += sys->count[t];
    b->tmp[t] = calloc(sys->count[t] + 1, sizeof(struct weft_topo_path));
    if (b->tmp[t] == NULL) return ncclSystemError;
  }
  b->front = calloc(b->total + 1, sizeof(*b->front));
  b->next = calloc(b->total + 1, sizeof(*b->next));
  b->queued = calloc(b->total + 1, 1);
  return b->front && b->next && b->queued ? ncclSuccess : ncclSystemError;
}

static void bfs_free(struct bfs* b) {
  for (int t = 0; t < WEFT_NODE_TYPES; t++) free(b->tmp[t]);
  free(b->front);
  free(b->next);
  free(b->queued);
}

static ncclResult_t paths_from(struct weft_topo_system* sys, struct bfs* b, struct weft_topo_node* src,
                               int nvb) {
  bfs_run(sys, b, src, nvb);
  for (int d = 0; d < WEFT_NODE_TYPES; d++) {
    if (!has_paths(d)) continue;
    src->paths[d] = calloc(sys->count[d] + 1, sizeof(struct weft_topo_path));
    if (src->paths[d] == NULL) return ncclSystemError;
    for (int j = 0; j < sys->count[d]; j++) {
      src->paths[d][j] = b->tmp[d][j];
      if (src->paths[d][j].nhops < 0) src->paths[d][j].nhops = 0;
    }
  }
  return ncclSuccess;
}

/* Hosts with more than WEFT_GRAPH_SEARCH_LOCAL host ranks: their ranks get no paths of their
 * own. A host rank's only link goes to its CPU, so its paths are that link followed by the CPU's
 * (weft_topo_host_rank_path); storing them would cost ranks^2 paths (~280 MB at 1,024 ranks)
 * and a search from each rank, in every rank of a thread-rank job. */
static void crowded_hosts(const struct weft_topo_system* sys, char* crowded) {
  int count[WEFT_TOPO_CAP_CPU] = {0};
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    const struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->u.gpu.host_rank && g->host >= 0 && g->host < WEFT_TOPO_CAP_CPU) count[g->host]++;
  }
  for (int h = 0; h < WEFT_TOPO_CAP_CPU; h++) crowded[h] = count[h] > WEFT_GRAPH_SEARCH_LOCAL;
}

static int derived(const char* crowded, const struct weft_topo_node* n) {
  return n->type == WEFT_NODE_GPU && n->u.gpu.host_rank && n->host >= 0 && n->host < WEFT_TOPO_CAP_CPU &&
         crowded[n->host] && n->nlinks == 1 && n->cpu >= 0;
}

ncclResult_t weft_topo_compute_paths(struct weft_topo_system* sys) {
  weft_topo_free_paths(sys);
  struct bfs b;
  char crowded[WEFT_TOPO_CAP_CPU];
  crowded_hosts(sys, crowded);
  int nvb = !weft_param_int("NCCL_NVB_DISABLE");
  ncclResult_t res = bfs_alloc(sys, &b);
  for (int t = 0; t < WEFT_NODE_TYPES && res == ncclSuccess; t++) {
    if (!has_paths(t)) continue;
    for (int i = 0; i < sys->count[t] && res == ncclSuccess; i++)
      if (!derived(crowded, &sys->nodes[t][i])) res = paths_from(sys, &b, &sys->nodes[t][i], nvb);
  }
  bfs_free(&b);
  if (res != ncclSuccess) {
    weft_topo_free_paths(sys);
    WEFT_WARN("topology: out of memory computing paths");
    return res;
  }
  sys->paths_ready = 1;
  apply_p2p_level(sys);
  apply_c2c(sys);
  apply_pxn(sys);
  apply_gdr(sys);
  return ncclSuccess;
}

struct weft_topo_node* weft_topo_rank_node(struct weft_topo_system* sys, int host, int local) {
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->host == host && g->u.gpu.rank == local) return g;
  }
  return NULL;
}

int weft_topo_host_rank_path(struct weft_topo_system* sys, const struct weft_topo_node* from, int type,
                             int index, struct weft_topo_path* out) {
  if (!sys->paths_ready || from->nlinks < 1 || from->cpu < 0 || index < 0 || index >= sys->count[type])
    return 0;
  struct weft_topo_node* cpu = &sys->nodes[WEFT_NODE_CPU][from->cpu];
  const struct weft_topo_path* q = cpu->paths[type] ? &cpu->paths[type][index] : NULL;
  if (type == WEFT_NODE_GPU && &sys->nodes[type][index] == from) {
    *out = (struct weft_topo_path){.type = WEFT_PATH_LOC, .bw = WEFT_TOPO_LOC_BW, .nhops = 0};
    return 1;
  }
  if (q == NULL || q->type == WEFT_PATH_DIS || q->nhops + 2 > WEFT_TOPO_MAX_HOPS) {
    *out = (struct weft_topo_path){.type = WEFT_PATH_DIS, .bw = 0, .nhops = 0};
    return 1;
  }
  struct weft_topo_link* up = &((struct weft_topo_node*)from)->links[0];
  out->hops[0] = up;
  memcpy(out->hops + 1, q->hops, q->nhops * sizeof(q->hops[0]));
  out->nhops = q->nhops + 1;
  out->bw = q->bw < up->bw_full ? q->bw : up->bw_full;
  out->type = q->type;
  /* To a NIC a host rank has no GPUDirect: the bytes are staged in its CPU's memory. */
  if (type == WEFT_NODE_NET) {
    if (cpu->mem.remote != NULL) {
      out->hops[out->nhops++] = &cpu->mem;
      if (cpu->mem.bw_full < out->bw) out->bw = cpu->mem.bw_full;
    }
    if (out->type < WEFT_PATH_PHB) out->type = WEFT_PATH_PHB;
  }
  return 1;
}

int weft_topo_rank_path(struct weft_topo_system* sys, int host, int local_a, int local_b, float* bw) {
  if (!sys->paths_ready && weft_topo_compute_paths(sys) != ncclSuccess) return -1;
  struct weft_topo_node* a = weft_topo_rank_node(sys, host, local_a);
  struct weft_topo_node* b = weft_topo_rank_node(sys, host, local_b);
  if (a == NULL || b == NULL) return -1;
  struct weft_topo_path derived_path;
  struct weft_topo_path* p = &derived_path;
  if (a->paths[WEFT_NODE_GPU] != NULL)
    p = &a->paths[WEFT_NODE_GPU][b->index];
  else if (!weft_topo_host_rank_path(sys, a, WEFT_NODE_GPU, b->index, p))
    return -1;
  if (bw) *bw = p->bw;
  return p->type;
}

struct weft_topo_node* weft_topo_gpu_by_busid(struct weft_topo_system* sys, int host, int64_t busid) {
  for (int i = 0; i < sys->count[WEFT_NODE_GPU]; i++) {
    struct weft_topo_node* g = &sys->nodes[WEFT_NODE_GPU][i];
    if (g->host == host && !g->u.gpu.host_rank && g->id == busid) return g;
  }
  return NULL;
}

int weft_topo_p2p_between(struct weft_topo_system* sys, int host, int64_t bus_a, int64_t bus_b) {
  if (bus_a < 0 || bus_b < 0 || bus_a == bus_b) return -1;
  if (!sys->paths_ready && weft_topo_compute_paths(sys) != ncclSuccess) return -1;
  struct weft_topo_node* a = weft_topo_gpu_by_busid(sys, host, bus_a);
  struct weft_topo_node* b = weft_topo_gpu_by_busid(sys, host, bus_b);
  if (a == NULL || b == NULL || a->paths[WEFT_NODE_GPU] == NULL) return -1;
  const struct weft_topo_path* p = &a->paths[WEFT_NODE_GPU][b->index];
  return p->type == WEFT_PATH_DIS ? -1 : p->p2p;
}
