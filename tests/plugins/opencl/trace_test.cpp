// trace_test.cpp: the opencl plugin's node spans from profiling events
// (backplane/trace.h): every node once on its backend's "nodes" track, in
// order, inside the time between its submission and the synchronize that
// waited for it; the profiling queue used only while tracing, and results
// the same either way.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "opencl_harness.hpp"
#include "support/trace_check.hpp"

namespace bp_opencl_test {
namespace {

TEST(OpenclTrace, NodesCarryDeviceTimesOnTheHostTimeline) {
  const auto specs = device_specs();
  if (specs.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
  if (bp_trace_active()) bp_trace_stop();  // BP_TRACE in the environment
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new((specs[0] + ",cache_dir=" + test_cache_dir()).c_str(), &be), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *w = bp_tensor_set_name(bp_tensor_new_2d(ctx, BP_TYPE_F32, 64, 48), "w");
  bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(ctx, BP_TYPE_F32, 64, 5), "x");
  bp_tensor *b = bp_tensor_set_name(bp_tensor_new_1d(ctx, BP_TYPE_F32, 48), "b");
  bp_tensor *out = bp_tensor_set_name(
      bp_silu(ctx, bp_tensor_set_name(bp_add(ctx, bp_tensor_set_name(bp_mul_mat(ctx, w, x), "prod"), b), "sum")),
      "out");
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, out), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> values(64 * 48);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
  ASSERT_EQ(bp_tensor_set(w, values.data(), 0, 64 * 48 * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(x, values.data(), 0, 64 * 5 * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(b, values.data(), 0, 48 * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();  // builds the kernels
  std::vector<float> untraced(48 * 5), traced(48 * 5), after(48 * 5);
  ASSERT_EQ(bp_tensor_get(out, untraced.data(), 0, untraced.size() * 4), BP_OK);

  const std::string path = std::string(::testing::TempDir()) + "/bp_opencl_trace_" + std::to_string(getpid()) + ".json";
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK) << bp_last_error();
  const int runs = 2;
  for (int i = 0; i < runs; ++i) ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(out, traced.data(), 0, traced.size() * 4), BP_OK);
  ASSERT_EQ(bp_trace_stop(), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();  // back on the plain queue
  ASSERT_EQ(bp_tensor_get(out, after.data(), 0, after.size() * 4), BP_OK);
  EXPECT_EQ(traced, untraced);
  EXPECT_EQ(after, untraced);

  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);
  const auto nodes = bp::test::spans_on(t, "node", "nodes");
  std::map<std::string, int> seen;
  for (const auto *s : nodes) ++seen[s->args.value("node", "")];
  EXPECT_EQ(seen["prod"], runs);
  EXPECT_EQ(seen["sum"], runs);
  EXPECT_EQ(seen["out"], runs);
  EXPECT_EQ(seen.size(), 3u);
  // Each node lies between its graph's submission and the synchronize that
  // waited for it (the clock mapping may be off by a few microseconds).
  const auto submits = bp::test::spans_on(t, "submit", "host calls");
  const auto syncs = bp::test::spans_on(t, "sync", "host calls");
  ASSERT_EQ(submits.size(), (size_t)runs);
  ASSERT_GE(syncs.size(), (size_t)runs);
  const int64_t slack_ns = 1000 * 1000;
  for (const auto *n : nodes) {
    bool placed = false;
    for (size_t r = 0; r < submits.size(); ++r) {
      int64_t sync_end = 0;
      for (const auto *s : syncs)
        if (s->begin_ns >= submits[r]->end_ns && (sync_end == 0 || s->end_ns < sync_end)) sync_end = s->end_ns;
      placed |= n->begin_ns >= submits[r]->begin_ns && n->end_ns <= sync_end + slack_ns;
    }
    EXPECT_TRUE(placed) << n->args.value("node", "") << " at " << n->begin_ns << " outside every submit..sync";
  }
  std::remove(path.c_str());
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_backend_free(be);
}

}  // namespace
}  // namespace bp_opencl_test
