// blas_trace_test.cpp: the OpenBLAS plugin's node spans (backplane/trace.h):
// each product once on the backend's "nodes" track, its parts on worker
// tracks, spans nested, and the per-op summary naming the backend.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "support/trace_check.hpp"

namespace {

TEST(BlasTrace, EveryProductAppearsOnceWithItsPartsOnWorkers) {
  bp_registry_add_path(BP_TEST_PLUGIN_DIR);
  bp_backend *be = nullptr;
  if (bp_backend_new("blas:min_mnk=0,threads=2", &be) != BP_OK)
    GTEST_SKIP() << "the blas plugin is not available: " << bp_last_error();
  if (bp_trace_active()) bp_trace_stop();  // BP_TRACE in the environment
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 128, 96);
  bp_tensor *b = bp_tensor_new_3d(ctx, BP_TYPE_F32, 128, 40, 2);
  bp_tensor *c = bp_tensor_set_name(bp_mul_mat(ctx, a, b), "c");
  bp_tensor *d = bp_tensor_set_name(bp_mul_mat(ctx, bp_tensor_new_2d(ctx, BP_TYPE_F32, 96, 8), c), "d");
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, d), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_buffer_clear(buf, 0), BP_OK);

  const std::string path = std::string(::testing::TempDir()) + "/bp_blas_trace_" + std::to_string(getpid()) + ".json";
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_trace_stop(), BP_OK) << bp_last_error();

  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);
  std::map<std::string, int> whole, parts;
  for (const auto *s : bp::test::spans_on(t, "node", "nodes")) {
    ++whole[s->args.value("node", "")];
    EXPECT_EQ(s->name, "MUL_MAT");
    EXPECT_EQ(s->args.value("backend", "").rfind(bp_backend_name(be), 0), 0u);
  }
  for (const auto *s : bp::test::spans_on(t, "node", "worker")) ++parts[s->args.value("node", "")];
  EXPECT_EQ(whole["c"], 1);
  EXPECT_EQ(whole["d"], 1);
  EXPECT_EQ(whole.size(), 2u);
  EXPECT_GE(parts["c"], 1);
  EXPECT_GE(parts["d"], 1);

  size_t n = 0;
  bp_trace_op_stat row{};
  ASSERT_EQ(bp_trace_op_stats(&row, 1, &n), BP_OK);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(row.op, BP_OP_MUL_MAT);
  EXPECT_EQ(row.count, 2u);
  EXPECT_EQ(std::string(row.backend).rfind(bp_backend_name(be), 0), 0u) << row.backend;
  EXPECT_EQ(row.flops, uint64_t{2} * 96 * 128 * 40 * 2 + uint64_t{2} * 8 * 96 * 40 * 2);

  std::remove(path.c_str());
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_backend_free(be);
}

}  // namespace
