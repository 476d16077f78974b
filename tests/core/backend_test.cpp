// backend_test.cpp: backends and events against the real cpu plugin:
// compute checked against a double-precision reference, the validation
// bp_backend_graph_compute does before a plugin sees a graph, async
// transfers, events, handle misuse, and device-lost stickiness through the
// fault-injecting fixtures.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "core/handles.hpp"  // white-box: the sticky lost flag
#include "objects_test_util.hpp"

namespace bp_objects_test {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

using BackendTest = CpuObjectsTest;

TEST_F(BackendTest, DescribesItself) {
  const char *name = bp_backend_name(backend);
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(std::string(name).rfind("cpu", 0), 0u) << name;
  EXPECT_EQ(bp_backend_device(backend), dev);
  EXPECT_EQ(bp_backend_buffer_type(backend), bp_device_buffer_type(dev));
  EXPECT_TRUE(bp_backend_supports_buft(backend, bp_device_buffer_type(dev)));
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 4);
  EXPECT_TRUE(bp_backend_supports_op(backend, bp_transpose(ctx, bp_reshape_2d(ctx, a, 2, 2))));
  EXPECT_TRUE(bp_backend_supports_op(backend, bp_add(ctx, a, a)));
  EXPECT_FALSE(bp_backend_offload_op(backend, bp_add(ctx, a, a)));  // a host backend pulls nothing
  EXPECT_EQ(bp_backend_synchronize(backend), BP_OK) << bp_last_error();
}

TEST_F(BackendTest, ComputesBroadcastAddAndMatMulLikeTheReference) {
  const int64_t K = 33, M = 7, N = 5;
  bp_tensor *a = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M), "a");
  bp_tensor *bias = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, K), "bias");
  bp_tensor *x = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N), "x");
  bp_tensor *sum = bp_add(ctx, a, bias);      // [K, M], bias broadcast over rows
  bp_tensor *prod = bp_mul_mat(ctx, sum, x);  // [M, N]
  ASSERT_NE(prod, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, prod), BP_OK) << bp_last_error();
  ASSERT_NE(alloc_all(), nullptr);

  const auto va = random_floats(K * M, 1), vb = random_floats(K, 2), vx = random_floats(K * N, 3);
  ASSERT_EQ(bp_tensor_set(a, va.data(), 0, va.size() * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(bias, vb.data(), 0, vb.size() * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(x, vx.data(), 0, vx.size() * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(backend, g), BP_OK) << bp_last_error();

  std::vector<float> out(M * N);
  ASSERT_EQ(bp_tensor_get(prod, out.data(), 0, out.size() * 4), BP_OK);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += ((double)va[m * K + k] + vb[k]) * vx[n * K + k];
      EXPECT_NEAR(out[n * M + m], ref, 1e-4 * (1 + std::fabs(ref))) << "m=" << m << " n=" << n;
    }
  }
  // The async form gives the same after synchronize.
  std::vector<float> again(out.size());
  ASSERT_EQ(bp_backend_graph_compute_async(backend, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_synchronize(backend), BP_OK);
  ASSERT_EQ(bp_tensor_get(prod, again.data(), 0, again.size() * 4), BP_OK);
  EXPECT_EQ(again, out);
  bp_graph_free(g);
}

TEST_F(BackendTest, ComputeRefusesTensorsWithoutMemory) {
  bp_tensor *a = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 7), "a");
  ASSERT_NE(alloc_all(), nullptr);
  bp_tensor *b = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 7), "b_unallocated");
  bp_tensor *c = named(bp_add(ctx, a, b), "c");
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, c), BP_OK);
  EXPECT_STATUS(bp_backend_graph_compute(backend, g), BP_ERR_FAILED_PRECONDITION, "'c'", "has no memory");
  ASSERT_NE(alloc_all(), nullptr);  // now b and c get memory
  EXPECT_STATUS(bp_backend_graph_compute(backend, g), BP_OK);
  EXPECT_STATUS(bp_backend_graph_compute(backend, nullptr), BP_ERR_INVALID_ARGUMENT, "graph is NULL");
  EXPECT_STATUS(bp_backend_graph_compute(nullptr, g), BP_ERR_INVALID_ARGUMENT, "backend is NULL");
  bp_graph_free(g);
}

