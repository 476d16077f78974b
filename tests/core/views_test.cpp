// views_test.cpp: view, reshape, permute, transpose: shapes, strides,
// offsets, aliasing and bounds errors.
#include <string>

#include "core/core_test_util.hpp"

namespace {

using bp_test::CoreTest;
using bp_test::expect_shape;

TEST_F(CoreTest, View1dAtOffset) {
  bp_tensor *a = bp_tensor_set_name(f32(8, 3), "a");
  bp_tensor *v = bp_view_1d(ctx, a, 5, 4 * 10);
  expect_shape(v, 5, 1, 1, 1);
  EXPECT_EQ(v->op, BP_OP_VIEW);
  EXPECT_EQ(v->src[0], a);
  EXPECT_EQ(v->view_src, a);
  EXPECT_EQ(v->view_offs, 40u);
  EXPECT_EQ(v->type, BP_TYPE_F32);
  EXPECT_EQ(v->nb[0], 4u);
  EXPECT_TRUE(bp_tensor_is_contiguous(v));
  EXPECT_STREQ(v->name, "a (view)");
  // The last element of a is the last possible view element.
  EXPECT_NE(bp_view_1d(ctx, a, 1, 4 * 23), nullptr);
}

TEST_F(CoreTest, View2dWithRowStrideIsNotContiguous) {
  bp_tensor *a = f16(33, 7);
  // Columns 1..4 of every other row.
  bp_tensor *v = bp_view_2d(ctx, a, 4, 3, 2 * a->nb[1], 2);
  expect_shape(v, 4, 3, 1, 1);
  EXPECT_EQ(v->nb[0], 2u);
  EXPECT_EQ(v->nb[1], 2 * a->nb[1]);
  EXPECT_EQ(v->view_offs, 2u);
  EXPECT_FALSE(bp_tensor_is_contiguous(v));
  EXPECT_TRUE(bp_tensor_rows_contiguous(v));
}

TEST_F(CoreTest, View3dAnd4dStrides) {
  bp_tensor *a = f32(4, 5, 6, 7);
  bp_tensor *v3 = bp_view_3d(ctx, a, 4, 5, 2, a->nb[1], a->nb[2], a->nb[3]);
  expect_shape(v3, 4, 5, 2, 1);
  EXPECT_EQ(v3->view_offs, a->nb[3]);
  EXPECT_EQ(v3->nb[3], v3->nb[2] * 2);
  bp_tensor *v4 = bp_view_4d(ctx, a, 2, 5, 6, 7, a->nb[1], a->nb[2], a->nb[3], 8);
  expect_shape(v4, 2, 5, 6, 7);
  EXPECT_EQ(v4->nb[3], a->nb[3]);
  EXPECT_EQ(bp_tensor_nbytes(v4) + 8, bp_tensor_nbytes(a));
}

TEST_F(CoreTest, ViewOfViewAccumulatesOffsetAndKeepsTheOwner) {
  bp_tensor *a = f32(16, 4);
  bp_tensor *v = bp_view_1d(ctx, a, 32, 4 * 16);  // rows 1..2
  bp_tensor *w = bp_view_2d(ctx, v, 4, 2, 64, 8);
  ASSERT_NE(w, nullptr) << bp_last_error();
  EXPECT_EQ(w->src[0], v);
  EXPECT_EQ(w->view_src, a);
  EXPECT_EQ(w->view_offs, 64u + 8u);
  bp_tensor *t = bp_transpose(ctx, w);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->view_src, a);
  EXPECT_EQ(t->view_offs, 72u);
}

TEST_F(CoreTest, ViewsOutsideTheSourceAreRejected) {
  bp_tensor *a = bp_tensor_set_name(f32(8, 3), "a");
  EXPECT_FAILS_WITH(bp_view_1d(ctx, a, 25, 0), "bp_view_1d", "past the end", "'a' [8,3,1,1] f32", "96 bytes");
  EXPECT_FAILS_WITH(bp_view_1d(ctx, a, 1, 96), "past the end");
  EXPECT_FAILS_WITH(bp_view_1d(ctx, a, 4, 2), "offset 2", "multiple");
  EXPECT_FAILS_WITH(bp_view_2d(ctx, a, 8, 4, 32, 0), "past the end");
  EXPECT_FAILS_WITH(bp_view_2d(ctx, a, 8, 2, 0, 0), "nb[1] = 0");
  EXPECT_FAILS_WITH(bp_view_2d(ctx, a, 2, 2, 6, 0), "nb[1] = 6");
  EXPECT_FAILS_WITH(bp_view_1d(ctx, a, 0, 0), "ne[0] = 0");
  EXPECT_FAILS_WITH(bp_view_1d(ctx, a, -1, 0), "ne[0] = -1");
  EXPECT_FAILS_WITH(bp_view_4d(ctx, a, 2, 5, 2, 2, size_t(1) << 62, 8, 8, 0), "overflow");
  EXPECT_FAILS_WITH(bp_view_1d(ctx, a, 1, SIZE_MAX - 3), "past the end");
  // A view of a view is checked against the inner view, not the owner.
  bp_tensor *row = bp_view_1d(ctx, a, 8, 32);
  ASSERT_NE(row, nullptr);
  EXPECT_FAILS_WITH(bp_view_1d(ctx, row, 9, 0), "past the end", "32 bytes");
}

