// spec_resolve_test.cpp: spec strings against real plugins (docs/failures.md
// #13, #14): device index and id selection, "auto", parameter types, ranges
// and defaults, errors that list what exists, and the list API.
#include <gtest/gtest.h>

#include <string>

#include "registry_test_util.hpp"
#include "support/find.hpp"

using bp_test::load_fixture;

namespace {

class SpecResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(load_fixture("good"), nullptr);
    ASSERT_NE(load_fixture("fake_gpu"), nullptr);
  }
  // Creates a backend from |spec| and returns its name ("" on failure).
  std::string backend_name(const char *spec) {
    bp_backend *be = nullptr;
    bp_status st = bp_backend_new(spec, &be);
    EXPECT_EQ(st, BP_OK) << spec << ": " << bp_last_error();
    if (st != BP_OK) return "";
    std::string name = bp_backend_name(be);
    bp_backend_free(be);
    return name;
  }
  // Expects |spec| to fail with |status| and a message containing each part.
  void expect_error(const char *spec, bp_status status, std::initializer_list<const char *> parts) {
    bp_backend *be = reinterpret_cast<bp_backend *>(0x1);
    EXPECT_EQ(bp_backend_new(spec, &be), status) << spec << ": " << bp_last_error();
    EXPECT_EQ(be, nullptr);
    std::string message = bp_last_error();
    for (const char *part : parts) EXPECT_NE(message.find(part), std::string::npos) << spec << ": " << message;
  }
};

TEST_F(SpecResolve, DeviceSelection) {
  EXPECT_EQ(backend_name("good"), "good:0");
  EXPECT_EQ(backend_name("good:0"), "good:0");
  EXPECT_EQ(backend_name("good:device=0"), "good:0");
  EXPECT_EQ(backend_name("fake_gpu:1"), "fake_gpu:1");
  EXPECT_EQ(backend_name("fake_gpu:id=fake-fake_gpu-B"), "fake_gpu:1");
  EXPECT_EQ(backend_name("fake_gpu:id=fake-fake_gpu-A,flavor=2"), "fake_gpu:0");
  EXPECT_EQ(backend_name(" fake_gpu:0 "), "fake_gpu:0");
}

TEST_F(SpecResolve, EveryDeviceSpecSelectsItsDevice) {
  for (size_t i = 0, n = bp_device_count(); i < n; ++i) {
    bp_device *dev = bp_device_get(i);
    bp_device_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(bp_device_describe(dev, &info), BP_OK);
    std::string plugin = bp_plugin_name(info.plugin);
    if (plugin != "good" && plugin != "fake_gpu") continue;  // others may need hardware
    bp_backend *be = nullptr;
    ASSERT_EQ(bp_backend_new(info.spec, &be), BP_OK) << info.spec << ": " << bp_last_error();
    EXPECT_EQ(bp_backend_device(be), dev);
    bp_backend_free(be);
    std::string by_id = plugin + ":id=" + info.id;
    ASSERT_EQ(bp_backend_new(by_id.c_str(), &be), BP_OK) << by_id << ": " << bp_last_error();
    EXPECT_EQ(bp_backend_device(be), dev);
    bp_backend_free(be);
  }
}

TEST_F(SpecResolve, UnknownDevicesListWhatExists) {
  expect_error("good:1", BP_ERR_NOT_FOUND, {"device spec \"good:1\"", "has no device 1", "valid: 0..0", "good:0"});
  expect_error("fake_gpu:device=7", BP_ERR_NOT_FOUND, {"valid: 0..1", "fake_gpu:0", "fake_gpu:1", "id=fake-fake_gpu-B"});
  expect_error("fake_gpu:id=nope", BP_ERR_NOT_FOUND, {"no device with id 'nope'", "id=fake-fake_gpu-A"});
  expect_error("fake_gpu:1,id=fake-fake_gpu-B", BP_ERR_INVALID_ARGUMENT, {"not both"});
  expect_error("nosuch", BP_ERR_NOT_FOUND, {"no plugin named 'nosuch'", "loaded:", "good", "fake_gpu"});
}

TEST_F(SpecResolve, RefusedPluginIsNamedWithItsReason) {
  bp_registry_load(bp_test::fixture("init_fails").c_str(), nullptr);
  expect_error("init_fails", BP_ERR_NOT_FOUND, {"libbp-init_fails.so was refused", "permission denied"});
}

TEST_F(SpecResolve, ZeroDevicesIsUnavailable) {
  ASSERT_NE(load_fixture("zero_devices"), nullptr);
  expect_error("zero_devices", BP_ERR_UNAVAILABLE, {"has no devices"});
}

TEST_F(SpecResolve, ParameterValidation) {
  EXPECT_EQ(backend_name("good:flavor=100"), "good:0");
  EXPECT_EQ(backend_name("good:flavor=0,label=hello,throw=no"), "good:0");
  expect_error("good:flavor=101", BP_ERR_INVALID_ARGUMENT, {"at column 6", "'flavor' is 101, outside its range 0..100"});
  expect_error("good:flavor=-1", BP_ERR_INVALID_ARGUMENT, {"outside its range 0..100"});
  expect_error("good:flavor=abc", BP_ERR_INVALID_ARGUMENT, {"'abc' for 'flavor' is not an integer"});
  expect_error("good:flavor=99999999999999999999", BP_ERR_INVALID_ARGUMENT, {"overflows"});
  expect_error("good:throw=maybe", BP_ERR_INVALID_ARGUMENT, {"'maybe' for 'throw' is not a boolean"});
  expect_error("good:flavour=1", BP_ERR_INVALID_ARGUMENT,
               {"at column 6", "unknown key 'flavour' for plugin 'good'", "device=INT (0..0)", "id=STRING",
                "flavor=INT (0..100, default 0)", "throw=BOOL (default false)", "label=STRING (default fake)"});
  expect_error("good:threads=2", BP_ERR_INVALID_ARGUMENT, {"unknown key 'threads'"});
  expect_error("good:flavor=1,flavor=2", BP_ERR_INVALID_ARGUMENT, {"duplicate key 'flavor'"});
}

