// ops_shape_test.cpp: every op's shape and type rule, good and bad input,
// parameters, NULL propagation, names, costs.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/core_test_util.hpp"

namespace {

using bp_test::CoreTest;
using bp_test::expect_shape;

float param_f(const bp_tensor *t, int i) { return bp_tensor_param_f32(t, i); }

TEST_F(CoreTest, BinaryOpsBroadcastSrc1OverSrc0) {
  bp_tensor *a = f32(6, 4, 3, 2);
  const bp_op ops[] = {BP_OP_ADD, BP_OP_SUB, BP_OP_MUL, BP_OP_DIV};
  bp_tensor *(*fns[])(bp_context *, bp_tensor *, bp_tensor *) = {bp_add, bp_sub, bp_mul, bp_div};
  for (int k = 0; k < 4; ++k) {
    bp_tensor *b_cases[] = {f32(6, 4, 3, 2), f32(6), f32(1), f16(3, 2, 3, 1), f32(6, 1, 1, 2)};
    for (bp_tensor *b : b_cases) {
      bp_tensor *c = fns[k](ctx, a, b);
      expect_shape(c, 6, 4, 3, 2);
      EXPECT_EQ(c->op, ops[k]);
      EXPECT_EQ(c->type, BP_TYPE_F32);
      EXPECT_EQ(c->src[0], a);
      EXPECT_EQ(c->src[1], b);
      EXPECT_TRUE(bp_tensor_is_contiguous(c));
    }
  }
  // Output keeps a's type, f16 with an f32 b.
  EXPECT_EQ(bp_add(ctx, f16(6), f32(3))->type, BP_TYPE_F16);
  // Non-contiguous inputs are fine.
  bp_tensor *t = bp_transpose(ctx, f32(4, 6));
  expect_shape(bp_mul(ctx, t, f32(6)), 6, 4, 1, 1);

  EXPECT_FAILS_WITH(bp_add(ctx, a, f32(4)), "bp_add", "b [4,1,1,1] f32", "a [6,4,3,2] f32", "dim 0",
                    "4 does not divide 6");
  EXPECT_FAILS_WITH(bp_sub(ctx, f32(6), a), "bp_sub", "dim 1");
  EXPECT_FAILS_WITH(bp_div(ctx, a, f32(6, 4, 2, 2)), "dim 2");
  EXPECT_FAILS_WITH(bp_mul(ctx, i32(6), f32(6)), "bp_mul", "a [6,1,1,1] i32", "f32 or f16");
  EXPECT_FAILS_WITH(bp_add(ctx, f32(6), i32(6)), "b [6,1,1,1] i32");
}

TEST_F(CoreTest, UnaryOpsKeepShapeAndType) {
  const bp_op unary[] = {BP_OP_NEG,  BP_OP_ABS,  BP_OP_SQR,  BP_OP_SQRT, BP_OP_EXP,
                         BP_OP_RELU, BP_OP_GELU, BP_OP_SILU, BP_OP_TANH, BP_OP_SIGMOID};
  bp_tensor *(*fns[])(bp_context *, bp_tensor *) = {bp_neg,  bp_abs,  bp_sqr,  bp_sqrt, bp_exp,
                                                    bp_relu, bp_gelu, bp_silu, bp_tanh, bp_sigmoid};
  bp_tensor *a = f16(7, 33);
  bp_tensor *p = bp_permute(ctx, f32(2, 3, 4, 5), 3, 2, 1, 0);
  for (int k = 0; k < 10; ++k) {
    bp_tensor *x = fns[k](ctx, a);
    expect_shape(x, 7, 33, 1, 1);
    EXPECT_EQ(x->type, BP_TYPE_F16);
    EXPECT_EQ(x->op, unary[k]);
    bp_tensor *y = bp_unary(ctx, p, unary[k]);
    expect_shape(y, 5, 4, 3, 2);
    EXPECT_EQ(y->op, unary[k]);
    EXPECT_STREQ(bp_op_name(unary[k]), bp_op_name(y->op));
    EXPECT_FAILS_WITH(fns[k](ctx, i32(3)), "i32", "f32 or f16");
  }
  EXPECT_FAILS_WITH(bp_unary(ctx, a, BP_OP_ADD), "bp_unary", "ADD", "not a unary op");
  EXPECT_FAILS_WITH(bp_unary(ctx, a, (bp_op)999), "not a unary op");
  EXPECT_FAILS_WITH(bp_gelu(ctx, i32(3)), "bp_gelu");
}

TEST_F(CoreTest, ScaleAndClampStoreParameters) {
  bp_tensor *a = f32(7);
  bp_tensor *s = bp_scale(ctx, a, -0.25f);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->op, BP_OP_SCALE);
  EXPECT_EQ(param_f(s, 0), -0.25f);
  bp_tensor *c = bp_clamp(ctx, f16(7), -1.5f, 2.0f);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, BP_TYPE_F16);
  EXPECT_EQ(param_f(c, 0), -1.5f);
  EXPECT_EQ(param_f(c, 1), 2.0f);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_NE(bp_clamp(ctx, a, -inf, 0.0f), nullptr);  // one-sided clamp
  EXPECT_NE(bp_clamp(ctx, a, 1.0f, 1.0f), nullptr);
  EXPECT_FAILS_WITH(bp_clamp(ctx, a, 2.0f, 1.0f), "bp_clamp", "min must be <= max");
  EXPECT_FAILS_WITH(bp_clamp(ctx, a, std::nanf(""), 1.0f), "NaN");
  EXPECT_FAILS_WITH(bp_scale(ctx, a, inf), "bp_scale", "not finite");
  EXPECT_FAILS_WITH(bp_scale(ctx, i32(2), 2.0f), "f32 or f16");
}

