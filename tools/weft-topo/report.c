/* weft-topo printers: a readable report and the stable JSON document described in
 * docs/weft-topo.md. */
#include <stdlib.h>
#include <string.h>

#include "graph/topo.h"
#include "report.h"
#include "util/json.h"

/* The NICs nearest each rank of host 0, as the network connectors choose them (graph/near_nets.c):
 * the host's NETs named "name:port"; *out NULL when the host has no NET. */
#define MAX_NAMED_NETS 64
struct rank_nics {
  int nnets, nranks;
  char names[MAX_NAMED_NETS][72];
  struct weft_topo_near_nets* near; /* [nranks] */
};

static void rank_nics_free(struct rank_nics* rn) {
  free(rn->near);
  free(rn);
}

static struct rank_nics* rank_nics_of(struct report* r) {
  struct weft_topo_system* sys = r->sys;
  struct rank_nics* rn = calloc(1, sizeof(*rn));
  if (rn == NULL) return NULL;
  const char* list[MAX_NAMED_NETS];
  for (int i = 0; i < sys->count[WEFT_NODE_NET] && rn->nnets < MAX_NAMED_NETS; i++) {
    const struct weft_topo_node* x = &sys->nodes[WEFT_NODE_NET][i];
    if (x->host != 0) continue;
    snprintf(rn->names[rn->nnets], sizeof(rn->names[0]), "%.60s:%d", x->name, x->u.net.port);
    list[rn->nnets] = rn->names[rn->nnets];
    rn->nnets++;
  }
  rn->nranks = weft_topo_nlocal(sys, 0);
  if (rn->nnets == 0 || rn->nranks < 1 || (rn->near = calloc(rn->nranks, sizeof(*rn->near))) == NULL ||
      weft_topo_near_nets(sys, 0, list, rn->nnets, NULL, rn->nranks, rn->near) != ncclSuccess) {
    rank_nics_free(rn);
    return NULL;
  }
  return rn;
}

static void text_nics(struct report* r, FILE* f) {
  struct rank_nics* rn = rank_nics_of(r);
  if (rn == NULL) return;
  fprintf(f, "NICs per rank (most bandwidth, then the shortest path; turn among the ranks sharing them):\n");
  int show = rn->nranks < 16 ? rn->nranks : 16;
  for (int i = 0; i < show; i++) {
    const struct weft_topo_near_nets* n = &rn->near[i];
    fprintf(f, "  rank %d:", i);
    for (int k = 0; k < n->n; k++) fprintf(f, " %s", rn->names[n->dev[k]]);
    if (n->n == 0) fprintf(f, " none reachable");
    fprintf(f, " (turn %d of %d)\n", n->rail, n->sharers);
  }
  if (show < rn->nranks) fprintf(f, "  ... %d more ranks\n", rn->nranks - show);
  rank_nics_free(rn);
}

static void json_nics(struct report* r, FILE* f) {
  struct rank_nics* rn = rank_nics_of(r);
  fprintf(f, "  \"nics\": [");
  for (int i = 0; rn && i < rn->nranks; i++) {
    const struct weft_topo_near_nets* n = &rn->near[i];
    fprintf(f, "%s{\"rank\": %d, \"nets\": [", i ? ", " : "", i);
    for (int k = 0; k < n->n; k++) {
      if (k) fprintf(f, ", ");
      weft_json_string(f, rn->names[n->dev[k]]);
    }
    fprintf(f, "], \"turn\": %d, \"sharers\": %d}", n->rail, n->sharers);
  }
  fprintf(f, "],\n");
  if (rn) rank_nics_free(rn);
}

static const char* arch_name(int arch) {
  static const char* n[] = {"host", "volta", "ampere", "hopper", "blackwell"};
  return arch >= 0 && arch <= WEFT_ARCH_BLACKWELL ? n[arch] : "?";
}

static void text_graph(const char* what, const struct weft_topo_graph* g, FILE* f) {
  fprintf(f, "%s: pattern %d, crossNic %d, nChannels %d, bw %.2f/%.2f GB/s, type %s/%s, sameChannels %d\n",
          what, g->pattern, g->cross_nic, g->nchannels, g->bw_intra, g->bw_inter,
          weft_topo_path_name(g->type_intra), weft_topo_path_name(g->type_inter), g->same_channels);
  for (int c = 0; c < g->nchannels; c++) {
    fprintf(f, "  %2d :", c);
    if (g->inter) fprintf(f, " NET/%lld", (long long)g->inter_net[c][0]);
    for (int i = 0; i < g->nlocal; i++) fprintf(f, " %d", weft_topo_graph_row(g, c)[i]);
    if (g->inter) fprintf(f, " NET/%lld", (long long)g->inter_net[c][1]);
    fprintf(f, "\n");
  }
}