TEST_F(SpecResolve, SyntaxErrorsComeBackThroughTheApi) {
  for (const char *bad : {"", ":", "cpu:", "cpu:,", "cpu:threads=", "cpu:=2", "cpu:threads=2,threads=3",
                          "cpu:99999999999999999999", "a;;b", "cpü"}) {
    bp_backend *be = nullptr;
    EXPECT_EQ(bp_backend_new(bad, &be), BP_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(bp_last_error()).find("at column"), std::string::npos) << bp_last_error();
  }
  expect_error("good;fake_gpu", BP_ERR_INVALID_ARGUMENT, {"use bp_backend_new_list"});
  bp_backend *be = nullptr;
  EXPECT_EQ(bp_backend_new(nullptr, &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_backend_new("good", nullptr), BP_ERR_INVALID_ARGUMENT);
}

TEST_F(SpecResolve, AutoPicksTheBestDevice) {
  // Expected: the first device of the best type, most memory first.
  auto rank = [](bp_device_type t) {
    return t == BP_DEVICE_TYPE_GPU ? 0 : t == BP_DEVICE_TYPE_IGPU ? 1 : t == BP_DEVICE_TYPE_ACCEL ? 2 : 3;
  };
  bp_device *best = nullptr;
  bp_device_info best_info{};
  for (size_t i = 0, n = bp_device_count(); i < n; ++i) {
    bp_device_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(bp_device_describe(bp_device_get(i), &info), BP_OK);
    if (!best || rank(info.type) < rank(best_info.type) ||
        (rank(info.type) == rank(best_info.type) && info.memory_total > best_info.memory_total)) {
      best = bp_device_get(i);
      best_info = info;
    }
  }
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best_info.type, BP_DEVICE_TYPE_GPU);  // fake_gpu is loaded
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("auto", &be), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_backend_device(be), best);
  bp_backend_free(be);
  expect_error("auto:0", BP_ERR_INVALID_ARGUMENT, {"'auto' picks the device itself"});
  expect_error("auto:id=x", BP_ERR_INVALID_ARGUMENT, {"'auto' picks the device itself"});
}

TEST_F(SpecResolve, ListsAreWholeOrNothing) {
  bp_backend *out[4] = {};
  size_t n = 99;
  ASSERT_EQ(bp_backend_new_list("fake_gpu:1;good:flavor=1", out, 4, &n), BP_OK) << bp_last_error();
  ASSERT_EQ(n, 2u);
  EXPECT_STREQ(bp_backend_name(out[0]), "fake_gpu:1");
  EXPECT_STREQ(bp_backend_name(out[1]), "good:0");
  bp_backend_free(out[0]);
  bp_backend_free(out[1]);

  EXPECT_EQ(bp_backend_new_list("good;fake_gpu;nosuch", out, 4, &n), BP_ERR_NOT_FOUND);
  EXPECT_EQ(n, 0u);
  EXPECT_NE(std::string(bp_last_error()).find("no plugin named 'nosuch'"), std::string::npos) << bp_last_error();
  EXPECT_EQ(bp_backend_new_list("good;good;good", out, 2, &n), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("names 3 backends but capacity is 2"), std::string::npos);
  EXPECT_EQ(bp_backend_new_list("good;;good", out, 4, &n), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_backend_new_list(nullptr, out, 4, &n), BP_ERR_INVALID_ARGUMENT);
  // Nothing was left alive by the failed calls.
  EXPECT_EQ(bp_plugin_unload(bp_test::find_plugin("good")), BP_OK) << bp_last_error();
}

TEST_F(SpecResolve, DeviceInitBackendTakesParamsOnly) {
  bp_device *dev = bp_plugin_device(bp_test::find_plugin("fake_gpu"), 1);
  ASSERT_NE(dev, nullptr);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new_on_device(dev, nullptr, &be), BP_OK) << bp_last_error();
  EXPECT_STREQ(bp_backend_name(be), "fake_gpu:1");
  bp_backend_free(be);
  ASSERT_EQ(bp_backend_new_on_device(dev, "flavor=5,label=x", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
  EXPECT_EQ(bp_backend_new_on_device(dev, "device=0", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("the device is given by the handle"), std::string::npos);
  EXPECT_EQ(bp_backend_new_on_device(dev, "flavor=", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("bad backend params \"flavor=\" at column 8"), std::string::npos)
      << bp_last_error();
  EXPECT_EQ(bp_backend_new_on_device(dev, "nope=1", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_backend_new_on_device(nullptr, "", &be), BP_ERR_INVALID_ARGUMENT);
}

TEST_F(SpecResolve, CpuPluginAcceptsThreads) {
  if (!bp_test::find_plugin("cpu")) GTEST_SKIP() << "cpu plugin not built";
  EXPECT_EQ(backend_name("cpu:threads=2"), "cpu:0");
  expect_error("cpu:threads=-5", BP_ERR_INVALID_ARGUMENT, {"outside its range"});
}

}  // namespace
