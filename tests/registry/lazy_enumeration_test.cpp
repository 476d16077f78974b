// lazy_enumeration_test.cpp: a plugin with an enumerate slot (ABI 1.1) is
// loaded without running it; its devices are found when first listed or
// asked for, exactly once; a failure there leaves the plugin listed with no
// devices and a status that names the cause (PLG-21). ABI 1.0 tables still
// load and are enumerated at load.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "registry_test_util.hpp"
#include "support/find.hpp"

using bp_test::load_fixture;

namespace {

TEST(RegistryLazy, LoadDoesNotEnumerateFirstUseDoesOnce) {
  bp_test::log_capture logs;
  bp_plugin *p = load_fixture("lazy");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(logs.count("lazy", "fake: init"), 1u);
  EXPECT_EQ(logs.count("lazy", "fake: enumerate"), 0u) << "enumerate ran at load";
  EXPECT_GE(logs.count("registry", "devices found on first use"), 1u);
  EXPECT_EQ(bp_plugin_device_count(p), 2u);
  EXPECT_EQ(logs.count("lazy", "fake: enumerate"), 1u);
  EXPECT_NE(bp_plugin_device(p, 1), nullptr);
  const char *why = "unset";
  EXPECT_EQ(bp_plugin_status(p, &why), BP_OK);
  EXPECT_EQ(why, nullptr);
  EXPECT_EQ(logs.count("lazy", "fake: enumerate"), 1u) << "enumerate ran twice";
  ASSERT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryLazy, BackendInitEnumeratesOnlyTheNamedPlugin) {
  bp_test::log_capture logs;
  bp_plugin *lazy = load_fixture("lazy");
  bp_plugin *good = load_fixture("good");
  ASSERT_NE(lazy, nullptr);
  ASSERT_NE(good, nullptr);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("good", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
  EXPECT_EQ(logs.count("lazy", "fake: enumerate"), 0u) << "asking for 'good' enumerated 'lazy'";
  ASSERT_EQ(bp_backend_new("lazy:1", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
  EXPECT_EQ(logs.count("lazy", "fake: enumerate"), 1u);
  ASSERT_EQ(bp_plugin_unload(lazy), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_plugin_unload(good), BP_OK) << bp_last_error();
}

TEST(RegistryLazy, UnavailableAtEnumerationKeepsThePluginWithItsReason) {
  bp_plugin *p = load_fixture("lazy_unavailable");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(bp_plugin_device_count(p), 0u);
  const char *why = nullptr;
  EXPECT_EQ(bp_plugin_status(p, &why), BP_ERR_UNAVAILABLE);
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("no fake driver answered"), std::string::npos) << why;
  bp_backend *be = reinterpret_cast<bp_backend *>(0x1);
  EXPECT_EQ(bp_backend_new("lazy_unavailable", &be), BP_ERR_UNAVAILABLE);
  EXPECT_EQ(be, nullptr);
  const std::string message = bp_last_error();
  EXPECT_NE(message.find("has no devices"), std::string::npos) << message;
  EXPECT_NE(message.find("no fake driver answered"), std::string::npos) << message;
  ASSERT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryLazy, ExceptionFromEnumerateIsAStatusNotACrash) {
  bp_plugin *p = load_fixture("lazy_throws");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(bp_plugin_device_count(p), 0u);
  const char *why = nullptr;
  EXPECT_EQ(bp_plugin_status(p, &why), BP_ERR_INTERNAL);
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("PLG-10"), std::string::npos) << why;
  ASSERT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryLazy, Abi10TableWithoutEnumerateLoadsAndIsEnumeratedAtLoad) {
  bp_test::log_capture logs;
  bp_plugin *p = load_fixture("abi_1_0_table");
  ASSERT_NE(p, nullptr) << bp_last_error();
  EXPECT_GE(logs.count("registry", "(1 devices)"), 1u);
  EXPECT_EQ(bp_plugin_device_count(p), 1u);
  EXPECT_EQ(bp_plugin_status(p, nullptr), BP_OK);
  ASSERT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryLazy, StatusRejectsABadHandle) {
  EXPECT_EQ(bp_plugin_status(nullptr, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("bp_plugin_status"), std::string::npos);
}

}  // namespace

namespace {

// The shipped GPU plugins defer their driver work (PLG-21): asking for the
// cpu loads them (discovery) but enumerates neither, so no Vulkan instance
// or OpenCL platform is created; listing every device then does.
TEST(RegistryLazy, AskingForCpuDoesNotEnumerateTheGpuPlugins) {
  bp_test::log_capture logs;
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("cpu", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
  std::vector<std::string> deferred;
  for (const char *name : {"vulkan", "opencl"})
    if (bp_test::find_plugin(name)) deferred.push_back(name);
  if (deferred.empty()) GTEST_SKIP() << "neither the vulkan nor the opencl plugin is built here";
  for (const std::string &name : deferred) {
    SCOPED_TRACE(name);
    EXPECT_EQ(logs.count("registry", "plugin '" + name + "': "), 0u) << "enumerated while asking for cpu";
  }
  bp_device_count();
  for (const std::string &name : deferred) {
    SCOPED_TRACE(name);
    const char *why = nullptr;
    bp_status st = bp_plugin_status(bp_test::find_plugin(name.c_str()), &why);
    EXPECT_TRUE(st == BP_OK || st == BP_ERR_UNAVAILABLE) << bp_status_name(st) << ": " << (why ? why : "");
    if (st == BP_OK) {
      EXPECT_EQ(logs.count("registry", "plugin '" + name + "': "), 1u) << "enumerated once";
    }
  }
}

// PLG-13: the host adds the plugin's name to each log line, so no shipped
// plugin starts a line with it ("vulkan: vulkan: 1 device(s)" otherwise).
// Enumerating, creating a backend and running a graph log on every plugin.
TEST(RegistryLazy, NoShippedPluginRepeatsItsNameInALogLine) {
  bp_test::log_capture logs;
  bp_device_count();
  std::vector<std::string> names;
  for (size_t i = 0; i < bp_plugin_count(); ++i) names.push_back(bp_plugin_name(bp_plugin_get(i)));
  for (const std::string &name : names) {
    bp_backend *be = nullptr;
    if (bp_backend_new(name.c_str(), &be) != BP_OK) continue;  // no device here
    bp_context *ctx = bp_context_new(0);
    bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 8);
    bp_graph *g = bp_graph_new(ctx, 0);
    bp_buffer *buf = nullptr;
    if (bp_graph_build(g, bp_add(ctx, a, a)) == BP_OK && bp_context_alloc_tensors(ctx, be, &buf) == BP_OK)
      bp_backend_graph_compute(be, g);
    bp_buffer_free(buf);
    bp_graph_free(g);
    bp_context_free(ctx);
    bp_backend_free(be);
  }
  size_t lines = 0;
  for (const std::string &name : names) {
    SCOPED_TRACE(name);
    lines += logs.count_from(name);
    EXPECT_EQ(logs.count_starting(name, name + ":"), 0u) << "a log line of '" << name << "' starts with its name";
  }
  EXPECT_GT(lines, 0u) << "no plugin logged anything at debug level: the test proves nothing";
}

}  // namespace