static void text_tuning(struct report* r, FILE* f) {
  const struct weft_tuning* t = &r->tuning;
  fprintf(f, "Tuning: model %s, %d ranks, %d nodes, %d channels\n", arch_name(t->in.arch), t->in.nranks,
          t->in.nnodes, t->in.nchannels);
  for (int i = 0; i < REPORT_NFUNCS; i++)
    for (int s = 0; s < REPORT_NSIZES; s++) {
      int fn = report_funcs[i];
      size_t b = report_sizes[s];
      struct weft_tuning_choice c;
      if (weft_tuning_choose(t, fn, b, &c) != ncclSuccess) continue;
      fprintf(f, "  %-13s %10zu B: %s/%s on %d channels, %.1f us, busbw %.2f GB/s\n", weft_func_name(fn), b,
              weft_algo_name(c.algo), weft_proto_name(c.proto), c.nchannels, c.time_us, c.busbw_gbs);
      for (int a = 0; a < WEFT_ALGO_COUNT; a++)
        for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
          float us = weft_tuning_predict(t, fn, a, p, b, t->in.nranks, t->in.nnodes, t->in.nchannels);
          if (us < 0) continue;
          fprintf(f, "      %-5s %-6s %12.1f us %9.2f GB/s\n", weft_algo_name(a), weft_proto_name(p), us,
                  weft_tuning_busbw(t, fn, a, p, b, t->in.nranks, t->in.nnodes, t->in.nchannels));
        }
    }
}

void report_text(struct report* r, FILE* f) {
  struct weft_topo_system* sys = r->sys;
  fprintf(f, "weft-topo: %s (%s), %d node%s\n", r->source, r->detection, r->nnodes, r->nnodes > 1 ? "s" : "");
  fprintf(f,
          "System: %d host(s), %d GPUs, %d CPUs, %d NICs, %d NETs, %d NVSwitches; %d ranks per node (%s)\n",
          sys->nhosts, sys->count[WEFT_NODE_GPU] - (r->host_ranks ? weft_topo_nlocal(sys, 0) : 0),
          sys->count[WEFT_NODE_CPU], sys->count[WEFT_NODE_NIC], sys->count[WEFT_NODE_NET],
          sys->count[WEFT_NODE_NVS], weft_topo_nlocal(sys, 0), r->host_ranks ? "host ranks" : "GPUs");
  char* d = NULL;
  if (weft_topo_describe(sys, &d) == ncclSuccess) {
    for (char* line = strtok(d, "\n"); line; line = strtok(NULL, "\n")) fprintf(f, "  %s\n", line);
    free(d);
  }
  text_graph("Ring", &r->ring, f);
  text_graph("Tree", &r->tree, f);
  struct weft_topo_channels* ch = r->ch;
  fprintf(f, "Channels: %d ranks, %d channels, tree depth %d\n", ch->nranks, ch->nchannels, ch->tree_depth);
  int show = ch->nchannels < 2 ? ch->nchannels : 2;
  for (int c = 0; c < show; c++) {
    fprintf(f, "  Channel %02d/%02d :", c, ch->nchannels);
    for (int i = 0; i < ch->nranks && i < 64; i++) fprintf(f, " %d", ch->ring[c * ch->nranks + i]);
    fprintf(f, "%s\n", ch->nranks > 64 ? " ..." : "");
  }
  text_nics(r, f);
  text_tuning(r, f);
}

/* ---- JSON ---- */

static void json_graph(const struct weft_topo_graph* g, FILE* f) {
  fprintf(f,
          "{\"pattern\": %d, \"cross_nic\": %d, \"nchannels\": %d, \"bw_intra\": %.3f, \"bw_inter\": %.3f, "
          "\"type_intra\": \"%s\", \"type_inter\": \"%s\", \"same_channels\": %d, \"channels\": [",
          g->pattern, g->cross_nic, g->nchannels, g->bw_intra, g->bw_inter,
          weft_topo_path_name(g->type_intra), weft_topo_path_name(g->type_inter), g->same_channels);
  for (int c = 0; c < g->nchannels; c++) {
    fprintf(f, "%s{\"net_in\": %lld, \"ranks\": [", c ? ", " : "",
            (long long)(g->inter ? g->inter_net[c][0] : -1));
    for (int i = 0; i < g->nlocal; i++) fprintf(f, "%s%d", i ? ", " : "", weft_topo_graph_row(g, c)[i]);
    fprintf(f, "], \"net_out\": %lld}", (long long)(g->inter ? g->inter_net[c][1] : -1));
  }
  fprintf(f, "]}");
}

