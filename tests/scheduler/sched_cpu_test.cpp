// sched_cpu_test.cpp: the scheduler with host-memory backends only (one or
// two cpu backends): splits, pins, eval callback, reset, reserve, bad input.
#include <cstring>
#include <string>
#include <vector>

#include "scheduler/sched_test_util.hpp"

namespace sched_test {
namespace {

TEST_F(SchedTest, CpuAloneIsOneSplitWithoutCopies) {
  make_backends("cpu");
  make_sched();
  build_mlp(backends[0], /*gelu_mid=*/true);
  reference ref(cpu_ref, true);
  std::vector<float> got = run(1), want = ref.run(1);
  EXPECT_EQ(bp_sched_split_count(sched), 1);
  EXPECT_EQ(bp_sched_copy_count(sched), 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  bp_sched_split_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(bp_sched_split_describe(sched, 0, &info), BP_OK) << bp_last_error();
  EXPECT_EQ(info.backend, backends[0]);
  EXPECT_EQ(info.first_node, 0);
  EXPECT_EQ(info.n_nodes, (int)bp_graph_node_count(m.graph));
  EXPECT_EQ(info.n_inputs, 0);
  EXPECT_EQ(info.bytes_copied, 0u);
  EXPECT_GT(bp_sched_buffer_size(sched, backends[0]), 0u);
  for (size_t i = 0; i < bp_graph_node_count(m.graph); ++i)
    EXPECT_EQ(bp_sched_get_tensor_backend(sched, bp_graph_node(m.graph, i)), backends[0]);
}

TEST_F(SchedTest, TwoCpuBackendsSplitByPinsWithoutCopies) {
  make_backends("cpu;cpu:threads=1");
  ASSERT_EQ(backends.size(), 2u);
  make_sched();
  build_mlp(backends[1], true);
  const size_t n = bp_graph_node_count(m.graph);
  for (size_t i = 0; i < n; ++i) {
    bp_tensor *t = bp_graph_node(m.graph, i);
    ASSERT_EQ(bp_sched_set_tensor_backend(sched, t, backends[i < n / 2 ? 0 : 1]), BP_OK) << bp_last_error();
  }
  reference ref(cpu_ref, true);
  for (unsigned seed = 1; seed <= 2; ++seed) {
    std::vector<float> got = run(seed), want = ref.run(seed);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  }
  EXPECT_EQ(bp_sched_split_count(sched), 2);
  EXPECT_EQ(bp_sched_copy_count(sched), 0) << "host memory is shared, never copied";
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(backend_of(bp_graph_node(m.graph, i)), backends[i < n / 2 ? 0 : 1]) << i;
  bp_sched_split_info a{}, b{};
  a.struct_size = b.struct_size = sizeof a;
  ASSERT_EQ(bp_sched_split_describe(sched, 0, &a), BP_OK);
  ASSERT_EQ(bp_sched_split_describe(sched, 1, &b), BP_OK);
  EXPECT_EQ(a.n_nodes + b.n_nodes, (int)n);
  EXPECT_EQ(b.first_node, a.n_nodes);
  EXPECT_EQ(a.n_inputs + b.n_inputs, 0);
}

TEST_F(SchedTest, EvalCallbackObservesChosenNodes) {
  make_backends("cpu");
  make_sched();
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  ref.run(3);
  std::vector<float> want_mm1 = read_f32(ref.graph().mm1), want_mm2 = read_f32(ref.graph().mm2);
  struct seen_t {
    std::vector<std::string> asked, observed;
    std::vector<std::vector<float>> values;
  } seen;
  bp_sched_set_eval_callback(
      sched,
      [](bp_tensor *t, bool ask, void *ud) {
        auto *s = static_cast<seen_t *>(ud);
        bool mm = t->op == BP_OP_MUL_MAT;
        if (ask) {
          s->asked.push_back(t->name);
          return mm;
        }
        s->observed.push_back(t->name);
        s->values.push_back(read_f32(t));
        return true;
      },
      &seen);
  std::vector<float> got = run(3), want = ref.run(3);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(seen.asked.size(), bp_graph_node_count(m.graph)) << "asked once per node";
  ASSERT_EQ(seen.observed, (std::vector<std::string>{"mm1", "mm2"}));
  EXPECT_EQ(seen.values[0], want_mm1) << "observed after it was computed";
  EXPECT_EQ(seen.values[1], want_mm2);
}

TEST_F(SchedTest, EvalCallbackCanStopTheGraph) {
  make_backends("cpu");
  make_sched();
  build_mlp(backends[0], true);
  ASSERT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_memset(m.out, 0x7f, 0, bp_tensor_nbytes(m.out)), BP_OK) << bp_last_error();
  int observed = 0;
  bp_sched_set_eval_callback(
      sched,
      [](bp_tensor *t, bool ask, void *ud) {
        if (ask) return t->op == BP_OP_MUL_MAT;
        ++*static_cast<int *>(ud);
        return false;  // stop at the first one
      },
      &observed);
  write_f32(m.x, m.input(1));
  ASSERT_EQ(bp_sched_graph_compute(sched, m.graph), BP_OK) << bp_last_error();
  EXPECT_EQ(observed, 1);
  std::vector<unsigned char> bytes(bp_tensor_nbytes(m.out));
  ASSERT_EQ(bp_tensor_get(m.out, bytes.data(), 0, bytes.size()), BP_OK);
  for (unsigned char c : bytes) ASSERT_EQ(c, 0x7f) << "the output was computed after the stop";
  // Without the callback the same graph runs to the end.
  bp_sched_set_eval_callback(sched, nullptr, nullptr);
  reference ref(cpu_ref, true);
  std::vector<float> got = run(1), want = ref.run(1);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
}

TEST_F(SchedTest, ResetForgetsAndRerunsTheSame) {
  make_backends("cpu;cpu:threads=1");
  make_sched();
  build_mlp(backends[0], false);
  reference ref(cpu_ref, false);
  ASSERT_EQ(bp_sched_set_tensor_backend(sched, m.mm2, backends[1]), BP_OK);
  std::vector<float> first = run(5);
  EXPECT_EQ(backend_of(m.mm2), backends[1]);
  EXPECT_GE(bp_sched_split_count(sched), 2);
  bp_sched_reset(sched);
  EXPECT_EQ(bp_sched_split_count(sched), 0);
  EXPECT_EQ(bp_sched_copy_count(sched), 0);
  EXPECT_EQ(backend_of(m.mm2), nullptr) << "reset forgets pins and assignments";
  std::vector<float> second = run(5), want = ref.run(5);
  EXPECT_EQ(backend_of(m.mm2), backends[0]);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(first[i], want[i]) << i;
    ASSERT_EQ(second[i], want[i]) << i;
  }
}

TEST_F(SchedTest, ReserveSizesBuffersFromTheMeasureGraph) {
  make_backends("cpu");
  make_sched();
  build_mlp(backends[0], true);
  ASSERT_EQ(bp_sched_reserve(sched, m.graph), BP_OK) << bp_last_error();
  size_t reserved = bp_sched_buffer_size(sched, backends[0]);
  EXPECT_GT(reserved, 0u);
  EXPECT_EQ(bp_sched_split_count(sched), 0) << "reserve leaves no graph allocated";
  EXPECT_EQ(m.out->data, nullptr);
  reference ref(cpu_ref, true);
  std::vector<float> got = run(2), want = ref.run(2);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(bp_sched_buffer_size(sched, backends[0]), reserved) << "the run fits the reserve";
}

TEST_F(SchedTest, ComputeAsyncThenSynchronize) {
  make_backends("cpu");
  make_sched(/*parallel=*/true);
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  ASSERT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
  for (unsigned seed = 1; seed <= 3; ++seed) {
    write_f32(m.x, m.input(seed));
    ASSERT_EQ(bp_sched_graph_compute_async(sched, m.graph), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_sched_synchronize(sched), BP_OK) << bp_last_error();
    std::vector<float> got = read_f32(m.out), want = ref.run(seed);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  }
}

TEST_F(SchedTest, BadInputIsAStatus) {
  make_backends("cpu;cpu:threads=1");
  bp_clear_error();
  EXPECT_EQ(bp_sched_new(nullptr, nullptr, 1, 0, false), nullptr);
  EXPECT_EQ(bp_sched_new(backends.data(), nullptr, 0, 0, false), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("at least one backend"), std::string::npos) << bp_last_error();
  bp_backend *twice[2] = {backends[0], backends[0]};
  EXPECT_EQ(bp_sched_new(twice, nullptr, 2, 0, false), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("twice"), std::string::npos) << bp_last_error();

  // A graph larger than graph_size: RESOURCE_EXHAUSTED naming the limit.
  make_sched(false, 3);
  build_mlp(backends[0], false);
  EXPECT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("graph_size=3"), std::string::npos) << bp_last_error();
  EXPECT_EQ(bp_sched_graph_compute(sched, m.graph), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_EQ(bp_sched_alloc_graph(sched, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_alloc_graph(nullptr, m.graph), BP_ERR_INVALID_ARGUMENT);
  bp_sched_free(sched);
  sched = nullptr;

  make_sched();
  EXPECT_EQ(bp_sched_set_tensor_backend(sched, m.mm1, cpu_ref), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("not one of the scheduler"), std::string::npos) << bp_last_error();
  EXPECT_EQ(bp_sched_set_tensor_backend(sched, nullptr, backends[0]), BP_ERR_INVALID_ARGUMENT);
  bp_sched_split_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(bp_sched_split_describe(sched, 0, &info), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_split_describe(sched, -1, &info), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_split_describe(sched, 0, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_buffer_size(sched, cpu_ref), 0u);
  EXPECT_EQ(bp_sched_backend(sched, 2), nullptr);
  EXPECT_EQ(bp_sched_backend(sched, 1), backends[1]);
  EXPECT_EQ(bp_sched_backend_count(sched), 2);
  EXPECT_EQ(bp_sched_split_count(nullptr), 0);
  EXPECT_EQ(bp_sched_synchronize(nullptr), BP_ERR_INVALID_ARGUMENT);
  bp_sched_reset(nullptr);
  bp_sched_free(nullptr);
  // The scheduler still works after all that.
  reference ref(cpu_ref, false);
  std::vector<float> got = run(4), want = ref.run(4);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
}

}  // namespace
}  // namespace sched_test

namespace sched_test {
namespace {

// blas;cpu: blas works on host memory, so MUL_MAT moves to it (weights in a
// cpu WEIGHTS buffer) and nothing is ever copied.
TEST_F(SchedTest, BlasAndCpuShareMemory) {
  const std::string blas = std::string(BP_TEST_PLUGIN_DIR) + "/libbp-blas.so";
  if (!file_exists(blas)) GTEST_SKIP() << "missing " << blas << " (OpenBLAS not found at configure time)";
  ASSERT_EQ(bp_registry_load(blas.c_str(), nullptr), BP_OK) << bp_last_error();
  make_backends("blas:min_mnk=0;cpu");  // min_mnk=0: even these small products go to blas
  make_sched();
  build_mlp(backends[1], true);
  reference ref(cpu_ref, true);
  EXPECT_LT(nmse(run(1), ref.run(1)), 1e-10);
  EXPECT_EQ(backend_of(m.mm1), backends[0]);
  EXPECT_EQ(backend_of(m.mm2), backends[0]);
  EXPECT_EQ(backend_of(m.out), backends[1]);
  EXPECT_EQ(bp_sched_copy_count(sched), 0);
  for (size_t i = 0; i < bp_graph_node_count(m.graph); ++i) {
    const bp_tensor *t = bp_graph_node(m.graph, i);
    if (t->op != BP_OP_MUL_MAT) {
      EXPECT_EQ(backend_of(t), backends[1]) << t->name;
    }
  }
}

}  // namespace
}  // namespace sched_test
