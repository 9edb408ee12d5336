/* libFuzzer target: NCCL topology and graph XML input must load or fail cleanly, and whatever
 * loads must survive paths, searches, channel building, dumps and a reload. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct weft_topo_system* sys = NULL;
  if (weft_topo_load_text((const char*)data, size, "fuzz", &sys) != ncclSuccess) return 0;
  char* dump = NULL;
  if (weft_topo_dump_string(sys, &dump) == ncclSuccess) {
    struct weft_topo_system* again = NULL;
    if (weft_topo_load_text(dump, strlen(dump), "fuzz-dump", &again) != ncclSuccess) abort();
    weft_topo_system_destroy(again);
  }
  free(dump);
  if (weft_topo_compute_paths(sys) == ncclSuccess && weft_topo_nlocal(sys, 0) > 0) {
    struct weft_topo_graph* g = malloc(2 * sizeof(*g));
    if (g && weft_topo_search_all(sys, 0, 2, &g[0], &g[1]) == ncclSuccess) {
      struct weft_topo_channels* ch = NULL;
      if (weft_topo_connect_channels(&g[0], &g[1], 3, &ch) != ncclSuccess) abort();
      weft_topo_channels_destroy(ch);
      /* Graph files too: dump this system's graphs and read them back. */
      const struct weft_topo_graph* gs[2] = {&g[0], &g[1]};
      char* text = NULL;
      if (weft_topo_graphs_to_string(sys, 0, gs, 2, &text) == ncclSuccess) {
        struct weft_topo_graph* back[2] = {&g[0], &g[1]};
        if (weft_topo_graphs_from_string(sys, 0, text, strlen(text), back, 2) != ncclSuccess) abort();
      }
      free(text);
    }
    if (g) {
      weft_topo_graph_fini(&g[0]);
      weft_topo_graph_fini(&g[1]);
    }
    free(g);
  }
  weft_topo_system_destroy(sys);
  return 0;
}