static void json_system(struct report* r, FILE* f) {
  struct weft_topo_system* sys = r->sys;
  int n = weft_topo_nlocal(sys, 0);
  fprintf(f,
          "  \"system\": {\"hosts\": %d, \"gpus\": %d, \"cpus\": %d, \"nics\": %d, \"nets\": %d, "
          "\"nvswitches\": %d, "
          "\"ranks_per_node\": %d, \"host_ranks\": %s, \"copy_bw\": %.3f,\n    \"ranks\": [",
          sys->nhosts, sys->count[WEFT_NODE_GPU] - (r->host_ranks ? n : 0), sys->count[WEFT_NODE_CPU],
          sys->count[WEFT_NODE_NIC], sys->count[WEFT_NODE_NET], sys->count[WEFT_NODE_NVS], n,
          r->host_ranks ? "true" : "false", r->host_ranks ? r->copy_bw : 0.0);
  for (int i = 0; i < n; i++) {
    struct weft_topo_node* g = weft_topo_rank_node(sys, 0, i);
    fprintf(f, "%s{\"rank\": %d, \"dev\": %d, \"busid\": ", i ? ", " : "", i, g->u.gpu.dev);
    weft_json_string(f, g->u.gpu.host_rank ? "" : g->name);
    fprintf(f, ", \"sm\": %d, \"numa\": %lld, \"p2p\": %s}", g->u.gpu.sm,
            g->cpu >= 0 ? (long long)sys->nodes[WEFT_NODE_CPU][g->cpu].id : -1LL,
            g->u.gpu.host_rank || g->u.gpu.p2p ? "true" : "false");
  }
  fprintf(f, "],\n    \"nets\": [");
  int k = 0;
  for (int i = 0; i < sys->count[WEFT_NODE_NET]; i++) {
    struct weft_topo_node* x = &sys->nodes[WEFT_NODE_NET][i];
    if (x->host != 0) continue;
    fprintf(f, "%s{\"dev\": %d, \"name\": ", k++ ? ", " : "", x->u.net.dev);
    weft_json_string(f, x->name);
    fprintf(f, ", \"bw\": %.3f, \"numa\": %lld}", x->u.net.speed_bw,
            x->cpu >= 0 ? (long long)sys->nodes[WEFT_NODE_CPU][x->cpu].id : -1LL);
  }
  fprintf(f, "]},\n");
}

static void json_tuning(struct report* r, FILE* f) {
  const struct weft_tuning* t = &r->tuning;
  fprintf(f,
          "  \"tuning\": {\"model\": \"%s\", \"nranks\": %d, \"nnodes\": %d, \"nchannels\": %d, "
          "\"predictions\": [",
          arch_name(t->in.arch), t->in.nranks, t->in.nnodes, t->in.nchannels);
  int first = 1;
  for (int i = 0; i < REPORT_NFUNCS; i++)
    for (int s = 0; s < REPORT_NSIZES; s++) {
      int fn = report_funcs[i];
      size_t b = report_sizes[s];
      struct weft_tuning_choice c;
      if (weft_tuning_choose(t, fn, b, &c) != ncclSuccess) continue;
      fprintf(f,
              "%s\n    {\"collective\": \"%s\", \"bytes\": %zu, \"chosen\": {\"algo\": \"%s\", \"proto\": "
              "\"%s\", "
              "\"nchannels\": %d, \"time_us\": %.3f, \"busbw\": %.3f}, \"candidates\": [",
              first ? "" : ",", weft_func_name(fn), b, weft_algo_name(c.algo), weft_proto_name(c.proto),
              c.nchannels, c.time_us, c.busbw_gbs);
      first = 0;
      int k = 0;
      for (int a = 0; a < WEFT_ALGO_COUNT; a++)
        for (int p = 0; p < WEFT_PROTO_COUNT; p++) {
          float us = weft_tuning_predict(t, fn, a, p, b, t->in.nranks, t->in.nnodes, t->in.nchannels);
          if (us < 0) continue;
          fprintf(f, "%s{\"algo\": \"%s\", \"proto\": \"%s\", \"time_us\": %.3f, \"busbw\": %.3f}",
                  k++ ? ", " : "", weft_algo_name(a), weft_proto_name(p), us,
                  weft_tuning_busbw(t, fn, a, p, b, t->in.nranks, t->in.nnodes, t->in.nchannels));
        }
      fprintf(f, "]}");
    }
  fprintf(f, "\n  ]}\n");
}

void report_json(struct report* r, FILE* f) {
  fprintf(f, "{\n  \"version\": 1,\n  \"source\": ");
  weft_json_string(f, r->source ? r->source : "");
  fprintf(f, ",\n  \"detection\": ");
  weft_json_string(f, r->detection ? r->detection : "");
  fprintf(f, ",\n  \"nodes\": %d,\n", r->nnodes);
  json_system(r, f);
  fprintf(f, "  \"graphs\": {\"ring\": ");
  json_graph(&r->ring, f);
  fprintf(f, ",\n             \"tree\": ");
  json_graph(&r->tree, f);
  fprintf(f, "},\n  \"channels\": {\"nranks\": %d, \"nchannels\": %d, \"tree_depth\": %d},\n", r->ch->nranks,
          r->ch->nchannels, r->ch->tree_depth);
  json_nics(r, f);
  json_tuning(r, f);
  fprintf(f, "}\n");
}
