/* Ring bodies + host prims + connectors with ranks as threads and connectors in process memory:
 * every collective for 1..8 ranks, counts 0/1/7/odd/large, 1-4 channels, Simple and LL, all
 * datatypes and ops, in place and out of place, against a reference computed here. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "collectives/host/exec.h"
#include "collectives/host/interleave.h"
#include "collectives/plan.h"
#include "collectives/reduce.h"

#define SIMPLE_BYTES (256 * 1024) /* small FIFOs so even moderate counts take many steps */
#define LL_BYTES (64 * 1024)

static uint64_t seed;
static int interleave; /* run a rank's channels interleaved in its thread, as network rings do */

struct cfg {
  int coll, dtype, op, nranks, nch, proto, in_place;
  size_t count;
};

struct rank_ctx {
  const struct cfg* cfg;
  int rank;
  struct weft_plan plan;
  struct weft_conn send[WEFT_PLAN_MAX_CHANNELS], recv[WEFT_PLAN_MAX_CHANNELS];
  const void* in;
  void* out;
  volatile uint32_t abort_flag;
  ncclResult_t res;
};

/* Input element i of rank r as a small integer (values chosen so float results are exact). */
static int64_t input_val(const struct cfg* c, int r, size_t i) {
  uint64_t h =
      (seed ^ (uint64_t)r * 0x9e3779b97f4a7c15ull ^ i * 0xbf58476d1ce4e5b9ull) * 0x94d049bb133111ebull;
  h ^= h >> 31;
  int fp8 = c->dtype == WEFT_DT_E4M3 || c->dtype == WEFT_DT_E5M2;
  int isfloat = c->dtype >= WEFT_DT_F16 && c->dtype != WEFT_DT_I64 && c->dtype != WEFT_DT_U64;
  if (c->op == WEFT_RED_PROD && isfloat) return (int64_t)(h % 4) - 1; /* -1, 0, 1, 2 */
  if (c->dtype == WEFT_DT_E5M2) return (int64_t)(h % 2);
  if (fp8) return (int64_t)(h % 3);
  if (c->dtype == WEFT_DT_BF16) return (int64_t)(h % 31) - 15; /* 8 ranks: |sums| <= 120 < 2^8 */
  if (c->dtype == WEFT_DT_U8 || c->dtype == WEFT_DT_U32 || c->dtype == WEFT_DT_U64) return (int64_t)(h % 100);
  return (int64_t)(h % 101) - 50;
}

static int is_float(int dt) {
  return dt == WEFT_DT_F16 || dt == WEFT_DT_F32 || dt == WEFT_DT_F64 || dt >= WEFT_DT_BF16;
}

/* The element's bytes for value v (doubles for float types, modular for integers). */
static uint64_t encode(int dt, double v) {
  uint64_t bits = 0;
  float f = (float)v;
  switch (dt) {
    case WEFT_DT_F16:
      return weft_f32_to_f16(f);
    case WEFT_DT_BF16:
      return weft_f32_to_bf16(f);
    case WEFT_DT_E4M3:
      return weft_f32_to_e4m3(f);
    case WEFT_DT_E5M2:
      return weft_f32_to_e5m2(f);
    case WEFT_DT_F32:
      memcpy(&bits, &f, 4);
      return bits;
    case WEFT_DT_F64:
      memcpy(&bits, &v, 8);
      return bits;
    default:
      return (uint64_t)(int64_t)v;
  }
}

static const uint64_t SCALAR_X2 = 2; /* PreMulSum scalar used here: 2, exact everywhere */

static uint64_t scalar_bits(int dt) { return is_float(dt) ? encode(dt, 2.0) : SCALAR_X2; }

static void store(void* buf, int dt, size_t i, uint64_t bits) {
  memcpy((char*)buf + i * weft_dt_size(dt), &bits, weft_dt_size(dt));
}
static uint64_t load(const void* buf, int dt, size_t i) {
  uint64_t bits = 0;
  memcpy(&bits, (const char*)buf + i * weft_dt_size(dt), weft_dt_size(dt));
  return bits;
}
static uint64_t mask_of(int dt) {
  return weft_dt_size(dt) == 8 ? ~0ull : (1ull << (8 * weft_dt_size(dt))) - 1;
}

