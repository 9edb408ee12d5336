/* Channels of a communicator from per-node graphs: rings joined node after node, trees as chains
 * inside nodes joined by NCCL's double binary tree over nodes; channel count clamped by
 * NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "util/check.h"
#include "util/param.h"

static void btree(int n, int r, int* parent, int* d0, int* d1) {
  int bit;
  *parent = *d0 = *d1 = -1;
  if (r == 0) {
    for (bit = 1; bit < n; bit <<= 1) {
    }
    if (n > 1) *d1 = bit >> 1; /* root: one child, the largest power of two below n */
    return;
  }
  for (bit = 1; !(r & bit); bit <<= 1) {
  }
  *parent = (r ^ bit) | (bit << 1);
  if (*parent >= n) *parent = r ^ bit;
  int low = bit >> 1;
  if (low == 0) return;
  *d0 = r - low;
  for (int l = low; l > 0; l >>= 1)
    if (r + l < n) {
      *d1 = r + l;
      break;
    }
}

void weft_topo_dtree(int n, int r, int t, int* parent, int* child0, int* child1) {
  if (t == 0 || n <= 1) return btree(n, r, parent, child0, child1);
  int p, a, b;
  if (n % 2 == 1) { /* shift by one */
    btree(n, (r - 1 + n) % n, &p, &a, &b);
    *parent = p < 0 ? -1 : (p + 1) % n;
    *child0 = a < 0 ? -1 : (a + 1) % n;
    *child1 = b < 0 ? -1 : (b + 1) % n;
  } else { /* mirror */
    btree(n, n - 1 - r, &p, &a, &b);
    *parent = p < 0 ? -1 : n - 1 - p;
    *child0 = a < 0 ? -1 : n - 1 - a;
    *child1 = b < 0 ? -1 : n - 1 - b;
  }
}

void weft_topo_channels_destroy(struct weft_topo_channels* ch) {
  if (ch == NULL) return;
  free(ch->ring);
  free(ch->ring_prev);
  free(ch->ring_next);
  free(ch->tree_up);
  free(ch->tree_down);
  free(ch);
}

static int comm_channels(int nch) {
  int n = 2 * nch;
  if (n > WEFT_MAX_CHANNELS) n = WEFT_MAX_CHANNELS;
  int64_t maxc = weft_param_int("NCCL_MAX_NCHANNELS"), minc = weft_param_int("NCCL_MIN_NCHANNELS");
  if (weft_param_is_set("NCCL_MAX_NCHANNELS") && maxc >= 1 && maxc < n) n = (int)maxc;
  if (weft_param_is_set("NCCL_MIN_NCHANNELS") && minc > n)
    n = minc > WEFT_MAX_CHANNELS ? WEFT_MAX_CHANNELS : (int)minc;
  return n < 1 ? 1 : n;
}

static void build_ring(struct weft_topo_channels* ch, const struct weft_topo_graph* g, int c) {
  int n = ch->nranks, L = ch->nlocal, base = c % g->nchannels;
  int* order = &ch->ring[c * n];
  int k = 0, start = 0;
  for (int node = 0; node < ch->nnodes; node++)
    for (int i = 0; i < L; i++) order[k++] = node * L + weft_topo_graph_row(g, base)[i];
  /* Deterministic mode: one ring, in rank order, on every channel, so an element's reduction
   * order does not depend on which channel carries it (core/api_coll.c). */
  if (weft_param_int("WEFT_DETERMINISTIC") != 0)
    for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 0; i < n; i++)
    if (order[i] == 0) start = i;
  int* tmp = malloc(n * sizeof(int));
  if (tmp) { /* start the listing at rank 0, as NCCL prints it */
    for (int i = 0; i < n; i++) tmp[i] = order[(start + i) % n];
    memcpy(order, tmp, n * sizeof(int));
    free(tmp);
  }
  for (int i = 0; i < n; i++) {
    ch->ring_next[c * n + order[i]] = order[(i + 1) % n];
    ch->ring_prev[c * n + order[i]] = order[(i + n - 1) % n];
  }
}

static void add_down(struct weft_topo_channels* ch, int c, int r, int child) {
  int* d = &ch->tree_down[(c * ch->nranks + r) * 3];
  for (int k = 0; k < 3; k++)
    if (d[k] < 0) {
      d[k] = child;
      return;
    }
}

/* Roles of a node's ranks in tree channel c: the chain head talks to the parent node, child0 and
 * child1 talk to the child nodes (NCCL's TREE / SPLIT_TREE / BALANCED_TREE placement). */
static void tree_roles(const struct weft_topo_graph* g, int base, int* head, int* c0, int* c1) {
  const int* row = weft_topo_graph_row(g, base);
  int second = g->nlocal > 1 ? row[1] : row[0];
  *head = row[0];
  *c0 = g->pattern == WEFT_PATTERN_TREE ? *head : second;
  *c1 = g->pattern == WEFT_PATTERN_SPLIT_TREE ? second : *head;
}

