// sched_partial_test.cpp: the scheduler over the `partial` fixture backend
// (its own non-host memory, only ADD, MUL, MUL_MAT, RMS_NORM, SILU and
// SCALE) and the cpu: splits, copies, weights pulling their consumers, the
// eval callback across backends and pipelined runs, all compared with a
// cpu-only run of the same graph.
#include <string>
#include <vector>

#include "scheduler/sched_test_util.hpp"

namespace sched_test {
namespace {

#define NEED_PARTIAL()                                                                        \
  do {                                                                                        \
    if (!need_partial()) GTEST_SKIP() << "missing " << partial_plugin() << " (build bp_fixtures)"; \
  } while (0)

TEST_F(SchedTest, PartialAndCpuSplitCopyAndMatchCpu) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  make_sched();
  build_mlp(backends[0], /*gelu_mid=*/true);  // weights in partial's memory
  reference ref(cpu_ref, true);
  for (unsigned seed = 1; seed <= 3; ++seed) {
    std::vector<float> got = run(seed), want = ref.run(seed);
    EXPECT_LT(nmse(got, want), 1e-6) << "seed " << seed;
  }
  // mm1 add1 | gelu | silu norm mm2 add2 scale | out
  EXPECT_EQ(bp_sched_split_count(sched), 4);
  EXPECT_EQ(bp_sched_copy_count(sched), 4) << "x in, add1 out, gelu in, scale out";
  EXPECT_EQ(backend_of(m.mm1), backends[0]);
  EXPECT_EQ(backend_of(m.mm2), backends[0]);
  EXPECT_EQ(backend_of(m.out), backends[1]) << "SOFT_MAX only runs on the cpu";
  int nodes = 0, inputs = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < bp_sched_split_count(sched); ++i) {
    bp_sched_split_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(bp_sched_split_describe(sched, i, &info), BP_OK);
    EXPECT_EQ(info.first_node, nodes);
    EXPECT_EQ(info.backend, backends[(size_t)(i % 2)]) << "partial and cpu alternate";
    EXPECT_GE(info.n_inputs, 1) << "every split here reads something from the other side";
    nodes += info.n_nodes;
    inputs += info.n_inputs;
    bytes += info.bytes_copied;
  }
  EXPECT_EQ(nodes, (int)bp_graph_node_count(m.graph));
  EXPECT_EQ(inputs, bp_sched_copy_count(sched));
  EXPECT_EQ(bytes, (uint64_t)(2 * m.d * m.n + 2 * m.h * m.n) * sizeof(float));
  EXPECT_GT(bp_sched_buffer_size(sched, backends[0]), 0u);
  EXPECT_GT(bp_sched_buffer_size(sched, backends[1]), 0u);
}

TEST_F(SchedTest, WeightsPullTheirConsumers) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  make_sched();
  // Weights in cpu memory: the partial backend cannot read them, so the
  // whole graph stays on the cpu, without copies.
  build_mlp(backends[1], false);
  reference ref(cpu_ref, false);
  std::vector<float> got = run(1), want = ref.run(1);
  EXPECT_LT(nmse(got, want), 1e-12);
  EXPECT_EQ(backend_of(m.mm1), backends[1]);
  EXPECT_EQ(bp_sched_split_count(sched), 1);
  EXPECT_EQ(bp_sched_copy_count(sched), 0);
}

TEST_F(SchedTest, OffloadHintPullsAProductUpFromTheCpu) {
  NEED_PARTIAL();
  // Weights in cpu memory, as above, but partial's offload_op asks for
  // products over at least 4 columns: both MUL_MATs (n = 7) move up, their
  // weights are copied in, and the numbers do not change.
  make_backends("partial:offload_min_batch=4;cpu");
  make_sched();
  build_mlp(backends[1], false);
  reference ref(cpu_ref, false);
  for (unsigned seed = 1; seed <= 2; ++seed) {
    std::vector<float> got = run(seed), want = ref.run(seed);
    EXPECT_LT(nmse(got, want), 1e-6) << "seed " << seed;
  }
  EXPECT_EQ(backend_of(m.mm1), backends[0]);
  EXPECT_EQ(backend_of(m.mm2), backends[0]);
  EXPECT_EQ(backend_of(m.out), backends[1]) << "SOFT_MAX only runs on the cpu";
  uint64_t bytes = 0;
  for (size_t i = 0; i < bp_sched_split_count(sched); ++i) {
    bp_sched_split_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(bp_sched_split_describe(sched, i, &info), BP_OK);
    bytes += info.bytes_copied;
  }
  // w1 and w2 (d x h floats each) reach partial by copy, with x and more.
  EXPECT_GE(bytes, (uint64_t)(2 * m.d * m.h) * sizeof(float));
}

