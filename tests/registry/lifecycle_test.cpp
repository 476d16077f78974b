// lifecycle_test.cpp: plugin lifetime (docs/failures.md #15-#18): unload refused
// while objects live, shutdown exactly once per load, load/unload loops,
// fail-the-Nth-allocation and device-lost fixtures, bp_runtime_shutdown.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "registry_test_util.hpp"
#include "support/find.hpp"

using bp_test::fixture;
using bp_test::is_mapped;
using bp_test::load_fixture;

namespace {

TEST(RegistryLifecycle, UnloadWithALiveBufferIsRefusedThenWorks) {
  bp_plugin *p = load_fixture("good");
  ASSERT_NE(p, nullptr);
  bp_buffer_type *buft = bp_device_buffer_type(bp_plugin_device(p, 0));
  ASSERT_NE(buft, nullptr) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_buffer_type_alloc(buft, 256, &buf), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_plugin_unload(p), BP_ERR_FAILED_PRECONDITION);
  std::string message = bp_last_error();
  EXPECT_NE(message.find("plugin 'good' still has 1 live object"), std::string::npos) << message;
  EXPECT_EQ(bp_test::find_plugin("good"), p);  // still loaded and usable
  EXPECT_EQ(bp_buffer_clear(buf, 7), BP_OK) << bp_last_error();
  bp_buffer_free(buf);
  EXPECT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_test::find_plugin("good"), nullptr);
  EXPECT_EQ(bp_plugin_unload(p), BP_ERR_INVALID_ARGUMENT);  // a stale handle is caught, not used
}

TEST(RegistryLifecycle, UnloadWithALiveBackendIsRefused) {
  bp_plugin *p = load_fixture("good");
  ASSERT_NE(p, nullptr);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("good", &be), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_plugin_unload(p), BP_ERR_FAILED_PRECONDITION);
  bp_backend_free(be);
  EXPECT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryLifecycle, LoadUnloadTenTimesShutsDownOncePerLoad) {
  // The OpenCL plugin_test loop; under ASan/LSan (build-asan-reg) it also
  // proves each cycle frees what it made. Each unload really unmaps the file.
  unsetenv("BP_DISABLE_UNLOAD");
  if (bp_plugin *old = bp_test::find_plugin("good")) {
    ASSERT_EQ(bp_plugin_unload(old), BP_OK) << bp_last_error();
  }
  bp_test::log_capture logs;
  for (int i = 0; i < 10; ++i) {
    bp_plugin *p = load_fixture("good");
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(is_mapped(fixture("good")));
    bp_backend *be = nullptr;
    ASSERT_EQ(bp_backend_new("good:flavor=3", &be), BP_OK) << bp_last_error();
    bp_buffer *buf = nullptr;
    ASSERT_EQ(bp_backend_alloc_buffer(be, 1000, &buf), BP_OK) << bp_last_error();
    bp_buffer_free(buf);
    bp_backend_free(be);
    ASSERT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
    EXPECT_FALSE(is_mapped(fixture("good"))) << "cycle " << i << ": dlclose left the file mapped";
  }
  EXPECT_EQ(logs.count("good", "fake: init"), 10u);
  EXPECT_EQ(logs.count("good", "fake: shutdown"), 10u);
}

TEST(RegistryLifecycle, DisableUnloadKeepsTheCodeButStillShutsDown) {
  if (bp_plugin *old = bp_test::find_plugin("good")) {
    ASSERT_EQ(bp_plugin_unload(old), BP_OK);
  }
  setenv("BP_DISABLE_UNLOAD", "1", 1);
  bp_test::log_capture logs;
  bp_plugin *p = load_fixture("good");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(bp_plugin_unload(p), BP_OK);
  EXPECT_TRUE(is_mapped(fixture("good"))) << "BP_DISABLE_UNLOAD=1 must keep the code mapped";
  // "0" and "" mean off.
  for (const char *off : {"0", ""}) {
    setenv("BP_DISABLE_UNLOAD", off, 1);
    ASSERT_NE((p = load_fixture("zero_devices")), nullptr);
    EXPECT_EQ(bp_plugin_unload(p), BP_OK);
    EXPECT_FALSE(is_mapped(fixture("zero_devices"))) << "BP_DISABLE_UNLOAD='" << off << "'";
  }
  unsetenv("BP_DISABLE_UNLOAD");
  EXPECT_EQ(logs.count("good", "fake: shutdown"), 1u);
  EXPECT_NE(load_fixture("good"), nullptr);  // and it loads again
}

