// discovery_test.cpp: where plugins are looked for (docs/failures.md #20):
// BP_PLUGIN_PATH is honoured, folders added through the API are searched,
// only libbp-*.so files are candidates, the current directory never is.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "registry_test_util.hpp"
#include "support/find.hpp"

namespace fs = std::filesystem;
using bp_test::find_rejected;
using bp_test::fixture;
using bp_test::temp_dir;

namespace {

bool any_plugin_under(const fs::path &dir) {
  const std::string prefix = dir.string() + "/";
  for (size_t i = 0, n = bp_plugin_count(); i < n; ++i)
    if (std::string(bp_plugin_path(bp_plugin_get(i))).rfind(prefix, 0) == 0) return true;
  for (size_t i = 0, n = bp_rejected_count(); i < n; ++i) {
    const char *path = nullptr;
    bp_rejected_get(i, &path, nullptr, nullptr);
    if (path && std::string(path).rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TEST(RegistryDiscovery, BuildTreePluginsAreFoundWithoutHelp) {
  ASSERT_EQ(bp_registry_discover(), BP_OK) << bp_last_error();
  if (!fs::exists(std::string(BP_TEST_PLUGIN_DIR) + "/libbp-cpu.so")) GTEST_SKIP() << "cpu plugin not built";
  bp_plugin *cpu = bp_test::find_plugin("cpu");
  ASSERT_NE(cpu, nullptr) << bp_last_error();
  EXPECT_EQ(fs::canonical(bp_plugin_path(cpu)), fs::canonical(std::string(BP_TEST_PLUGIN_DIR) + "/libbp-cpu.so"));
}

TEST(RegistryDiscovery, PluginPathEnvironmentIsHonoured) {
  temp_dir dir;
  // A copy under a new name: discovery only cares about the file name
  // pattern; the plugin's own name comes from its descriptor.
  fs::copy_file(fixture("zero_devices"), dir.path() / "libbp-zero_devices.so");
  fs::copy_file(fixture("good"), dir.path() / "not-a-candidate.so");  // wrong file name: ignored
  fs::create_directory(dir.path() / "libbp-folder.so");                // not a regular file: ignored
  if (bp_plugin *old = bp_test::find_plugin("zero_devices")) {
    ASSERT_EQ(bp_plugin_unload(old), BP_OK);
  }
  std::string env = "relative/ignored::" + dir.path().string();
  setenv("BP_PLUGIN_PATH", env.c_str(), 1);
  bp_status st = bp_registry_discover();
  unsetenv("BP_PLUGIN_PATH");
  ASSERT_EQ(st, BP_OK) << bp_last_error();
  bp_plugin *p = bp_test::find_plugin("zero_devices");
  ASSERT_NE(p, nullptr) << "BP_PLUGIN_PATH was not searched";
  EXPECT_EQ(fs::path(bp_plugin_path(p)), dir.path() / "libbp-zero_devices.so");
  EXPECT_FALSE(find_rejected((dir.path() / "not-a-candidate.so").string(), nullptr, nullptr));
  EXPECT_FALSE(find_rejected((dir.path() / "libbp-folder.so").string(), nullptr, nullptr));
  EXPECT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
}

TEST(RegistryDiscovery, AddedFolderIsSearchedAndBadFilesAreListed) {
  temp_dir dir;
  fs::copy_file(fixture("not_elf"), dir.path() / "libbp-not_elf.so");
  fs::copy_file(fixture("fake_gpu"), dir.path() / "libbp-fake_gpu.so");
  if (bp_plugin *old = bp_test::find_plugin("fake_gpu")) {
    ASSERT_EQ(bp_plugin_unload(old), BP_OK);
  }
  ASSERT_EQ(bp_registry_add_path(dir.path().c_str()), BP_OK) << bp_last_error();
  // Discovery re-runs on next use after a folder was added.
  bp_plugin *p = bp_test::find_plugin("fake_gpu");
  ASSERT_NE(p, nullptr) << bp_last_error();
  EXPECT_EQ(fs::path(bp_plugin_path(p)), dir.path() / "libbp-fake_gpu.so");
  bp_status st = BP_OK;
  std::string message;
  ASSERT_TRUE(find_rejected((dir.path() / "libbp-not_elf.so").string(), &st, &message));
  EXPECT_EQ(st, BP_ERR_INCOMPATIBLE);
  EXPECT_NE(message.find("invalid ELF header"), std::string::npos) << message;
  EXPECT_EQ(bp_plugin_unload(p), BP_OK);
}

TEST(RegistryDiscovery, AddPathRejectsBadFolders) {
  EXPECT_EQ(bp_registry_add_path(nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_registry_add_path(""), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_registry_add_path("/no/such/folder/anywhere"), BP_ERR_NOT_FOUND);
  EXPECT_NE(std::string(bp_last_error()).find("/no/such/folder/anywhere"), std::string::npos);
  EXPECT_EQ(bp_registry_add_path(fixture("good").c_str()), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("bp_registry_load"), std::string::npos);
}

TEST(RegistryDiscovery, CurrentDirectoryIsNeverSearched) {
  temp_dir dir;
  fs::copy_file(fixture("good"), dir.path() / "libbp-trap.so");
  fs::copy_file(fixture("init_fails"), dir.path() / "libbp-trap2.so");
  char old_cwd[PATH_MAX];
  ASSERT_NE(getcwd(old_cwd, sizeof old_cwd), nullptr);
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  setenv("BP_PLUGIN_PATH", "", 1);  // empty entries mean nothing, not "."
  bp_status st = bp_registry_discover();
  unsetenv("BP_PLUGIN_PATH");
  bool trapped = any_plugin_under(dir.path());
  ASSERT_EQ(chdir(old_cwd), 0);
  EXPECT_EQ(st, BP_OK) << bp_last_error();
  EXPECT_FALSE(trapped) << "a plugin in the current directory was looked at";
}

}  // namespace
