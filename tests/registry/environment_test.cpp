// environment_test.cpp: search-path hijacking (docs/failures.md #20) and
// configuration errors in the environment (#14), in child processes.
//
// bp_registry_probe (tests/fixtures/registry_probe.c) prints what discovery
// found. Elevation is faked with an LD_PRELOAD shim of secure_getenv (as the
// Vulkan loader's tests do), so no privilege is needed. The trap plugin's
// constructor ends its process with status 86: a trap that is ever opened,
// even if the registry refused it afterwards, fails the test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "registry_test_util.hpp"

namespace fs = std::filesystem;
using bp_test::child_result;
using bp_test::fixture;
using bp_test::run_child;
using bp_test::temp_dir;

namespace {

constexpr int k_trap_status = 86;

const std::string k_env_dir = std::string(BP_TEST_FIXTURE_DIR) + "/env";
const std::string k_probe = k_env_dir + "/bp_registry_probe";
const std::string k_shim = k_env_dir + "/libbp_secure_getenv_shim.so";
const std::string k_trap = std::string(BP_TEST_FIXTURE_DIR) + "/trap/libbp-trap.so";

bool has_line(const child_result &r, const std::string &line) {
  return ("\n" + r.out).find("\n" + line + "\n") != std::string::npos;
}

// Environment of a child that runs with the shim preloaded. ASan insists on
// coming first in the library list; the shim is harmless before it.
std::map<std::string, std::string> elevated(std::map<std::string, std::string> env) {
  env["LD_PRELOAD"] = k_shim;
  const char *asan = std::getenv("ASAN_OPTIONS");
  env["ASAN_OPTIONS"] = std::string(asan ? asan : "") + (asan && *asan ? ":" : "") + "verify_asan_link_order=0";
  return env;
}

class RegistryEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string &f : {k_probe, k_shim, k_trap}) ASSERT_TRUE(fs::exists(f)) << f << " is not built";
  }
};

TEST_F(RegistryEnvironment, PluginPathIsReadInANormalProcess) {
  // The control: without the shim the same folder is searched, so the
  // elevated test below can fail.
  temp_dir dir;
  fs::copy_file(fixture("zero_devices"), dir.path() / "libbp-zero_devices.so");
  child_result r = run_child({k_probe}, {{"BP_PLUGIN_PATH", dir.path().string()}});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has_line(r, "secure_getenv BP_PLUGIN_PATH=set")) << r.out;
  EXPECT_TRUE(has_line(r, "plugin zero_devices " + (dir.path() / "libbp-zero_devices.so").string())) << r.out;
  EXPECT_TRUE(has_line(r, "done")) << r.out;

  // And a trap on that path is opened: the detector works.
  fs::copy_file(k_trap, dir.path() / "libbp-trap.so");
  r = run_child({k_probe}, {{"BP_PLUGIN_PATH", dir.path().string()}});
  EXPECT_EQ(r.status, k_trap_status) << r.out;
}

TEST_F(RegistryEnvironment, PluginPathIsIgnoredUnderFakeElevation) {
  temp_dir dir;
  fs::copy_file(fixture("zero_devices"), dir.path() / "libbp-zero_devices.so");
  fs::copy_file(k_trap, dir.path() / "libbp-trap.so");
  child_result r = run_child({k_probe}, elevated({{"BP_PLUGIN_PATH", dir.path().string()}}));
  ASSERT_EQ(r.status, 0) << (r.status == k_trap_status ? "the trap on BP_PLUGIN_PATH was opened\n" : "") << r.out;
  // The shim is in effect: secure_getenv hides what getenv still sees.
  ASSERT_TRUE(has_line(r, "secure_getenv BP_PLUGIN_PATH=unset")) << "shim not active:\n" << r.out;
  ASSERT_TRUE(has_line(r, "getenv BP_PLUGIN_PATH=set")) << r.out;
  EXPECT_EQ(r.out.find(dir.path().string()), std::string::npos) << "BP_PLUGIN_PATH was searched:\n" << r.out;
  EXPECT_TRUE(has_line(r, "done")) << r.out;
  // The install folder and the build tree are still searched.
  if (fs::exists(std::string(BP_TEST_PLUGIN_DIR) + "/libbp-cpu.so")) {
    EXPECT_NE(r.out.find("plugin cpu "), std::string::npos) << r.out;
  }
}

TEST_F(RegistryEnvironment, CurrentDirectoryTrapIsNeverOpened) {
  // ggml loads from the CWD; Backplane never does, however BP_PLUGIN_PATH is
  // spelled (relative entries are ignored, empty ones mean nothing).
  temp_dir dir;
  fs::copy_file(k_trap, dir.path() / "libbp-trap.so");
  fs::copy_file(fixture("zero_devices"), dir.path() / "libbp-cwd.so");
  fs::create_directory(dir.path() / "sub");
  fs::copy_file(k_trap, dir.path() / "sub" / "libbp-trap.so");
  const std::vector<const char *> spellings = {nullptr, "", ".", "./", ":", "::", "sub", "./sub", "sub:."};
  for (const char *value : spellings) {
    SCOPED_TRACE(value ? std::string("BP_PLUGIN_PATH='") + value + "'" : std::string("BP_PLUGIN_PATH unset"));
    child_result r = value ? run_child({k_probe}, {{"BP_PLUGIN_PATH", value}}, {}, dir.path().string())
                           : run_child({k_probe}, {}, {"BP_PLUGIN_PATH"}, dir.path().string());
    EXPECT_EQ(r.status, 0) << (r.status == k_trap_status ? "the trap in the CWD was opened\n" : "") << r.out;
    EXPECT_EQ(r.out.find(dir.path().string()), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("libbp-cwd.so"), std::string::npos) << r.out;
    EXPECT_TRUE(has_line(r, "done")) << r.out;
  }
}

TEST(RegistryEnvironmentConfig, MissingOrRelativePluginPathEntriesAreWarnings) {
  // docs/failures.md #14: a configuration error is reported, not swallowed.
  bp_test::log_capture logs;
  setenv("BP_PLUGIN_PATH", "/no/such/bp-plugin-folder:relative/folder", 1);
  bp_status st = bp_registry_discover();
  unsetenv("BP_PLUGIN_PATH");
  EXPECT_EQ(st, BP_OK) << bp_last_error();  // the other folders still count
  EXPECT_EQ(logs.count_at(BP_LOG_WARN, "registry",
                          "BP_PLUGIN_PATH entry /no/such/bp-plugin-folder is not an existing folder"),
            1u);
  EXPECT_EQ(logs.count_at(BP_LOG_WARN, "registry", "BP_PLUGIN_PATH entry 'relative/folder' is not absolute"), 1u);
}

}  // namespace