TEST(RegistryLifecycle, UnloadWithEveryKindOfLiveObjectIsRefused) {
  // Backend, buffer from the backend, buffer from the device's type: each one
  // alone keeps the plugin, and the count in the message is exact.
  bp_plugin *p = load_fixture("fake_gpu");
  ASSERT_NE(p, nullptr);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("fake_gpu:1", &be), BP_OK) << bp_last_error();
  bp_buffer *a = nullptr, *b = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(be, 64, &a), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_buffer_type_alloc(bp_device_buffer_type(bp_plugin_device(p, 0)), 64, &b), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_plugin_unload(p), BP_ERR_FAILED_PRECONDITION);
  EXPECT_NE(std::string(bp_last_error()).find("still has 3 live object(s)"), std::string::npos) << bp_last_error();
  bp_backend_free(be);  // the buffers outlive their backend and still count
  EXPECT_EQ(bp_plugin_unload(p), BP_ERR_FAILED_PRECONDITION);
  EXPECT_NE(std::string(bp_last_error()).find("still has 2 live object(s)"), std::string::npos) << bp_last_error();
  bp_buffer_free(a);
  EXPECT_EQ(bp_plugin_unload(p), BP_ERR_FAILED_PRECONDITION);
  bp_buffer_free(b);
  EXPECT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryLifecycle, FailTheNthAllocationThenRecover) {
  ASSERT_NE(load_fixture("fail_alloc"), nullptr);
  for (int n = 0; n <= 3; ++n) {
    SCOPED_TRACE(n);
    bp_backend *be = nullptr;
    ASSERT_EQ(bp_backend_new(("fail_alloc:fail_after=" + std::to_string(n)).c_str(), &be), BP_OK) << bp_last_error();
    std::vector<bp_buffer *> bufs;
    bp_status st = BP_OK;
    for (int i = 0; i < 10 && st == BP_OK; ++i) {
      bp_buffer *b = nullptr;
      st = bp_backend_alloc_buffer(be, 128, &b);
      if (st == BP_OK) bufs.push_back(b);
    }
    EXPECT_EQ(st, BP_ERR_OUT_OF_DEVICE_MEMORY);
    EXPECT_NE(std::string(bp_last_error()).find("fail_after budget"), std::string::npos) << bp_last_error();
    EXPECT_EQ(bufs.size(), static_cast<size_t>(n));
    for (bp_buffer *b : bufs) bp_buffer_free(b);
    bp_backend_free(be);
  }
  // Nothing leaked: every buffer and backend gave its reference back.
  EXPECT_EQ(bp_plugin_unload(bp_test::find_plugin("fail_alloc")), BP_OK) << bp_last_error();
}

TEST(RegistryLifecycle, DeviceLostIsStickyAndReleaseStillWorks) {
  ASSERT_NE(load_fixture("lost_after"), nullptr);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("lost_after", &be), BP_OK) << bp_last_error();
  bp_test::add_graph add(be, 7);
  ASSERT_EQ(add.status, BP_OK) << bp_last_error();
  bp_tensor *a = add.a, *b = add.b, *c = add.c;
  bp_graph *g = add.g;
  std::vector<float> x(7), y(7), out(7);
  for (int i = 0; i < 7; ++i) {
    x[i] = 0.5f * i;
    y[i] = 10.0f - i;
  }
  ASSERT_EQ(bp_tensor_set(a, x.data(), 0, sizeof(float) * 7), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(b, y.data(), 0, sizeof(float) * 7), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();  // lost_after=1: the first one runs
  ASSERT_EQ(bp_tensor_get(c, out.data(), 0, sizeof(float) * 7), BP_OK) << bp_last_error();
  for (int i = 0; i < 7; ++i) EXPECT_DOUBLE_EQ(out[i], double(x[i]) + double(y[i]));
  EXPECT_EQ(bp_backend_graph_compute(be, g), BP_ERR_DEVICE_LOST);
  EXPECT_EQ(bp_backend_graph_compute(be, g), BP_ERR_DEVICE_LOST);  // sticky
  EXPECT_EQ(bp_tensor_get(c, out.data(), 0, sizeof(float) * 7), BP_ERR_DEVICE_LOST);
  add.release();
  bp_backend_free(be);
  EXPECT_EQ(bp_plugin_unload(bp_test::find_plugin("lost_after")), BP_OK) << bp_last_error();
}

