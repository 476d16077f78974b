// quant_types_test.cpp: the quantized types in the core's tensor model:
// the type table, strides, byte counts, the whole-block rules of tensors and
// views, and which ops accept quantized sources.
#include <string>

#include "core/core_test_util.hpp"

namespace {

using bp_test::CoreTest;
using bp_test::expect_shape;

struct type_row {
  bp_type type;
  const char *name;
  int64_t block;
  size_t bytes;
};

const type_row k_types[] = {
    {BP_TYPE_F32, "f32", 1, 4},           {BP_TYPE_F16, "f16", 1, 2},       {BP_TYPE_I32, "i32", 1, 4},
    {BP_TYPE_Q8_0, "q8_0", 32, 34},       {BP_TYPE_Q4_0, "q4_0", 32, 18},   {BP_TYPE_Q5_0, "q5_0", 32, 22},
    {BP_TYPE_Q4_K, "q4_K", 256, 144},     {BP_TYPE_Q6_K, "q6_K", 256, 210}, {BP_TYPE_Q5_K, "q5_K", 256, 176},
    {BP_TYPE_BF16, "bf16", 1, 2},         {BP_TYPE_Q4_1, "q4_1", 32, 20},   {BP_TYPE_Q5_1, "q5_1", 32, 24},
    {BP_TYPE_Q2_K, "q2_K", 256, 84},      {BP_TYPE_Q3_K, "q3_K", 256, 110}, {BP_TYPE_IQ4_NL, "iq4_nl", 32, 18},
    {BP_TYPE_IQ4_XS, "iq4_xs", 256, 136}, {BP_TYPE_MXFP4, "mxfp4", 32, 17},
};

TEST(QuantTypes, TableMatchesTheGgufBlockSizes) {
  for (const type_row &r : k_types) {
    SCOPED_TRACE(r.name);
    EXPECT_STREQ(bp_type_name(r.type), r.name);
    EXPECT_EQ(bp_type_block_size(r.type), r.block);
    EXPECT_EQ(bp_type_size(r.type), r.bytes);
    EXPECT_EQ(bp_type_row_size(r.type, 4 * r.block), 4 * r.bytes);
    // The weight encodings: the block types and bf16.
    EXPECT_EQ(bp_type_is_quantized(r.type), r.block > 1 || r.type == BP_TYPE_BF16);
  }
  // Values are appended, never renumbered (the plugin ABI).
  EXPECT_EQ(static_cast<int>(BP_TYPE_Q6_K), 7);
  EXPECT_EQ(static_cast<int>(BP_TYPE_Q5_K), 8);
  EXPECT_EQ(static_cast<int>(BP_TYPE_BF16), 9);
  EXPECT_EQ(static_cast<int>(BP_TYPE_Q4_1), 10);
  EXPECT_EQ(static_cast<int>(BP_TYPE_MXFP4), 16);
  EXPECT_EQ(static_cast<int>(BP_TYPE_COUNT), 17);
  EXPECT_EQ(bp_type_size(BP_TYPE_COUNT), 0u);
  EXPECT_STREQ(bp_type_name(BP_TYPE_COUNT), "?");
}

TEST_F(CoreTest, QuantizedTensorStridesAreBlocksAndRows) {
  bp_tensor *t = bp_tensor_new_3d(ctx, BP_TYPE_Q4_K, 512, 3, 2);
  expect_shape(t, 512, 3, 2, 1);
  EXPECT_EQ(t->nb[0], 144u);
  EXPECT_EQ(t->nb[1], 288u);
  EXPECT_EQ(t->nb[2], 288u * 3);
  EXPECT_EQ(t->nb[3], 288u * 6);
  EXPECT_EQ(bp_tensor_nbytes(t), 288u * 6);
  EXPECT_TRUE(bp_tensor_is_contiguous(t));
  EXPECT_TRUE(bp_tensor_rows_contiguous(t));
  bp_tensor *q8 = bp_tensor_new_1d(ctx, BP_TYPE_Q8_0, 32);
  ASSERT_NE(q8, nullptr) << bp_last_error();
  EXPECT_EQ(bp_tensor_nbytes(q8), 34u);
}

TEST_F(CoreTest, QuantizedRowsMustHoldWholeBlocks) {
  EXPECT_FAILS_WITH(bp_tensor_new_2d(ctx, BP_TYPE_Q4_K, 100, 2), "q4_K rows hold whole blocks of 256 values",
                    "ne[0] = 100 is not a multiple of 256");
  EXPECT_FAILS_WITH(bp_tensor_new_1d(ctx, BP_TYPE_Q5_0, 48), "q5_0", "of 32 values", "ne[0] = 48");
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
}

TEST_F(CoreTest, QuantizedViewsStartAndEndOnBlocks) {
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_Q8_0, 128, 4);  // 4 blocks of 34 bytes per row
  ASSERT_NE(a, nullptr);
  // Blocks 1..2 of rows 1..2.
  bp_tensor *v = bp_view_2d(ctx, a, 64, 2, a->nb[1], a->nb[1] + 34);
  expect_shape(v, 64, 2, 1, 1);
  EXPECT_EQ(v->nb[0], 34u);
  EXPECT_EQ(bp_tensor_nbytes(v), a->nb[1] + 68u);
  EXPECT_TRUE(bp_tensor_rows_contiguous(v));
  EXPECT_FALSE(bp_tensor_is_contiguous(v));
  // A whole row as 1d.
  bp_tensor *row = bp_view_1d(ctx, a, 128, 3 * a->nb[1]);
  ASSERT_NE(row, nullptr) << bp_last_error();
  EXPECT_TRUE(bp_tensor_is_contiguous(row));
  EXPECT_FAILS_WITH(bp_view_2d(ctx, a, 48, 2, a->nb[1], 0), "q8_0 rows hold whole blocks of 32", "ne[0] = 48");
  EXPECT_FAILS_WITH(bp_view_2d(ctx, a, 64, 2, a->nb[1], 17), "offset 17 is not on a block boundary", "34");
  EXPECT_FAILS_WITH(bp_view_2d(ctx, a, 64, 2, a->nb[1] + 1, 0), "nb[1]", "block size 34");
  EXPECT_FAILS_WITH(bp_view_2d(ctx, a, 64, 2, a->nb[1], 3 * a->nb[1]), "past the end");
}

