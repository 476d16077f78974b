// op_new_test.cpp: bp_op_new, the generic builder, gives the same node as
// the typed builders and refuses what their signatures cannot express.
#include <cstring>

#include "core/core_test_util.hpp"

namespace {

using bp_test::CoreTest;
using bp_test::expect_shape;

int32_t bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

// The node bp_op_new builds equals the typed builder's in every field the
// op table sets (op, type, shape, strides, sources, parameters).
void expect_same_node(const bp_tensor *a, const bp_tensor *b) {
  ASSERT_NE(a, nullptr) << bp_last_error();
  ASSERT_NE(b, nullptr) << bp_last_error();
  EXPECT_EQ(a->op, b->op);
  EXPECT_EQ(a->type, b->type);
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    EXPECT_EQ(a->ne[i], b->ne[i]);
    EXPECT_EQ(a->nb[i], b->nb[i]);
  }
  for (int i = 0; i < BP_MAX_SRC; ++i) EXPECT_EQ(a->src[i], b->src[i]);
  EXPECT_EQ(std::memcmp(a->op_params, b->op_params, sizeof a->op_params), 0);
  EXPECT_EQ(a->view_src, b->view_src);
  EXPECT_EQ(a->view_offs, b->view_offs);
}

TEST_F(CoreTest, OpNewMatchesTheTypedBuilders) {
  bp_tensor *a = f32(8, 4), *b = f32(8, 3), *m = f32(8, 4), *ids = i32(2), *pos = i32(4);
  bp_tensor *ab[] = {a, b};
  expect_same_node(bp_op_new(ctx, BP_OP_MUL_MAT, ab, 2, nullptr, 0), bp_mul_mat(ctx, a, b));
  bp_tensor *aa[] = {a, m};
  expect_same_node(bp_op_new(ctx, BP_OP_ADD, aa, 2, nullptr, 0), bp_add(ctx, a, m));
  const int32_t scale[] = {bits(0.5f)};
  expect_same_node(bp_op_new(ctx, BP_OP_SCALE, &a, 1, scale, 1), bp_scale(ctx, a, 0.5f));
  const int32_t clamp[] = {bits(-1.0f), bits(2.0f)};
  expect_same_node(bp_op_new(ctx, BP_OP_CLAMP, &a, 1, clamp, 2), bp_clamp(ctx, a, -1.0f, 2.0f));
  // SOFT_MAX's mask is optional: left out, given as NULL, or given.
  expect_same_node(bp_op_new(ctx, BP_OP_SOFT_MAX, &a, 1, scale, 1), bp_soft_max(ctx, a, nullptr, 0.5f));
  bp_tensor *a_null[] = {a, nullptr};
  expect_same_node(bp_op_new(ctx, BP_OP_SOFT_MAX, a_null, 2, scale, 1), bp_soft_max(ctx, a, nullptr, 0.5f));
  expect_same_node(bp_op_new(ctx, BP_OP_SOFT_MAX, aa, 2, scale, 1), bp_soft_max(ctx, a, m, 0.5f));
  bp_tensor *rows[] = {a, ids};
  expect_same_node(bp_op_new(ctx, BP_OP_GET_ROWS, rows, 2, nullptr, 0), bp_get_rows(ctx, a, ids));
  // CPY aliases its destination, as bp_cpy does.
  bp_tensor *dst = f16(8, 4);
  bp_tensor *cp[] = {a, dst};
  expect_same_node(bp_op_new(ctx, BP_OP_CPY, cp, 2, nullptr, 0), bp_cpy(ctx, a, dst));
  // CONT keeps the source's type.
  bp_tensor *h = f16(8, 4);
  expect_same_node(bp_op_new(ctx, BP_OP_CONT, &h, 1, nullptr, 0), bp_cont(ctx, h));
  const int32_t dim[] = {1};
  bp_tensor *cc[] = {a, m};
  expect_same_node(bp_op_new(ctx, BP_OP_CONCAT, cc, 2, dim, 1), bp_concat(ctx, a, m, 1));
  bp_tensor *x = f32(8, 2, 4);
  bp_tensor *rp[] = {x, pos};
  const int32_t rope[] = {8, BP_ROPE_NEOX, bits(10000.0f), bits(1.0f)};
  expect_same_node(bp_op_new(ctx, BP_OP_ROPE, rp, 2, rope, 4), bp_rope(ctx, x, pos, 8, BP_ROPE_NEOX, 10000.0f, 1.0f));
  bp_tensor *ff = f32(4);
  bp_tensor *rpf[] = {x, pos, ff};
  expect_same_node(bp_op_new(ctx, BP_OP_ROPE, rpf, 3, rope, 4),
                   bp_rope_ext(ctx, x, pos, ff, 8, BP_ROPE_NEOX, 10000.0f, 1.0f));
  // Parameters given in full (trailing zeros) are the same as fewer words.
  const int32_t concat_padded[] = {1};
  expect_same_node(bp_op_new(ctx, BP_OP_CONCAT, cc, 2, concat_padded, 1), bp_concat(ctx, a, m, 1));
  expect_shape(bp_op_new(ctx, BP_OP_SUM_ROWS, &a, 1, nullptr, 0), 1, 4, 1, 1);
  EXPECT_EQ(bp_last_status(), BP_OK);
}