TEST(RegistryLifecycle, ThrowingSlotBecomesInternalAndTheProcessLives) {
  ASSERT_NE(load_fixture("good"), nullptr);
  bp_backend *be = nullptr;
  EXPECT_EQ(bp_backend_new("good:throw=true", &be), BP_ERR_INTERNAL);
  EXPECT_EQ(be, nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("backend_init threw as asked"), std::string::npos) << bp_last_error();
  ASSERT_EQ(bp_backend_new("good:throw=false", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
}

TEST(RegistryLifecycle, RuntimeShutdownWithLiveObjectsChangesNothing) {
  // All or nothing. Refused while objects live, and then
  // the runtime is as it was, so "free them, then call again" can be done.
  EXPECT_EXIT(
      {
        bp_plugin *good = nullptr;
        if (bp_registry_load(fixture("good").c_str(), &good) != BP_OK) std::exit(10);
        if (bp_registry_load(fixture("fake_gpu").c_str(), nullptr) != BP_OK) std::exit(11);
        bp_buffer *buf = nullptr;
        if (bp_buffer_type_alloc(bp_device_buffer_type(bp_plugin_device(good, 0)), 64, &buf) != BP_OK) std::exit(12);
        if (bp_runtime_shutdown() != BP_ERR_FAILED_PRECONDITION) std::exit(13);
        const std::string why = bp_last_error();
        if (why.find("good (1 live)") == std::string::npos) std::exit(14);
        if (why.find("nothing was shut down") == std::string::npos) std::exit(15);
        // Nothing was unloaded and the registry still works.
        if (bp_test::find_plugin("fake_gpu") == nullptr || bp_test::find_plugin("good") != good) std::exit(16);
        if (bp_registry_load(fixture("good").c_str(), nullptr) != BP_OK) std::exit(17);
        bp_buffer_free(buf);
        if (bp_runtime_shutdown() != BP_OK) std::exit(18);
        if (bp_plugin_count() != 0) std::exit(19);
        bp_backend *be = nullptr;
        if (bp_backend_new("good", &be) != BP_ERR_FAILED_PRECONDITION) std::exit(20);
        if (bp_registry_load(fixture("good").c_str(), nullptr) != BP_ERR_FAILED_PRECONDITION) std::exit(21);
        if (bp_runtime_shutdown() != BP_ERR_FAILED_PRECONDITION) std::exit(22);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(RegistryLifecycle, EveryRegistryCallAfterShutdownIsFailedPrecondition) {
  // docs/failures.md #18: an explicit end, and nothing works by accident after it.
  EXPECT_EXIT(
      {
        if (bp_registry_load(fixture("good").c_str(), nullptr) != BP_OK) std::exit(10);
        if (bp_runtime_shutdown() != BP_OK) std::exit(12);
        if (bp_registry_add_path(BP_TEST_FIXTURE_DIR) != BP_ERR_FAILED_PRECONDITION) std::exit(13);
        if (bp_registry_discover() != BP_ERR_FAILED_PRECONDITION) std::exit(14);
        if (bp_registry_load(fixture("fake_gpu").c_str(), nullptr) != BP_ERR_FAILED_PRECONDITION) std::exit(15);
        bp_backend *more[2] = {};
        size_t n = 0;
        if (bp_backend_new_list("good;good", more, 2, &n) != BP_ERR_FAILED_PRECONDITION) std::exit(16);
        if (bp_backend_new("good", &more[0]) != BP_ERR_FAILED_PRECONDITION) std::exit(17);
        if (more[0] || more[1]) std::exit(18);
        if (bp_rejected_get(0, nullptr, nullptr, nullptr) != BP_ERR_FAILED_PRECONDITION) std::exit(19);
        if (bp_plugin_count() != 0 || bp_device_count() != 0 || bp_rejected_count() != 0) std::exit(20);
        if (bp_test::find_plugin("good") != nullptr || bp_device_get(0) != nullptr) std::exit(21);
        if (std::string(bp_last_error()).find("bp_runtime_shutdown") == std::string::npos) std::exit(22);
        if (bp_last_status() != BP_ERR_FAILED_PRECONDITION) std::exit(23);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(RegistryLifecycle, ExitWithoutFreeingOrShutdownIsClean) {
  // docs/failures.md #18: no work in global destructors. A process that just
  // exits with plugins loaded and objects alive must not crash in teardown
  // (the registry is never destroyed, so no plugin is closed under it).
  EXPECT_EXIT(
      {
        // Static: still referenced at exit, so LSan (ASan builds) sees live
        // objects, not leaks; what is tested is that teardown does not crash.
        static bp_backend *be = nullptr;
        static bp_buffer *buf = nullptr;
        if (bp_registry_load(fixture("good").c_str(), nullptr) != BP_OK) std::exit(10);
        if (bp_registry_load(fixture("fake_gpu").c_str(), nullptr) != BP_OK) std::exit(11);
        if (bp_backend_new("fake_gpu:1", &be) != BP_OK) std::exit(12);
        if (bp_backend_alloc_buffer(be, 128, &buf) != BP_OK) std::exit(13);
        bp_device_count();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