TEST_F(CoreTest, QuantizedReshapeAndPermuteKeepDimZero) {
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_Q6_K, 512, 2);
  bp_tensor *r = bp_reshape_2d(ctx, a, 256, 4);
  expect_shape(r, 256, 4, 1, 1);
  EXPECT_EQ(r->nb[1], 210u);
  EXPECT_TRUE(bp_tensor_is_contiguous(r));
  EXPECT_FAILS_WITH(bp_reshape_2d(ctx, a, 128, 8), "q6_K rows hold whole blocks of 256", "ne[0] = 128");
  EXPECT_FAILS_WITH(bp_transpose(ctx, a), "blocks of 256 values", "dim 0 must stay first");
  bp_tensor *p = bp_permute(ctx, bp_reshape_3d(ctx, a, 256, 2, 2), 0, 2, 1, 3);
  ASSERT_NE(p, nullptr) << bp_last_error();
  EXPECT_EQ(p->nb[2], 210u);
}

TEST_F(CoreTest, MulMatTakesQuantizedWeightsAndF32Activations) {
  for (bp_type t : {BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16}) {
    SCOPED_TRACE(bp_type_name(t));
    bp_tensor *w = bp_tensor_new_2d(ctx, t, 256, 5);
    bp_tensor *y = bp_mul_mat(ctx, w, f32(256, 3));
    expect_shape(y, 5, 3, 1, 1);
    EXPECT_EQ(y->type, BP_TYPE_F32);
    EXPECT_GT(bp_op_flops(y), 0u) << bp_last_error();  // validates the node again
    EXPECT_FAILS_WITH(bp_mul_mat(ctx, w, f16(256, 3)), "the type must be f32");
    EXPECT_FAILS_WITH(bp_mul_mat(ctx, f32(256, 3), w), "the type must be f32", "quantized tensors are read only by");
  }
}

TEST_F(CoreTest, GetRowsOfAQuantizedTableGivesF32) {
  bp_tensor *table = bp_tensor_new_2d(ctx, BP_TYPE_Q4_0, 64, 10);
  bp_tensor *rows = bp_get_rows(ctx, table, i32(4));
  expect_shape(rows, 64, 4, 1, 1);
  EXPECT_EQ(rows->type, BP_TYPE_F32);
  for (bp_type t : {BP_TYPE_Q5_K, BP_TYPE_BF16}) {
    bp_tensor *r = bp_get_rows(ctx, bp_tensor_new_2d(ctx, t, 256, 10), i32(4));
    ASSERT_NE(r, nullptr) << bp_type_name(t) << ": " << bp_last_error();
    expect_shape(r, 256, 4, 1, 1);
    EXPECT_EQ(r->type, BP_TYPE_F32);
  }
}

