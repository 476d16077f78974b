// trace_test.cpp: the vulkan plugin's node spans from timestamp queries
// (backplane/trace.h): every node of a graph once on its backend's "nodes"
// track, for a direct compute and for a replayed graph plan, in order and
// between the submission and the synchronize that waited for it; results the
// same traced or not.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "support/find.hpp"
#include "support/trace_check.hpp"

namespace {

TEST(VulkanTrace, NodesCarryDeviceTimesForComputesAndPlanReplays) {
  bp_registry_add_path(BP_TEST_PLUGIN_DIR);
  bp_plugin *p = bp_test::find_plugin("vulkan");
  if (!p || bp_plugin_device_count(p) == 0) GTEST_SKIP() << "no Vulkan device";
  if (bp_trace_active()) bp_trace_stop();  // BP_TRACE in the environment
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("vulkan:0", &be), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *w = bp_tensor_set_name(bp_tensor_new_2d(ctx, BP_TYPE_F32, 64, 48), "w");
  bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(ctx, BP_TYPE_F32, 64, 5), "x");
  bp_tensor *b = bp_tensor_set_name(bp_tensor_new_1d(ctx, BP_TYPE_F32, 48), "b");
  bp_tensor *prod = bp_tensor_set_name(bp_mul_mat(ctx, w, x), "prod");
  bp_tensor *sum = bp_tensor_set_name(bp_add(ctx, prod, b), "sum");
  bp_tensor *out = bp_tensor_set_name(bp_soft_max(ctx, bp_silu(ctx, sum), nullptr, 1.0f), "out");
  bp_tensor_set_name(out->src[0], "act");
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, out), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> values(64 * 48);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
  ASSERT_EQ(bp_tensor_set(w, values.data(), 0, 64 * 48 * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(x, values.data(), 0, 64 * 5 * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(b, values.data(), 0, 48 * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> untraced(48 * 5), traced(48 * 5), replayed(48 * 5);
  ASSERT_EQ(bp_tensor_get(out, untraced.data(), 0, untraced.size() * 4), BP_OK);
  bp_graph_plan *plan = nullptr;
  ASSERT_EQ(bp_graph_plan_new(be, g, &plan), BP_OK) << bp_last_error();

  const std::string path = std::string(::testing::TempDir()) + "/bp_vulkan_trace_" + std::to_string(getpid()) + ".json";
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(out, traced.data(), 0, traced.size() * 4), BP_OK);
  ASSERT_EQ(bp_graph_plan_compute_async(plan), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_synchronize(be), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(out, replayed.data(), 0, replayed.size() * 4), BP_OK);
  ASSERT_EQ(bp_trace_stop(), BP_OK) << bp_last_error();
  EXPECT_EQ(traced, untraced);
  EXPECT_EQ(replayed, untraced);

  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);
  const auto nodes = bp::test::spans_on(t, "node", "nodes");
  std::map<std::string, int> seen;
  for (const auto *s : nodes) ++seen[s->args.value("node", "")];
  for (const char *name : {"prod", "sum", "act", "out"}) EXPECT_EQ(seen[name], 2) << name;
  EXPECT_EQ(seen.size(), 4u);
  // Each node lies between the first submission and the last synchronize
  // (the clock mapping may be off by a few microseconds).
  const auto submits = bp::test::spans_on(t, "submit", "host calls");
  const auto syncs = bp::test::spans_on(t, "sync", "host calls");
  ASSERT_FALSE(submits.empty());
  ASSERT_FALSE(syncs.empty());
  int64_t first = submits[0]->begin_ns, last = 0;
  for (const auto *s : submits) first = std::min(first, s->begin_ns);
  for (const auto *s : syncs) last = std::max(last, s->end_ns);
  for (const auto *n : nodes) {
    EXPECT_GE(n->begin_ns, first) << n->args.value("node", "");
    EXPECT_LE(n->end_ns, last + 1000 * 1000) << n->args.value("node", "");
  }
  std::remove(path.c_str());
  bp_graph_plan_free(plan);
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_backend_free(be);
}

}  // namespace