/* Reference reduction over ranks of element i's inputs (j: element index in each rank's input). */
static uint64_t ref_reduce(const struct cfg* c, size_t j) {
  int k = c->nranks, dt = c->dtype;
  if (is_float(dt)) {
    double acc = 0;
    for (int r = 0; r < k; r++) {
      double x = (double)input_val(c, r, j);
      if (c->op == WEFT_RED_PREMULSUM) x *= 2;
      if (r == 0)
        acc = x;
      else if (c->op == WEFT_RED_PROD)
        acc *= x;
      else if (c->op == WEFT_RED_MAX)
        acc = x > acc ? x : acc;
      else if (c->op == WEFT_RED_MIN)
        acc = x < acc ? x : acc;
      else
        acc += x;
    }
    return encode(dt, acc);
  }
  uint64_t m = mask_of(dt), acc = 0;
  int is_signed = dt == WEFT_DT_I8 || dt == WEFT_DT_I32 || dt == WEFT_DT_I64;
  for (int r = 0; r < k; r++) {
    int64_t v = input_val(c, r, j);
    uint64_t x = (uint64_t)v;
    if (c->op == WEFT_RED_PREMULSUM) x *= SCALAR_X2;
    if (r == 0)
      acc = x;
    else if (c->op == WEFT_RED_PROD)
      acc *= x;
    else if (c->op == WEFT_RED_MAX)
      acc = (int64_t)x > (int64_t)acc ? x : acc;
    else if (c->op == WEFT_RED_MIN)
      acc = (int64_t)x < (int64_t)acc ? x : acc;
    else
      acc += x;
  }
  acc &= m;
  if (c->op == WEFT_RED_SUMPOSTDIV) {
    int bits = 8 * (int)weft_dt_size(dt);
    if (is_signed) {
      int64_t sv = bits == 64 ? (int64_t)acc : (int64_t)(acc << (64 - bits)) >> (64 - bits);
      acc = (uint64_t)(sv / k) & m;
    } else {
      acc = (acc / (uint64_t)k) & m;
    }
  }
  return acc;
}

static void* rank_main(void* arg) {
  struct rank_ctx* x = arg;
  struct weft_waiter w;
  weft_waiter_init(&w, &x->abort_flag, x->rank, x->cfg->nranks);
  x->res = ncclSuccess;
  if (interleave && x->cfg->nranks > 1 && x->plan.nchannels > 1) {
    void* stacks[WEFT_PLAN_MAX_CHANNELS] = {0};
    x->res = weft_host_run_interleaved(x->plan.work, x->plan.nchannels, x->send, x->recv, &w, x->in, x->out,
                                       stacks);
    weft_host_interleave_free(stacks, WEFT_PLAN_MAX_CHANNELS);
    return NULL;
  }
  for (int c = 0; c < x->plan.nchannels && x->res == ncclSuccess; c++) {
    int one = x->cfg->nranks == 1;
    x->res = weft_host_run_work(&x->plan.work[c], one ? NULL : &x->send[c], one ? NULL : &x->recv[c], &w, c,
                                x->in, x->out);
  }
  return NULL;
}

static size_t in_elems(const struct cfg* c) {
  return c->coll == WEFT_COLL_REDUCESCATTER ? c->count * c->nranks : c->count;
}
static size_t out_elems(const struct cfg* c) {
  return c->coll == WEFT_COLL_ALLGATHER ? c->count * c->nranks : c->count;
}

