// trace_test.cpp: the trace recorder (core/trace, backplane/trace.h) with the
// cpu plugin's node spans: the file parses, each node of a run appears once
// on its backend's "nodes" track and on a worker track, node times sum to at
// most the wall time, spans nest, tracks are named, the per-op summary adds
// up, a capture keeps one backend's node times, and an untraced run
// allocates nothing per node.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "objects_test_util.hpp"
#include "support/trace_check.hpp"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// GCC pairs the replaced operators below with its builtin new and warns at
// every inlined delete; they are a matching malloc/free pair.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Counts every allocation of the process (plugins included: the cpu plugin
// resolves operator new to this definition), to prove an untraced graph
// allocates nothing per node.
void *operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void *operator new[](std::size_t n) { return operator new(n); }
void *operator new[](std::size_t n, const std::nothrow_t &t) noexcept { return operator new(n, t); }
// Every plain and nothrow form above and below, so no allocation made by
// one allocator (a sanitizer's operator new) reaches the other's delete.
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }

namespace bp_objects_test {
namespace {

std::string temp_path(const char *name) {
  return std::string(::testing::TempDir()) + "/bp_trace_" + std::to_string(getpid()) + "_" + name + ".json";
}

class TraceTest : public CpuObjectsTest {
 protected:
  void SetUp() override {
    CpuObjectsTest::SetUp();
    if (bp_trace_active()) bp_trace_stop();  // BP_TRACE in the environment
  }
  void TearDown() override {
    if (bp_trace_active()) bp_trace_stop();
    CpuObjectsTest::TearDown();
  }

  // x [K, N] -> mul_mat(w [K, M], x) -> add bias -> silu -> scale: the
  // product is large enough that the cpu backend splits it over its threads.
  bp_graph *build(int64_t K = 256, int64_t M = 128, int64_t N = 4) {
    bp_tensor *w = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M), "w");
    bp_tensor *x = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N), "x");
    bp_tensor *b = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, M), "b");
    bp_tensor *t = named(bp_mul_mat(ctx, w, x), "prod");
    t = named(bp_add(ctx, t, b), "biased");
    t = named(bp_silu(ctx, t), "act");
    t = named(bp_scale(ctx, t, 0.5f), "out");
    bp_graph *g = bp_graph_new(ctx, 0);
    EXPECT_EQ(bp_graph_build(g, t), BP_OK) << bp_last_error();
    EXPECT_NE(alloc_all(), nullptr);
    std::vector<float> zeros(size_t(K * M), 0.25f);
    EXPECT_EQ(bp_tensor_set(w, zeros.data(), 0, size_t(K * M) * 4), BP_OK);
    EXPECT_EQ(bp_tensor_set(x, zeros.data(), 0, size_t(K * N) * 4), BP_OK);
    EXPECT_EQ(bp_tensor_set(b, zeros.data(), 0, size_t(M) * 4), BP_OK);
    return g;
  }
};

