// abi_minor_test.cpp: what the plugin ABI's minor version changes (plugin.h,
// BP_PLUGIN_ABI_MINOR). A plugin built for 1.1 (its table ends at
// enumerate, its descriptor says minor 1) loads, lists its devices and
// computes; it is never asked about a ROPE with frequency factors (src[2],
// added in 1.2), which it would run without them. A 1.2 plugin with
// init_with_host gets the very host table there, and init is not called.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "registry_test_util.hpp"

using bp_test::load_fixture;

namespace {

// A ROPE of a [8, 2, 3] by positions [3], with |factors| (may be NULL).
struct rope_graph {
  explicit rope_graph(bool with_factors) {
    ctx = bp_context_new(0);
    a = bp_tensor_new_3d(ctx, BP_TYPE_F32, 8, 2, 3);
    pos = bp_tensor_new_1d(ctx, BP_TYPE_I32, 3);
    factors = with_factors ? bp_tensor_new_1d(ctx, BP_TYPE_F32, 4) : nullptr;
    node = bp_rope_ext(ctx, a, pos, factors, 8, BP_ROPE_NORMAL, 10000.0f, 1.0f);
  }
  ~rope_graph() { bp_context_free(ctx); }
  rope_graph(const rope_graph &) = delete;
  rope_graph &operator=(const rope_graph &) = delete;
  bp_context *ctx = nullptr;
  bp_tensor *a = nullptr, *pos = nullptr, *factors = nullptr, *node = nullptr;
};

TEST(RegistryAbiMinor, PluginOfAbi11LoadsListsDevicesAndComputes) {
  bp_plugin *p = load_fixture("abi_1_1_plugin");
  ASSERT_NE(p, nullptr) << bp_last_error();
  EXPECT_EQ(bp_plugin_device_count(p), 1u);
  EXPECT_EQ(bp_plugin_status(p, nullptr), BP_OK);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("abi_1_1_plugin", &be), BP_OK) << bp_last_error();
  // Its device table has no weight buffer type: NULL and UNIMPLEMENTED.
  EXPECT_EQ(bp_device_weight_buffer_type(bp_backend_device(be)), nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_UNIMPLEMENTED);
  bp_test::add_graph add(be, 5);
  ASSERT_EQ(add.status, BP_OK) << bp_last_error();
  const std::vector<float> x = {1, 2, 3, 4, 5}, y = {10, 20, 30, 40, 50};
  std::vector<float> out(5);
  ASSERT_EQ(bp_tensor_set(add.a, x.data(), 0, sizeof(float) * 5), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(add.b, y.data(), 0, sizeof(float) * 5), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, add.g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(add.c, out.data(), 0, sizeof(float) * 5), BP_OK) << bp_last_error();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], x[i] + y[i]) << i;
  add.release();
  bp_backend_free(be);
  EXPECT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryAbiMinor, PluginOfAbi12GetsTheHostTableThroughInitWithHostAndNoInit) {
  bp_test::log_capture logs;
  bp_plugin *p = load_fixture("abi_1_2_host");  // init would fail the load
  ASSERT_NE(p, nullptr) << bp_last_error();
  // The fixture's entry keeps no table for logging: this line went through
  // the table init_with_host received, the one the entry was given.
  EXPECT_EQ(logs.count("abi_1_2_host", "fake: init_with_host got the entry's host table"), 1u);
  EXPECT_EQ(logs.count("abi_1_2_host", "another host table"), 0u);
  EXPECT_EQ(logs.count("abi_1_2_host", "the host called init"), 0u);
  EXPECT_EQ(bp_plugin_device_count(p), 1u);
  // Valid until shutdown returns: shutdown still logs through it.
  ASSERT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
  EXPECT_EQ(logs.count("abi_1_2_host", "fake: shutdown"), 1u);
}

