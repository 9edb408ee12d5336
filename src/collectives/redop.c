/* Reduction operators: ncclRedOpCreatePreMulSum / ncclRedOpDestroy, and the resolution of an
 * op for a datatype into what the engine runs (Avg becomes PreMulSum or SumPostDiv). */
#include "collectives/redop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/context.h"
#include "collectives/enqueue.h"
#include "util/check.h"
#include "util/log.h"

/* A slot of comm->user_ops that holds no op. */
#define FREE_SLOT WEFT_OP_KIND_COUNT

/* value in a binary float format with ebits exponent and mbits mantissa bits, round to nearest
 * even. e4m3 (fn) has no infinity: its top exponent holds finite values and 0x7f is NaN. */
static uint32_t encode_small(double v, int ebits, int mbits, int fn) {
  uint32_t sign = signbit(v) ? 1u << (ebits + mbits) : 0;
  uint32_t exp_all = (1u << ebits) - 1, mant_top = 1u << mbits;
  if (isnan(v)) return fn ? sign | 0x7f : sign | exp_all << mbits | mant_top >> 1;
  double a = fabs(v);
  int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, e = 0;
  if (a == 0) return sign;
  if (isinf(a)) return fn ? sign | 0x7f : sign | exp_all << mbits;
  frexp(a, &e);
  int exp = e - 1 < emin ? emin : e - 1;
  double r = rint(ldexp(a, mbits - exp)); /* steps of this binade; default rounding is to even */
  if (r >= 2.0 * mant_top) {
    r /= 2;
    exp++;
  }
  uint32_t mant = (uint32_t)r, biased = 0;
  if (mant >= mant_top) {
    biased = (uint32_t)(exp + bias);
    mant -= mant_top;
  }
  uint32_t max_biased = fn ? exp_all : exp_all - 1;
  if (biased > max_biased || (fn && biased == exp_all && mant == mant_top - 1)) {
    return fn ? sign | 0x7f : sign | exp_all << mbits;
  }
  return sign | biased << mbits | mant;
}

uint64_t weft_redop_encode(double value, ncclDataType_t dtype) {
  uint64_t bits = 0;
  switch (dtype) {
    case ncclInt8:
    case ncclInt32:
    case ncclInt64:
      return (uint64_t)(int64_t)value;
    case ncclUint8:
    case ncclUint32:
    case ncclUint64:
      return (uint64_t)value;
    case ncclFloat16:
      return encode_small(value, 5, 10, 0);
    case ncclBfloat16:
      return encode_small(value, 8, 7, 0);
    case ncclFloat8e4m3:
      return encode_small(value, 4, 3, 1);
    case ncclFloat8e5m2:
      return encode_small(value, 5, 2, 0);
    case ncclFloat32: {
      float f = (float)value;
      uint32_t u;
      memcpy(&u, &f, sizeof(u));
      return u;
    }
    case ncclFloat64:
      memcpy(&bits, &value, sizeof(bits));
      return bits;
    default:
      return 0;
  }
}

static int is_float(ncclDataType_t dtype) {
  return dtype == ncclFloat16 || dtype == ncclFloat32 || dtype == ncclFloat64 || dtype == ncclBfloat16 ||
         dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2;
}

static ncclResult_t resolve_user(struct weft_comm_ctx* comm, const char* name, ncclRedOp_t op,
                                 ncclDataType_t dtype, struct weft_redop* out) {
  long ix = (long)op - ncclNumOps;
  WEFT_ARG_CHECK(ix < comm->user_ops_capacity && comm->user_ops[ix].kind != FREE_SLOT,
                 "%s: reduction operation %d unknown to comm %p (never created or already destroyed)", name,
                 (int)op, (void*)comm);
  const struct weft_redop* u = &comm->user_ops[ix];
  WEFT_ARG_CHECK(u->dtype == dtype,
                 "%s: reduction operation %d was created for datatype %d, used with datatype %d", name,
                 (int)op, (int)u->dtype, (int)dtype);
  *out = *u;
  return ncclSuccess;
}

