// handles_test.cpp: wrong-type handles at the core's own objects (contexts,
// graphs, schedulers, graph allocators; docs/failures.md #24). Each carries a type
// tag like the registry's handles, so a tensor or a graph passed where
// another object is expected gives INVALID_ARGUMENT naming both kinds, or
// NULL/0, never a crash. The registry's handles: tests/registry/handles_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "backplane/backplane.h"
#include "support/find.hpp"

namespace {

void expect_error_mentions(const char *fn, const char *what) {
  const std::string message = bp_last_error();
  EXPECT_NE(message.find(fn), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

class CoreHandles : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_registry_add_path(BP_TEST_PLUGIN_DIR);
    ASSERT_EQ(bp_backend_new("cpu", &cpu_), BP_OK) << bp_last_error();
    ctx_ = bp_context_new(0);
    graph_ = bp_graph_new(ctx_, 0);
    a_ = bp_tensor_new_1d(ctx_, BP_TYPE_F32, 4);
    ASSERT_NE(a_, nullptr);
    ASSERT_EQ(bp_graph_build(graph_, bp_neg(ctx_, a_)), BP_OK) << bp_last_error();
    bp_backend *list[] = {cpu_};
    sched_ = bp_sched_new(list, nullptr, 1, 64, false);
    ASSERT_NE(sched_, nullptr) << bp_last_error();
    galloc_ = bp_gallocr_new(bp_backend_buffer_type(cpu_));
    ASSERT_NE(galloc_, nullptr) << bp_last_error();
  }
  void TearDown() override {
    bp_gallocr_free(galloc_);
    bp_sched_free(sched_);
    bp_graph_free(graph_);
    bp_context_free(ctx_);
    bp_backend_free(cpu_);
  }

  // Casts for the misuse under test: one kind of object passed as another.
  template <typename T, typename U>
  static T *as(U *p) {
    return reinterpret_cast<T *>(p);
  }

  bp_backend *cpu_ = nullptr;
  bp_context *ctx_ = nullptr;
  bp_graph *graph_ = nullptr;
  bp_tensor *a_ = nullptr;
  bp_sched *sched_ = nullptr;
  bp_gallocr *galloc_ = nullptr;
};

TEST_F(CoreHandles, GraphOfTheWrongType) {
  bp_graph *not_graph = as<bp_graph>(ctx_);
  bp_clear_error();
  EXPECT_EQ(bp_backend_graph_compute(cpu_, not_graph), BP_ERR_INVALID_ARGUMENT);
  expect_error_mentions("bp_backend_graph_compute", "is not a graph (a context)");
  EXPECT_EQ(bp_graph_build(not_graph, a_), BP_ERR_INVALID_ARGUMENT);
  expect_error_mentions("bp_graph_build", "not a graph");
  EXPECT_EQ(bp_graph_validate(not_graph), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_graph_compute(sched_, not_graph), BP_ERR_INVALID_ARGUMENT);
  expect_error_mentions("bp_sched_graph_compute", "not a graph");
  EXPECT_EQ(bp_gallocr_alloc_graph(galloc_, not_graph), BP_ERR_INVALID_ARGUMENT);
  expect_error_mentions("bp_gallocr_alloc_graph", "not a graph");
  EXPECT_EQ(bp_graph_node_count(not_graph), 0u);
  EXPECT_EQ(bp_graph_node(not_graph, 0), nullptr);
  EXPECT_EQ(bp_graph_leaf_count(not_graph), 0u);
  bp_graph_clear(not_graph);  // ignored
  bp_graph_free(not_graph);   // ignored: the context stays alive
  // A tensor (which starts with its struct_size) is not a graph either.
  EXPECT_EQ(bp_backend_graph_compute(cpu_, as<bp_graph>(a_)), BP_ERR_INVALID_ARGUMENT);
  expect_error_mentions("bp_backend_graph_compute", "unknown object");
  EXPECT_EQ(bp_context_tensor_count(ctx_), 2u);  // a and its NEG: the context was not freed
}

TEST_F(CoreHandles, ContextOfTheWrongType) {
  bp_context *not_ctx = as<bp_context>(graph_);
  bp_clear_error();
  EXPECT_EQ(bp_tensor_new_1d(not_ctx, BP_TYPE_F32, 4), nullptr);
  expect_error_mentions("bp_tensor_new", "is not a context (a graph)");
  bp_clear_error();
  EXPECT_EQ(bp_add(not_ctx, a_, a_), nullptr);
  expect_error_mentions("bp_add", "not a context");
  bp_clear_error();
  EXPECT_EQ(bp_view_1d(not_ctx, a_, 2, 0), nullptr);
  expect_error_mentions("bp_view_1d", "not a context");
  bp_clear_error();
  EXPECT_EQ(bp_reshape_2d(not_ctx, a_, 2, 2), nullptr);
  expect_error_mentions("bp_reshape", "not a context");
  bp_clear_error();
  EXPECT_EQ(bp_transpose(not_ctx, a_), nullptr);
  expect_error_mentions("bp_transpose", "not a context");
  bp_buffer *buf = nullptr;
  EXPECT_EQ(bp_context_alloc_tensors(not_ctx, cpu_, &buf), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(buf, nullptr);
  EXPECT_EQ(bp_context_tensor_count(not_ctx), 0u);
  EXPECT_EQ(bp_context_tensor(not_ctx, 0), nullptr);
  EXPECT_EQ(bp_test::find_tensor(not_ctx, "x"), nullptr);
  bp_context_free(not_ctx);  // ignored: the graph stays alive
  EXPECT_EQ(bp_graph_node_count(graph_), 1u);
}

TEST_F(CoreHandles, SchedulerAndAllocatorOfTheWrongType) {
  bp_sched *not_sched = as<bp_sched>(galloc_);
  bp_clear_error();
  EXPECT_EQ(bp_sched_alloc_graph(not_sched, graph_), BP_ERR_INVALID_ARGUMENT);
  expect_error_mentions("bp_sched_alloc_graph", "is not a scheduler (a graph allocator)");
  EXPECT_EQ(bp_sched_graph_compute(not_sched, graph_), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_synchronize(not_sched), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_split_count(not_sched), 0);
  EXPECT_EQ(bp_sched_copy_count(not_sched), 0);
  EXPECT_EQ(bp_sched_buffer_size(not_sched, cpu_), 0u);
  EXPECT_EQ(bp_sched_backend(not_sched, 0), nullptr);
  bp_sched_split_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(bp_sched_split_describe(not_sched, 0, &info), BP_ERR_INVALID_ARGUMENT);
  bp_sched_reset(not_sched);  // ignored
  bp_sched_free(not_sched);   // ignored: the allocator stays alive

  bp_gallocr *not_galloc = as<bp_gallocr>(sched_);
  bp_clear_error();
  EXPECT_EQ(bp_gallocr_alloc_graph(not_galloc, graph_), BP_ERR_INVALID_ARGUMENT);
  expect_error_mentions("bp_gallocr_alloc_graph", "is not a graph allocator (a scheduler)");
  EXPECT_EQ(bp_gallocr_buffer_size(not_galloc), 0u);
  bp_gallocr_free(not_galloc);  // ignored

  // Both still work after the misuse.
  EXPECT_EQ(bp_gallocr_alloc_graph(galloc_, graph_), BP_OK) << bp_last_error();
  EXPECT_GT(bp_gallocr_buffer_size(galloc_), 0u);
}

}  // namespace
