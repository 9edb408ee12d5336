/* Graph results: NCCL's log lines, graph files (NCCL_GRAPH_FILE / NCCL_GRAPH_DUMP_FILE) and the
 * communicator-level search of a ring and a tree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph/search.h"
#include "util/check.h"
#include "util/param.h"

void weft_topo_graph_log(struct weft_topo_system* sys, const struct weft_topo_graph* g) {
  (void)sys;
  if (!WEFT_LOG_ON(WEFT_LOG_INFO, WEFT_GRAPH)) return;
  WEFT_INFO(WEFT_GRAPH, "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d",
            g->pattern, g->cross_nic, g->nchannels, g->bw_intra, g->bw_inter,
            weft_topo_path_name(g->type_intra), weft_topo_path_name(g->type_inter), g->same_channels);
  for (int c = 0; c < g->nchannels; c++) {
    char line[1024];
    int n = snprintf(line, sizeof(line), "%2d :", c);
    if (g->inter) n += snprintf(line + n, sizeof(line) - n, " NET/%lld", (long long)g->inter_net[c][0]);
    for (int r = 0; r < g->nlocal && n < (int)sizeof(line) - 16; r++)
      n += snprintf(line + n, sizeof(line) - n, " GPU/%d", weft_topo_graph_row(g, c)[r]);
    if (g->inter && n < (int)sizeof(line) - 24)
      snprintf(line + n, sizeof(line) - n, " NET/%lld", (long long)g->inter_net[c][1]);
    WEFT_INFO(WEFT_GRAPH, "%s", line);
  }
}

static ncclResult_t graph_to_xml(struct search* s, const struct weft_topo_graph* g,
                                 struct weft_xml_node* root) {
  struct weft_xml_node* x = weft_xml_add_child(root, "graph");
  if (x == NULL) return ncclSystemError;
  WEFT_CHECK(weft_xml_set_int(x, "id", g->id));
  WEFT_CHECK(weft_xml_set_int(x, "pattern", g->pattern));
  WEFT_CHECK(weft_xml_set_int(x, "crossnic", g->cross_nic));
  WEFT_CHECK(weft_xml_set_int(x, "nchannels", g->nchannels));
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", g->bw_intra);
  WEFT_CHECK(weft_xml_set(x, "speedintra", buf));
  snprintf(buf, sizeof(buf), "%g", g->bw_inter);
  WEFT_CHECK(weft_xml_set(x, "speedinter", buf));
  snprintf(buf, sizeof(buf), "%g", g->latency_inter);
  WEFT_CHECK(weft_xml_set(x, "latencyinter", buf));
  WEFT_CHECK(weft_xml_set(x, "typeintra", weft_topo_path_name(g->type_intra)));
  WEFT_CHECK(weft_xml_set(x, "typeinter", weft_topo_path_name(g->type_inter)));
  WEFT_CHECK(weft_xml_set_int(x, "samechannels", g->same_channels));
  for (int c = 0; c < g->nchannels; c++) {
    struct weft_xml_node* ch = weft_xml_add_child(x, "channel");
    if (ch == NULL) return ncclSystemError;
    struct weft_xml_node* e;
    if (g->inter &&
        ((e = weft_xml_add_child(ch, "net")) == NULL || weft_xml_set_int(e, "dev", g->inter_net[c][0])))
      return ncclSystemError;
    for (int r = 0; r < g->nlocal; r++)
      if ((e = weft_xml_add_child(ch, "gpu")) == NULL ||
          weft_xml_set_int(e, "dev", s->rank[weft_topo_graph_row(g, c)[r]]->u.gpu.dev) != ncclSuccess)
        return ncclSystemError;
    if (g->inter &&
        ((e = weft_xml_add_child(ch, "net")) == NULL || weft_xml_set_int(e, "dev", g->inter_net[c][1])))
      return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t weft_topo_graphs_to_string(struct weft_topo_system* sys, int host,
                                        const struct weft_topo_graph* const* graphs, int ngraphs,
                                        char** out) {
  struct search s;
  WEFT_CHECK(weft_search_init(&s, sys, host, 0));
  struct weft_xml_node* root = weft_xml_new("graphs");
  ncclResult_t res = root ? weft_xml_set(root, "version", "1") : ncclSystemError;
  for (int i = 0; i < ngraphs && res == ncclSuccess; i++) res = graph_to_xml(&s, graphs[i], root);
  if (res == ncclSuccess)
    res = weft_xml_write_string(root, out, NULL);
  else
    WEFT_WARN("graph dump: out of memory");
  weft_xml_free(root);
  weft_search_fini(&s);
  return res;
}

ncclResult_t weft_topo_graphs_dump(struct weft_topo_system* sys, int host,
                                   const struct weft_topo_graph* const* graphs, int ngraphs,
                                   const char* path) {
  char* text;
  WEFT_CHECK(weft_topo_graphs_to_string(sys, host, graphs, ngraphs, &text));
  FILE* f = fopen(path, "w");
  int ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = 0;
  free(text);
  if (!ok) {
    WEFT_WARN("graph dump: cannot write %s: %s", path, strerror(errno));
    return ncclSystemError;
  }
  WEFT_INFO(WEFT_GRAPH, "Graphs dumped to %s", path);
  return ncclSuccess;
}

static ncclResult_t gerr(const char* what, int line, const char* msg) {
  WEFT_WARN("graph file %s line %d: %s", what, line, msg);
  return ncclInvalidUsage;
}

/* seen: s->n bytes of scratch. */
static ncclResult_t channel_from_xml(struct search* s, const char* what, const struct weft_xml_node* ch,
                                     struct weft_topo_graph* g, int c, char* seen) {
  int k = 0, nets = 0;
  memset(seen, 0, (size_t)s->n);
  g->inter_net[c][0] = g->inter_net[c][1] = -1;
  for (int i = 0; i < ch->nchildren; i++) {
    const struct weft_xml_node* e = ch->children[i];
    long long dev = weft_xml_get_int(e, "dev", -1);
    if (strcmp(e->name, "net") == 0) {
      if (nets == 2) return gerr(what, e->line, "more than two <net> in a channel");
      g->inter_net[c][nets++] = dev;
      if (nets == 1) g->inter_net[c][1] = dev;
      continue;
    }
    if (strcmp(e->name, "gpu") != 0) continue;
    int r = -1;
    for (int q = 0; q < s->n; q++)
      if (s->rank[q]->u.gpu.dev == dev) r = q;
    if (r < 0 || seen[r] || k >= s->n) return gerr(what, e->line, "unknown or repeated <gpu dev>");
    seen[r] = 1;
    weft_topo_graph_row(g, c)[k++] = r;
  }
  if (k != s->n) return gerr(what, ch->line, "channel does not list every GPU of the node");
  return ncclSuccess;
}