// Q5_K is a block type like Q4_K; BF16 has blocks of one value but is a
// weight encoding all the same: dense rows, dim 0 first, read only by
// MUL_MAT and GET_ROWS, written only from f32.
TEST_F(CoreTest, Q5KAndBf16FollowTheQuantizedRules) {
  bp_tensor *q5 = bp_tensor_new_2d(ctx, BP_TYPE_Q5_K, 512, 3);
  ASSERT_NE(q5, nullptr) << bp_last_error();
  EXPECT_EQ(q5->nb[0], 176u);
  EXPECT_EQ(q5->nb[1], 352u);
  EXPECT_EQ(bp_tensor_nbytes(q5), 3u * 352);
  EXPECT_FAILS_WITH(bp_tensor_new_1d(ctx, BP_TYPE_Q5_K, 100), "q5_K rows hold whole blocks of 256 values");
  bp_tensor *bf = bp_tensor_new_2d(ctx, BP_TYPE_BF16, 5, 3);  // any row length
  ASSERT_NE(bf, nullptr) << bp_last_error();
  EXPECT_EQ(bf->nb[0], 2u);
  EXPECT_EQ(bf->nb[1], 10u);
  EXPECT_EQ(bp_tensor_nbytes(bf), 30u);
  EXPECT_TRUE(bp_tensor_is_contiguous(bf));
  bp_tensor *c = bp_cast(ctx, f32(5, 3), BP_TYPE_BF16);
  ASSERT_NE(c, nullptr) << bp_last_error();
  EXPECT_EQ(c->type, BP_TYPE_BF16);
  EXPECT_NE(bp_cpy(ctx, f32(5, 3), bf), nullptr) << bp_last_error();
  const char *hint = "quantized tensors are read only by MUL_MAT";
  EXPECT_FAILS_WITH(bp_add(ctx, bf, bf), "bp_add", "bf16", hint);
  EXPECT_FAILS_WITH(bp_add(ctx, q5, q5), "bp_add", "q5_K", hint);
  EXPECT_FAILS_WITH(bp_cast(ctx, bf, BP_TYPE_F32), "cannot convert bf16 to f32");
  EXPECT_FAILS_WITH(bp_cast(ctx, f16(5, 3), BP_TYPE_BF16), "cannot convert f16 to bf16");
  EXPECT_FAILS_WITH(bp_mul_mat(ctx, f32(5, 2), bf), "the type must be f32");
}

TEST_F(CoreTest, CpyAndContQuantizeF32Only) {
  bp_tensor *src = f32(256, 2);
  bp_tensor *dst = bp_tensor_new_2d(ctx, BP_TYPE_Q4_K, 256, 2);
  bp_tensor *c = bp_cpy(ctx, src, dst);
  ASSERT_NE(c, nullptr) << bp_last_error();
  EXPECT_EQ(c->type, BP_TYPE_Q4_K);
  bp_tensor *q = bp_cast(ctx, src, BP_TYPE_Q8_0);
  expect_shape(q, 256, 2, 1, 1);
  EXPECT_EQ(q->type, BP_TYPE_Q8_0);
  EXPECT_EQ(q->nb[1], 8u * 34);
  EXPECT_FAILS_WITH(bp_cast(ctx, f32(100), BP_TYPE_Q8_0), "q8_0 rows hold whole blocks of 32", "ne[0] = 100");
  EXPECT_FAILS_WITH(bp_cast(ctx, dst, BP_TYPE_F32), "cannot convert q4_K to f32");
  EXPECT_FAILS_WITH(bp_cast(ctx, f16(256), BP_TYPE_Q8_0), "cannot convert f16 to q8_0");
  EXPECT_FAILS_WITH(bp_cpy(ctx, f32(512), dst), "differ in dim 0", "quantizes whole rows");
}

TEST_F(CoreTest, OtherOpsRefuseQuantizedInputs) {
  bp_tensor *q = bp_tensor_new_2d(ctx, BP_TYPE_Q8_0, 64, 2);
  const char *hint = "quantized tensors are read only by MUL_MAT";
  EXPECT_FAILS_WITH(bp_add(ctx, q, q), "bp_add", "q8_0", hint);
  EXPECT_FAILS_WITH(bp_add(ctx, f32(64, 2), q), "bp_add", hint);
  EXPECT_FAILS_WITH(bp_scale(ctx, q, 2.0f), "bp_scale", hint);
  EXPECT_FAILS_WITH(bp_unary(ctx, q, BP_OP_SILU), hint);
  EXPECT_FAILS_WITH(bp_rms_norm(ctx, q, 1e-5f), hint);
  EXPECT_FAILS_WITH(bp_soft_max(ctx, q, nullptr, 1.0f), hint);
  EXPECT_FAILS_WITH(bp_sum_rows(ctx, q), hint);
  EXPECT_FAILS_WITH(bp_concat(ctx, q, q, 1), "CONCAT does not take quantized tensors");
  EXPECT_FAILS_WITH(bp_cont(ctx, q), "cannot convert q8_0 to q8_0");
}

}  // namespace