TEST_F(SchedTest, OffloadHintBelowItsBatchLeavesTheProductOnTheCpu) {
  NEED_PARTIAL();
  // n = 7 columns is under the hint's threshold of 8: nothing moves.
  make_backends("partial:offload_min_batch=8;cpu");
  make_sched();
  build_mlp(backends[1], false);
  reference ref(cpu_ref, false);
  std::vector<float> got = run(1), want = ref.run(1);
  EXPECT_LT(nmse(got, want), 1e-12);
  EXPECT_EQ(backend_of(m.mm1), backends[1]);
  EXPECT_EQ(bp_sched_split_count(sched), 1);
  EXPECT_EQ(bp_sched_copy_count(sched), 0);
}

TEST_F(SchedTest, WeightsInPartialMemoryRunThere) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  make_sched();
  build_mlp(backends[0], false);
  reference ref(cpu_ref, false);
  std::vector<float> got = run(1), want = ref.run(1);
  EXPECT_LT(nmse(got, want), 1e-6);
  // Everything up to SOFT_MAX runs where the weights are; x goes in, the
  // scaled logits come out.
  for (size_t i = 0; i + 1 < bp_graph_node_count(m.graph); ++i)
    EXPECT_EQ(backend_of(bp_graph_node(m.graph, i)), backends[0]) << bp_graph_node(m.graph, i)->name;
  EXPECT_EQ(bp_sched_split_count(sched), 2);
  EXPECT_EQ(bp_sched_copy_count(sched), 2);
}

TEST_F(SchedTest, PinnedUnsupportedOpIsAStatus) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  make_sched();
  build_mlp(backends[0], false);
  ASSERT_EQ(bp_sched_set_tensor_backend(sched, m.out, backends[0]), BP_OK);
  EXPECT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("does not support"), std::string::npos) << bp_last_error();
  // Unpinned again (reset), the graph runs.
  bp_sched_reset(sched);
  reference ref(cpu_ref, false);
  EXPECT_LT(nmse(run(2), ref.run(2)), 1e-6);
}

TEST_F(SchedTest, LastBackendMustBeCpu) {
  NEED_PARTIAL();
  make_backends("partial");
  EXPECT_EQ(bp_sched_new(backends.data(), nullptr, 1, 0, false), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("CPU"), std::string::npos) << bp_last_error();
}

TEST_F(SchedTest, EvalCallbackSeesNodesOnBothBackends) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  make_sched();
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  ref.run(9);
  struct seen_t {
    std::vector<std::string> names;
    std::vector<std::vector<float>> values;
  } seen;
  bp_sched_set_eval_callback(
      sched,
      [](bp_tensor *t, bool ask, void *ud) {
        auto *s = static_cast<seen_t *>(ud);
        if (ask) return std::string(t->name) == "mm2" || std::string(t->name) == "gelu";
        s->names.push_back(t->name);
        s->values.push_back(read_f32(t));  // mm2 lives in partial's memory
        return true;
      },
      &seen);
  std::vector<float> got = run(9), want = ref.run(9);
  EXPECT_LT(nmse(got, want), 1e-6);
  ASSERT_EQ(seen.names, (std::vector<std::string>{"gelu", "mm2"}));
  const mlp &r = ref.graph();
  EXPECT_LT(nmse(seen.values[1], read_f32(r.mm2)), 1e-6);
}

TEST_F(SchedTest, PipelinedRunsGiveTheSameResults) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  make_sched(/*parallel=*/true);
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  ASSERT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
  for (unsigned seed = 1; seed <= 2 * BP_SCHED_MAX_COPIES + 1; ++seed) {
    write_f32(m.x, m.input(seed));
    ASSERT_EQ(bp_sched_graph_compute_async(sched, m.graph), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_sched_synchronize(sched), BP_OK) << bp_last_error();
    EXPECT_LT(nmse(read_f32(m.out), ref.run(seed)), 1e-6) << "run " << seed;
  }
  EXPECT_EQ(bp_sched_copy_count(sched), 4);
}