TEST_F(CoreTest, RowReductions) {
  bp_tensor *a = f32(257, 7, 3, 2);
  bp_tensor *s = bp_sum_rows(ctx, a);
  expect_shape(s, 1, 7, 3, 2);
  EXPECT_EQ(s->type, BP_TYPE_F32);
  expect_shape(bp_mean(ctx, a), 1, 7, 3, 2);
  bp_tensor *m = bp_argmax(ctx, a);
  expect_shape(m, 7, 3, 2, 1);
  EXPECT_EQ(m->type, BP_TYPE_I32);
  EXPECT_FAILS_WITH(bp_sum_rows(ctx, f16(4)), "bp_sum_rows", "f16", "must be f32");
  EXPECT_FAILS_WITH(bp_mean(ctx, i32(4)), "bp_mean");
  EXPECT_FAILS_WITH(bp_argmax(ctx, f16(4)), "bp_argmax");
}

TEST_F(CoreTest, NormsTakeEps) {
  bp_tensor *a = f32(33, 5);
  bp_tensor *n = bp_norm(ctx, a, 1e-5f);
  expect_shape(n, 33, 5, 1, 1);
  EXPECT_EQ(n->op, BP_OP_NORM);
  EXPECT_EQ(param_f(n, 0), 1e-5f);
  bp_tensor *r = bp_rms_norm(ctx, a, 0.0f);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->op, BP_OP_RMS_NORM);
  EXPECT_FAILS_WITH(bp_norm(ctx, a, -1.0f), "bp_norm", "eps", ">= 0");
  EXPECT_FAILS_WITH(bp_rms_norm(ctx, a, std::nanf("")), "bp_rms_norm", "eps");
  EXPECT_FAILS_WITH(bp_rms_norm(ctx, f16(4), 1e-6f), "f16");
}

