// set_rows_test.cpp: SET_ROWS on every shipped plugin that runs it (cpu,
// opencl, vulkan): good ids write their rows and leave the others alone; an
// id outside the destination is INVALID_ARGUMENT naming it, and nothing is
// written. (The conformance suite checks the values; this checks the error.)
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/find.hpp"

namespace {

class SetRows : public ::testing::TestWithParam<std::string> {};

TEST_P(SetRows, WritesTheNamedRowsAndRefusesABadIdWritingNothing) {
  bp_registry_add_path(BP_TEST_PLUGIN_DIR);
  bp_backend *be = nullptr;
  if (bp_backend_new(GetParam().c_str(), &be) != BP_OK) GTEST_SKIP() << GetParam() << ": " << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *dst = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3);
  bp_tensor *src = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 2);
  bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, 2);
  bp_tensor *r = bp_set_rows(ctx, dst, src, ids);
  ASSERT_NE(r, nullptr) << bp_last_error();
  if (!bp_backend_supports_op(be, r)) {
    bp_context_free(ctx);
    bp_backend_free(be);
    GTEST_SKIP() << GetParam() << " does not run SET_ROWS";
  }
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, r), BP_OK);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  const std::vector<float> before = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
  const std::vector<float> rows = {-1, -2, -3, -4, -5, -6, -7, -8};
  ASSERT_EQ(bp_tensor_set(dst, before.data(), 0, before.size() * sizeof(float)), BP_OK);
  ASSERT_EQ(bp_tensor_set(src, rows.data(), 0, rows.size() * sizeof(float)), BP_OK);

  const int32_t good[2] = {2, 0};
  ASSERT_EQ(bp_tensor_set(ids, good, 0, sizeof good), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> got(12);
  ASSERT_EQ(bp_tensor_get(dst, got.data(), 0, got.size() * sizeof(float)), BP_OK);
  EXPECT_EQ(got, (std::vector<float>{-5, -6, -7, -8, 10, 11, 12, 13, -1, -2, -3, -4}));

  ASSERT_EQ(bp_tensor_set(dst, before.data(), 0, before.size() * sizeof(float)), BP_OK);
  const int32_t bad[2] = {1, 3};
  ASSERT_EQ(bp_tensor_set(ids, bad, 0, sizeof bad), BP_OK);
  EXPECT_EQ(bp_backend_graph_compute(be, g), BP_ERR_INVALID_ARGUMENT);
  const std::string msg = bp_last_error();
  EXPECT_NE(msg.find("row id 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  ASSERT_EQ(bp_tensor_get(dst, got.data(), 0, got.size() * sizeof(float)), BP_OK);
  EXPECT_EQ(got, before) << "a refused SET_ROWS wrote rows";
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_backend_free(be);
}

INSTANTIATE_TEST_SUITE_P(Plugins, SetRows, ::testing::Values("cpu", "opencl", "vulkan"),
                         [](const ::testing::TestParamInfo<std::string> &i) { return i.param; });

}  // namespace