TEST(RegistryAbiMinor, RopeWithFrequencyFactorsIsNotSupportedOnAPluginOfAbi11) {
  // Both fixtures claim every ROPE by its first two sources alone; the host
  // asks only the 1.2 one about a ROPE with factors.
  ASSERT_NE(load_fixture("abi_1_1_plugin"), nullptr) << bp_last_error();
  ASSERT_NE(load_fixture("abi_1_2_host"), nullptr) << bp_last_error();
  bp_backend *old_plugin = nullptr, *new_plugin = nullptr;
  ASSERT_EQ(bp_backend_new("abi_1_1_plugin", &old_plugin), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_new("abi_1_2_host", &new_plugin), BP_OK) << bp_last_error();
  rope_graph plain(false), with_factors(true);
  ASSERT_NE(plain.node, nullptr) << bp_last_error();
  ASSERT_NE(with_factors.node, nullptr) << bp_last_error();
  EXPECT_TRUE(bp_backend_supports_op(old_plugin, plain.node));
  EXPECT_FALSE(bp_backend_supports_op(old_plugin, with_factors.node));
  EXPECT_TRUE(bp_backend_supports_op(new_plugin, plain.node));
  EXPECT_TRUE(bp_backend_supports_op(new_plugin, with_factors.node));

  // Computing it there directly is refused before the plugin sees it, saying why.
  bp_graph *g = bp_graph_new(with_factors.ctx, 0);
  ASSERT_EQ(bp_graph_build(g, with_factors.node), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(with_factors.ctx, old_plugin, &buf), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_backend_graph_compute(old_plugin, g), BP_ERR_UNIMPLEMENTED);
  const std::string why = bp_last_error();
  EXPECT_NE(why.find("built for ABI 1.1, which predates this form of the op: ABI 1.2 added it"), std::string::npos)
      << why;
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_backend_free(old_plugin);
  bp_backend_free(new_plugin);
}

TEST(RegistryAbiMinor, SchedulerRunsARopeWithFactorsBesideAPluginOfAbi11Elsewhere) {
  ASSERT_NE(load_fixture("abi_1_1_plugin"), nullptr) << bp_last_error();
  bp_backend *backends[2] = {nullptr, nullptr};
  ASSERT_EQ(bp_backend_new("abi_1_1_plugin", &backends[0]), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_new("cpu", &backends[1]), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_set_flags(bp_tensor_new_3d(ctx, BP_TYPE_F32, 8, 2, 3), BP_TENSOR_FLAG_INPUT);
  bp_tensor *pos = bp_tensor_set_flags(bp_tensor_new_1d(ctx, BP_TYPE_I32, 3), BP_TENSOR_FLAG_INPUT);
  bp_tensor *factors = bp_tensor_set_flags(bp_tensor_new_1d(ctx, BP_TYPE_F32, 4), BP_TENSOR_FLAG_INPUT);
  bp_tensor *rope = bp_rope_ext(ctx, a, pos, factors, 8, BP_ROPE_NORMAL, 10000.0f, 1.0f);
  ASSERT_NE(rope, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, rope), BP_OK) << bp_last_error();
  bp_sched *sched = bp_sched_new(backends, nullptr, 2, 0, false);
  ASSERT_NE(sched, nullptr) << bp_last_error();
  ASSERT_EQ(bp_sched_alloc_graph(sched, g), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_sched_get_tensor_backend(sched, rope), backends[1]);
  // And it runs there: factors of 1 change nothing, positions of 0 rotate nothing.
  std::vector<float> x(48), ones(4, 1.0f), out(48);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i);
  const std::vector<int32_t> zeros(3, 0);
  ASSERT_EQ(bp_tensor_set(a, x.data(), 0, sizeof(float) * x.size()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(pos, zeros.data(), 0, sizeof(int32_t) * zeros.size()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(factors, ones.data(), 0, sizeof(float) * ones.size()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_sched_graph_compute(sched, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(rope, out.data(), 0, sizeof(float) * out.size()), BP_OK) << bp_last_error();
  for (size_t i = 0; i < out.size(); ++i) EXPECT_FLOAT_EQ(out[i], x[i]) << i;
  bp_sched_free(sched);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_backend_free(backends[0]);
  bp_backend_free(backends[1]);
}

}  // namespace
