/* libFuzzer target: NCCL topology and graph XML input must load or fail cleanly, and whatever
 * loads must survive paths, searches, dumps and a reload. */
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
  weft_topo_compute_paths(sys);
  weft_topo_system_destroy(sys);
  return 0;
}