TEST_F(CoreTest, OpNewRefusesWhatTheTypedBuildersCannotBeGiven) {
  bp_tensor *a = f32(8, 4), *b = f32(8, 3);
  bp_tensor *ab[] = {a, b};
  const int32_t words[BP_MAX_OP_PARAMS + 1] = {};
  EXPECT_FAILS_WITH(bp_op_new(ctx, static_cast<bp_op>(BP_OP_COUNT), ab, 2, nullptr, 0), "bp_op_new", "unknown op");
  EXPECT_FAILS_WITH(bp_op_new(ctx, static_cast<bp_op>(-1), ab, 2, nullptr, 0), "unknown op -1");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_NONE, nullptr, 0, nullptr, 0), "NONE is a leaf or a view", "bp_tensor_new");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_RESHAPE, ab, 1, nullptr, 0), "RESHAPE", "bp_reshape");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_MUL_MAT, ab, 1, nullptr, 0), "bp_op_new(MUL_MAT)", "1 sources given",
                    "takes 2");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_NEG, ab, 2, nullptr, 0), "bp_op_new(NEG)", "2 sources given");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_SOFT_MAX, ab, 3, words, 1), "SOFT_MAX takes 1 to 2");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_ADD, nullptr, 2, nullptr, 0), "src is NULL");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_ADD, ab, -1, nullptr, 0), "-1 sources given");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_ADD, ab, 2, words, 1), "1 parameter words given", "ADD reads 0");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_ROPE, ab, 2, words, BP_MAX_OP_PARAMS + 1), "ROPE reads 4");
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_SCALE, &a, 1, nullptr, 1), "params is NULL");
  // The op's own rule, with the typed builder's message.
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_ADD, ab, 2, nullptr, 0), "bp_add", "dim 1");
  const int32_t bad_dim[] = {7};
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_CONCAT, ab, 2, bad_dim, 1), "bp_concat");
  const int32_t odd_dims[] = {3, 0, bits(10000.0f), bits(1.0f)};
  bp_tensor *rp[] = {f32(8, 2, 4), i32(4)};
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_ROPE, rp, 2, odd_dims, 4), "bp_rope");
  // A required source that is NULL is named as the typed builder names it.
  bp_tensor *nb[] = {nullptr, b};
  EXPECT_FAILS_WITH(bp_op_new(ctx, BP_OP_ADD, nb, 2, nullptr, 0), "bp_add: a is NULL");
  EXPECT_FAILS_WITH(bp_op_new(nullptr, BP_OP_ADD, ab, 2, nullptr, 0), "bp_op_new", "ctx");
}

}  // namespace
