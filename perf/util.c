/* Small helpers of the perf harness: launcher environment, bandwidth and number formatting, and
 * per-rank counts. */
#include <errno.h>
#include <stdlib.h>

#include "common.h"

void perf_bw(double bytes, double factor, double sec, double* algbw, double* busbw) {
  *algbw = bytes / 1.0e9 / sec;
  *busbw = *algbw * factor;
}

/* Per-rank element count rounded down to a multiple of 16 bytes (may be 0 for small sizes). */
size_t perf_base_count(size_t count, size_t elsize, int nranks) {
  size_t align = 16 / elsize;
  return (count / (size_t)nranks) & ~(align - 1);
}

/* Fits v in width characters: 2, 1 then 0 decimals, else exponent notation. */
void perf_float_str(double v, int width, char* out) {
  if (snprintf(out, (size_t)width + 1, "%*.2f", width, v) <= width) return;
  if (snprintf(out, (size_t)width + 1, "%*.1f", width, v) <= width) return;
  if (snprintf(out, (size_t)width + 1, "%*.0f", width, v) <= width) return;
  snprintf(out, (size_t)width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

static int parse_nonneg(const char* s, int* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < 0 || v > 1 << 24) return -1;
  *out = (int)v;
  return 0;
}

/* Launchers in priority order: ours, Open MPI, PMI (MPICH, Hydra), Slurm, torchrun. Slurm's step
 * size is preferred to SLURM_NTASKS, which a batch script also sees for the whole allocation. */
static const struct {
  const char *name, *rank, *size, *size2, *local, *local2;
} launchers[] = {
    {"weftrun", "WEFT_RANK", "WEFT_NRANKS", NULL, "WEFT_LOCAL_RANK", NULL},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, "OMPI_COMM_WORLD_LOCAL_RANK", NULL},
    {"PMI", "PMI_RANK", "PMI_SIZE", NULL, "MPI_LOCALRANKID", "PMI_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_LOCALID", NULL},
    {"torchrun", "RANK", "WORLD_SIZE", NULL, "LOCAL_RANK", NULL},
};

static const char* env2(const char* a, const char* b) {
  const char* v = a ? getenv(a) : NULL;
  if (!v && b) v = getenv(b);
  return v;
}

int perf_world_detect(struct perf_world* w, char* err, size_t errlen) {
  w->nprocs = 1;
  w->proc = 0;
  w->local_rank = 0;
  w->source = "none";
  for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
    const char* rank = getenv(launchers[i].rank);
    const char* size = env2(launchers[i].size, launchers[i].size2);
    if (!rank || !size) continue;
    const char* local = env2(launchers[i].local, launchers[i].local2);
    if (parse_nonneg(rank, &w->proc) || parse_nonneg(size, &w->nprocs) || w->nprocs < 1 ||
        w->proc >= w->nprocs || (local && parse_nonneg(local, &w->local_rank))) {
      snprintf(err, errlen, "invalid %s environment: %s=%s %s=%s (rank must be in [0, size))",
               launchers[i].name, launchers[i].rank, rank, launchers[i].size, size);
      return -1;
    }
    w->source = launchers[i].name;
    return 0;
  }
  return 0;
}