TEST_F(CoreTest, SoftMaxWithAndWithoutMask) {
  bp_tensor *a = f32(7, 5, 4, 2);
  bp_tensor *s = bp_soft_max(ctx, a, nullptr, 0.125f);
  expect_shape(s, 7, 5, 4, 2);
  EXPECT_EQ(s->src[1], nullptr);
  EXPECT_EQ(param_f(s, 0), 0.125f);
  // A mask with more rows than a, broadcast over dims 2 and 3.
  bp_tensor *mask = f16(7, 8, 2, 1);
  bp_tensor *m = bp_soft_max(ctx, a, mask, 1.0f);
  expect_shape(m, 7, 5, 4, 2);
  EXPECT_EQ(m->src[1], mask);
  EXPECT_NE(bp_soft_max(ctx, a, f32(7, 5), 1.0f), nullptr);

  EXPECT_FAILS_WITH(bp_soft_max(ctx, a, f32(8, 5), 1.0f), "bp_soft_max", "mask [8,5,1,1] f32", "dim 0", "(8 vs 7)");
  EXPECT_FAILS_WITH(bp_soft_max(ctx, a, f32(7, 4), 1.0f), "4 rows", "at least as many rows");
  EXPECT_FAILS_WITH(bp_soft_max(ctx, a, f32(7, 5, 3), 1.0f), "dim 2", "3 does not divide 4");
  EXPECT_FAILS_WITH(bp_soft_max(ctx, a, i32(7, 5), 1.0f), "mask", "i32");
  EXPECT_FAILS_WITH(bp_soft_max(ctx, f16(7), nullptr, 1.0f), "must be f32");
  EXPECT_FAILS_WITH(bp_soft_max(ctx, a, nullptr, std::numeric_limits<float>::infinity()), "scale");
}

TEST_F(CoreTest, MulMatShapesAndBroadcast) {
  bp_tensor *a = f16(64, 32, 2, 1);
  bp_tensor *b = f32(64, 8, 6, 3);
  bp_tensor *c = bp_mul_mat(ctx, a, b);
  expect_shape(c, 32, 8, 6, 3);
  EXPECT_EQ(c->type, BP_TYPE_F32);
  EXPECT_EQ(c->op, BP_OP_MUL_MAT);
  EXPECT_EQ(bp_op_flops(c), uint64_t(2) * 64 * 32 * 8 * 6 * 3);
  expect_shape(bp_mul_mat(ctx, f32(1), f32(1)), 1, 1, 1, 1);
  // Outer-dim views with dense rows are accepted.
  bp_tensor *big = f32(64, 40);
  bp_tensor *rows = bp_view_2d(ctx, big, 64, 8, 2 * big->nb[1], 0);
  expect_shape(bp_mul_mat(ctx, f16(64, 32), rows), 32, 8, 1, 1);

  EXPECT_FAILS_WITH(bp_mul_mat(ctx, f32(64, 32), f32(63, 8)), "bp_mul_mat", "a [64,32,1,1] f32", "b [63,8,1,1] f32",
                    "differ in dim 0 (64 vs 63)", "inner dimensions must match");
  EXPECT_FAILS_WITH(bp_mul_mat(ctx, f32(4, 4, 3), f32(4, 4, 4)), "dim 2", "3 does not divide 4");
  EXPECT_FAILS_WITH(bp_mul_mat(ctx, f32(4, 4, 1, 2), f32(4, 4, 1, 3)), "dim 3");
  EXPECT_FAILS_WITH(bp_mul_mat(ctx, f32(4), f16(4)), "b [4,1,1,1] f16", "must be f32");
  EXPECT_FAILS_WITH(bp_mul_mat(ctx, i32(4), f32(4)), "a [4,1,1,1] i32");
  EXPECT_FAILS_WITH(bp_mul_mat(ctx, bp_transpose(ctx, f32(4, 4)), f32(4)), "not dense", "bp_cont");
}

TEST_F(CoreTest, GetRowsPicksRowsPerMatrix) {
  bp_tensor *a = f16(5, 10, 3, 2);
  bp_tensor *ids = i32(7, 3, 2);
  bp_tensor *r = bp_get_rows(ctx, a, ids);
  expect_shape(r, 5, 7, 3, 2);
  EXPECT_EQ(r->type, BP_TYPE_F32);
  bp_tensor *ri = bp_get_rows(ctx, i32(5, 10), i32(4));
  expect_shape(ri, 5, 4, 1, 1);
  EXPECT_EQ(ri->type, BP_TYPE_I32);
  EXPECT_EQ(bp_get_rows(ctx, f32(5, 10), i32(4))->type, BP_TYPE_F32);

  EXPECT_FAILS_WITH(bp_get_rows(ctx, a, i32(7, 2, 2)), "bp_get_rows", "ids [7,2,2,1] i32", "[N,3,2,1]");
  EXPECT_FAILS_WITH(bp_get_rows(ctx, a, i32(7, 3, 2, 2)), "ids");
  EXPECT_FAILS_WITH(bp_get_rows(ctx, a, f32(7, 3, 2)), "ids [7,3,2,1] f32", "must be i32");
}