TEST_F(TraceTest, EveryNodeOfARunAppearsOnceOnItsBackendAndOnAWorker) {
  bp_graph *g = build();
  const std::string path = temp_path("nodes");
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK) << bp_last_error();
  EXPECT_TRUE(bp_trace_active());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(bp_backend_graph_compute(backend, g), BP_OK) << bp_last_error();
  const auto wall_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(bp_trace_stop(), BP_OK) << bp_last_error();
  EXPECT_FALSE(bp_trace_active());

  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);

  std::map<std::string, int> whole, parts;
  int64_t sum_ns = 0;
  for (const auto *s : bp::test::spans_on(t, "node", "nodes")) {
    ++whole[s->args.value("node", "")];
    sum_ns += s->end_ns - s->begin_ns;
    EXPECT_EQ(t.processes.at(s->pid).rfind("backend cpu", 0), 0u) << t.processes.at(s->pid);
    EXPECT_EQ(s->args.value("backend", "").rfind(bp_backend_name(backend), 0), 0u) << "the name, maybe with #N";
  }
  for (const auto *s : bp::test::spans_on(t, "node", "worker")) ++parts[s->args.value("node", "")];
  size_t n_nodes = 0;
  for (size_t i = 0; i < bp_graph_node_count(g); ++i) {
    const bp_tensor *n = bp_graph_node(g, i);
    if (bp_op_is_view(n->op)) continue;
    ++n_nodes;
    EXPECT_EQ(whole[n->name], 1) << n->name << " on the nodes track";
    EXPECT_GE(parts[n->name], 1) << n->name << " on a worker track";
  }
  EXPECT_EQ(n_nodes, 4u);
  EXPECT_EQ(whole.size(), n_nodes) << "no span for a node outside the graph";
  EXPECT_LE(sum_ns, wall_ns + 1) << "node times sum past the wall time";

  // The product ran on both threads of a 2-thread backend (skipped on 1 core).
  if (bp_backend_name(backend) && parts["prod"] < 2) {
    GTEST_LOG_(INFO) << "the product ran on one thread (one core here?)";
  }

  // The submission on the host-calls track holds the node spans in time.
  const auto submits = bp::test::spans_on(t, "submit", "host calls");
  ASSERT_EQ(submits.size(), 1u);
  for (const auto *s : bp::test::spans_on(t, "node", "nodes")) {
    EXPECT_GE(s->begin_ns, submits[0]->begin_ns);
    EXPECT_LE(s->end_ns, submits[0]->end_ns);
  }

  // The node's arguments: op, types, shapes, bytes and FLOPs.
  for (const auto *s : bp::test::spans_on(t, "node", "nodes")) {
    if (s->args.value("node", "") != "prod") continue;
    EXPECT_EQ(s->name, "MUL_MAT");
    EXPECT_EQ(s->args.value("type", ""), "f32");
    EXPECT_EQ(s->args["shape"], nlohmann::json::parse("[128,4,1,1]"));
    ASSERT_EQ(s->args["src"].size(), 2u);
    EXPECT_EQ(s->args["src"][0]["shape"], nlohmann::json::parse("[256,128,1,1]"));
    EXPECT_EQ(s->args.value("flops", uint64_t{0}), uint64_t{2} * 256 * 128 * 4);
    EXPECT_EQ(s->args.value("bytes", uint64_t{0}), uint64_t{4} * (256 * 128 + 256 * 4 + 128 * 4));
  }
  std::remove(path.c_str());
}

TEST_F(TraceTest, SummaryCountsEachOpOnItsBackend) {
  bp_graph *g = build();
  ASSERT_EQ(bp_trace_start(nullptr), BP_OK) << bp_last_error();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(bp_backend_graph_compute(backend, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_trace_stop(), BP_OK) << bp_last_error();
  size_t n = 0;
  ASSERT_EQ(bp_trace_op_stats(nullptr, 0, &n), BP_OK) << bp_last_error();
  ASSERT_EQ(n, 4u);  // MUL_MAT, ADD, SILU, SCALE
  std::vector<bp_trace_op_stat> rows(n);
  ASSERT_EQ(bp_trace_op_stats(rows.data(), rows.size(), &n), BP_OK);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(rows[i].count, 3u) << bp_op_name(rows[i].op);
    EXPECT_EQ(std::string(rows[i].backend).rfind(bp_backend_name(backend), 0), 0u) << rows[i].backend;
    if (i) {
      EXPECT_LE(rows[i].total_ns, rows[i - 1].total_ns) << "largest first";
    }
    if (rows[i].op == BP_OP_MUL_MAT) {
      EXPECT_EQ(rows[i].flops, 3u * 2 * 256 * 128 * 4);
    }
  }
  // The summary outlives the stop and ends at the next start.
  ASSERT_EQ(bp_trace_start(nullptr), BP_OK);
  ASSERT_EQ(bp_trace_op_stats(nullptr, 0, &n), BP_OK);
  EXPECT_EQ(n, 0u);
}

TEST_F(TraceTest, MisuseIsRefusedWithTheReason) {
  EXPECT_STATUS(bp_trace_stop(), BP_ERR_FAILED_PRECONDITION, "no trace is recording");
  EXPECT_STATUS(bp_trace_start(""), BP_ERR_INVALID_ARGUMENT, "empty");
  const std::string path = temp_path("twice");
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK);
  EXPECT_STATUS(bp_trace_start(nullptr), BP_ERR_FAILED_PRECONDITION, "already recording", path);
  EXPECT_EQ(bp_trace_stop(), BP_OK);
  std::remove(path.c_str());
  ASSERT_EQ(bp_trace_start("/nonexistent-folder/trace.json"), BP_OK);
  EXPECT_STATUS(bp_trace_stop(), BP_ERR_NOT_FOUND, "/nonexistent-folder/trace.json", "No such file");
  EXPECT_FALSE(bp_trace_active());
  EXPECT_STATUS(bp_trace_op_stats(nullptr, 1, nullptr), BP_ERR_INVALID_ARGUMENT, "out_count");
}