/* Run one configuration and check every rank's output; returns the number of wrong elements. */
static long run_cfg(const struct cfg* c) {
  int k = c->nranks, dt = c->dtype;
  size_t es = weft_dt_size(dt);
  struct rank_ctx* ctx = calloc(k, sizeof(*ctx));
  struct weft_conn_mem *mem[WEFT_PLAN_MAX_CHANNELS][8] = {{0}}, *peer_mem[WEFT_PLAN_MAX_CHANNELS][8] = {{0}};
  char** bufs = calloc(k, sizeof(char*));
  char** outs = calloc(k, sizeof(char*));
  const void** ins = calloc(k, sizeof(void*));
  setenv("NCCL_PROTO", c->proto == WEFT_PROTO_LL ? "LL" : "Simple", 1);
  char nch[8];
  snprintf(nch, sizeof(nch), "%d", c->nch);
  setenv("NCCL_MIN_NCHANNELS", nch, 1);
  setenv("NCCL_MAX_NCHANNELS", nch, 1);
  for (int r = 0; r < k; r++) {
    size_t ie = in_elems(c), oe = out_elems(c);
    /* Out-of-place: separate buffers; in place: input inside the output as NCCL defines. */
    bufs[r] = malloc((ie + oe + 1) * es);
    outs[r] = bufs[r] + ie * es;
    if (c->in_place) {
      outs[r] = bufs[r];
      if (c->coll == WEFT_COLL_ALLGATHER)
        ins[r] = outs[r] + (size_t)r * c->count * es;
      else
        ins[r] = outs[r];
    } else {
      ins[r] = bufs[r];
    }
    memset(outs[r], 0xa5, oe * es);
    for (size_t i = 0; i < ie; i++) store((void*)ins[r], dt, i, encode(dt, (double)input_val(c, r, i)));
    struct weft_task t = {.coll = c->coll, .count = c->count, .dtype = dt, .root = k > 2 ? 1 : 0};
    t.op.kind = c->op;
    t.op.scalar = scalar_bits(dt);
    t.op.divisor = k;
    struct weft_plan_params pp = {.nranks = k,
                                  .rank = r,
                                  .nchannels = c->nch,
                                  .simple_slot = SIMPLE_BYTES / WEFT_NSTEPS,
                                  .ll_slot = LL_BYTES / WEFT_NSTEPS,
                                  .nnodes = 1};
    weft_plan_read_env(&pp);
    weft_plan_coll(&pp, NULL, &t, &ctx[r].plan);
    ctx[r].cfg = c;
    ctx[r].rank = r;
    ctx[r].in = ins[r];
    ctx[r].out = outs[r];
  }
  for (int ch = 0; ch < c->nch && k > 1; ch++)
    for (int r = 0; r < k; r++) {
      struct weft_conn_handle h;
      /* Connector r -> r+1: owned by the receiver, attached by the sender. */
      weft_conn_mem_create(SIMPLE_BYTES, LL_BYTES, 0, "test", &mem[ch][r], &h);
      weft_conn_mem_attach(&h, &peer_mem[ch][r]);
    }
  for (int ch = 0; ch < c->nch && k > 1; ch++)
    for (int r = 0; r < k; r++) {
      weft_conn_bind(&ctx[r].send[ch], peer_mem[ch][r], (r + 1) % k);
      weft_conn_bind(&ctx[r].recv[ch], mem[ch][(r + k - 1) % k], (r + k - 1) % k);
    }
  pthread_t th[8];
  for (int r = 0; r < k; r++) pthread_create(&th[r], NULL, rank_main, &ctx[r]);
  for (int r = 0; r < k; r++) pthread_join(th[r], NULL);
  long bad = 0;
  int root = k > 2 ? 1 : 0;
  for (int r = 0; r < k; r++) {
    if (ctx[r].res != ncclSuccess) bad++;
    for (size_t i = 0; i < out_elems(c) && bad < 10; i++) {
      uint64_t want;
      size_t blk = c->count ? i / c->count : 0, j = c->count ? i % c->count : 0;
      switch (c->coll) {
        case WEFT_COLL_ALLREDUCE:
          want = ref_reduce(c, i);
          break;
        case WEFT_COLL_REDUCE:
          if (r != root) continue;
          want = ref_reduce(c, i);
          break;
        case WEFT_COLL_REDUCESCATTER:
          want = ref_reduce(c, (size_t)r * c->count + i);
          break;
        case WEFT_COLL_ALLGATHER:
          want = encode(dt, (double)input_val(c, (int)blk, j));
          break;
        default:
          want = encode(dt, (double)input_val(c, root, i));
          break;
      }
      uint64_t got = load(outs[r], dt, i);
      if (got != (want & mask_of(dt))) {
        if (bad < 3)
          fprintf(stderr,
                  "coll %d dt %d op %d k %d nch %d proto %d inplace %d count %zu: rank %d elem %zu got "
                  "0x%llx want 0x%llx\n",
                  c->coll, dt, c->op, k, c->nch, c->proto, c->in_place, c->count, r, i,
                  (unsigned long long)got, (unsigned long long)want);
        bad++;
      }
    }
  }
  for (int ch = 0; ch < WEFT_PLAN_MAX_CHANNELS; ch++)
    for (int r = 0; r < 8; r++) {
      weft_conn_mem_release(mem[ch][r]);
      weft_conn_mem_release(peer_mem[ch][r]);
    }
  for (int r = 0; r < k; r++) free(bufs[r]);
  free(bufs);
  free(outs);
  free(ins);
  free(ctx);
  return bad;
}