TEST_F(CoreTest, CpyResultAliasesTheDestination) {
  bp_tensor *a = f32(6, 4);
  bp_tensor *dst_owner = f16(48);
  bp_tensor *b = bp_view_2d(ctx, dst_owner, 4, 6, 8 * 2, 8);  // strided destination
  ASSERT_NE(b, nullptr) << bp_last_error();
  bp_tensor *c = bp_cpy(ctx, a, b);
  expect_shape(c, 4, 6, 1, 1);
  EXPECT_EQ(c->op, BP_OP_CPY);
  EXPECT_EQ(c->type, BP_TYPE_F16);
  EXPECT_EQ(c->src[0], a);
  EXPECT_EQ(c->src[1], b);
  EXPECT_EQ(c->view_src, dst_owner);
  EXPECT_EQ(c->view_offs, 8u);
  EXPECT_EQ(c->nb[1], b->nb[1]);
  EXPECT_FALSE(bp_op_is_view(c->op));
  EXPECT_EQ(bp_op_flops(c), 24u);  // one conversion per element
  // Into a plain leaf.
  bp_tensor *leaf = f32(24);
  EXPECT_EQ(bp_cpy(ctx, a, leaf)->view_src, leaf);
  EXPECT_NE(bp_cpy(ctx, i32(3), i32(3, 1)), nullptr);

  EXPECT_FAILS_WITH(bp_cpy(ctx, a, f32(25)), "bp_cpy", "24 elements", "25", "counts must match");
  EXPECT_FAILS_WITH(bp_cpy(ctx, i32(4), f32(4)), "cannot convert i32 to f32");
  EXPECT_FAILS_WITH(bp_cpy(ctx, f16(4), i32(4)), "cannot convert f16 to i32");
}

TEST_F(CoreTest, ContAndCast) {
  bp_tensor *t = bp_transpose(ctx, f16(7, 3));
  bp_tensor *c = bp_cont(ctx, t);
  expect_shape(c, 3, 7, 1, 1);
  EXPECT_EQ(c->op, BP_OP_CONT);
  EXPECT_EQ(c->type, BP_TYPE_F16);
  EXPECT_TRUE(bp_tensor_is_contiguous(c));
  bp_tensor *f = bp_cast(ctx, t, BP_TYPE_F32);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type, BP_TYPE_F32);
  EXPECT_EQ(f->op, BP_OP_CONT);
  EXPECT_EQ(bp_cast(ctx, f32(2), BP_TYPE_F16)->type, BP_TYPE_F16);
  EXPECT_EQ(bp_cont(ctx, i32(2))->type, BP_TYPE_I32);
  EXPECT_FAILS_WITH(bp_cast(ctx, f32(2), BP_TYPE_I32), "bp_cast", "cannot convert f32 to i32");
  EXPECT_FAILS_WITH(bp_cast(ctx, i32(2), BP_TYPE_F16), "cannot convert i32 to f16");
  const std::string unknown = "unknown type " + std::to_string(BP_TYPE_COUNT);  // the first value past the enum
  EXPECT_FAILS_WITH(bp_cast(ctx, f32(2), BP_TYPE_COUNT), unknown.c_str());
}

TEST_F(CoreTest, ConcatAlongEachDim) {
  for (int dim = 0; dim < 4; ++dim) {
    int64_t na[4] = {2, 3, 4, 5}, nb[4] = {2, 3, 4, 5};
    nb[dim] = 7;
    bp_tensor *a = bp_tensor_new(ctx, BP_TYPE_F16, 4, na);
    bp_tensor *b = bp_tensor_new(ctx, BP_TYPE_F16, 4, nb);
    bp_tensor *c = bp_concat(ctx, a, b, dim);
    ASSERT_NE(c, nullptr) << bp_last_error();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(c->ne[i], i == dim ? na[i] + 7 : na[i]);
    EXPECT_EQ(c->op_params[0], dim);
    EXPECT_EQ(c->type, BP_TYPE_F16);
  }
  EXPECT_NE(bp_concat(ctx, i32(2), i32(3), 0), nullptr);
  EXPECT_FAILS_WITH(bp_concat(ctx, f32(2, 3), f32(2, 4), 0), "bp_concat", "differ in dim 1 (3 vs 4)",
                    "concatenated one (0)");
  EXPECT_FAILS_WITH(bp_concat(ctx, f32(2), f16(2), 0), "differ in type");
  EXPECT_FAILS_WITH(bp_concat(ctx, f32(2), f32(2), 4), "dim = 4", "0..3");
  EXPECT_FAILS_WITH(bp_concat(ctx, f32(2), f32(2), -1), "dim = -1");
}