// A capture keeps one backend's node times without a recording: each node
// once, in order, inside the call, on bp_trace_clock_ns's clock; no file and
// no recording follow from it.
TEST_F(TraceTest, ACaptureKeepsOneBackendsNodeTimesWithoutARecording) {
  bp_graph *g = build();
  ASSERT_EQ(bp_trace_capture_begin(backend), BP_OK) << bp_last_error();
  EXPECT_FALSE(bp_trace_active()) << "a capture is not a recording";
  EXPECT_STATUS(bp_trace_capture_begin(backend), BP_ERR_FAILED_PRECONDITION, "already has a capture");
  const uint64_t t0 = bp_trace_clock_ns();
  ASSERT_EQ(bp_backend_graph_compute(backend, g), BP_OK) << bp_last_error();
  const uint64_t t1 = bp_trace_clock_ns();
  size_t n = 0;
  std::vector<bp_trace_node_time> times(2);
  ASSERT_EQ(bp_trace_capture_end(backend, times.data(), times.size(), &n), BP_OK) << bp_last_error();
  EXPECT_EQ(n, 4u) << "every node is counted, more than the capacity";
  // The next capture starts empty and sees the whole run.
  ASSERT_EQ(bp_trace_capture_begin(backend), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(backend, g), BP_OK) << bp_last_error();
  times.assign(8, bp_trace_node_time{});
  ASSERT_EQ(bp_trace_capture_end(backend, times.data(), times.size(), &n), BP_OK) << bp_last_error();
  ASSERT_EQ(n, 4u);
  const char *order[] = {"prod", "biased", "act", "out"};
  uint64_t last_end = t0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NE(times[i].node, nullptr);
    EXPECT_STREQ(times[i].node->name, order[i]);
    EXPECT_LE(times[i].begin_ns, times[i].end_ns);
    EXPECT_GE(times[i].begin_ns, last_end) << "nodes follow one another";
    last_end = times[i].end_ns;
  }
  EXPECT_GT(last_end, t1) << "the second run ended after the first run's end";
  EXPECT_STATUS(bp_trace_capture_end(backend, times.data(), times.size(), &n), BP_ERR_FAILED_PRECONDITION,
                "no capture");
  EXPECT_STATUS(bp_trace_capture_end(backend, nullptr, 1, &n), BP_ERR_INVALID_ARGUMENT, "capacity");
  EXPECT_STATUS(bp_trace_capture_end(backend, nullptr, 0, nullptr), BP_ERR_INVALID_ARGUMENT, "out_count");
  EXPECT_STATUS(bp_trace_capture_begin(nullptr), BP_ERR_INVALID_ARGUMENT, "backend");
  // A recording started during a capture records too; the capture is not in
  // its file, and it does not stop the recording.
  const std::string path = temp_path("capture");
  ASSERT_EQ(bp_trace_capture_begin(backend), BP_OK);
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(backend, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_trace_capture_end(backend, times.data(), times.size(), &n), BP_OK);
  EXPECT_EQ(n, 4u);
  EXPECT_TRUE(bp_trace_active());
  ASSERT_EQ(bp_trace_stop(), BP_OK);
  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(bp::test::spans_on(t, "node", "nodes").size(), 4u);
  std::remove(path.c_str());
}

// Off, a node costs a flag test: a graph of 40 nodes allocates no more than
// one of 4 (the host's per-graph bookkeeping is the same for both). MUL_MAT
// of f32, because its cpu kernel allocates no scratch of its own.
TEST_F(TraceTest, UntracedRunAllocatesNothingPerNode) {
  bp_tensor *w = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, 16, 16), "w");
  bp_tensor *x = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, 16, 1), "x");
  bp_tensor *small = x, *large = x;
  for (int i = 0; i < 4; ++i) small = bp_mul_mat(ctx, w, small);
  for (int i = 0; i < 40; ++i) large = bp_mul_mat(ctx, w, large);
  bp_graph *gs = bp_graph_new(ctx, 0), *gl = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(gs, small), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_graph_build(gl, large), BP_OK) << bp_last_error();
  ASSERT_NE(alloc_all(), nullptr);
  ASSERT_FALSE(bp_trace_active());
  // Warm: first runs may size scratch memory.
  ASSERT_EQ(bp_backend_graph_compute(backend, gs), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(backend, gl), BP_OK);
  uint64_t before = g_allocations.load();
  ASSERT_EQ(bp_backend_graph_compute(backend, gs), BP_OK);
  const uint64_t small_allocs = g_allocations.load() - before;
  before = g_allocations.load();
  ASSERT_EQ(bp_backend_graph_compute(backend, gl), BP_OK);
  const uint64_t large_allocs = g_allocations.load() - before;
  EXPECT_EQ(large_allocs, small_allocs) << "allocations grow with the node count while tracing is off";
}

}  // namespace
}  // namespace bp_objects_test
