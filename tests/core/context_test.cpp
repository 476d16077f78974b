// context_test.cpp: contexts, leaf tensors, names, flags, limits, fp16 helpers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/core_test_util.hpp"

namespace {

using bp_test::CoreTest;
using bp_test::expect_shape;

TEST_F(CoreTest, NewTensorHasContiguousStridesAndNoMemory) {
  bp_tensor *t = bp_tensor_new_3d(ctx, BP_TYPE_F16, 7, 33, 2);
  expect_shape(t, 7, 33, 2, 1);
  EXPECT_EQ(t->struct_size, sizeof(bp_tensor));
  EXPECT_EQ(t->type, BP_TYPE_F16);
  EXPECT_EQ(t->nb[0], 2u);
  EXPECT_EQ(t->nb[1], 14u);
  EXPECT_EQ(t->nb[2], 14u * 33);
  EXPECT_EQ(t->nb[3], 14u * 33 * 2);
  EXPECT_EQ(t->op, BP_OP_NONE);
  EXPECT_EQ(t->data, nullptr);
  EXPECT_EQ(t->buffer, nullptr);
  EXPECT_EQ(t->view_src, nullptr);
  EXPECT_EQ(t->flags, 0u);
  for (int i = 0; i < BP_MAX_SRC; ++i) EXPECT_EQ(t->src[i], nullptr);
  EXPECT_TRUE(bp_tensor_is_contiguous(t));
  EXPECT_EQ(bp_tensor_nbytes(t), 2u * 7 * 33 * 2);
  EXPECT_EQ(bp_tensor_nelements(t), 7 * 33 * 2);
  EXPECT_EQ(bp_tensor_nrows(t), 33 * 2);
}

TEST_F(CoreTest, EveryRankAndType) {
  expect_shape(bp_tensor_new_1d(ctx, BP_TYPE_I32, 257), 257, 1, 1, 1);
  expect_shape(bp_tensor_new_2d(ctx, BP_TYPE_F32, 1, 7), 1, 7, 1, 1);
  expect_shape(bp_tensor_new_4d(ctx, BP_TYPE_F16, 2, 3, 4, 5), 2, 3, 4, 5);
  const int64_t ne[4] = {3, 5, 7, 9};
  for (int n = 1; n <= 4; ++n) {
    bp_tensor *t = bp_tensor_new(ctx, BP_TYPE_F32, n, ne);
    ASSERT_NE(t, nullptr);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(t->ne[i], i < n ? ne[i] : 1);
  }
  EXPECT_EQ(bp_context_tensor_count(ctx), 7u);
}

TEST_F(CoreTest, BadTensorArgumentsGiveMessages) {
  const int64_t ne[4] = {3, 5, 7, 9};
  EXPECT_FAILS_WITH(bp_tensor_new(ctx, BP_TYPE_F32, 0, ne), "n_dims = 0");
  EXPECT_FAILS_WITH(bp_tensor_new(ctx, BP_TYPE_F32, 5, ne), "n_dims = 5");
  EXPECT_FAILS_WITH(bp_tensor_new(ctx, BP_TYPE_F32, 2, nullptr), "ne is NULL");
  EXPECT_FAILS_WITH(bp_tensor_new_1d(ctx, (bp_type)99, 4), "unknown type 99");
  EXPECT_FAILS_WITH(bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 0), "ne[1] = 0", ">= 1");
  EXPECT_FAILS_WITH(bp_tensor_new_2d(ctx, BP_TYPE_F32, -3, 2), "ne[0] = -3");
  const int64_t big = int64_t(1) << 40;
  EXPECT_FAILS_WITH(bp_tensor_new_3d(ctx, BP_TYPE_F32, big, big, 2), "overflow");
  EXPECT_FAILS_WITH(bp_tensor_new_1d(ctx, BP_TYPE_F32, std::numeric_limits<int64_t>::max()), "overflow");
  EXPECT_EQ(bp_context_tensor_count(ctx), 0u);
  // A NULL context records a message when nothing failed before.
  EXPECT_FAILS_WITH(bp_tensor_new_1d(nullptr, BP_TYPE_F32, 4), "ctx is NULL");
}

TEST(ContextTest, MaxTensorsCapNamesTheLimit) {
  bp_context *ctx = bp_context_new(3);
  ASSERT_NE(ctx, nullptr);
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 4);
  ASSERT_NE(bp_tensor_new_1d(ctx, BP_TYPE_F32, 4), nullptr);
  ASSERT_NE(bp_neg(ctx, a), nullptr);
  bp_clear_error();
  EXPECT_EQ(bp_tensor_new_1d(ctx, BP_TYPE_F32, 4), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("max_tensors = 3"), std::string::npos) << bp_last_error();
  // Ops and views hit the same cap.
  EXPECT_EQ(bp_neg(ctx, a), nullptr);
  EXPECT_EQ(bp_transpose(ctx, a), nullptr);
  EXPECT_EQ(bp_context_tensor_count(ctx), 3u);
  bp_context_free(ctx);
}