static ncclResult_t graph_from_xml(struct search* s, const char* what, const struct weft_xml_node* x,
                                   struct weft_topo_graph* g) {
  g->pattern = (int)weft_xml_get_int(x, "pattern", g->pattern);
  g->cross_nic = (int)weft_xml_get_int(x, "crossnic", 0);
  g->bw_intra = (float)weft_xml_get_double(x, "speedintra", 0);
  g->bw_inter = (float)weft_xml_get_double(x, "speedinter", g->bw_intra);
  g->latency_inter = (float)weft_xml_get_double(x, "latencyinter", 0);
  int ti = weft_topo_path_type_parse(weft_xml_get(x, "typeintra"));
  int tn = weft_topo_path_type_parse(weft_xml_get(x, "typeinter"));
  g->type_intra = ti < 0 ? WEFT_PATH_SYS : ti;
  g->type_inter = tn < 0 ? WEFT_PATH_SYS : tn;
  g->same_channels = (int)weft_xml_get_int(x, "samechannels", 0);
  if (g->pattern < WEFT_PATTERN_BALANCED_TREE || g->pattern > WEFT_PATTERN_RING || !(g->bw_intra > 0))
    return gerr(what, x->line, "bad pattern or speedintra");
  g->nchannels = 0;
  g->inter = 0;
  if (g->nlocal != s->n) return gerr(what, x->line, "graph searched for another number of ranks");
  char* seen = malloc((size_t)s->n);
  if (seen == NULL) return ncclSystemError;
  for (int i = 0; i < x->nchildren; i++) {
    if (strcmp(x->children[i]->name, "channel") != 0) continue;
    ncclResult_t res = g->nchannels >= WEFT_MAX_CHANNELS
                           ? gerr(what, x->children[i]->line, "too many channels")
                           : channel_from_xml(s, what, x->children[i], g, g->nchannels, seen);
    if (res != ncclSuccess) {
      free(seen);
      return res;
    }
    if (g->inter_net[g->nchannels][0] >= 0) g->inter = 1;
    g->nchannels++;
  }
  free(seen);
  if (g->nchannels == 0) return gerr(what, x->line, "graph without channels");
  return ncclSuccess;
}