TEST_F(CoreTest, ReshapeKeepsElementsAndNeedsContiguous) {
  bp_tensor *a = bp_tensor_set_name(f32(6, 4), "a");
  bp_tensor *r = bp_reshape_3d(ctx, a, 3, 2, 4);
  expect_shape(r, 3, 2, 4, 1);
  EXPECT_EQ(r->op, BP_OP_RESHAPE);
  EXPECT_EQ(r->view_src, a);
  EXPECT_EQ(r->view_offs, 0u);
  EXPECT_TRUE(bp_tensor_is_contiguous(r));
  expect_shape(bp_reshape_2d(ctx, a, 24, 1), 24, 1, 1, 1);
  expect_shape(bp_reshape_4d(ctx, a, 1, 2, 3, 4), 1, 2, 3, 4);
  const int64_t ne1[1] = {24};
  expect_shape(bp_reshape(ctx, a, 1, ne1), 24, 1, 1, 1);

  EXPECT_FAILS_WITH(bp_reshape_2d(ctx, a, 5, 5), "24 elements", "[5,5,1,1]", "25");
  EXPECT_FAILS_WITH(bp_reshape(ctx, a, 0, ne1), "n_dims = 0");
  EXPECT_FAILS_WITH(bp_reshape(ctx, a, 2, nullptr), "NULL");
  bp_tensor *t = bp_transpose(ctx, a);
  EXPECT_FAILS_WITH(bp_reshape_2d(ctx, t, 24, 1), "not contiguous", "bp_cont");
  // A reshape of a contiguous view keeps its offset.
  bp_tensor *v = bp_view_1d(ctx, a, 6, 24);
  bp_tensor *rv = bp_reshape_2d(ctx, v, 2, 3);
  ASSERT_NE(rv, nullptr);
  EXPECT_EQ(rv->view_offs, 24u);
  EXPECT_EQ(rv->view_src, a);
}

TEST_F(CoreTest, PermuteMovesDimsAndStrides) {
  bp_tensor *a = f32(2, 3, 5, 7);
  bp_tensor *p = bp_permute(ctx, a, 2, 0, 3, 1);  // dim i of a becomes dim axis_i
  expect_shape(p, 3, 7, 2, 5);
  EXPECT_EQ(p->op, BP_OP_PERMUTE);
  EXPECT_EQ(p->nb[2], a->nb[0]);
  EXPECT_EQ(p->nb[0], a->nb[1]);
  EXPECT_EQ(p->nb[3], a->nb[2]);
  EXPECT_EQ(p->nb[1], a->nb[3]);
  EXPECT_EQ(p->op_params[0], 2);
  EXPECT_EQ(p->op_params[3], 1);
  EXPECT_FALSE(bp_tensor_is_contiguous(p));
  EXPECT_EQ(bp_tensor_nbytes(p), bp_tensor_nbytes(a));
  bp_tensor *id = bp_permute(ctx, a, 0, 1, 2, 3);
  ASSERT_NE(id, nullptr);
  EXPECT_TRUE(bp_tensor_is_contiguous(id));
  EXPECT_FAILS_WITH(bp_permute(ctx, a, 0, 0, 1, 2), "not a permutation");
  EXPECT_FAILS_WITH(bp_permute(ctx, a, 0, 1, 2, 4), "not a permutation");
  EXPECT_FAILS_WITH(bp_permute(ctx, a, -1, 1, 2, 3), "not a permutation");
}

TEST_F(CoreTest, TransposeSwapsFirstTwoDims) {
  bp_tensor *a = f16(7, 33);
  bp_tensor *t = bp_transpose(ctx, a);
  expect_shape(t, 33, 7, 1, 1);
  EXPECT_EQ(t->op, BP_OP_TRANSPOSE);
  EXPECT_EQ(t->nb[0], a->nb[1]);
  EXPECT_EQ(t->nb[1], a->nb[0]);
  EXPECT_FALSE(bp_tensor_rows_contiguous(t));
  bp_tensor *tt = bp_transpose(ctx, t);
  expect_shape(tt, 7, 33, 1, 1);
  EXPECT_TRUE(bp_tensor_is_contiguous(tt));
  EXPECT_EQ(tt->view_src, a);
}

TEST_F(CoreTest, ViewsOfOpResultsAliasTheOpNode) {
  bp_tensor *a = f32(4, 4);
  bp_tensor *s = bp_neg(ctx, a);
  bp_tensor *v = bp_view_1d(ctx, s, 4, 16);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->view_src, s);
  EXPECT_EQ(v->data, nullptr);
}

TEST_F(CoreTest, ViewsOfTensorsWithMemoryGetTheirAddressNow) {
  // The core never dereferences data; a fake address shows the arithmetic.
  bp_tensor *a = f32(16, 4);
  alignas(16) static char fake[256];
  a->data = fake;
  a->buffer_ctx = &fake[1];
  bp_tensor *v = bp_view_2d(ctx, a, 4, 2, 64, 8);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->data, fake + 8);
  EXPECT_EQ(v->buffer_ctx, &fake[1]);
  bp_tensor *w = bp_view_1d(ctx, v, 2, 64);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data, fake + 72);
  bp_tensor *b = f32(64);
  bp_tensor *c = bp_cpy(ctx, bp_neg(ctx, a), b);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->data, nullptr);  // b has no memory yet
  b->data = fake + 128;
  bp_tensor *c2 = bp_cpy(ctx, a, b);
  EXPECT_EQ(c2->data, fake + 128);
}

TEST_F(CoreTest, ViewNullInputsPropagate) {
  EXPECT_EQ(bp_view_1d(ctx, nullptr, 4, 0), nullptr);
  EXPECT_EQ(bp_reshape_2d(ctx, nullptr, 4, 1), nullptr);
  EXPECT_EQ(bp_permute(ctx, nullptr, 0, 1, 2, 3), nullptr);
  EXPECT_EQ(bp_transpose(nullptr, f32(2)), nullptr);
}

}  // namespace