TEST_F(CoreTest, RopeParametersAndShapes) {
  bp_tensor *a = f32(64, 4, 7, 2);  // [D, H, T, B]
  bp_tensor *pos = i32(7);
  bp_tensor *r = bp_rope(ctx, a, pos, 32, BP_ROPE_NEOX, 10000.0f, 0.5f);
  expect_shape(r, 64, 4, 7, 2);
  EXPECT_EQ(r->op, BP_OP_ROPE);
  EXPECT_EQ(r->src[1], pos);
  EXPECT_EQ(r->op_params[0], 32);
  EXPECT_EQ(r->op_params[1], BP_ROPE_NEOX);
  EXPECT_EQ(param_f(r, 2), 10000.0f);
  EXPECT_EQ(param_f(r, 3), 0.5f);
  EXPECT_NE(bp_rope(ctx, a, pos, 64, BP_ROPE_NORMAL, 500.0f, 1.0f), nullptr);

  EXPECT_FAILS_WITH(bp_rope(ctx, a, i32(6), 32, 0, 1e4f, 1.0f), "bp_rope", "pos [6,1,1,1] i32", "pos must be [7]");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, i32(7, 2), 32, 0, 1e4f, 1.0f), "pos must be [7]");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, f32(7), 32, 0, 1e4f, 1.0f), "must be i32");
  EXPECT_FAILS_WITH(bp_rope(ctx, f16(64, 4, 7), pos, 32, 0, 1e4f, 1.0f), "must be f32");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, pos, 33, 0, 1e4f, 1.0f), "n_dims = 33", "even");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, pos, 66, 0, 1e4f, 1.0f), "n_dims = 66", "<= 64");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, pos, 0, 0, 1e4f, 1.0f), "n_dims = 0");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, pos, 32, 1, 1e4f, 1.0f), "mode = 1", "BP_ROPE_NEOX");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, pos, 32, 0, 0.0f, 1.0f), "freq_base");
  EXPECT_FAILS_WITH(bp_rope(ctx, a, pos, 32, 0, 1e4f, -1.0f), "freq_scale");
}

TEST_F(CoreTest, AttentionShapesAndErrors) {
  bp_tensor *q = f32(64, 5, 8, 2);                           // [D, T, H, B]
  bp_tensor *k = f16(64, 40, 2, 2), *v = f16(48, 40, 2, 2);  // [D, N, Hk, B], [Dv, N, Hk, B]
  bp_tensor *mask = f32(40, 8);                              // padded to 8 rows
  bp_tensor *r = bp_attention(ctx, q, k, v, mask, 0.125f);
  expect_shape(r, 48, 8, 5, 2);  // [Dv, H, T, B]: heads before tokens
  EXPECT_EQ(r->op, BP_OP_ATTENTION);
  EXPECT_EQ(r->type, BP_TYPE_F32);
  EXPECT_EQ(r->src[3], mask);
  EXPECT_EQ(param_f(r, 0), 0.125f);
  bp_tensor *no_mask = bp_attention(ctx, q, k, v, nullptr, 1.0f);
  ASSERT_NE(no_mask, nullptr);
  EXPECT_EQ(no_mask->src[3], nullptr);
  EXPECT_NE(bp_attention(ctx, q, f16(64, 40, 2, 1), f16(48, 40, 2, 1), nullptr, 1.0f), nullptr);  // shared batch
  EXPECT_GT(bp_op_flops(r), 0u);

  EXPECT_FAILS_WITH(bp_attention(ctx, q, f16(32, 40, 2, 2), v, nullptr, 1.0f), "bp_attention", "k [32,40,2,2] f16",
                    "a key row must be as long as a query row");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, f16(64, 40, 3, 2), f16(48, 40, 3, 2), nullptr, 1.0f), "3 does not divide 8",
                    "equal groups");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, k, f32(48, 40, 2, 2), nullptr, 1.0f), "k and v must both be f32 or both f16");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, k, f16(48, 39, 2, 2), nullptr, 1.0f), "v needs k's dims 1 to 3");
  EXPECT_FAILS_WITH(bp_attention(ctx, f16(64, 5, 8, 2), k, v, nullptr, 1.0f), "q ", "must be f32");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, k, v, f32(41, 5), 1.0f), "mask [41,5,1,1] f32", "one value per key");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, k, v, f32(40, 4), 1.0f), "a row per token");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, k, v, f32(40, 5, 3), 1.0f), "mask", "does not divide 8");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, k, v, mask, INFINITY), "scale", "not finite");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, bp_transpose(ctx, f16(40, 64, 2, 2)), v, nullptr, 1.0f), "not dense",
                    "bp_cont");
  EXPECT_FAILS_WITH(bp_attention(ctx, q, nullptr, v, nullptr, 1.0f), "bp_attention", "k");
}