TEST_F(BackendTest, ComputeInitialisesViewsMadeAfterAllocation) {
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3);
  ASSERT_NE(alloc_all(), nullptr);
  bp_tensor *row = bp_view_1d(ctx, a, 4, 4 * sizeof(float));  // row 1
  row->buffer = nullptr;                                      // as if made before its source had memory
  row->data = nullptr;
  bp_tensor *twice = bp_add(ctx, row, row);
  bp_buffer *buf = nullptr;
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, twice), BP_OK);
  ASSERT_EQ(bp_context_alloc_tensors(ctx, backend, &buf), BP_OK) << bp_last_error();
  if (buf) buffers.push_back(buf);
  row->buffer = nullptr;  // undo what bp_context_alloc_tensors did for the view
  row->data = nullptr;
  const float va[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  ASSERT_EQ(bp_tensor_set(a, va, 0, sizeof va), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(backend, g), BP_OK) << bp_last_error();
  EXPECT_EQ(row->data, static_cast<char *>(a->data) + 16);
  float out[4];
  ASSERT_EQ(bp_tensor_get(twice, out, 0, sizeof out), BP_OK);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], 2 * va[4 + i]);
  bp_graph_free(g);
}

TEST_F(BackendTest, AsyncTransfersFallBackAndRoundTrip) {
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 257);
  ASSERT_NE(alloc_all(), nullptr);
  const auto in = random_floats(257, 4);
  std::vector<float> out(257);
  ASSERT_EQ(bp_backend_tensor_set_async(backend, t, in.data(), 0, in.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_tensor_get_async(backend, t, out.data(), 0, out.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_synchronize(backend), BP_OK);
  EXPECT_EQ(out, in);
  EXPECT_STATUS(bp_backend_tensor_set_async(backend, t, in.data(), 4, in.size() * 4), BP_ERR_INVALID_ARGUMENT,
                "outside tensor");
  EXPECT_STATUS(bp_backend_tensor_get_async(backend, nullptr, out.data(), 0, 4), BP_ERR_INVALID_ARGUMENT);
}

TEST_F(BackendTest, EventsRecordWaitAndSynchronize) {
  bp_event *ev = nullptr;
  bp_status st = bp_event_new(dev, &ev);
  if (st == BP_ERR_UNIMPLEMENTED) GTEST_SKIP() << bp_last_error();
  ASSERT_EQ(st, BP_OK) << bp_last_error();
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 33);
  bp_tensor *b = bp_sqr(ctx, a);
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, b), BP_OK);
  ASSERT_NE(alloc_all(), nullptr);
  const auto in = random_floats(33, 8);
  ASSERT_EQ(bp_tensor_set(a, in.data(), 0, 33 * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute_async(backend, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_event_record(ev, backend), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_wait_event(backend, ev), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_event_synchronize(ev), BP_OK) << bp_last_error();
  std::vector<float> out(33);
  ASSERT_EQ(bp_tensor_get(b, out.data(), 0, 33 * 4), BP_OK);
  for (int i = 0; i < 33; ++i) EXPECT_NEAR(out[i], (double)in[i] * in[i], 1e-6);
  EXPECT_STATUS(bp_event_record(nullptr, backend), BP_ERR_INVALID_ARGUMENT, "event is NULL");
  EXPECT_STATUS(bp_backend_wait_event(backend, reinterpret_cast<bp_event *>(backend)), BP_ERR_INVALID_ARGUMENT,
                "is not an event");
  bp_event_free(ev);
  bp_event_free(nullptr);
  bp_graph_free(g);
}

TEST_F(BackendTest, BadHandlesAreRefusedWithAMessage) {
  EXPECT_EQ(bp_backend_name(nullptr), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("backend is NULL"), std::string::npos);
  EXPECT_STATUS(bp_backend_synchronize(nullptr), BP_ERR_INVALID_ARGUMENT, "bp_backend_synchronize", "NULL");
  bp_buffer *buf = reinterpret_cast<bp_buffer *>(&buf);
  EXPECT_STATUS(bp_backend_alloc_buffer(nullptr, 16, &buf), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(buf, nullptr);
  auto *not_a_backend = reinterpret_cast<bp_backend *>(bp_device_buffer_type(dev));
  EXPECT_STATUS(bp_backend_synchronize(not_a_backend), BP_ERR_INVALID_ARGUMENT, "is not a backend");
  EXPECT_FALSE(bp_backend_supports_op(nullptr, nullptr));
  EXPECT_FALSE(bp_backend_supports_buft(backend, nullptr));
  bp_event *ev = reinterpret_cast<bp_event *>(&ev);
  EXPECT_STATUS(bp_event_new(nullptr, &ev), BP_ERR_INVALID_ARGUMENT, "device is NULL");
  EXPECT_EQ(ev, nullptr);
  bp_backend_free(nullptr);
}

TEST_F(BackendTest, FreedBackendIsDetectedInEveryBuild) {
  bp_backend *other = nullptr;
  ASSERT_EQ(bp_backend_new_on_device(dev, nullptr, &other), BP_OK) << bp_last_error();
  bp_backend_free(other);
  EXPECT_STATUS(bp_backend_synchronize(other), BP_ERR_INVALID_ARGUMENT, "already freed");
  bp_backend_free(other);  // reported, not fatal
}

// White-box: the sticky flag the core sets when a plugin reports
// DEVICE_LOST (the fixture test below proves it is set). Every call on the
// device's objects must fail fast without reaching the plugin, and freeing
// must still work. The flag is cleared again so later tests keep the device.
TEST_F(BackendTest, LostDeviceFailsFastButFreesWork) {
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 4);
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, bp_neg(ctx, t)), BP_OK);
  bp_buffer *buf = alloc_all();
  ASSERT_NE(buf, nullptr);
  bp_event *ev = nullptr;
  const bool has_events = bp_event_new(dev, &ev) == BP_OK;
  struct clear_on_exit {
    bp_device *d;
    ~clear_on_exit() { d->lost = false; }
  } guard{dev};
  dev->lost = true;
  float x[4] = {};
  EXPECT_STATUS(bp_tensor_set(t, x, 0, sizeof x), BP_ERR_DEVICE_LOST, "was lost", "free its buffers");
  EXPECT_STATUS(bp_tensor_get(t, x, 0, sizeof x), BP_ERR_DEVICE_LOST);
  EXPECT_STATUS(bp_tensor_memset(t, 0, 0, 4), BP_ERR_DEVICE_LOST);
  EXPECT_STATUS(bp_buffer_clear(buf, 0), BP_ERR_DEVICE_LOST);
  EXPECT_STATUS(bp_backend_graph_compute(backend, g), BP_ERR_DEVICE_LOST);
  EXPECT_STATUS(bp_backend_synchronize(backend), BP_ERR_DEVICE_LOST);
  bp_buffer *more = nullptr;
  EXPECT_STATUS(bp_backend_alloc_buffer(backend, 16, &more), BP_ERR_DEVICE_LOST);
  bp_backend *again = nullptr;
  EXPECT_EQ(bp_backend_new_on_device(dev, nullptr, &again), BP_ERR_DEVICE_LOST) << bp_last_error();
  EXPECT_FALSE(bp_backend_supports_op(backend, bp_neg(ctx, t)));
  if (has_events) {
    EXPECT_STATUS(bp_event_record(ev, backend), BP_ERR_DEVICE_LOST);
    EXPECT_STATUS(bp_event_synchronize(ev), BP_ERR_DEVICE_LOST);
    bp_event_free(ev);  // frees still reach the plugin
  }
  bp_buffer_free(buf);
  buffers.clear();
  bp_graph_free(g);
}

