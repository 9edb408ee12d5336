/* GPUs a job would see twice: CUDA_VISIBLE_DEVICES naming one device more than once, or more ranks
 * on this host than GPUs. NVIDIA NCCL refuses two ranks on one GPU ("Duplicate GPU detected");
 * Weft runs them, each with its share of the SMs, so for Weft it is a warning. */
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"

#define MAX_VISIBLE 64

/* Splits CUDA_VISIBLE_DEVICES into items; returns the count and the first repeated item. */
static int split_visible(const char* list, char items[][64], int max, const char** dup) {
  int n = 0;
  *dup = NULL;
  for (const char* s = list; *s && n < max;) {
    size_t len = strcspn(s, ",");
    while (len && (*s == ' ')) s++, len--;
    snprintf(items[n], 64, "%.*s", (int)(len < 63 ? len : 63), s);
    for (int j = 0; j < n && *dup == NULL; j++)
      if (items[n][0] && strcmp(items[j], items[n]) == 0) *dup = items[n];
    n++;
    s += len;
    if (*s == ',') s++;
  }
  return n;
}

void weft_doctor_check_gpus(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  int gpus = weft_doctor_count_gpus();
  const char* visible = weft_doctor_env_get(o, "CUDA_VISIBLE_DEVICES");
  static char items[MAX_VISIBLE][64];
  const char* dup = NULL;
  int nvis = visible ? split_visible(visible, items, MAX_VISIBLE, &dup) : gpus;
  if (dup != NULL) {
    weft_doctor_add(
        r, "gpus.duplicate", WEFT_DOCTOR_WARN,
        "List each GPU once in CUDA_VISIBLE_DEVICES (give each rank its own), or keep it if sharing a "
        "GPU between ranks is intended (Weft only)",
        "CUDA_VISIBLE_DEVICES=%s names GPU %s twice: ranks on those two indices share one GPU; NVIDIA "
        "NCCL fails their init with 'Duplicate GPU detected', Weft runs them sharing its SMs",
        visible, dup);
    return;
  }
  if (gpus == 0) {
    weft_doctor_add(r, "gpus.duplicate", WEFT_DOCTOR_OK, NULL,
                    "no NVIDIA GPU on the PCI bus: ranks run on the host backend");
    return;
  }
  const char* from = NULL;
  int ranks = weft_doctor_local_ranks(o, &from);
  if (ranks > nvis) {
    weft_doctor_add(r, "gpus.duplicate", WEFT_DOCTOR_WARN,
                    "Run at most one rank per GPU on this host (or accept sharing: Weft only)",
                    "%d local rank(s) (%s) but %d visible GPU(s): some ranks share a GPU; NVIDIA NCCL fails "
                    "with 'Duplicate GPU detected', Weft gives each its share of the SMs",
                    ranks, from, nvis);
    return;
  }
  weft_doctor_add(r, "gpus.duplicate", WEFT_DOCTOR_OK, NULL, "%d GPU(s) on the bus, %d visible, each once",
                  gpus, nvis);
}