TEST_F(CoreTest, SetRowsShapesAndErrors) {
  bp_tensor *dst = f16(64, 128), *src = f32(64, 3), *ids = i32(3);
  bp_tensor *r = bp_set_rows(ctx, dst, src, ids);
  expect_shape(r, 64, 128, 1, 1);
  EXPECT_EQ(r->op, BP_OP_SET_ROWS);
  EXPECT_EQ(r->type, BP_TYPE_F16);
  EXPECT_EQ(r->view_src, dst);  // the result is dst, as CPY's is
  EXPECT_EQ(r->src[0], src);
  EXPECT_EQ(r->src[1], dst);
  EXPECT_EQ(r->src[2], ids);
  EXPECT_EQ(bp_op_bytes(r), 64u * 3 * 4 + 3 * 4 + 3 * 64 * 2);  // src, ids and the rows written only

  EXPECT_FAILS_WITH(bp_set_rows(ctx, dst, f32(32, 3), ids), "bp_set_rows", "src [32,3,1,1] f32", "row length");
  EXPECT_FAILS_WITH(bp_set_rows(ctx, dst, src, i32(4)), "ids [4,1,1,1] i32", "ids must be [3]");
  EXPECT_FAILS_WITH(bp_set_rows(ctx, dst, src, f32(3)), "ids", "must be i32");
  EXPECT_FAILS_WITH(bp_set_rows(ctx, dst, f16(64, 3), ids), "src", "must be f32");
  EXPECT_FAILS_WITH(bp_set_rows(ctx, i32(64, 128), src, ids), "dst", "f32 or f16");
  EXPECT_FAILS_WITH(bp_set_rows(ctx, bp_transpose(ctx, f32(128, 64)), src, ids), "not dense");
  EXPECT_FAILS_WITH(bp_set_rows(ctx, nullptr, src, ids), "bp_set_rows", "dst");
}

TEST_F(CoreTest, RopeFrequencyFactors) {
  bp_tensor *a = f32(64, 4, 7, 2);  // [D, H, T, B]
  bp_tensor *pos = i32(7);
  bp_tensor *ff = f32(16);
  bp_tensor *r = bp_rope_ext(ctx, a, pos, ff, 32, BP_ROPE_NEOX, 500000.0f, 1.0f);
  expect_shape(r, 64, 4, 7, 2);
  EXPECT_EQ(r->op, BP_OP_ROPE);
  EXPECT_EQ(r->src[1], pos);
  EXPECT_EQ(r->src[2], ff);
  EXPECT_EQ(r->op_params[0], 32);
  EXPECT_EQ(param_f(r, 2), 500000.0f);
  EXPECT_NE(bp_rope_ext(ctx, a, pos, f32(40), 32, 0, 1e4f, 1.0f), nullptr);  // more factors than pairs
  bp_tensor *plain = bp_rope_ext(ctx, a, pos, nullptr, 32, 0, 1e4f, 1.0f);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->src[2], nullptr);

  EXPECT_FAILS_WITH(bp_rope_ext(ctx, a, pos, f32(15), 32, 0, 1e4f, 1.0f), "bp_rope_ext", "freq_factors [15,1,1,1] f32",
                    "at least n_dims/2 = 16");
  EXPECT_FAILS_WITH(bp_rope_ext(ctx, a, pos, f16(16), 32, 0, 1e4f, 1.0f), "freq_factors", "must be f32");
  EXPECT_FAILS_WITH(bp_rope_ext(ctx, a, pos, i32(16), 32, 0, 1e4f, 1.0f), "must be f32");
  EXPECT_FAILS_WITH(bp_rope_ext(ctx, a, pos, f32(8, 2), 32, 0, 1e4f, 1.0f), "must be 1-D", "[16]");
}