// ---- a second plugin with its own memory and only some ops ("partial") ----

class PartialBackendTest : public CpuObjectsTest {
 protected:
  void SetUp() override {
    CpuObjectsTest::SetUp();
    if (!file_exists(partial_plugin_path())) GTEST_SKIP() << "fixture not built: " << partial_plugin_path();
    pdev = load_first_device(partial_plugin_path());
    ASSERT_NE(pdev, nullptr);
    ASSERT_EQ(bp_backend_new_on_device(pdev, nullptr, &pbackend), BP_OK) << bp_last_error();
  }
  void TearDown() override {
    CpuObjectsTest::TearDown();
    bp_backend_free(pbackend);
  }
  bp_device *pdev = nullptr;
  bp_backend *pbackend = nullptr;
};

TEST_F(PartialBackendTest, ComputeRefusesMemoryTheBackendCannotUse) {
  bp_tensor *a = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 7), "in_device_memory");
  bp_tensor *b = named(bp_add(ctx, a, a), "b");
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, b), BP_OK);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, pbackend, &buf), BP_OK) << bp_last_error();
  buffers.push_back(buf);
  EXPECT_FALSE(bp_backend_supports_buft(backend, bp_backend_buffer_type(pbackend)));
  // The cpu backend must not be handed device memory it cannot read.
  EXPECT_STATUS(bp_backend_graph_compute(backend, g), BP_ERR_INVALID_ARGUMENT, "'b'", "cannot use",
                bp_buffer_type_name(bp_backend_buffer_type(pbackend)));
  // The partial backend runs it.
  const float in[7] = {1, 2, 3, 4, 5, 6, 7};
  ASSERT_EQ(bp_tensor_set(a, in, 0, sizeof in), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(pbackend, g), BP_OK) << bp_last_error();
  float out[7];
  ASSERT_EQ(bp_tensor_get(b, out, 0, sizeof out), BP_OK);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(out[i], 2 * in[i]);
  bp_graph_free(g);
}