static void build_tree(struct weft_topo_channels* ch, const struct weft_topo_graph* g, int c,
                       int nch_search) {
  int L = ch->nlocal, N = ch->nnodes, base = c % g->nchannels, t = (c / nch_search) % 2;
  int head, c0, c1;
  const int* row = weft_topo_graph_row(g, base);
  tree_roles(g, base, &head, &c0, &c1);
  for (int node = 0; node < N; node++) {
    int off = node * L;
    for (int i = 0; i < L; i++) {
      int r = off + row[i];
      ch->tree_up[c * ch->nranks + r] = i > 0 ? off + row[i - 1] : -1;
      if (i + 1 < L) add_down(ch, c, r, off + row[i + 1]);
    }
    int p, d0, d1;
    weft_topo_dtree(N, node, t, &p, &d0, &d1);
    if (p >= 0) {
      int pp, pd0, pd1;
      weft_topo_dtree(N, p, t, &pp, &pd0, &pd1);
      ch->tree_up[c * ch->nranks + off + head] = p * L + (pd0 == node ? c0 : c1);
    }
    if (d0 >= 0) add_down(ch, c, off + c0, d0 * L + head);
    if (d1 >= 0) add_down(ch, c, off + c1, d1 * L + head);
  }
}

/* Deepest rank of any channel's tree. Each rank's depth is remembered, so long intra-node chains
 * (a thousand host ranks) cost linear time, not a walk to the root per rank. */
static int tree_depth(const struct weft_topo_channels* ch) {
  int n = ch->nranks, worst = 0;
  int* depth = malloc(2 * (size_t)n * sizeof(int));
  if (depth == NULL) return n; /* the worst a tree can be */
  int* stack = depth + n;
  for (int c = 0; c < ch->nchannels; c++) {
    const int* up = &ch->tree_up[(size_t)c * n];
    for (int r = 0; r < n; r++) depth[r] = -1;
    for (int r = 0; r < n; r++) {
      int k = 0, x = r;
      while (depth[x] < 0 && up[x] >= 0 && k < n) {
        stack[k++] = x;
        x = up[x];
      }
      int d = depth[x] < 0 ? 0 : depth[x];
      depth[x] = d;
      while (k > 0) depth[stack[--k]] = ++d;
      if (depth[r] > worst) worst = depth[r];
    }
  }
  free(depth);
  return worst;
}

static void log_channels(const struct weft_topo_channels* ch) {
  if (!WEFT_LOG_ON(WEFT_LOG_INFO, WEFT_GRAPH)) return;
  for (int c = 0; c < ch->nchannels; c++) {
    char line[1024];
    int n = snprintf(line, sizeof(line), "Channel %02d/%02d :", c, ch->nchannels);
    for (int i = 0; i < ch->nranks && n < (int)sizeof(line) - 16; i++)
      n += snprintf(line + n, sizeof(line) - n, " %d", ch->ring[c * ch->nranks + i]);
    WEFT_INFO(WEFT_GRAPH, "%s", line);
  }
  for (int c = 0; c < ch->nchannels && ch->tree_up; c++) {
    const int* d = &ch->tree_down[c * ch->nranks * 3];
    WEFT_INFO(WEFT_GRAPH, "Trees [%d] %d/%d/%d->%d->%d", c, d[0], d[1], d[2], 0, ch->tree_up[c * ch->nranks]);
  }
}

ncclResult_t weft_topo_connect_channels(const struct weft_topo_graph* ring,
                                        const struct weft_topo_graph* tree, int nnodes,
                                        struct weft_topo_channels** out) {
  *out = NULL;
  if (ring == NULL || ring->intra == NULL || ring->nchannels < 1 || ring->nlocal < 1 || nnodes < 1 ||
      (tree && (tree->intra == NULL || tree->nchannels < 1 || tree->nlocal != ring->nlocal))) {
    WEFT_WARN("connect channels: invalid graphs (ring %d channels, %d ranks per node, %d nodes)",
              ring ? ring->nchannels : 0, ring ? ring->nlocal : 0, nnodes);
    return ncclInvalidUsage;
  }
  struct weft_topo_channels* ch = calloc(1, sizeof(*ch));
  if (ch == NULL) goto oom;
  ch->nlocal = ring->nlocal;
  ch->nnodes = nnodes;
  ch->nranks = nnodes * ring->nlocal;
  ch->nchannels = comm_channels(ring->nchannels);
  size_t cells = (size_t)ch->nchannels * ch->nranks;
  ch->ring = calloc(cells, sizeof(int));
  ch->ring_prev = calloc(cells, sizeof(int));
  ch->ring_next = calloc(cells, sizeof(int));
  if (!ch->ring || !ch->ring_prev || !ch->ring_next) goto oom;
  for (int c = 0; c < ch->nchannels; c++) build_ring(ch, ring, c);
  if (tree) {
    ch->tree_up = malloc(cells * sizeof(int));
    ch->tree_down = malloc(cells * 3 * sizeof(int));
    if (!ch->tree_up || !ch->tree_down) goto oom;
    memset(ch->tree_up, 0xff, cells * sizeof(int));
    memset(ch->tree_down, 0xff, cells * 3 * sizeof(int));
    int nch_tree = ch->nchannels / 2 > 0 ? ch->nchannels / 2 : 1;
    for (int c = 0; c < ch->nchannels; c++) build_tree(ch, tree, c, nch_tree);
    ch->tree_depth = tree_depth(ch);
  }
  log_channels(ch);
  *out = ch;
  return ncclSuccess;
oom:
  weft_topo_channels_destroy(ch);
  WEFT_WARN("connect channels: out of memory");
  return ncclSystemError;
}
