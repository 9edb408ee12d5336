/* Inputs and expected results for -c: each rank's input is a pure function of (seed, rank, element),
 * so any rank can compute every rank's input, and the expected output, on the host. Values are small
 * integers, sized per type and op so that every partial sum or product is exact in any order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define PERF_MAX_RANGE 1048576.0

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static uint64_t rank_key(const struct perf_data* d, int rank) {
  return mix64(d->seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank + 1);
}

void perf_data_init(struct perf_data* d, const struct perf_type* t, int op, int nranks, int root,
                    uint64_t seed, size_t count) {
  memset(d, 0, sizeof(*d));
  d->t = t;
  d->op = op;
  d->nranks = nranks;
  d->root = root;
  d->seed = seed;
  d->count = count;
  d->active = nranks;
  double wide = t->budget < PERF_MAX_RANGE ? t->budget : PERF_MAX_RANGE;
  switch (op) {
    case ncclSum:
    case ncclAvg:
    case PERF_OP_PREMULSUM: {
      /* Few-bit types get only max_active non-zero contributions per element, so sums stay exact. */
      if (t->max_active && t->max_active < nranks) d->active = t->max_active;
      double scale = op == PERF_OP_PREMULSUM ? 2 : 1;
      d->kind = PERF_GEN_SUM;
      d->range = floor(t->budget / (d->active * scale));
      if (d->range > PERF_MAX_RANGE) d->range = PERF_MAX_RANGE;
      if (d->range < 1) d->range = 1;
      break;
    }
    case ncclProd:
      d->kind = PERF_GEN_PROD; /* +-1 everywhere and one +-2 per element: |product| <= 2 */
      d->range = 2;
      break;
    case ncclMax:
    case ncclMin:
      d->kind = PERF_GEN_MINMAX;
      d->range = wide;
      break;
    default:
      d->kind = PERF_GEN_COPY;
      d->range = wide;
      break;
  }
}

static inline double draw(const struct perf_data* d, uint64_t h) {
  uint64_t r = (uint64_t)d->range;
  if (d->t->kind == PERF_KIND_UINT) return (double)(h % (r + 1));
  return (double)(h % (2 * r + 1)) - d->range;
}

static inline double gen_keyed(const struct perf_data* d, uint64_t key, int rank, size_t idx) {
  uint64_t h = mix64(key ^ ((uint64_t)idx * 0xd1b54a32d192ed03ull));
  size_t n = (size_t)d->nranks;
  switch (d->kind) {
    case PERF_GEN_SUM:
      if ((idx % n + (size_t)rank) % n >= (size_t)d->active) return 0;
      return draw(d, h);
    case PERF_GEN_PROD: {
      double mag = idx % n == (size_t)rank ? 2 : 1;
      return d->t->kind != PERF_KIND_UINT && (h & 1) ? -mag : mag;
    }
    default:
      return draw(d, h);
  }
}

double perf_gen(const struct perf_data* d, int rank, size_t idx) {
  return gen_keyed(d, rank_key(d, rank), rank, idx);
}

double perf_premul_scalar(int rank) { return rank & 1 ? 2 : 1; }

void perf_fill(const struct perf_data* d, void* buf, size_t n, int src_rank, size_t first) {
  uint64_t key = rank_key(d, src_rank);
  for (size_t i = 0; i < n; i++) perf_type_store(d->t, buf, i, gen_keyed(d, key, src_rank, first + i));
}

/* Integer avg is the exact sum divided by nranks, truncated toward zero as C does. */
static double finish_avg(const struct perf_data* d, double sum) {
  if (d->t->kind == PERF_KIND_FLOAT) return sum / d->nranks;
  if (d->t->kind == PERF_KIND_INT) return (double)((int64_t)sum / d->nranks);
  return (double)((uint64_t)sum / (uint64_t)d->nranks);
}

static double reduce_at(const struct perf_data* d, const uint64_t* keys, size_t idx) {
  double acc = gen_keyed(d, keys[0], 0, idx);
  if (d->op == PERF_OP_PREMULSUM) acc *= perf_premul_scalar(0);
  for (int r = 1; r < d->nranks; r++) {
    double v = gen_keyed(d, keys[r], r, idx);
    switch (d->op) {
      case ncclProd:
        acc *= v;
        break;
      case ncclMax:
        acc = v > acc ? v : acc;
        break;
      case ncclMin:
        acc = v < acc ? v : acc;
        break;
      case PERF_OP_PREMULSUM:
        acc += v * perf_premul_scalar(r);
        break;
      default:
        acc += v;
        break;
    }
  }
  return d->op == ncclAvg ? finish_avg(d, acc) : acc;
}

void perf_fill_reduced(const struct perf_data* d, void* buf, size_t n, size_t first) {
  uint64_t* keys = malloc(sizeof(uint64_t) * (size_t)d->nranks);
  if (!keys) abort();
  for (int r = 0; r < d->nranks; r++) keys[r] = rank_key(d, r);
  for (size_t i = 0; i < n; i++) perf_type_store(d->t, buf, i, reduce_at(d, keys, first + i));
  free(keys);
}

/* avg on floating types may pre-multiply each input by 1/nranks (as NCCL does), which rounds once
 * per term and per partial sum: allow that many units of the data's scale. */
static double avg_tolerance(const struct perf_data* d, double expected) {
  return d->t->eps * (d->active + 2) * (d->active * d->range / d->nranks + fabs(expected));
}

size_t perf_compare(const struct perf_data* d, const void* got, const void* expected, size_t n) {
  size_t es = (size_t)d->t->size;
  if (memcmp(got, expected, n * es) == 0) return 0;
  int tolerant = d->t->kind == PERF_KIND_FLOAT && d->op == ncclAvg;
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp((const char*)got + i * es, (const char*)expected + i * es, es) == 0) continue;
    if (d->t->kind != PERF_KIND_FLOAT) {
      wrong++;
      continue;
    }
    double g = perf_type_load(d->t, got, i), e = perf_type_load(d->t, expected, i);
    if (g == e) continue; /* +0 and -0 */
    if (tolerant && fabs(g - e) <= avg_tolerance(d, e)) continue;
    wrong++;
  }
  return wrong;
}
