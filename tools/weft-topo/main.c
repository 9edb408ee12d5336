/* weft-topo: load (--xml), convert from hwloc XML (--hwloc) or detect (--detect) a node's topology,
 * search rings and trees, build the channels of an N-node job and print the tuning model's
 * predictions, as text or JSON; with hwloc, what hwloc saw comes first. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "util/hwloc.h"
#include "util/log.h"

const size_t report_sizes[REPORT_NSIZES] = {8, 1 << 20, (size_t)1 << 30};
const int report_funcs[REPORT_NFUNCS] = {WEFT_FUNC_ALLREDUCE, WEFT_FUNC_ALLGATHER, WEFT_FUNC_REDUCESCATTER,
                                         WEFT_FUNC_BROADCAST};

static void usage(FILE* f) {
  fprintf(f,
          "usage: weft-topo (--xml FILE | --hwloc FILE | --detect) [--nodes N] [--json] [--ranks N]\n"
          "                 [--copy-bw GBS]\n"
          "  --xml FILE    NCCL topology XML to load (as NCCL_TOPO_FILE)\n"
          "  --hwloc FILE  hwloc XML (lstopo --of xml) to convert, as WEFT_HWLOC_XML would\n"
          "  --detect      detect this machine (hwloc, else sysfs; NVML when present)\n"
          "  --nodes N     job of N identical nodes joined by their NICs (default 1)\n"
          "  --json        machine-readable output (schema in docs/weft-topo.md)\n"
          "  --ranks N     CPU-only systems: host-backend ranks to place over the NUMA nodes, in\n"
          "                proportion to their CPUs (this process's allowed ones with --detect;\n"
          "                default 2 per NUMA node)\n"
          "  --copy-bw G   host ranks' memory copy bandwidth in GB/s (default 10)\n"
          "  --explain C S only the tuning explanation of collective C at S bytes (K/M/G), as\n"
          "                NCCL_DEBUG_SUBSYS=TUNING logs it\n");
}

static int place_host_ranks(struct report* r, int nranks) {
  int ncpu = weft_topo_count(r->sys, WEFT_NODE_CPU);
  if (nranks <= 0) nranks = 2 * (ncpu > 0 ? ncpu : 1);
  int* numa = calloc(nranks, sizeof(int));
  if (numa == NULL) return -1;
  cpu_set_t mine;
  int here = strcmp(r->detection, "file") != 0 && strcmp(r->source, "detect") == 0 &&
             sched_getaffinity(0, sizeof(mine), &mine) == 0;
  ncclResult_t res = weft_topo_place_host_ranks(r->sys, 0, nranks, here ? &mine : NULL, numa);
  if (res == ncclSuccess) res = weft_topo_add_host_ranks(r->sys, 0, nranks, numa, r->copy_bw);
  free(numa);
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
  const char* hwloc;
  int detect, json, nranks;
};

/* Returns 0, or the exit status for a usage error / --help. */
static int parse_args(int argc, char** argv, struct args* a, struct report* r) {
  static const struct option opts[] = {{"xml", required_argument, NULL, 'x'},
                                       {"hwloc", required_argument, NULL, 'w'},
                                       {"detect", no_argument, NULL, 'd'},
                                       {"nodes", required_argument, NULL, 'n'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"ranks", required_argument, NULL, 'r'},
                                       {"copy-bw", required_argument, NULL, 'c'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "x:w:dn:jr:c:h", opts, NULL)) != -1) {
    switch (c) {
      case 'x':
        a->xml = optarg;
        break;
      case 'w':
        a->hwloc = optarg;
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
  if ((a->xml != NULL) + (a->hwloc != NULL) + a->detect != 1 || r->nnodes < 1 || r->nnodes > 4096 ||
      optind != argc || !(r->copy_bw > 0)) {
    usage(stderr);
    return 2;
  }
  return 0;
}

/* The system from the chosen source; 0, or -1 after saying why. */
static int load(const struct args* a, struct report* r) {
  ncclResult_t res;
  if (a->xml) {
    r->source = a->xml;
    r->detection = "file";
    res = weft_topo_load_file(a->xml, &r->sys);
  } else if (a->hwloc) {
    r->source = a->hwloc;
    r->detection = "hwloc";
    res = weft_topo_detect_hwloc(WEFT_HWLOC_XML, a->hwloc, &r->sys);
  } else {
    r->source = "detect";
    res = weft_topo_detect(&r->sys);
    r->detection = weft_topo_detect_method();
  }
  if (res == ncclSuccess) return 0;
  fprintf(stderr, "weft-topo: cannot %s%s: %s\n", a->detect ? "detect the topology" : "load ",
          a->detect ? "" : r->source, weft_log_last_error());
  return -1;
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
  if (load(&a, r) != 0) {
    free(r);
    return 1;
  }
  int rc = build(r, a.nranks);
  if (rc == 0 && ex.wanted) {
    explain_print(r, &ex, stdout);
  } else if (rc == 0) {
    if (a.json) {
      report_json(r, stdout);
    } else {
      if (strcmp(r->detection, "hwloc") == 0)
        hwloc_view_print(a.hwloc ? WEFT_HWLOC_XML : WEFT_HWLOC_THIS_MACHINE, a.hwloc, stdout);
      report_text(r, stdout);
    }
  } else {
    fprintf(stderr, "weft-topo: %s\n", weft_log_last_error());
  }
  weft_topo_channels_destroy(r->ch);
  weft_topo_system_destroy(r->sys);
  weft_topo_graph_fini(&r->ring);
  weft_topo_graph_fini(&r->tree);
  free(r);
  return rc == 0 ? 0 : 1;
}
