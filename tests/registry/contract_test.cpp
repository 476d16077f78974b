// contract_test.cpp: the plugin contract enforced the same way at the same
// time: exceptions out of discovery slots, descriptor
// pointers and declared sizes, enum values, table checks with the exact slot,
// file name vs plugin name, intended overrides, world-writable folders.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "registry_test_util.hpp"
#include "sanitizers/sanitizers.hpp"
#include "support/find.hpp"

namespace fs = std::filesystem;
using bp_test::find_rejected;
using bp_test::fixture;
using bp_test::is_mapped;
using bp_test::load_fixture;
using bp_test::temp_dir;

namespace {

size_t count_of(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(RegistryContract, ExceptionFromAnyDiscoverySlotLeavesTheOtherPluginsUsable) {
  // The exception class and its what() live in the plugin, so
  // closing the file before the host is done with the exception crashed.
  // Every slot throws in a folder that discovery walks; the good plugin
  // beside them still loads and runs.
  temp_dir dir;
  const std::vector<std::string> throwing = {"throw_entry", "throw_init", "throw_device_count", "throw_get_props"};
  for (const std::string &v : throwing) fs::copy_file(fixture(v), dir.path() / ("libbp-" + v + ".so"));
  fs::copy_file(fixture("zero_devices"), dir.path() / "libbp-zero_devices.so");
  ASSERT_EQ(bp_registry_add_path(dir.path().c_str()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_registry_discover(), BP_OK) << bp_last_error();
  EXPECT_NE(bp_test::find_plugin("zero_devices"), nullptr);
  for (const std::string &v : throwing) {
    SCOPED_TRACE(v);
    const std::string path = (dir.path() / ("libbp-" + v + ".so")).string();
    bp_status st = BP_OK;
    std::string message;
    ASSERT_TRUE(find_rejected(path, &st, &message));
    EXPECT_EQ(st, BP_ERR_INTERNAL);
    EXPECT_NE(message.find("fake: a slot threw fake_exception"), std::string::npos) << message;
    EXPECT_NE(message.find("(PLG-10)"), std::string::npos) << message;
    EXPECT_FALSE(is_mapped(path));
    EXPECT_EQ(bp_test::find_plugin(v.c_str()), nullptr);
  }
  // The shipped cpu plugin (found next to the library) is unaffected.
  bp_backend *be = nullptr;
  if (bp_test::find_plugin("cpu")) {
    EXPECT_EQ(bp_backend_new("cpu", &be), BP_OK) << bp_last_error();
    bp_backend_free(be);
  }
}

TEST(RegistryContract, BackendTableIsCheckedAtCreationNamingTheSlot) {
  // The refusal names the one missing slot and the rule, not a
  // list of five candidates.
  ASSERT_NE(load_fixture("no_supports_buft"), nullptr);
  bp_backend *be = nullptr;
  EXPECT_EQ(bp_backend_new("no_supports_buft", &be), BP_ERR_INCOMPATIBLE);
  EXPECT_EQ(be, nullptr);
  const std::string message = bp_last_error();
  EXPECT_NE(message.find("required slot bp_backend_i.supports_buft is NULL (PLG-5)"), std::string::npos) << message;
  EXPECT_EQ(message.find("free, buffer_type"), std::string::npos) << message;
}

TEST(RegistryContract, EveryRefusalOfABrokenTableNamesTheSlotAndTheRule) {
  // The same words for every table (plugin, device, buffer type).
  struct table_case {
    const char *variant;
    const char *text;
  };
  for (const table_case &c : {table_case{"null_required_slot", "required slot bp_plugin_i.device_get is NULL (PLG-5)"},
                              table_case{"short_table", "bp_plugin_i table is 8 bytes, ABI 1.0 needs at least"},
                              table_case{"null_device_slot", "required slot bp_device_i.get_props is NULL (PLG-5)"}}) {
    SCOPED_TRACE(c.variant);
    EXPECT_EQ(bp_registry_load(fixture(c.variant).c_str(), nullptr), BP_ERR_INCOMPATIBLE);
    EXPECT_NE(std::string(bp_last_error()).find(c.text), std::string::npos) << bp_last_error();
  }
  // An ABI 1.0 plugin table (no enumerate slot, appended in 1.1) loads.
  EXPECT_NE(load_fixture("abi_1_0_table"), nullptr);
}

TEST(RegistryContract, BufferTypeMessageSaysEachPrefixOnceAndNoRebuildAdvice) {
  // An alignment of 48 is the plugin's bug, not a header
  // mismatch; and "plugin 'x': device 0: default buffer type: x: device
  // 'x:0': ..." named the plugin and device twice.
  EXPECT_EQ(bp_registry_load(fixture("alignment_48").c_str(), nullptr), BP_ERR_INCOMPATIBLE);
  const std::string message = bp_last_error();
  EXPECT_NE(message.find("alignment 48, which is not a power of two (PLG-9)"), std::string::npos) << message;
  EXPECT_EQ(message.find("rebuild"), std::string::npos) << message;
  EXPECT_EQ(count_of(message, "alignment_48'"), 1u) << message;  // "plugin 'alignment_48'" once
  EXPECT_EQ(message.find("device 'alignment_48:0'"), std::string::npos) << message;
}

TEST(RegistryContract, LogLevelOutOfRangeIsLoggedAsError) {
  // 99 is read as an integer and mapped, never stored as a
  // bp_log_level first.
  bp_test::log_capture logs;
  ASSERT_NE(load_fixture("log_level_99"), nullptr);
  EXPECT_EQ(logs.count_at(BP_LOG_ERROR, "log_level_99", "fake: init"), 1u);
}

TEST(RegistryContract, PluginPathShadowsAnInstalledPluginOnPurpose) {
  // The first folder on the search path wins; the other file
  // is listed as shadowed by the winner, at info level.
  temp_dir first, second;
  fs::copy_file(fixture("zero_devices"), first.path() / "libbp-zero_devices.so");
  fs::copy_file(fixture("zero_devices"), second.path() / "libbp-zero_devices.so");
  ASSERT_EQ(bp_registry_add_path(second.path().c_str()), BP_OK);
  bp_test::log_capture logs;
  setenv("BP_PLUGIN_PATH", first.path().c_str(), 1);
  bp_status st = bp_registry_discover();
  unsetenv("BP_PLUGIN_PATH");
  ASSERT_EQ(st, BP_OK) << bp_last_error();
  bp_plugin *p = bp_test::find_plugin("zero_devices");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(fs::path(bp_plugin_path(p)), first.path() / "libbp-zero_devices.so");
  const std::string loser = (second.path() / "libbp-zero_devices.so").string();
  bp_status listed = BP_OK;
  std::string message;
  ASSERT_TRUE(find_rejected(loser, &listed, &message));
  EXPECT_EQ(listed, BP_ERR_ALREADY_EXISTS);
  EXPECT_NE(message.find("is shadowed by " + (first.path() / "libbp-zero_devices.so").string()), std::string::npos)
      << message;
  EXPECT_EQ(logs.count_at(BP_LOG_INFO, "registry", "shadowed by"), 1u);
}

TEST(RegistryContract, WorldWritableFolderRefusesItsPlugins) {
  // Anyone may replace a file in a folder every user may
  // write (0777); the file's own mode is not enough.
  temp_dir dir;
  fs::create_directory(dir.path() / "open");
  const fs::path file = dir.path() / "open" / "libbp-zero_devices.so";
  fs::copy_file(fixture("zero_devices"), file);
  ASSERT_EQ(chmod((dir.path() / "open").c_str(), 0777), 0);
  EXPECT_EQ(bp_registry_load(file.c_str(), nullptr), BP_ERR_FAILED_PRECONDITION);
  std::string message = bp_last_error();
  EXPECT_NE(message.find("folder"), std::string::npos) << message;
  EXPECT_NE(message.find("writable by every user (mode 0777)"), std::string::npos) << message;
  EXPECT_NE(message.find("PLG-20"), std::string::npos) << message;
  EXPECT_FALSE(is_mapped(file.string()));
  // Sticky (1777, like /tmp): others cannot replace our file, so our own
  // file loads, with a warning about the folder.
  ASSERT_EQ(chmod((dir.path() / "open").c_str(), 01777), 0);
  bp_test::log_capture logs;
  EXPECT_EQ(bp_registry_load(file.c_str(), nullptr), BP_OK) << bp_last_error();
  EXPECT_EQ(logs.count_at(BP_LOG_WARN, "registry", "sticky"), 1u);
}

}  // namespace

namespace {

std::string read_doc(const std::string &name) {
  std::ifstream in(std::string(BP_TEST_SOURCE_DIR) + "/../docs/" + name);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(RegistryContract, DeviceSpecDocSaysWhatTheCApiDoesWithANul) {
  // No public entry point takes a length, so the docs must not
  // promise that an embedded NUL is refused; the C string ends there.
  const std::string doc = read_doc("device-spec.md");
  ASSERT_FALSE(doc.empty());
  EXPECT_EQ(doc.find("when the caller passes a length"), std::string::npos);
  EXPECT_NE(doc.find("spec ends at\n  its first NUL byte"), std::string::npos);
  ASSERT_NE(load_fixture("good"), nullptr);
  const std::string with_nul("good\0:flavor=999", 16);
  bp_backend *be = nullptr;
  // flavor=999 is out of range (0..100): it is never seen.
  EXPECT_EQ(bp_backend_new(with_nul.c_str(), &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
}

}  // namespace

namespace {

std::string probe_fixture(const std::string &variant) {
  return std::string(BP_TEST_FIXTURE_DIR) + "/probe/libbp-" + variant + ".so";
}

TEST(RegistryContract, ProbeRefusesAFileWhoseChildExitsCrashesOrHangs) {
  // ELF constructors run at dlopen; exit(3) in one ended the
  // process. With BP_PLUGIN_PROBE=1 a child loads the file first.
  setenv("BP_PLUGIN_PROBE", "1", 1);
  setenv("BP_PLUGIN_PROBE_TIMEOUT", "2", 1);
  struct probe_case {
    const char *variant;
    const char *cause;
  };
#if BP_TEST_ASAN || BP_TEST_TSAN
  // A sanitizer's SIGSEGV handler reports and exits (ASan status 1, TSan 66)
  // instead of letting the child die by the signal.
  const char *crash_cause = "exited with status";
#else
  const char *crash_cause = "killed by signal 11";
#endif
  for (const probe_case &c : {probe_case{"ctor_exit", "exited with status 3"}, probe_case{"init_crashes", crash_cause},
                              probe_case{"init_sleeps", "did not finish within 2 s"}}) {
    SCOPED_TRACE(c.variant);
    const std::string path = probe_fixture(c.variant);
    EXPECT_EQ(bp_registry_load(path.c_str(), nullptr), BP_ERR_INCOMPATIBLE);
    const std::string message = bp_last_error();
    EXPECT_NE(message.find(c.cause), std::string::npos) << message;
    EXPECT_NE(message.find("PLG-11"), std::string::npos) << message;
    EXPECT_FALSE(is_mapped(path));
  }
  // A good plugin survives its probe and loads as usual.
  EXPECT_NE(load_fixture("good"), nullptr);
  unsetenv("BP_PLUGIN_PROBE");
  unsetenv("BP_PLUGIN_PROBE_TIMEOUT");
}

}  // namespace
