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

/* Uniform integer in [0, span) without a division (multiply-shift range reduction). */
static inline uint64_t below(uint64_t h, uint64_t span) { return (uint64_t)(((__uint128_t)h * span) >> 64); }

static inline double draw(const struct perf_data* d, uint64_t h) {
  uint64_t r = (uint64_t)d->range;
  if (d->t->kind == PERF_KIND_UINT) return (double)below(h, r + 1);
  return (double)below(h, 2 * r + 1) - d->range;
}

static inline uint64_t elem_hash(uint64_t key, size_t idx) {
  return mix64(key ^ ((uint64_t)idx * 0xd1b54a32d192ed03ull));
}

/* out[i] = input of rank at element first+i; the kind is decided once per row, not per element. */
static void gen_row(const struct perf_data* d, int rank, size_t first, size_t n, double* out) {
  uint64_t key = rank_key(d, rank);
  size_t nr = (size_t)d->nranks;
  if (d->kind == PERF_GEN_PROD) {
    int sign = d->t->kind != PERF_KIND_UINT;
    for (size_t i = 0; i < n; i++) {
      size_t idx = first + i;
      double mag = idx % nr == (size_t)rank ? 2 : 1;
      out[i] = sign && (elem_hash(key, idx) & 1) ? -mag : mag;
    }
    return;
  }
  for (size_t i = 0; i < n; i++) out[i] = draw(d, elem_hash(key, first + i));
  if (d->kind == PERF_GEN_SUM && d->active < d->nranks) {
    /* Rank r contributes to element idx only when (idx + r) mod nranks < active. */
    size_t phase = (first % nr + (size_t)rank) % nr;
    for (size_t i = 0; i < n; i++) {
      if (phase >= (size_t)d->active) out[i] = 0;
      if (++phase == nr) phase = 0;
    }
  }
}

double perf_gen(const struct perf_data* d, int rank, size_t idx) {
  double v;
  gen_row(d, rank, idx, 1, &v);
  return v;
}

double perf_premul_scalar(int rank) { return rank & 1 ? 2 : 1; }

/* Stores n doubles into a typed buffer; the type is decided once, not per element. */
static void store_row(const struct perf_type* t, void* buf, const double* v, size_t n) {
  switch (t->type) {
    case ncclFloat32:
      for (size_t i = 0; i < n; i++) ((float*)buf)[i] = (float)v[i];
      break;
    case ncclFloat64:
      memcpy(buf, v, n * sizeof(double));
      break;
    case ncclInt32:
      for (size_t i = 0; i < n; i++) ((int32_t*)buf)[i] = (int32_t)(int64_t)v[i];
      break;
    default:
      for (size_t i = 0; i < n; i++) perf_type_store(t, buf, i, v[i]);
      break;
  }
}

#define PERF_CHUNK 4096

void perf_fill(const struct perf_data* d, void* buf, size_t n, int src_rank, size_t first) {
  double v[PERF_CHUNK];
  for (size_t done = 0; done < n; done += PERF_CHUNK) {
    size_t m = n - done < PERF_CHUNK ? n - done : PERF_CHUNK;
    gen_row(d, src_rank, first + done, m, v);
    store_row(d->t, (char*)buf + done * (size_t)d->t->size, v, m);
  }
}

/* Integer avg is the exact sum divided by nranks, truncated toward zero as C does. */
static double finish_avg(const struct perf_data* d, double sum) {
  if (d->t->kind == PERF_KIND_FLOAT) return sum / d->nranks;
  if (d->t->kind == PERF_KIND_INT) return (double)((int64_t)sum / d->nranks);
  return (double)((uint64_t)sum / (uint64_t)d->nranks);
}

static void accumulate(int op, double* acc, const double* v, size_t m, double scalar) {
  switch (op) {
    case ncclProd:
      for (size_t i = 0; i < m; i++) acc[i] *= v[i];
      break;
    case ncclMax:
      for (size_t i = 0; i < m; i++) acc[i] = v[i] > acc[i] ? v[i] : acc[i];
      break;
    case ncclMin:
      for (size_t i = 0; i < m; i++) acc[i] = v[i] < acc[i] ? v[i] : acc[i];
      break;
    default:
      for (size_t i = 0; i < m; i++) acc[i] += v[i] * scalar;
      break;
  }
}

/* Exact in double: every input and partial result is a small integer (see perf_data_init). */
void perf_fill_reduced(const struct perf_data* d, void* buf, size_t n, size_t first) {
  double acc[PERF_CHUNK], v[PERF_CHUNK];
  int premul = d->op == PERF_OP_PREMULSUM;
  for (size_t done = 0; done < n; done += PERF_CHUNK) {
    size_t m = n - done < PERF_CHUNK ? n - done : PERF_CHUNK;
    gen_row(d, 0, first + done, m, acc);
    if (premul)
      for (size_t i = 0; i < m; i++) acc[i] *= perf_premul_scalar(0);
    for (int r = 1; r < d->nranks; r++) {
      gen_row(d, r, first + done, m, v);
      accumulate(d->op, acc, v, m, premul ? perf_premul_scalar(r) : 1);
    }
    if (d->op == ncclAvg)
      for (size_t i = 0; i < m; i++) acc[i] = finish_avg(d, acc[i]);
    store_row(d->t, (char*)buf + done * (size_t)d->t->size, acc, m);
  }
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