ncclResult_t weft_redop_resolve(struct weft_comm_ctx* comm, const char* name, ncclRedOp_t op,
                                ncclDataType_t dtype, struct weft_redop* out) {
  WEFT_ARG_CHECK((int)op >= 0, "%s: invalid reduction operation %d", name, (int)op);
  memset(out, 0, sizeof(*out));
  out->user_op = op;
  out->dtype = dtype;
  switch (op) {
    case ncclSum:
      out->kind = WEFT_OP_SUM;
      return ncclSuccess;
    case ncclProd:
      out->kind = WEFT_OP_PROD;
      return ncclSuccess;
    case ncclMax:
      out->kind = WEFT_OP_MAX;
      return ncclSuccess;
    case ncclMin:
      out->kind = WEFT_OP_MIN;
      return ncclSuccess;
    case ncclAvg:
      if (is_float(dtype)) {
        out->kind = WEFT_OP_PREMULSUM;
        out->scalar = weft_redop_encode(1.0 / comm->nranks, dtype);
      } else {
        out->kind = WEFT_OP_SUMPOSTDIV;
        out->divisor = (uint64_t)comm->nranks;
      }
      return ncclSuccess;
    default:
      return resolve_user(comm, name, op, dtype, out);
  }
}

/* Index of a free slot, growing the table when full; -1 when out of memory. */
static int free_slot(struct weft_comm_ctx* comm) {
  for (int i = 0; i < comm->user_ops_capacity; i++) {
    if (comm->user_ops[i].kind == FREE_SLOT) return i;
  }
  int cap = comm->user_ops_capacity ? 2 * comm->user_ops_capacity : 4;
  struct weft_redop* ops = realloc(comm->user_ops, (size_t)cap * sizeof(*ops));
  if (ops == NULL) return -1;
  for (int i = comm->user_ops_capacity; i < cap; i++) {
    memset(&ops[i], 0, sizeof(ops[i]));
    ops[i].kind = FREE_SLOT;
  }
  int ix = comm->user_ops_capacity;
  comm->user_ops = ops;
  comm->user_ops_capacity = cap;
  return ix;
}

ncclResult_t weft_redop_create(struct weft_comm_ctx* comm, ncclRedOp_t* op, void* scalar,
                               ncclDataType_t datatype, ncclScalarResidence_t residence) {
  WEFT_ARG_CHECK(op != NULL, "ncclRedOpCreatePreMulSum: op is NULL");
  WEFT_ARG_CHECK(scalar != NULL, "ncclRedOpCreatePreMulSum: scalar is NULL");
  size_t size = weft_dtype_size(datatype);
  WEFT_ARG_CHECK(size != 0, "ncclRedOpCreatePreMulSum: invalid datatype %d", (int)datatype);
  WEFT_ARG_CHECK(residence == ncclScalarDevice || residence == ncclScalarHostImmediate,
                 "ncclRedOpCreatePreMulSum: invalid residence %d", (int)residence);
  int ix = free_slot(comm);
  if (ix < 0) {
    WEFT_WARN("ncclRedOpCreatePreMulSum: out of memory growing the op table of comm %p", (void*)comm);
    return ncclSystemError;
  }
  struct weft_redop* u = &comm->user_ops[ix];
  memset(u, 0, sizeof(*u));
  u->kind = WEFT_OP_PREMULSUM;
  u->dtype = datatype;
  u->user_op = (ncclRedOp_t)(ncclNumOps + ix);
  /* Host immediate: the value as it is now. Device: the pointer, read each time the op runs. */
  if (residence == ncclScalarHostImmediate) {
    memcpy(&u->scalar, scalar, size);
  } else {
    u->scalar_ptr = scalar;
  }
  *op = u->user_op;
  WEFT_INFO(WEFT_COLL, "ncclRedOpCreatePreMulSum: op %d datatype %d residence %d scalar %p comm %p", (int)*op,
            (int)datatype, (int)residence, scalar, (void*)comm);
  return ncclSuccess;
}

ncclResult_t weft_redop_destroy(struct weft_comm_ctx* comm, ncclRedOp_t op) {
  WEFT_ARG_CHECK(!((int)op >= 0 && op < ncclNumOps), "ncclRedOpDestroy: op %d is a built-in operation",
                 (int)op);
  long ix = (long)op - ncclNumOps;
  WEFT_ARG_CHECK((int)op >= 0 && ix < comm->user_ops_capacity && comm->user_ops[ix].kind != FREE_SLOT,
                 "ncclRedOpDestroy: op %d unknown to comm %p (never created or already destroyed)", (int)op,
                 (void*)comm);
  memset(&comm->user_ops[ix], 0, sizeof(comm->user_ops[ix]));
  comm->user_ops[ix].kind = FREE_SLOT;
  return ncclSuccess;
}
