// remote_trace_test.cpp: a traced client's remote backend shows the server's
// node times: every node of each run once on the backend's "nodes" track,
// in the order the server ran them, inside the submission that carried it
// (a graph sent and re-run, and a plan's replay); untraced runs ask for no
// times and give the same results.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "remote_harness.hpp"
#include "support/trace_check.hpp"

namespace {

using bp_test::reload_remote;
using bp_test::serve_cpu;
using bp_test::serve_process;

struct RemoteTrace : ::testing::Test {
  serve_process server;
  void SetUp() override {
    BP_REQUIRE_SERVE();
    if (bp_trace_active()) bp_trace_stop();  // BP_TRACE in the environment
    ASSERT_TRUE(server.start(serve_cpu())) << server.log();
    setenv("BP_REMOTE", server.address().c_str(), 1);
    unsetenv("BP_REMOTE_TOKEN_FILE");
  }
  void TearDown() override {
    if (bp_trace_active()) bp_trace_stop();
    if (bp_plugin *p = bp_test::find_plugin("remote")) bp_plugin_unload(p);
  }
};

bp_tensor *named(bp_tensor *t, const char *name) { return bp_tensor_set_name(t, name); }

TEST_F(RemoteTrace, NodesCarryTheServersTimesInsideTheirSubmission) {
  reload_remote();
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *w = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, 128, 96), "w");
  bp_tensor *x = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, 128, 3), "x");
  bp_tensor *b = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 96), "b");
  bp_tensor *out = named(bp_silu(ctx, named(bp_add(ctx, named(bp_mul_mat(ctx, w, x), "prod"), b), "sum")), "out");
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, out), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> values(128 * 96);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 89) - 0.4f;
  ASSERT_EQ(bp_tensor_set(w, values.data(), 0, 128 * 96 * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(x, values.data(), 0, 128 * 3 * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(b, values.data(), 0, 96 * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> untraced(96 * 3), traced(96 * 3);
  ASSERT_EQ(bp_tensor_get(out, untraced.data(), 0, untraced.size() * 4), BP_OK);

  const std::string path = std::string(::testing::TempDir()) + "/bp_remote_trace_" + std::to_string(getpid()) + ".json";
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK) << bp_last_error();
  const int runs = 2;
  for (int i = 0; i < runs; ++i) ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  bp_graph_plan *plan = nullptr;
  ASSERT_EQ(bp_graph_plan_new(be, g, &plan), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_graph_plan_compute_async(plan), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_synchronize(be), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(out, traced.data(), 0, traced.size() * 4), BP_OK);
  ASSERT_EQ(bp_trace_stop(), BP_OK) << bp_last_error();
  EXPECT_EQ(traced, untraced);

  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);
  const auto nodes = bp::test::spans_on(t, "node", "nodes");
  std::map<std::string, int> seen;
  for (const auto *s : nodes) {
    ++seen[s->args.value("node", "")];
    EXPECT_EQ(t.processes.at(s->pid).rfind("backend remote", 0), 0u) << t.processes.at(s->pid);
  }
  EXPECT_EQ(seen["prod"], runs + 1);
  EXPECT_EQ(seen["sum"], runs + 1);
  EXPECT_EQ(seen["out"], runs + 1);
  EXPECT_EQ(seen.size(), 3u) << "no span for a node outside the graph";
  for (const auto *s : nodes)
    if (s->args.value("node", "") == "prod") {
      EXPECT_EQ(s->name, "MUL_MAT");
      EXPECT_EQ(s->args["shape"], nlohmann::json::parse("[96,3,1,1]"));
    }

  // Each run's three nodes lie inside one submission, in the order the
  // server ran them, and take no more time than it did.
  auto submits = bp::test::spans_on(t, "submit", "host calls");
  ASSERT_EQ(submits.size(), static_cast<size_t>(runs + 1)) << "two submits and a plan submit";
  for (const auto *sub : submits) {
    std::vector<const bp::test::trace_span *> inside;
    for (const auto *s : nodes)
      if (s->begin_ns >= sub->begin_ns && s->end_ns <= sub->end_ns) inside.push_back(s);
    ASSERT_EQ(inside.size(), 3u) << sub->name;
    EXPECT_EQ(inside[0]->args.value("node", ""), "prod");
    EXPECT_EQ(inside[1]->args.value("node", ""), "sum");
    EXPECT_EQ(inside[2]->args.value("node", ""), "out");
    EXPECT_LE(inside[0]->end_ns, inside[1]->begin_ns);
    EXPECT_LE(inside[1]->end_ns, inside[2]->begin_ns);
  }
  std::remove(path.c_str());
  bp_graph_plan_free(plan);
  bp_graph_free(g);
  bp_buffer_free(buf);
  bp_context_free(ctx);
  bp_backend_free(be);
}

}  // namespace
