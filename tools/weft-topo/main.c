/* weft-topo: load (--xml) or detect (--detect) a node's topology, search rings and trees, build
 * the channels of an N-node job and print the tuning model's predictions, as text or JSON. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "util/log.h"

const size_t report_sizes[REPORT_NSIZES] = {8, 1 << 20, (size_t)1 << 30};
const int report_funcs[REPORT_NFUNCS] = {WEFT_FUNC_ALLREDUCE, WEFT_FUNC_ALLGATHER, WEFT_FUNC_REDUCESCATTER,
                                         WEFT_FUNC_BROADCAST};

static void usage(FILE* f) {
  fprintf(f,
          "usage: weft-topo (--xml FILE | --detect) [--nodes N] [--json] [--ranks N] [--copy-bw GBS]\n"
          "  --xml FILE    NCCL topology XML to load (as NCCL_TOPO_FILE)\n"
          "  --detect      detect this machine (sysfs; NVML when present)\n"
          "  --nodes N     job of N identical nodes joined by their NICs (default 1)\n"
          "  --json        machine-readable output (schema in docs/weft-topo.md)\n"
          "  --ranks N     CPU-only systems: host-backend ranks to place, round robin over NUMA nodes\n"
          "                (default 2 per NUMA node)\n"
          "  --copy-bw G   host ranks' memory copy bandwidth in GB/s (default 10)\n"
          "  --explain C S only the tuning explanation of collective C at S bytes (K/M/G), as\n"
          "                NCCL_DEBUG_SUBSYS=TUNING logs it\n");
}

static int place_host_ranks(struct report* r, int nranks) {
  int ncpu = weft_topo_count(r->sys, WEFT_NODE_CPU);
  if (nranks <= 0) nranks = 2 * (ncpu > 0 ? ncpu : 1);
  if (nranks > WEFT_GRAPH_MAX_LOCAL) nranks = WEFT_GRAPH_MAX_LOCAL;
  int* numa = calloc(nranks, sizeof(int));
  if (numa == NULL) return -1;
  int* ids = calloc(ncpu > 0 ? ncpu : 1, sizeof(int));
  int nids = weft_topo_cpu_numa_ids(r->sys, 0, ids, ncpu > 0 ? ncpu : 1);
  for (int i = 0; i < nranks; i++) numa[i] = nids > 0 ? ids[(i * nids) / nranks] : 0;
  ncclResult_t res = weft_topo_add_host_ranks(r->sys, 0, nranks, numa, r->copy_bw);
  free(numa);
  free(ids);
  r->host_ranks = 1;
  return res == ncclSuccess ? 0 : -1;
}

static int build(struct report* r, int nranks) {
  if (weft_topo_nlocal(r->sys, 0) == 0 && place_host_ranks(r, nranks) != 0) return -1;
  if (weft_topo_search_all(r->sys, 0, r->nnodes, &r->ring, &r->tree) != ncclSuccess) return -1;
  if (weft_topo_connect_channels(&r->ring, &r->tree, r->nnodes, &r->ch) != ncclSuccess) return -1;
  int sm = weft_topo_min_sm(r->sys, 0);
  struct weft_tuning_input in = {.arch = r->host_ranks ? WEFT_ARCH_HOST : weft_arch_from_sm(sm),
                                 .cpu_vendor = weft_topo_cpu_is_amd(r->sys, 0),
                                 .nranks = r->ch->nranks,
                                 .nnodes = r->nnodes,
                                 .nchannels = r->ch->nchannels,
                                 .ring = &r->ring,
                                 .tree = &r->tree,
                                 .host_copy_bw = r->host_ranks ? r->copy_bw : 0};
  return weft_tuning_init(&r->tuning, &in) == ncclSuccess ? 0 : -1;
}

struct args {
  const char* xml;
  int detect, json, nranks;
};

/* Returns 0, or the exit status for a usage error / --help. */
static int parse_args(int argc, char** argv, struct args* a, struct report* r) {
  static const struct option opts[] = {
      {"xml", required_argument, NULL, 'x'},   {"detect", no_argument, NULL, 'd'},
      {"nodes", required_argument, NULL, 'n'}, {"json", no_argument, NULL, 'j'},
      {"ranks", required_argument, NULL, 'r'}, {"copy-bw", required_argument, NULL, 'c'},
      {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "x:dn:jr:c:h", opts, NULL)) != -1) {
    switch (c) {
      case 'x':
        a->xml = optarg;
        break;
      case 'd':
        a->detect = 1;
        break;
      case 'n':
        r->nnodes = atoi(optarg);
        break;
      case 'j':
        a->json = 1;
        break;
      case 'r':
        a->nranks = atoi(optarg);
        break;
      case 'c':
        r->copy_bw = (float)atof(optarg);
        break;
      case 'h':
        usage(stdout);
        return -1;
      default:
        usage(stderr);
        return 2;
    }
  }
  if ((a->xml == NULL) == !a->detect || r->nnodes < 1 || r->nnodes > 4096 || optind != argc ||
      !(r->copy_bw > 0)) {
    usage(stderr);
    return 2;
  }
  return 0;
}

int main(int argc, char** argv) {
  struct args a = {0};
  struct report* r = calloc(1, sizeof(*r));
  if (r == NULL) return 1;
  r->nnodes = 1;
  r->copy_bw = 10;
  struct explain_req ex;
  int st = explain_take_args(&argc, argv, &ex);
  if (st == 0) st = parse_args(argc, argv, &a, r);
  if (st != 0) {
    free(r);
    return st < 0 ? 0 : st;
  }
  const char* xml = a.xml;
  r->source = xml ? xml : "detect";
  ncclResult_t res = xml ? weft_topo_load_file(xml, &r->sys) : weft_topo_detect(&r->sys);
  if (res != ncclSuccess) {
    fprintf(stderr, "weft-topo: cannot %s%s: %s\n", xml ? "load " : "detect the topology", xml ? xml : "",
            weft_log_last_error());
    free(r);
    return 1;
  }
  int rc = build(r, a.nranks);
  if (rc == 0 && ex.wanted) {
    explain_print(r, &ex, stdout);
  } else if (rc == 0) {
    if (a.json)
      report_json(r, stdout);
    else
      report_text(r, stdout);
  } else {
    fprintf(stderr, "weft-topo: %s\n", weft_log_last_error());
  }
  weft_topo_channels_destroy(r->ch);
  weft_topo_system_destroy(r->sys);
  free(r);
  return rc == 0 ? 0 : 1;
}