TEST_F(PartialBackendTest, ComputeNamesTheFirstUnsupportedOp) {
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 7);
  bp_tensor *e = named(bp_exp(ctx, bp_add(ctx, a, a)), "e");
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, e), BP_OK);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, pbackend, &buf), BP_OK) << bp_last_error();
  buffers.push_back(buf);
  EXPECT_FALSE(bp_backend_supports_op(pbackend, e));
  EXPECT_STATUS(bp_backend_graph_compute(pbackend, g), BP_ERR_UNIMPLEMENTED, "EXP", "'e'", bp_backend_name(pbackend));
  bp_graph_free(g);
}

TEST_F(PartialBackendTest, EventsAreRefusedOnDevicesWithout) {
  bp_event *ev = nullptr;
  EXPECT_STATUS(bp_event_new(pdev, &ev), BP_ERR_UNIMPLEMENTED, "has no events");
  EXPECT_EQ(ev, nullptr);
  // A cpu event cannot be recorded on another device's backend.
  bp_event *cpu_ev = nullptr;
  if (bp_event_new(dev, &cpu_ev) != BP_OK) GTEST_SKIP() << bp_last_error();
  EXPECT_STATUS(bp_event_record(cpu_ev, pbackend), BP_ERR_INVALID_ARGUMENT, "belongs to device");
  // Waiting across plugins falls back to a host wait.
  EXPECT_STATUS(bp_backend_wait_event(pbackend, cpu_ev), BP_OK);
  bp_event_free(cpu_ev);
}

// ---- fault injection through the registry's fixture plugins ---------------

// The fixture variants the registry tests build (tests/fixtures): a device
// whose allocations fail, and one that reports DEVICE_LOST after a few calls.
// Found by a part of their file name, wherever the fixtures folder puts them.
std::string find_fixture(const char *part) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(BP_TEST_FIXTURE_DIR, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("libbp-", 0) == 0 && name.find(part) != std::string::npos && name.size() > 3 &&
        name.compare(name.size() - 3, 3, ".so") == 0) {
      return it->path().string();
    }
  }
  return "";
}

