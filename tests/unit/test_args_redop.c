/* Reduction operators: encodings of 1/nranks, Avg resolution per datatype, PreMulSum creation
 * with both scalar residences, destruction, and the errors around them. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives/redop.h"
#include "core/comm.h"
#include "nccl.h"

/* Independent decoder for the small float formats (no infinities/NaN needed here). */
static double decode(uint32_t bits, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1;
  uint32_t e = (bits >> mbits) & ((1u << ebits) - 1), m = bits & ((1u << mbits) - 1);
  double v = e ? ldexp(1.0 + ldexp(m, -mbits), (int)e - bias) : ldexp(m, 1 - bias - mbits);
  return (bits >> (ebits + mbits)) & 1 ? -v : v;
}

static void test_encode(void) {
  EXPECT_EQ_INT(weft_redop_encode(1.0 / 3, ncclFloat16), 0x3555);
  EXPECT_EQ_INT(weft_redop_encode(1.0 / 3, ncclBfloat16), 0x3eab);
  EXPECT_EQ_INT(weft_redop_encode(0.5, ncclFloat16), 0x3800);
  EXPECT_EQ_INT(weft_redop_encode(1.0, ncclBfloat16), 0x3f80);
  EXPECT_EQ_INT(weft_redop_encode(1.0 / 3, ncclFloat8e4m3), 0x2b);
  EXPECT_EQ_INT(weft_redop_encode(1.0 / 3, ncclFloat8e5m2), 0x35);
  EXPECT_EQ_INT(weft_redop_encode(448, ncclFloat8e4m3), 0x7e);
  EXPECT_EQ_INT(weft_redop_encode(1e6, ncclFloat8e4m3), 0x7f); /* no infinity: NaN */
  EXPECT_EQ_INT(weft_redop_encode(1e6, ncclFloat16), 0x7c00);  /* infinity */
  EXPECT_EQ_INT(weft_redop_encode(-2.0, ncclFloat16), 0xc000);
  EXPECT_EQ_INT(weft_redop_encode(ldexp(1, -24), ncclFloat16), 0x0001); /* smallest subnormal */
  EXPECT_EQ_INT(weft_redop_encode(ldexp(1, -25), ncclFloat16), 0x0000); /* tie to even: zero */
  EXPECT_EQ_INT(weft_redop_encode(ldexp(3, -25), ncclFloat16), 0x0002); /* tie to even: up */
  /* 1 + 2^-11 is halfway between 1 and the next half: ties to the even mantissa (1.0) */
  EXPECT_EQ_INT(weft_redop_encode(1 + ldexp(1, -11), ncclFloat16), 0x3c00);
  EXPECT_EQ_INT(weft_redop_encode(1 + ldexp(3, -11), ncclFloat16), 0x3c02);
  /* every 1/n for n <= 64 is the nearest representable value */
  static const int fmt[4][3] = {
      {5, 10, ncclFloat16}, {8, 7, ncclBfloat16}, {4, 3, ncclFloat8e4m3}, {5, 2, ncclFloat8e5m2}};
  for (int f = 0; f < 4; f++) {
    for (int n = 1; n <= 64; n++) {
      double want = 1.0 / n;
      uint32_t got = (uint32_t)weft_redop_encode(want, (ncclDataType_t)fmt[f][2]);
      double err = fabs(decode(got, fmt[f][0], fmt[f][1]) - want);
      double below = fabs(decode(got - 1, fmt[f][0], fmt[f][1]) - want);
      double above = fabs(decode(got + 1, fmt[f][0], fmt[f][1]) - want);
      EXPECT_MSG(err <= below && err <= above, "type %d 1/%d -> 0x%x", fmt[f][2], n, got);
    }
  }
  double third = 1.0 / 3;
  uint64_t bits;
  memcpy(&bits, &third, 8);
  EXPECT(weft_redop_encode(third, ncclFloat64) == bits);
}