// The partial backend (sync mode) has graph plans: its splits run through a
// plan made at their first run and replayed after, with the same results;
// with plans off, or a new allocation, none are held.
TEST_F(SchedTest, SplitsReplayGraphPlansAndMatchCpu) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  make_sched();
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  auto plans_held = [&] {
    int held = 0;
    for (size_t i = 0; i < bp_sched_split_count(sched); ++i) {
      bp_sched_split_info info{};
      info.struct_size = sizeof info;
      EXPECT_EQ(bp_sched_split_describe(sched, i, &info), BP_OK);
      held += info.n_plans;
      if (info.backend == backends[1]) {
        EXPECT_EQ(info.n_plans, 0) << "the cpu backend has no plans";
      }
    }
    return held;
  };
  for (unsigned seed = 1; seed <= 3; ++seed) {
    std::vector<float> got = run(seed), want = ref.run(seed);
    EXPECT_LT(nmse(got, want), 1e-6) << "seed " << seed;
    EXPECT_EQ(plans_held(), 2) << "one plan per partial split, made once";
  }
  ASSERT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
  EXPECT_EQ(plans_held(), 0) << "a new allocation drops the plans (addresses may move)";
  ASSERT_EQ(bp_sched_set_graph_plans(sched, false), BP_OK);
  std::vector<float> got = run(4), want = ref.run(4);
  EXPECT_LT(nmse(got, want), 1e-6);
  EXPECT_EQ(plans_held(), 0) << "plans off";
  ASSERT_EQ(bp_sched_set_graph_plans(sched, true), BP_OK);
  got = run(5);
  EXPECT_LT(nmse(got, ref.run(5)), 1e-6);
  EXPECT_EQ(plans_held(), 2);
  EXPECT_EQ(bp_sched_set_graph_plans(nullptr, true), BP_ERR_INVALID_ARGUMENT);
}

// The plan API directly: a plan replays its graph on new input data; a
// backend without plans says UNIMPLEMENTED and names the fallback.
TEST_F(SchedTest, GraphPlanApiReplaysAndRefusesWithoutPlans) {
  NEED_PARTIAL();
  make_backends("partial;cpu");
  bp_context *ctx = bp_context_new(8);
  ASSERT_NE(ctx, nullptr);
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 33);
  bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 33);
  bp_tensor *sum = bp_add(ctx, a, b);
  bp_graph *g = bp_graph_new(ctx, 8);
  ASSERT_EQ(bp_graph_build(g, sum), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, backends[0], &buf), BP_OK) << bp_last_error();
  bp_graph_plan *plan = nullptr;
  ASSERT_EQ(bp_graph_plan_new(backends[0], g, &plan), BP_OK) << bp_last_error();
  for (int run = 0; run < 3; ++run) {
    std::vector<float> x(33), y(33);
    for (int i = 0; i < 33; ++i) x[(size_t)i] = 0.5f * i + run, y[(size_t)i] = 100.0f * run - i;
    write_f32(a, x);
    write_f32(b, y);
    ASSERT_EQ(bp_graph_plan_compute_async(plan), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_backend_synchronize(backends[0]), BP_OK);
    std::vector<float> got = read_f32(sum);
    for (int i = 0; i < 33; ++i) EXPECT_EQ(got[(size_t)i], (double)x[(size_t)i] + y[(size_t)i]) << run << " " << i;
  }
  bp_graph_plan_free(plan);
  bp_graph_plan *none = reinterpret_cast<bp_graph_plan *>(0x1);
  EXPECT_EQ(bp_graph_plan_new(backends[1], g, &none), BP_ERR_UNIMPLEMENTED);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("bp_backend_graph_compute"), std::string::npos) << bp_last_error();
  EXPECT_EQ(bp_graph_plan_new(backends[0], g, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_graph_plan_compute_async(nullptr), BP_ERR_INVALID_ARGUMENT);
  bp_graph_plan_free(nullptr);
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
}

}  // namespace
}  // namespace sched_test