TEST_F(CoreTest, NullInputsPropagateAndKeepTheFirstError) {
  bp_tensor *a = f32(4, 3);
  bp_clear_error();
  bp_tensor *bad = bp_mul_mat(ctx, a, f32(5, 2));  // the first failure
  ASSERT_EQ(bad, nullptr);
  const std::string first = bp_last_error();
  ASSERT_NE(first.find("bp_mul_mat"), std::string::npos);
  const size_t before = bp_context_tensor_count(ctx);
  bp_tensor *m = f32(4, 3);
  bp_tensor *x = bp_add(ctx, bad, m);
  x = bp_soft_max(ctx, bp_scale(ctx, bp_gelu(ctx, x), 2.0f), m, 1.0f);
  x = bp_mul_mat(ctx, a, bp_cpy(ctx, x, bp_cont(ctx, x)));
  x = bp_rope(ctx, bp_get_rows(ctx, x, nullptr), nullptr, 2, 0, 1e4f, 1.0f);
  x = bp_concat(ctx, x, bp_reshape_2d(ctx, x, 1, 1), 0);
  x = bp_view_1d(ctx, bp_transpose(ctx, bp_permute(ctx, x, 0, 1, 2, 3)), 1, 0);
  EXPECT_EQ(x, nullptr);
  EXPECT_EQ(first, bp_last_error());
  EXPECT_EQ(bp_context_tensor_count(ctx), before + 1);  // only m was created
  bp_graph *g = bp_graph_new(ctx, 0);
  EXPECT_EQ(bp_graph_build(g, x), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find(first), std::string::npos) << bp_last_error();
  bp_graph_free(g);
  // With no earlier error, a NULL input is named.
  bp_clear_error();
  EXPECT_FAILS_WITH(bp_add(ctx, a, nullptr), "bp_add", "b is NULL");
  EXPECT_FAILS_WITH(bp_neg(nullptr, a), "bp_neg", "ctx is NULL");
}

TEST_F(CoreTest, OpNamesAndCosts) {
  EXPECT_STREQ(bp_op_name(BP_OP_NONE), "NONE");
  EXPECT_STREQ(bp_op_name(BP_OP_MUL_MAT), "MUL_MAT");
  EXPECT_STREQ(bp_op_name(BP_OP_ROPE), "ROPE");
  EXPECT_STREQ(bp_op_name(BP_OP_COUNT), "?");
  EXPECT_STREQ(bp_op_name((bp_op)-1), "?");
  for (int op = 0; op < BP_OP_COUNT; ++op) EXPECT_STRNE(bp_op_name((bp_op)op), "?");
  bp_tensor *a = f32(8, 4);
  bp_tensor *b = f32(8);
  bp_tensor *c = bp_add(ctx, a, b);
  EXPECT_EQ(bp_op_flops(c), 32u);
  EXPECT_EQ(bp_op_bytes(c), 4u * (32 + 8 + 32));
  bp_tensor *v = bp_transpose(ctx, a);
  EXPECT_EQ(bp_op_flops(v), 0u);
  EXPECT_EQ(bp_op_bytes(v), 0u);
  EXPECT_EQ(bp_op_flops(a), 0u);
  EXPECT_EQ(bp_op_bytes(nullptr), 0u);
  EXPECT_EQ(bp_op_flops(nullptr), 0u);
  EXPECT_EQ(bp_op_flops(bp_sum_rows(ctx, a)), 32u);
  bp_tensor *leaf16 = f16(32);
  EXPECT_EQ(bp_op_bytes(bp_cpy(ctx, a, leaf16)), 4u * 32 + 2u * 32);  // reads a, writes b
}

}  // namespace