static void test_resolve(struct ncclComm* c) {
  struct weft_redop op;
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", ncclAvg, ncclFloat16, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_PREMULSUM);
  EXPECT_EQ_INT(op.scalar, 0x3555); /* 1/3 */
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", ncclAvg, ncclFloat8e5m2, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_PREMULSUM);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", ncclAvg, ncclUint8, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_SUMPOSTDIV);
  EXPECT_EQ_INT(op.divisor, 3);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", ncclAvg, ncclInt64, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_SUMPOSTDIV);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", ncclMax, ncclInt64, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_MAX);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", ncclMin, ncclInt64, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_MIN);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", ncclProd, ncclFloat, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_PROD);
  EXPECT_EQ_INT(op.user_op, ncclProd);
}

static void test_user_ops(struct ncclComm* c) {
  ncclRedOp_t a, b, d;
  double two = 2.0;
  float dev_scalar = 3.0f;
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&a, &two, ncclFloat64, ncclScalarHostImmediate, c), ncclSuccess);
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&d, &dev_scalar, ncclFloat, ncclScalarDevice, c), ncclSuccess);
  EXPECT(a >= ncclNumOps && d >= ncclNumOps && a != d);
  two = 5.0; /* host immediate: the value at creation counts */
  struct weft_redop op;
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", a, ncclFloat64, &op), ncclSuccess);
  EXPECT_EQ_INT(op.kind, WEFT_OP_PREMULSUM);
  double got;
  memcpy(&got, &op.scalar, 8);
  EXPECT(got == 2.0 && op.scalar_ptr == NULL);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", d, ncclFloat, &op), ncclSuccess);
  EXPECT(op.scalar_ptr == &dev_scalar);
  /* an op belongs to its datatype */
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", a, ncclFloat, &op), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "created for datatype 8") != NULL);
  EXPECT_EQ_INT(ncclRedOpDestroy(a, c), ncclSuccess);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", a, ncclFloat64, &op), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "already destroyed") != NULL);
  EXPECT_EQ_INT(ncclRedOpDestroy(a, c), ncclInvalidArgument);
  EXPECT_EQ_INT(ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "built-in") != NULL);
  EXPECT_EQ_INT(ncclRedOpDestroy((ncclRedOp_t)1000, c), ncclInvalidArgument);
  /* a destroyed slot is reused, and many ops can live at once */
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&b, &two, ncclFloat64, ncclScalarHostImmediate, c), ncclSuccess);
  EXPECT_EQ_INT(b, a);
  ncclRedOp_t many[40];
  for (int i = 0; i < 40; i++) {
    EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&many[i], &two, ncclFloat64, ncclScalarHostImmediate, c),
                  ncclSuccess);
  }
  for (int i = 0; i < 40; i++) EXPECT_EQ_INT(ncclRedOpDestroy(many[i], c), ncclSuccess);
  EXPECT_EQ_INT(weft_redop_resolve(&c->ctx, "t", d, ncclFloat, &op), ncclSuccess);
  /* arguments */
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(NULL, &two, ncclFloat64, ncclScalarHostImmediate, c),
                ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "op is NULL") != NULL);
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&b, NULL, ncclFloat64, ncclScalarHostImmediate, c),
                ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "scalar is NULL") != NULL);
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&b, &two, (ncclDataType_t)12, ncclScalarHostImmediate, c),
                ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "datatype 12") != NULL);
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&b, &two, ncclFloat64, (ncclScalarResidence_t)2, c),
                ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "residence 2") != NULL);
  EXPECT_EQ_INT(ncclRedOpCreatePreMulSum(&b, &two, ncclFloat64, ncclScalarHostImmediate, NULL),
                ncclInvalidArgument);
  EXPECT_EQ_INT(ncclRedOpDestroy(d, NULL), ncclInvalidArgument);
}

int main(void) {
  struct ncclComm* c = calloc(1, sizeof(*c));
  c->magic = WEFT_COMM_MAGIC;
  c->ctx.rank = 1;
  c->ctx.nranks = 3;
  test_encode();
  test_resolve(c);
  test_user_ops(c);
  free(c->ctx.user_ops);
  free(c);
  return test_finish("test_args_redop");
}
