// limits_test.cpp: the registry's fixed capacities (docs/failures.md #23). Each
// one either clamps with a warning naming the limit (devices a plugin
// reports) or refuses with an error naming it (parameters a plugin declares,
// backends asked of bp_backend_new_list); the spec parser's limits are in
// spec_parser_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "registry_test_util.hpp"

using bp_test::load_fixture;

namespace {

TEST(RegistryLimits, DevicesBeyondThePerPluginLimitAreClampedWithAWarning) {
  bp_test::log_capture logs;
  bp_plugin *p = load_fixture("many_devices");  // reports 300
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(bp_plugin_device_count(p), 256u);
  EXPECT_EQ(logs.count_at(BP_LOG_WARN, "registry", "reports 300 devices; only the first 256 are used"), 1u);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("many_devices:255", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
  EXPECT_EQ(bp_backend_new("many_devices:256", &be), BP_ERR_NOT_FOUND);
  const std::string message = bp_last_error();
  EXPECT_NE(message.find("valid: 0..255"), std::string::npos) << message;
  // The list of devices in the message is cut short, not 256 entries long.
  EXPECT_LT(message.size(), 2000u) << message;
  EXPECT_NE(message.find("and 240 more"), std::string::npos) << message;
}

TEST(RegistryLimits, ParameterSchemaAtTheLimitLoadsAndOneMoreIsRefused) {
  bp_plugin *p = load_fixture("params_at_limit");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(bp_plugin_param_count(p), 64u);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("params_at_limit:p0=1,p63=2", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
  EXPECT_EQ(bp_registry_load(bp_test::fixture("params_over_limit").c_str(), nullptr), BP_ERR_INCOMPATIBLE);
  EXPECT_NE(std::string(bp_last_error()).find("declares 65 parameters, the limit is 64"), std::string::npos)
      << bp_last_error();
}

TEST(RegistryLimits, BackendListLongerThanTheCallersArrayNamesBothSizes) {
  ASSERT_NE(load_fixture("good"), nullptr);
  bp_backend *out[3] = {};
  size_t n = 7;
  EXPECT_EQ(bp_backend_new_list("good;good;good;good", out, 3, &n), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("names 4 backends but capacity is 3"), std::string::npos)
      << bp_last_error();
  EXPECT_EQ(n, 0u);
  for (bp_backend *b : out) EXPECT_EQ(b, nullptr);
  ASSERT_EQ(bp_backend_new_list("good;good;good", out, 3, &n), BP_OK) << bp_last_error();
  EXPECT_EQ(n, 3u);
  for (bp_backend *b : out) bp_backend_free(b);
}

}  // namespace