TEST(BackendFaultTest, FailedAllocationIsAnnotatedAndTheDeviceStaysUsable) {
  const std::string path = find_fixture("fail_alloc");
  if (path.empty()) GTEST_SKIP() << "fail_alloc fixture not built in " << BP_TEST_FIXTURE_DIR;
  bp_device *dev = load_first_device(path);
  ASSERT_NE(dev, nullptr);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new_on_device(dev, nullptr, &be), BP_OK) << bp_last_error();
  // The fixture refuses allocations once its budget is used up.
  std::vector<bp_buffer *> kept;
  bp_status st = BP_OK;
  for (int i = 0; i < 8 && st == BP_OK; ++i) {
    bp_buffer *buf = nullptr;
    st = bp_backend_alloc_buffer(be, 1024, &buf);
    if (st == BP_OK)
      kept.push_back(buf);
    else
      EXPECT_EQ(buf, nullptr);
  }
  ASSERT_EQ(st, BP_ERR_OUT_OF_DEVICE_MEMORY) << bp_last_error();
  const std::string msg = bp_last_error();
  EXPECT_NE(msg.find("fail_alloc: allocating 1024 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fake:"), std::string::npos) << "the plugin's own message must follow: " << msg;
  // Not lost: the plugin is asked again (and refuses again), and the memory
  // already given keeps working, including the host's memset fallback (the
  // fixture has no memset_tensor slot).
  bp_buffer *more = nullptr;
  EXPECT_STATUS(bp_backend_alloc_buffer(be, 1024, &more), BP_ERR_OUT_OF_DEVICE_MEMORY, "fake:");
  if (!kept.empty()) {
    bp_context *ctx = bp_context_new(0);
    bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 7);
    ASSERT_EQ(bp_buffer_place_tensor(kept[0], t, 0), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_tensor_memset(t, 0x3c, 4, 20), BP_OK) << bp_last_error();
    uint8_t bytes[28];
    ASSERT_EQ(bp_tensor_get(t, bytes, 0, sizeof bytes), BP_OK);
    for (size_t i = 4; i < 24; ++i) EXPECT_EQ(bytes[i], 0x3c) << i;
    bp_context_free(ctx);
  }
  for (bp_buffer *b : kept) bp_buffer_free(b);
  bp_backend_free(be);
}

TEST(BackendFaultTest, DeviceLostIsStickyAndFreeStillWorks) {
  const std::string path = find_fixture("lost_after");
  if (path.empty()) GTEST_SKIP() << "lost_after fixture not built in " << BP_TEST_FIXTURE_DIR;
  bp_device *dev = load_first_device(path);
  ASSERT_NE(dev, nullptr);
  // Use the device until the fixture reports the loss, wherever that falls.
  bp_backend *be = nullptr;
  bp_buffer *buf = nullptr;
  bp_context *ctx = bp_context_new(0);
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 16);
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, bp_add(ctx, t, t)), BP_OK) << bp_last_error();
  float x[16] = {};
  bp_status st = bp_backend_new_on_device(dev, nullptr, &be);
  if (st == BP_OK) st = bp_context_alloc_tensors(ctx, be, &buf);
  for (int i = 0; i < 64 && st == BP_OK; ++i) {
    st = bp_tensor_set(t, x, 0, sizeof x);
    if (st == BP_OK) st = bp_backend_graph_compute(be, g);
  }
  ASSERT_EQ(st, BP_ERR_DEVICE_LOST) << bp_last_error();
  ASSERT_NE(be, nullptr) << "lost before a backend existed: raise the fixture's N";
  ASSERT_NE(buf, nullptr) << "lost before a buffer existed: raise the fixture's N";
  // Every later call on the device fails fast with the same code.
  EXPECT_STATUS(bp_tensor_get(t, x, 0, sizeof x), BP_ERR_DEVICE_LOST, "was lost");
  EXPECT_STATUS(bp_buffer_clear(buf, 0), BP_ERR_DEVICE_LOST, "was lost");
  EXPECT_STATUS(bp_backend_synchronize(be), BP_ERR_DEVICE_LOST, "was lost");
  bp_buffer *more = nullptr;
  EXPECT_STATUS(bp_backend_alloc_buffer(be, 64, &more), BP_ERR_DEVICE_LOST, "was lost");
  bp_backend *again = nullptr;
  EXPECT_STATUS(bp_backend_new_on_device(dev, nullptr, &again), BP_ERR_DEVICE_LOST);
  EXPECT_STATUS(bp_backend_graph_compute(be, g), BP_ERR_DEVICE_LOST, "was lost");
  // Freeing still works (and releases the plugin's references).
  bp_buffer_free(buf);
  bp_backend_free(be);
  bp_graph_free(g);
  bp_context_free(ctx);
}

}  // namespace
}  // namespace bp_objects_test
