/* weft-topo: what main.c computes and both printers (text, JSON) read. */
#ifndef WEFT_TOPO_REPORT_H
#define WEFT_TOPO_REPORT_H

#include <stdio.h>

#include "graph/graph.h"

#define REPORT_NSIZES 3
#define REPORT_NFUNCS 4

struct report {
  const char* source;    /* file name or "detect" */
  const char* detection; /* "file" (NCCL XML), "hwloc" or "sysfs" */
  int nnodes;
  struct weft_topo_system* sys;
  struct weft_topo_graph ring, tree;
  struct weft_topo_channels* ch;
  struct weft_tuning tuning;
  int host_ranks; /* 1: CPU ranks placed by the tool */
  float copy_bw;
};

extern const size_t report_sizes[REPORT_NSIZES];
extern const int report_funcs[REPORT_NFUNCS];

void report_text(struct report* r, FILE* f);
/* hwloc_view.c: prints hwloc's view of a source (enum weft_hwloc_source); -1 without hwloc. */
int hwloc_view_print(int source, const char* arg, FILE* f);
void report_json(struct report* r, FILE* f);

#endif
