// handles_test.cpp: NULL and wrong-type handles at every registry entry
// point (docs/failures.md #24), in the style of the OpenCL CTS negative tests:
// INVALID_ARGUMENT (or NULL/0 with the error set) in every build, never a
// crash. Handles carry a type tag, so a device passed as a plugin is caught.
#include <gtest/gtest.h>

#include <string>

#include "registry_test_util.hpp"

using bp_test::load_fixture;

namespace {

// The last error names |fn| and says what was wrong with the handle.
void expect_error_names(const char *fn, const char *what) {
  const std::string message = bp_last_error();
  EXPECT_NE(message.find(fn), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

class RegistryHandles : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = load_fixture("fake_gpu");
    ASSERT_NE(plugin_, nullptr);
    device_ = bp_plugin_device(plugin_, 0);
    ASSERT_NE(device_, nullptr);
  }
  bp_plugin *plugin_ = nullptr;
  bp_device *device_ = nullptr;
};

TEST_F(RegistryHandles, NullPluginHandle) {
  bp_clear_error();
  EXPECT_EQ(bp_plugin_name(nullptr), nullptr);
  expect_error_names("bp_plugin_name", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_version(nullptr), nullptr);
  expect_error_names("bp_plugin_version", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_path(nullptr), nullptr);
  expect_error_names("bp_plugin_path", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_description(nullptr), nullptr);
  expect_error_names("bp_plugin_description", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_param_count(nullptr), 0u);
  expect_error_names("bp_plugin_param_count", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_param(nullptr, 0), nullptr);
  expect_error_names("bp_plugin_param", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_device_count(nullptr), 0u);
  expect_error_names("bp_plugin_device_count", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_device(nullptr, 0), nullptr);
  expect_error_names("bp_plugin_device", "NULL plugin handle");
  EXPECT_EQ(bp_plugin_unload(nullptr), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_plugin_unload", "NULL");
  bp_plugin *found = nullptr;
  EXPECT_EQ(bp_registry_find_plugin(nullptr, &found), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_registry_find_plugin", "NULL");
  EXPECT_EQ(bp_registry_find_plugin("cpu", nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_registry_find_plugin("no_such_plugin", &found), BP_ERR_NOT_FOUND);
  EXPECT_EQ(found, nullptr);
  expect_error_names("no plugin named 'no_such_plugin'", "bp-devices");
}

TEST_F(RegistryHandles, NullDeviceHandleAndOutputs) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(bp_device_describe(nullptr, &info), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_device_describe", "NULL device handle");
  EXPECT_EQ(bp_device_describe(device_, nullptr), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_device_describe", "out is NULL");
  bp_backend *be = reinterpret_cast<bp_backend *>(0x1);
  EXPECT_EQ(bp_backend_new_on_device(nullptr, "", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(be, nullptr);
  expect_error_names("bp_backend_new_on_device", "invalid device handle");
  EXPECT_EQ(bp_backend_new_on_device(device_, "", nullptr), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_backend_new_on_device", "out_backend is NULL");
  EXPECT_EQ(bp_backend_new_list("fake_gpu", nullptr, 1, nullptr), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_backend_new_list", "out is NULL");
  // Every output pointer of bp_rejected_get may be NULL.
  bp_registry_load(bp_test::fixture("not_elf").c_str(), nullptr);
  EXPECT_EQ(bp_rejected_get(0, nullptr, nullptr, nullptr), BP_OK);
}

TEST_F(RegistryHandles, WrongTypeHandlesAreCaughtByTheirTag) {
  // A device where a plugin is expected, and the other way round: both start
  // with a tag of another type.
  auto *device_as_plugin = reinterpret_cast<bp_plugin *>(device_);
  auto *plugin_as_device = reinterpret_cast<bp_device *>(plugin_);
  EXPECT_EQ(bp_plugin_name(device_as_plugin), nullptr);
  expect_error_names("bp_plugin_name", "invalid");
  EXPECT_EQ(bp_plugin_device_count(device_as_plugin), 0u);
  EXPECT_EQ(bp_plugin_device(device_as_plugin, 0), nullptr);
  EXPECT_EQ(bp_plugin_unload(device_as_plugin), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_plugin_unload", "not a loaded plugin");
  bp_device_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(bp_device_describe(plugin_as_device, &info), BP_ERR_INVALID_ARGUMENT);
  expect_error_names("bp_device_describe", "invalid");
  bp_backend *be = nullptr;
  EXPECT_EQ(bp_backend_new_on_device(plugin_as_device, "", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(be, nullptr);
  // Not a handle at all: a plain word with no known tag.
  alignas(16) uint32_t junk[16] = {0x12345678u};
  EXPECT_EQ(bp_plugin_name(reinterpret_cast<bp_plugin *>(junk)), nullptr);
  EXPECT_EQ(bp_device_describe(reinterpret_cast<bp_device *>(junk), &info), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_plugin_unload(reinterpret_cast<bp_plugin *>(junk)), BP_ERR_INVALID_ARGUMENT);
  // The real handles still work after all that.
  EXPECT_STREQ(bp_plugin_name(plugin_), "fake_gpu");
  EXPECT_EQ(bp_device_describe(device_, &info), BP_OK) << bp_last_error();
}

TEST_F(RegistryHandles, OutOfRangeIndicesNameTheRange) {
  EXPECT_EQ(bp_plugin_device(plugin_, 2), nullptr);
  expect_error_names("bp_plugin_device", "index 2 out of range (plugin 'fake_gpu' has 2 devices)");
  EXPECT_EQ(bp_plugin_param(plugin_, 99), nullptr);
  expect_error_names("bp_plugin_param", "out of range");
  EXPECT_EQ(bp_plugin_get(static_cast<size_t>(-1)), nullptr);
  expect_error_names("bp_plugin_get", "out of range");
  EXPECT_EQ(bp_device_get(static_cast<size_t>(-1)), nullptr);
  expect_error_names("bp_device_get", "out of range");
}

}  // namespace