TEST_F(CoreTest, EnumerateAndFindByName) {
  bp_tensor *a = bp_tensor_set_name(f32(4), "weights");
  bp_tensor *b = bp_tensor_set_name(f32(4), "bias");
  bp_tensor_set_name(f32(4), "weights");  // duplicate name: find returns the first
  EXPECT_EQ(bp_context_tensor(ctx, 0), a);
  EXPECT_EQ(bp_context_tensor(ctx, 1), b);
  EXPECT_EQ(bp_context_tensor(ctx, 3), nullptr);
  bp_tensor *found = nullptr;
  EXPECT_EQ(bp_context_find_tensor(ctx, "weights", &found), BP_OK);
  EXPECT_EQ(found, a);
  EXPECT_EQ(bp_context_find_tensor(ctx, "bias", &found), BP_OK);
  EXPECT_EQ(found, b);
  EXPECT_EQ(bp_context_find_tensor(ctx, "nope", &found), BP_ERR_NOT_FOUND);
  EXPECT_EQ(found, nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("'nope'"), std::string::npos) << bp_last_error();
  found = b;
  EXPECT_EQ(bp_context_find_tensor(ctx, nullptr, &found), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(found, nullptr);
  EXPECT_EQ(bp_context_find_tensor(ctx, "bias", nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_context_find_tensor(nullptr, "bias", &found), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_context_tensor_count(nullptr), 0u);
  EXPECT_EQ(bp_context_tensor(nullptr, 0), nullptr);
}

TEST_F(CoreTest, TensorAddressesStayValidAsTheContextGrows) {
  bp_tensor *first = f32(3);
  for (int i = 0; i < 5000; ++i) ASSERT_NE(f32(1), nullptr);
  EXPECT_EQ(bp_context_tensor(ctx, 0), first);
  EXPECT_EQ(first->ne[0], 3);
}

TEST_F(CoreTest, LongNamesAreTruncated) {
  std::string name(200, 'x');
  bp_tensor *t = bp_tensor_set_name(f32(1), name.c_str());
  EXPECT_EQ(std::strlen(t->name), size_t(BP_MAX_NAME - 1));
  EXPECT_EQ(bp_tensor_set_name(t, nullptr), t);
  EXPECT_STREQ(t->name, "");
  EXPECT_EQ(bp_tensor_set_name(nullptr, "x"), nullptr);
}

TEST_F(CoreTest, FlagsAccumulate) {
  bp_tensor *t = f32(1);
  EXPECT_EQ(bp_tensor_set_flags(t, BP_TENSOR_FLAG_INPUT), t);
  bp_tensor_set_flags(t, BP_TENSOR_FLAG_PARAM);
  EXPECT_EQ(t->flags, unsigned(BP_TENSOR_FLAG_INPUT | BP_TENSOR_FLAG_PARAM));
  EXPECT_EQ(bp_tensor_set_flags(nullptr, 1), nullptr);
}

TEST(ContextTest, FreeNullIsFine) { bp_context_free(nullptr); }

// fp16 helpers: exact on representable values, round-to-nearest-even otherwise.
TEST(Fp16Test, RoundTripsAndRounding) {
  const float exact[] = {0.0f, -0.0f, 1.0f, -2.5f, 0.333251953125f, 65504.0f, -65504.0f, 6.103515625e-05f,
                         5.960464477539063e-08f /* smallest subnormal */, 1023.5f};
  for (float f : exact) {
    EXPECT_EQ(bp_fp16_to_fp32(bp_fp32_to_fp16(f)), f) << f;
  }
  EXPECT_TRUE(std::signbit(bp_fp16_to_fp32(bp_fp32_to_fp16(-0.0f))));
  EXPECT_EQ(bp_fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(bp_fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(bp_fp32_to_fp16(65520.0f), 0x7c00);  // rounds up to +inf
  EXPECT_EQ(bp_fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(bp_fp16_to_fp32(bp_fp32_to_fp16(std::nanf("")))));
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to even (1).
  EXPECT_EQ(bp_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(bp_fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  // Every finite half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf / nan
    ASSERT_EQ(bp_fp32_to_fp16(bp_fp16_to_fp32((uint16_t)h)), h) << std::hex << h;
  }
  // Against a double reference: the nearest half to x is within half an ulp.
  for (double x = -70000.0; x < 70000.0; x += 123.456789) {
    const float xf = (float)x;
    const float h = bp_fp16_to_fp32(bp_fp32_to_fp16(xf));
    if (std::fabs(xf) >= 65520.0f) {
      EXPECT_TRUE(std::isinf(h)) << x;
      continue;
    }
    const double ulp = std::ldexp(1.0, std::max(-24, (int)std::floor(std::log2(std::fabs((double)xf))) - 10));
    EXPECT_LE(std::fabs((double)h - (double)xf), ulp / 2) << x;
  }
}

}  // namespace