ncclResult_t weft_topo_graphs_from_string(struct weft_topo_system* sys, int host, const char* text,
                                          size_t len, struct weft_topo_graph* const* graphs, int ngraphs) {
  struct search s;
  struct weft_xml_node* root;
  WEFT_CHECK(weft_search_init(&s, sys, host, 0));
  ncclResult_t parsed = weft_xml_parse(text, len, "graph file", &root);
  if (parsed != ncclSuccess) {
    weft_search_fini(&s);
    return parsed;
  }
  ncclResult_t res = ncclSuccess;
  if (strcmp(root->name, "graphs") != 0) res = gerr("", root->line, "top element is not <graphs>");
  for (int i = 0; i < root->nchildren && res == ncclSuccess; i++) {
    const struct weft_xml_node* x = root->children[i];
    if (strcmp(x->name, "graph") != 0) continue;
    long long id = weft_xml_get_int(x, "id", -1);
    for (int k = 0; k < ngraphs && res == ncclSuccess; k++) {
      if (graphs[k]->id != id) continue;
      struct weft_topo_graph tmp;
      res = weft_topo_graph_copy(&tmp, graphs[k]);
      if (res == ncclSuccess && tmp.intra == NULL) res = weft_topo_graph_alloc(&tmp, s.n);
      if (res == ncclSuccess) res = graph_from_xml(&s, "", x, &tmp);
      if (res == ncclSuccess) {
        weft_topo_graph_fini(graphs[k]);
        *graphs[k] = tmp;
      } else {
        weft_topo_graph_fini(&tmp);
      }
    }
  }
  weft_xml_free(root);
  weft_search_fini(&s);
  return res;
}

ncclResult_t weft_topo_graphs_load(struct weft_topo_system* sys, int host, const char* path,
                                   struct weft_topo_graph* const* graphs, int ngraphs) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    WEFT_WARN("graph file: cannot open %s: %s", path, strerror(errno));
    return ncclSystemError;
  }
  size_t cap = 1 << 20, n = 0;
  char* buf = malloc(cap);
  if (buf) n = fread(buf, 1, cap, f);
  fclose(f);
  if (buf == NULL || n == cap) {
    free(buf);
    WEFT_WARN("graph file: cannot read %s (larger than 1 MiB or out of memory)", path);
    return ncclSystemError;
  }
  ncclResult_t res = weft_topo_graphs_from_string(sys, host, buf, n, graphs, ngraphs);
  free(buf);
  return res;
}

ncclResult_t weft_topo_search_all(struct weft_topo_system* sys, int host, int nnodes,
                                  struct weft_topo_graph* ring, struct weft_topo_graph* tree) {
  memset(tree, 0, sizeof(*tree));
  WEFT_CHECK(weft_topo_search(sys, host, nnodes, WEFT_PATTERN_RING, ring));
  int n = ring->nlocal;
  if (nnodes > 1 && n > 1) {
    /* Trees: the pattern that carries the most; ties keep the earlier (balanced first). */
    static const int pats[] = {WEFT_PATTERN_BALANCED_TREE, WEFT_PATTERN_SPLIT_TREE, WEFT_PATTERN_TREE};
    for (int i = 0; i < 3; i++) {
      struct weft_topo_graph t;
      ncclResult_t res = weft_topo_search(sys, host, nnodes, pats[i], &t);
      if (res != ncclSuccess) {
        weft_topo_graph_fini(tree);
        weft_topo_graph_fini(ring);
        return res;
      }
      if (tree->nchannels == 0 || t.nchannels * t.bw_inter > tree->nchannels * tree->bw_inter + 1e-3f) {
        weft_topo_graph_fini(tree);
        *tree = t;
      } else {
        weft_topo_graph_fini(&t);
      }
    }
  } else {
    /* One node: the tree is a chain along the first ring (its channels are already balanced). */
    ncclResult_t res = weft_topo_graph_copy(tree, ring);
    if (res != ncclSuccess) {
      weft_topo_graph_fini(ring);
      return res;
    }
    tree->id = 1;
    tree->pattern = WEFT_PATTERN_TREE;
  }
  struct weft_topo_graph* gs[2] = {ring, tree};
  const char* in = weft_param_str("NCCL_GRAPH_FILE");
  ncclResult_t res = ncclSuccess;
  if (in && in[0]) res = weft_topo_graphs_load(sys, host, in, gs, 2);
  if (res == ncclSuccess) {
    weft_topo_graph_log(sys, ring);
    weft_topo_graph_log(sys, tree);
  }
  const char* dump = weft_param_str("NCCL_GRAPH_DUMP_FILE");
  if (res == ncclSuccess && dump && dump[0])
    res = weft_topo_graphs_dump(sys, host, (const struct weft_topo_graph* const*)gs, 2, dump);
  if (res != ncclSuccess) {
    weft_topo_graph_fini(ring);
    weft_topo_graph_fini(tree);
  }
  return res;
}