static int colls[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_ALLGATHER, WEFT_COLL_REDUCESCATTER, WEFT_COLL_BROADCAST,
                      WEFT_COLL_REDUCE};

int main(void) {
  seed = (uint64_t)time(NULL) * 6364136223846793005ull + 1442695040888963407ull;
  fprintf(stderr, "seed %llu\n", (unsigned long long)seed);
  long bad = 0;
  int runs = 0;
  /* Shapes: every collective, rank count, channel count and protocol on small and odd counts. */
  int ks[] = {1, 2, 3, 4, 5, 8};
  size_t counts[] = {0, 1, 7, 5003};
  for (int ki = 0; ki < 6; ki++)
    for (int ci = 0; ci < 5; ci++)
      for (int ni = 0; ni < 4; ni++)
        for (int proto = 0; proto < 2; proto++) {
          struct cfg c = {colls[ci],         WEFT_DT_F32, WEFT_RED_SUM, ks[ki],
                          1 + (ni + ki) % 4, proto,       ni == 2,      counts[ni]};
          bad += run_cfg(&c);
          runs++;
        }
  /* Every datatype x op on the reducing collectives. */
  for (int dt = 0; dt < WEFT_DT_COUNT; dt++)
    for (int op = WEFT_RED_SUM; op <= WEFT_RED_SUMPOSTDIV; op++) {
      if (op == WEFT_RED_SUMPOSTDIV && is_float(dt)) continue;
      for (int ci = 0; ci < 5; ci += (ci == 2 ? 2 : 1)) {
        struct cfg c = {colls[ci], dt, op, 3 + (dt + op) % 3, 1 + op % 3, (dt + ci) % 2, dt % 2, 999};
        bad += run_cfg(&c);
        runs++;
      }
    }
  /* Large counts: many loops of the ring and many FIFO wraps. */
  struct cfg big[] = {
      {WEFT_COLL_ALLREDUCE, WEFT_DT_F32, WEFT_RED_SUM, 4, 2, WEFT_PROTO_SIMPLE, 0, 1000003},
      {WEFT_COLL_ALLREDUCE, WEFT_DT_I32, WEFT_RED_MAX, 3, 1, WEFT_PROTO_LL, 1, 1000003},
      {WEFT_COLL_ALLREDUCE, WEFT_DT_BF16, WEFT_RED_SUM, 8, 4, WEFT_PROTO_SIMPLE, 1, 1000003},
      {WEFT_COLL_ALLGATHER, WEFT_DT_U8, WEFT_RED_SUM, 5, 3, WEFT_PROTO_LL, 0, 200003},
      {WEFT_COLL_REDUCESCATTER, WEFT_DT_F64, WEFT_RED_SUM, 4, 2, WEFT_PROTO_SIMPLE, 1, 250001},
      {WEFT_COLL_BROADCAST, WEFT_DT_I64, WEFT_RED_SUM, 5, 2, WEFT_PROTO_SIMPLE, 0, 300007},
      {WEFT_COLL_REDUCE, WEFT_DT_F16, WEFT_RED_SUM, 8, 1, WEFT_PROTO_LL, 0, 100003},
  };
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++, runs++) bad += run_cfg(&big[i]);
  /* No spinning: every wait that is not satisfied at once sleeps on the futex doorbell. */
  setenv("WEFT_SPIN_USEC", "0", 1);
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++, runs++) bad += run_cfg(&big[i]);
  /* Channels interleaved step by step in each rank's thread: sleeping, then spinning waits. */
  interleave = 1;
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++, runs++) bad += run_cfg(&big[i]);
  unsetenv("WEFT_SPIN_USEC");
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++, runs++) bad += run_cfg(&big[i]);
  for (int ki = 1; ki < 6; ki++)
    for (int ci = 0; ci < 5; ci++)
      for (int proto = 0; proto < 2; proto++, runs++) {
        struct cfg c = {colls[ci], WEFT_DT_I32, WEFT_RED_SUM, ks[ki], 2 + (ci + ki) % 3, proto, ci % 2, 5003};
        bad += run_cfg(&c);
      }
  fprintf(stderr, "%d configurations\n", runs);
  EXPECT_EQ_INT(bad, 0);
  return test_finish("prims_ring");
}
