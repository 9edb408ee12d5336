/* Detection helpers shared inside graph/ (NVML through dlopen). */
#ifndef WEFT_GRAPH_DETECT_H
#define WEFT_GRAPH_DETECT_H

#define WEFT_NVML_MAX_LINKS 18

struct weft_nvml_gpu {
  char busid[16]; /* "0000:18:00.0" */
  int sm;         /* compute capability x 10, 0 unknown */
  int ntargets;
  struct {
    char busid[16];
    int count;
  } targets[WEFT_NVML_MAX_LINKS]; /* active NVLinks aggregated per remote bus id */
};

/* Fills out[] with the GPUs NVML reports; 0 when NVML is absent or reports none. */
int weft_topo_nvml_gpus(struct weft_nvml_gpu* out, int max);

#endif
